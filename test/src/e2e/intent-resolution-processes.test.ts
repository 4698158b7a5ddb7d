import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { apiKeysEnv, bearer, businessTransaction, makeKey, onDatabase, postgresTarget, publishPolicy, spawnServer, type ProvisionedTarget, type SpawnedServer } from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const ann = makeKey('operator-ann', { holder: 'USER', capabilities: ['*'] });

type Listed = { intent: { businessTransactionId: string }; status: { state: string; inFlight: boolean } };

/**
 * Issue 9 item 6 across processes: a request held in flight on one server process (sandbox mode's
 * pause before release) cannot be resolved from another process on the same PostgreSQL, which
 * lists it in flight; once the request has ended it is no longer.
 */
describe('an intent in flight on one process, resolved from another on the same PostgreSQL', () => {
  let db: ProvisionedTarget;
  let dataDir: string;
  let a: SpawnedServer;
  let b: SpawnedServer;

  beforeAll(async () => {
    db = await postgresTarget.provision();
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'ets-inflight-'));
    await onDatabase(db.target, publishPolicy);
    const env = { SVC_DATA_DIR: dataDir, SVC_DATABASE_URL: (db.target as { url: string }).url, SVC_SANDBOX: 'true', ...apiKeysEnv(agent, ann) };
    [a, b] = await Promise.all([spawnServer(env), spawnServer(env)]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await db?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const listedOn = async (s: SpawnedServer, id: string, state: string): Promise<Listed | undefined> => {
    const res = await request(s.url).get(`/execution-intents?state=${state}&pageSize=100`).set('authorization', bearer(ann));
    expect(res.status).toBe(200);
    return (res.body.items as Listed[]).find((i) => i.intent.businessTransactionId === id);
  };

  it('answers 409 on the other process while the request runs, lists it in flight there, and not after the request ended', async () => {
    for (let round = 0; round < 3; round++) {
      const tx = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { sandboxPauseBeforeReleaseMs: 3000, round } } });
      const id = tx.businessTransactionId as string;
      const running = request(a.url).post('/execute').set('authorization', bearer(agent)).send(tx).then((r) => r);
      let listed: Listed | undefined;
      for (let tries = 0; !listed && tries < 300; tries++) {
        listed = await listedOn(b, id, 'PREPARED');
        if (!listed) await new Promise((r) => setTimeout(r, 10));
      }
      expect(listed?.status).toMatchObject({ state: 'PREPARED', inFlight: true });
      // Several operators at once, on both processes: none gets through.
      const attempts = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          request((i % 2 ? a : b).url).post(`/execution-intents/${id}/resolve`).set('authorization', bearer(ann)).send({ found: 'NOT_EXECUTED', note: `Operator ${i} found nothing yet.` }),
        ),
      );
      for (const r of attempts) expect({ status: r.status, code: r.body.code }).toEqual({ status: 409, code: 'EXECUTION_INTENT_NOT_RESOLVABLE' });

      const done = await running;
      expect(done.status).toBe(200);
      expect(done.body.executionStatus).toBe('EXECUTED');
      expect(await listedOn(b, id, 'PREPARED')).toBeUndefined();
      expect((await listedOn(b, id, 'FINALIZED'))?.status).toMatchObject({ state: 'FINALIZED', inFlight: false });
      expect((await request(b.url).get(`/trust-records/${id}`).set('authorization', bearer(agent))).status).toBe(200);
    }
  }, 90_000);
});
