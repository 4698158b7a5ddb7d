import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomInt } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { createClient } from 'redis';
import request from 'supertest';
import { createDataSource, MIGRATIONS } from '@ets/adapters-persistence';
import {
  apiKeysEnv,
  businessTransaction,
  checkpointCoversLog,
  expectApprovedOnce,
  expectHeldReleasedOnce,
  expectNonceOnce,
  expectOneWinnerPerId,
  expectSharedFailedAuthLimit,
  makeKey,
  postgresTarget,
  postMany,
  publishPolicy,
  runCli,
  startTwoInstances,
  tempDirs,
  type ProvisionedTarget,
  type TwoInstances,
} from '@ets/test-support';

// Needs the built CLI (`npm run build`), PostgreSQL and Redis. scripts/two-instances.mjs, the
// script an operator runs, starts two `ets serve` processes at the same moment on one throwaway
// PostgreSQL database and the shared Redis; every claim of a deployment of several instances is
// proved over both of them under concurrent load.

const REDIS_URL = process.env.ETS_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const alice = makeKey('alice', { holder: 'USER', stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const carol = makeKey('carol', { holder: 'USER', stepUp: true });
// A client address of this run only (behind a trusted proxy): the shared counts of other runs and
// tests on the same Redis never mix with these.
const clientIp = `198.18.${randomInt(256)}.${randomInt(1, 255)}`;
const AUTH_FAILURE_LIMIT = 30;
const tmp = tempDirs('ets-two-instances-');

describe('two instances on one PostgreSQL and Redis, as scripts/two-instances.mjs runs them', () => {
  let db: ProvisionedTarget;
  let dir: string;
  let env: Record<string, string>;
  let two: TwoInstances;
  let firstKeyId: string;
  const redis = createClient({ url: REDIS_URL });
  const query = async <T>(sql: string, params: unknown[] = []): Promise<T[]> => {
    const client = new pg.Client({ connectionString: (db.target as { url: string }).url });
    await client.connect();
    try {
      return (await client.query(sql, params)).rows as T[];
    } finally {
      await client.end();
    }
  };
  /** Each instance counts on its own until its Redis connection is in use: /ready says when. */
  const redisInUse = async () => {
    for (const url of two.urls) {
      for (let tries = 0; (await request(url).get('/ready')).body.redis !== 'UP'; tries++) {
        if (tries > 100) throw new Error(`${url} never used Redis`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
  /** What each instance's last start applied (its log's last "storage ready" line). */
  const appliedAtLastStart = (): string[][] =>
    two.logs.map((log) => {
      const lines = readFileSync(log, 'utf8').split('\n').filter((l) => l.includes('"msg":"storage ready"'));
      return (JSON.parse(lines.at(-1)!) as { applied: string[] }).applied;
    });

  beforeAll(async () => {
    await redis.connect();
    db = await postgresTarget.provision();
    dir = tmp();
    env = {
      SVC_DATABASE_URL: (db.target as { url: string }).url,
      SVC_REDIS_URL: REDIS_URL,
      SVC_TRUST_PROXY: 'true',
      RATE_LIMIT_AUTH_FAILURE_PER_MINUTE: String(AUTH_FAILURE_LIMIT),
      RATE_LIMIT_EXECUTE_PER_MINUTE: '1000000',
      ...apiKeysEnv(agent, alice, bob, carol),
    };
    two = await startTwoInstances(env, dir);
    const ds = createDataSource(db.target);
    await ds.initialize();
    await publishPolicy(ds);
    await ds.destroy();
    await redisInUse();
  }, 90_000);
  afterAll(async () => {
    await two?.stop();
    await db?.drop();
    await redis.del([`ets:rl:auth-failure:${clientIp}`]);
    await redis.close();
  });

  it('prints both addresses, and applied every migration once although both started at the same moment', async () => {
    expect(two.urls).toHaveLength(2);
    expect(two.output()).toMatch(/^signing key: ed25519-\S+ \(env provider/m);
    firstKeyId = /^signing key: (\S+)/m.exec(two.output())![1]!;
    const names = MIGRATIONS.map((m) => new m().name);
    const [a, b] = appliedAtLastStart();
    expect([...a!, ...b!].sort()).toEqual([...names].sort());
    expect(a!.length === 0 || b!.length === 0).toBe(true);
    const rows = await query<{ name: string; n: string }>('SELECT name, COUNT(*) AS n FROM migrations GROUP BY name');
    expect(rows).toHaveLength(names.length);
    expect(rows.every((r) => Number(r.n) === 1)).toBe(true);
    // Both proposed the shipped policy at start: it is pending once.
    expect(await query(`SELECT id FROM pending_changes WHERE subject = 'payments-transfer/1.0.0'`)).toHaveLength(1);
  });

  it('under concurrent load on both: one winner per id, one approval per change, one use per nonce, one chain that verifies end to end', async () => {
    const [executed] = await Promise.all([
      postMany(two.urls, agent, 300, { concurrency: 16 }),
      expectOneWinnerPerId(two.urls, agent),
      expectApprovedOnce(two.urls, alice, [bob, carol], async (changeId) => {
        const rows = await query<{ body: string }>(`SELECT body FROM audit_events WHERE kind = 'governance'`);
        return rows.map((r) => JSON.parse(r.body) as { subjectId: string; action: string }).filter((e) => e.subjectId === changeId && e.action !== 'propose').length;
      }),
      expectNonceOnce(two.urls, alice, bob),
      expectHeldReleasedOnce(two.urls, agent, [bob, carol], async (id) => {
        const [{ n }] = await query<{ n: string }>('SELECT COUNT(*) AS n FROM execution_intents WHERE business_transaction_id = $1', [id]);
        return Number(n);
      }),
    ]);
    expect(new Set(executed)).toEqual(new Set([200]));

    // The whole database, exported and verified offline with the JWKS that either instance serves.
    const jwks = path.join(dir, 'jwks.json');
    writeFileSync(jwks, await (await fetch(`${two.urls[1]}/.well-known/jwks.json`)).text());
    // The export is the tree of the newest checkpoint: once it holds every execution.
    for (const url of two.urls) await checkpointCoversLog(url);
    const exported = await runCli(['export'], { SVC_DATABASE_URL: env.SVC_DATABASE_URL });
    expect(exported.code).toBe(0);
    const file = path.join(dir, 'records.jsonl');
    writeFileSync(file, exported.stdout);
    const verified = await runCli(['verify', '--all', file, '--keys', jwks], {});
    const [{ n: links }] = await query<{ n: string }>(`SELECT COUNT(*) AS n FROM execution_intents WHERE state = 'FINALIZED'`);
    expect(Number(links)).toBeGreaterThanOrEqual(300);
    expect(verified.stdout).toContain(`chain: ${links} links, from the deployment's first execution`);
    expect(verified.stdout).toContain('no break');
    expect(verified.stdout).toContain('VALID: every record verifies, no leaf of the run is missing, repeated or out of order, and the chain is unbroken.');
    expect(verified.code).toBe(0);
  }, 120_000);

  it('holds the failed-authentication limit across both instances through Redis', async () => {
    const auditedFailures = async () =>
      Number((await query<{ n: string }>(`SELECT COUNT(*) AS n FROM audit_events WHERE kind = 'caller-authentication' AND caller_id IS NULL`))[0]!.n);
    await expectSharedFailedAuthLimit(two.urls, agent, clientIp, AUTH_FAILURE_LIMIT, auditedFailures);
  }, 60_000);

  it('stops both on SIGTERM to the script, and a second start applies nothing and proposes nothing again', async () => {
    expect(await two.stop()).toBe(0);
    expect(two.output()).toMatch(/instance a stopped \(exit 0\)/);
    expect(two.output()).toMatch(/instance b stopped \(exit 0\)/);
    two = await startTwoInstances(env, dir);
    expect(appliedAtLastStart()).toEqual([[], []]);
    expect(await query(`SELECT id FROM pending_changes WHERE subject = 'payments-transfer/1.0.0'`)).toHaveLength(1);
    // The same signing key after the restart (kept in DIR/signing.env).
    expect(/^signing key: (\S+)/m.exec(two.output())?.[1]).toBe(firstKeyId);
  }, 90_000);

  it('holds one execute budget per caller across both instances through Redis', async () => {
    await two.stop();
    // A caller of this run only, so no other run's counts on the same Redis mix with these.
    const limitedId = `agent-limit-${randomInt(1e9)}`;
    const limited = makeKey(limitedId, { holder: 'SERVICE', capabilities: ['*'], principals: [limitedId], tenants: ['t1'] });
    two = await startTwoInstances({ ...env, RATE_LIMIT_EXECUTE_PER_MINUTE: '20', ...apiKeysEnv(agent, alice, bob, carol, limited) }, dir);
    await redisInUse();
    try {
      const statuses = await postMany(two.urls, limited, 30, { concurrency: 6, body: () => businessTransaction({}, limitedId) });
      expect(statuses.filter((s) => s === 200)).toHaveLength(20);
      expect(statuses.filter((s) => s === 429)).toHaveLength(10);
    } finally {
      await redis.del([`ets:rl:execute:caller:${limitedId}`]);
    }
  }, 90_000);
});
