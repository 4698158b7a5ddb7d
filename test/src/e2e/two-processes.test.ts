import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { createDataSource, migrate } from '@ets/adapters-persistence';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  makeKey,
  postgresTarget,
  publishPolicy,
  spawnServer,
  type ProvisionedTarget,
  type SpawnedServer,
} from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });

describe('two server processes sharing one PostgreSQL', () => {
  let db: ProvisionedTarget;
  let dataDir: string;
  let servers: SpawnedServer[];

  beforeAll(async () => {
    db = await postgresTarget.provision();
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'ets-two-'));
    const ds = createDataSource(db.target);
    await ds.initialize();
    await migrate(ds);
    await publishPolicy(ds);
    await ds.destroy();
    // One data dir: both processes sign with the same service key, as instances of one deployment.
    const env = { SVC_DATA_DIR: dataDir, SVC_DATABASE_URL: (db.target as { url: string }).url, ...apiKeysEnv(agent) };
    servers = [await spawnServer(env)];
    servers.push(await spawnServer(env));
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('lets exactly one of many concurrent requests with one id win, whichever process they reach', async () => {
    for (let round = 0; round < 5; round++) {
      const tx = businessTransaction();
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => request(servers[i % 2]!.url).post(i % 3 ? '/execute' : '/transactions').set('authorization', bearer(agent)).send(tx)),
      );
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((s) => s === 200 || s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 409)).toHaveLength(9);
    }
  });

  it('extends one execution chain without forks when both execute at once', async () => {
    await Promise.all(
      Array.from({ length: 60 }, (_, i) => request(servers[i % 2]!.url).post('/execute').set('authorization', bearer(agent)).send(businessTransaction())),
    );
    const records: { executions: { chainHash: string; previousChainHash: string | null }[] }[] = [];
    for (let page = 1; ; page++) {
      const res = await request(servers[0]!.url).get(`/trust-records?page=${page}&pageSize=100`).set('authorization', bearer(agent));
      records.push(...res.body.items);
      if (res.body.items.length < 100) break;
    }
    const links = records.flatMap((r) => r.executions);
    expect(links.length).toBeGreaterThanOrEqual(60);
    const hashes = new Set(links.map((l) => l.chainHash));
    const previous = links.map((l) => l.previousChainHash);
    expect(previous.filter((p) => p === null)).toHaveLength(1);
    expect(new Set(previous).size).toBe(previous.length); // no two executions share a predecessor
    for (const p of previous) if (p !== null) expect(hashes.has(p)).toBe(true);
  });
});
