import { afterAll, describe, expect, it } from '@jest/globals';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { PolicyDocument } from '@ets/domain';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { verifyRecord } from '@ets/adapters-crypto';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  logMatchingRecords,
  makeKey,
  onDatabase,
  publishPolicy,
  signedApproval,
  spawnServer,
  STORAGE_TARGETS,
  type ProvisionedTarget,
  type SpawnedServer,
} from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const human = makeKey('ops', { holder: 'USER', capabilities: ['*'] });
const approver = makeKey('bob', { holder: 'USER', stepUp: true });
/** A policy that holds every request for a human. */
const HELD: PolicyDocument = {
  name: 'held',
  policyVersion: '1.0.0',
  signalsSchema: {},
  rules: [{ id: 'always', when: 'true', action: 'approve', requires_override: true, reason: 'A human decides' }],
};
const heldTransaction = (parameters: Record<string, unknown>) =>
  businessTransaction({ intent: { action: 'sandbox:echo', parameters }, policy: { name: 'held', version: '1.0.0' }, signals: {} });
const approvalOf = (tx: Record<string, unknown>) =>
  signedApproval(approver.stepUpPrivateKeyPem!, {
    approvalId: randomUUID(),
    approverId: 'bob',
    businessTransactionId: tx.businessTransactionId,
    action: 'sandbox:echo',
    scope: { field: 'resourceId', resourceId: tx.businessTransactionId },
    signalsHash: createHash('sha256').update('{}').digest('hex'),
    expiresAt: new Date(Date.now() + 300_000).toISOString(),
    nonce: randomBytes(32).toString('base64url'),
  });
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One statement (`?` placeholders) on the target's database, from outside the server. */
async function sql(db: ProvisionedTarget, text: string, params: unknown[]): Promise<void> {
  let n = 0;
  await onDatabase(db.target, (ds) => ds.query(db.target.kind === 'postgres' ? text.replace(/\?/g, () => `$${++n}`) : text, params));
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 10000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe.each(STORAGE_TARGETS)('crash safety of the execution pipeline on $name (SIGKILL and restart)', (factory) => {
  let db: ProvisionedTarget;
  let env: Record<string, string>;
  let dataDir: string;

  const start = () => spawnServer(env);
  const intentState = async (s: SpawnedServer, id: string): Promise<string | undefined> => {
    const r = await request(s.url).get(`/execution-intents/${id}`).set('authorization', bearer(agent));
    return r.status === 200 ? (r.body.status.state as string) : undefined;
  };
  const journal = (): string[] => {
    const file = path.join(dataDir, 'sandbox-releases.jsonl');
    return existsSync(file)
      ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { businessTransactionId: string }).businessTransactionId)
      : [];
  };

  it('prepares', async () => {
    db = await factory.provision();
    dataDir = db.target.kind === 'sqlite' ? path.dirname(db.target.file) : mkdtempSync(path.join(os.tmpdir(), 'ets-crash-'));
    cleanups.push(async () => {
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    });
    env = {
      SVC_DATA_DIR: dataDir,
      SVC_SANDBOX: 'true',
      ...apiKeysEnv(agent, human, approver),
      ...(db.target.kind === 'postgres' ? { SVC_DATABASE_URL: db.target.url } : {}),
    };
    await onDatabase(db.target, publishPolicy);
    await onDatabase(db.target, (ds) => publishPolicy(ds, HELD));
  });

  it('killed between a held transaction\'s approval and its release: never released, never twice; the approval\'s outcome is kept', async () => {
    let server = await start();
    const tx = heldTransaction({ sandboxPauseBeforeReleaseMs: 30000 });
    const id = tx.businessTransactionId as string;
    expect((await request(server.url).post('/execute').set('authorization', bearer(agent)).send(tx)).status).toBe(202);
    void request(server.url).post(`/overrides/${id}/approve`).set('authorization', bearer(approver)).send(approvalOf(tx)).catch(() => undefined);
    // The approval and the intent are one commit: once the intent is there, so is the approval.
    await until('the approval and its intent', async () => ((await intentState(server, id)) === 'PREPARED' ? true : undefined));
    await server.stop('SIGKILL');

    server = await start();
    try {
      const held = await request(server.url).get(`/overrides/${id}`).set('authorization', bearer(approver));
      expect(held.body).toMatchObject({ status: 'APPROVED', decidedBy: 'bob' });
      expect(await intentState(server, id)).toBe('PREPARED');
      expect(server.output()).toContain('need reconciliation');
      // A second approval cannot release it again.
      const again = await request(server.url).post(`/overrides/${id}/approve`).set('authorization', bearer(approver)).send(approvalOf(tx));
      expect(again.status).toBe(409);
      await sleep(500);
      expect(journal()).not.toContain(id);
    } finally {
      await server.stop();
    }
  });

  it('killed after a held transaction\'s release and before its record: finalized at restart, the approval in the record', async () => {
    let server = await start();
    const tx = heldTransaction({ sandboxPauseAfterReleaseMs: 30000, n: 2 });
    const id = tx.businessTransactionId as string;
    expect((await request(server.url).post('/execute').set('authorization', bearer(agent)).send(tx)).status).toBe(202);
    void request(server.url).post(`/overrides/${id}/approve`).set('authorization', bearer(approver)).send(approvalOf(tx)).catch(() => undefined);
    await until('RELEASED', async () => ((await intentState(server, id)) === 'RELEASED' ? true : undefined));
    await server.stop('SIGKILL');

    server = await start();
    try {
      expect(await intentState(server, id)).toBe('FINALIZED');
      const record = await request(server.url).get(`/trust-records/${id}`).set('authorization', bearer(agent));
      expect(record.body.executions).toHaveLength(1);
      expect(record.body.override).toMatchObject({ approverId: 'bob' });
      const jwks = (await request(server.url).get('/.well-known/jwks.json')).body;
      expect(verifyRecord(record.body, jwks).valid).toBe(true);
      expect(journal().filter((j) => j === id)).toHaveLength(1);
    } finally {
      await server.stop();
    }
  });

  it('killed during release (after the intent commit): the intent is PREPARED, listed for reconciliation, and resolvable once its lease has ended', async () => {
    let server = await start();
    const tx = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { sandboxDelayMs: 30000 } } });
    const id = tx.businessTransactionId as string;
    void request(server.url).post('/execute').set('authorization', bearer(agent)).send(tx).catch(() => undefined);
    await until('the release to start', async () => (journal().includes(id) ? true : undefined));
    expect(await intentState(server, id)).toBe('PREPARED');
    server.child.kill('SIGKILL');
    await server.stop('SIGKILL');

    server = await start();
    try {
      expect(server.output()).toContain('need reconciliation');
      expect(await intentState(server, id)).toBe('PREPARED');
      const listed = await request(server.url).get('/execution-intents').set('authorization', bearer(agent));
      const item = (listed.body.items as { intent: { businessTransactionId: string }; status: { inFlight: boolean } }[]).find((i) => i.intent.businessTransactionId === id);
      // Nothing tells a dead process from a slow one but time: until the lease ends it counts as in flight.
      expect(item?.status).toMatchObject({ state: 'PREPARED', inFlight: true });
      expect((await request(server.url).get(`/trust-records/${id}`).set('authorization', bearer(agent))).status).toBe(404);
      const resolve = () =>
        request(server.url).post(`/execution-intents/${id}/resolve`).set('authorization', bearer(human)).send({ found: 'EXECUTED', note: 'The sandbox echoed it before the crash.' });
      expect((await resolve()).body.code).toBe('EXECUTION_INTENT_NOT_RESOLVABLE');
      // Five minutes later (the lease, aged in the database rather than waited for).
      await sql(db, "UPDATE execution_intents SET in_flight_until = '2000-01-01T00:00:00.000Z' WHERE business_transaction_id = ?", [id]);
      expect((await request(server.url).get(`/execution-intents/${id}`).set('authorization', bearer(agent))).body.status.inFlight).toBe(false);
      const resolved = await resolve();
      expect(resolved.body.status.state).toBe('RESOLVED');
    } finally {
      await server.stop();
    }
  });

  it('killed after release and before the record: the RELEASED intent is finalized at restart from its saved context', async () => {
    let server = await start();
    const tx = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { sandboxPauseAfterReleaseMs: 30000, n: 1 } } });
    const id = tx.businessTransactionId as string;
    void request(server.url).post('/execute').set('authorization', bearer(agent)).send(tx).catch(() => undefined);
    await until('RELEASED', async () => ((await intentState(server, id)) === 'RELEASED' ? true : undefined));
    await server.stop('SIGKILL');

    server = await start();
    try {
      expect(await intentState(server, id)).toBe('FINALIZED');
      const record = await request(server.url).get(`/trust-records/${id}`).set('authorization', bearer(agent));
      expect(record.status).toBe(200);
      expect(record.body.executions[0].result).toMatchObject({ echo: { n: 1 } });
      const jwks = (await request(server.url).get('/.well-known/jwks.json')).body;
      expect(verifyRecord(record.body, jwks).valid).toBe(true);
    } finally {
      await server.stop();
    }
  });

  it('killed at arbitrary moments under load: every release that reached the connector has a stored signed intent', async () => {
    for (let round = 0; round < 3; round++) {
      const server = await start();
      const sent: string[] = [];
      const load = (async () => {
        for (let i = 0; i < 400; i++) {
          const batch = Array.from({ length: 8 }, () => businessTransaction());
          sent.push(...batch.map((b) => b.businessTransactionId as string));
          await Promise.all(batch.map((b) => request(server.url).post('/execute').set('authorization', bearer(agent)).send(b).catch(() => undefined)));
        }
      })();
      await sleep(150 + round * 170);
      await server.stop('SIGKILL');
      await load;
    }
    const server = await start();
    try {
      const jwks = (await request(server.url).get('/.well-known/jwks.json')).body;
      const released = journal();
      expect(released.length).toBeGreaterThan(0);
      for (const id of released) {
        const r = await request(server.url).get(`/execution-intents/${id}`).set('authorization', bearer(agent));
        expect(`${id}: ${r.status}`).toBe(`${id}: 200`);
        expect(verifyRecord(r.body.intent, jwks).valid).toBe(true);
        // Nothing stays RELEASED after a restart: it was finalized from its saved context.
        expect(['FINALIZED', 'PREPARED', 'RESOLVED']).toContain(r.body.status.state);
      }
    } finally {
      await server.stop();
    }
    // The transparency log matches the records exactly: every record has its leaf, no leaf lacks
    // its record, indices are dense, and every checkpoint is the root of the leaves it covers.
    await onDatabase(db.target, async (ds) => {
      const { problems, kinds } = await logMatchingRecords(ds);
      expect(problems).toEqual([]);
      expect(kinds.intent).toBeGreaterThan(0);
    });
  }, 240_000);
});
