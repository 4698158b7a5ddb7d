import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  logMatchingRecords,
  makeKey,
  openCheckpointNote,
  postgresTarget,
  onDatabase,
  publishPolicy,
  spawnServer,
  walkChain,
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
    await onDatabase(db.target, publishPolicy);
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
    // Listed in chain order, whichever process linked them: every neighbour links, on either process's list.
    const jwks = (await request(servers[1]!.url).get('/.well-known/jwks.json')).body;
    for (const s of servers) {
      const walked = await walkChain(async (page, pageSize) => (await request(s.url).get(`/trust-records?page=${page}&pageSize=${pageSize}`).set('authorization', bearer(agent))).body, jwks, 25);
      expect(walked.chained.length).toBe(records.filter((r) => r.executions.length > 0).length);
    }
  });

  it('append to one transparency log without forks, and sign only checkpoints of that one tree', async () => {
    const txs = Array.from({ length: 40 }, () => businessTransaction());
    await Promise.all(txs.map((tx, i) => request(servers[i % 2]!.url).post(i % 4 ? '/execute' : '/transactions').set('authorization', bearer(agent)).send(tx)));
    // Receipts from both at once: each may need a checkpoint that holds its record.
    const receipts = await Promise.all(
      txs.slice(0, 8).map(async (tx, i) => {
        const url = servers[i % 2]!.url;
        await request(url).post('/verify').set('authorization', bearer(agent)).send({ businessTransactionId: tx.businessTransactionId });
        return (await request(url).post('/receipt').set('authorization', bearer(agent)).send({ businessTransactionId: tx.businessTransactionId })).body;
      }),
    );
    const jwks = (await request(servers[0]!.url).get('/.well-known/jwks.json')).body;
    for (const r of receipts) expect(openCheckpointNote(r.transparency.checkpoint, jwks).treeSize).toBe(r.transparency.treeSize);
    await new Promise((r) => setTimeout(r, 1500));

    await onDatabase(db.target, async (ds) => {
      // Dense, one leaf per record, and every checkpoint either process kept is the root of a prefix of the one tree.
      const { problems, kinds } = await logMatchingRecords(ds);
      expect(problems).toEqual([]);
      expect(kinds['trust-record']).toBeGreaterThanOrEqual(40);
      const notes = (await ds.query('SELECT note FROM transparency_log_checkpoints ORDER BY tree_size')) as { note: string }[];
      expect(notes.length).toBeGreaterThan(1);
      for (const { note } of notes) openCheckpointNote(note, jwks);
    });
  });
});
