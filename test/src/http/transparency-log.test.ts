import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import {
  checkConsistency,
  checkInclusion,
  fromHex,
  jwksNoteVerifiers,
  openCheckpoint,
  unwrapServedRecord,
  verifyConsistency,
  verifyOffline,
} from '@ets/adapters-crypto';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  consistencyHolds,
  inclusionHolds,
  jwksOf,
  leafOf,
  logMatchingRecords,
  makeKey,
  openCheckpointNote,
  publishPolicy,
  runCli,
  STORAGE_TARGETS,
  startTestServer,
  tempDirs,
  treeHash,
  type TestServer,
} from '@ets/test-support';

// Everything a client sees of the transparency log of a real in-process server, on each store:
// what is in it (every signed record, once), and that what it serves is checked by the project's
// offline library and by the independent RFC 9162 / C2SP implementation of test-support.

type Json = Record<string, any>;
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const human = makeKey('ops', { holder: 'USER', capabilities: ['*'] });
const other = makeKey('agent-8', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const tempDir = tempDirs('ets-tlog-http-');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(STORAGE_TARGETS)('the transparency log of a server on $name', (factory) => {
  let server: TestServer;
  let jwks: { keys: Json[] };
  const get = (p: string, key = agent) => request(server.url).get(p).set('authorization', bearer(key));
  const post = (p: string, body: unknown) => request(server.url).post(p).set('authorization', bearer(agent)).send(body as object);
  const execute = (over: Record<string, unknown> = {}) => post('/execute', businessTransaction(over));

  /** Waits until the latest checkpoint covers the whole tree (the publisher signs within a second). */
  const currentCheckpoint = async (): Promise<{ note: string; treeSize: number; rootHash: string }> => {
    for (let i = 0; i < 100; i++) {
      const note = (await request(server.url).get('/log/checkpoint')).text;
      const opened = openCheckpointNote(note, jwks);
      const [head] = (await server.dataSource.query('SELECT tree_size FROM transparency_log_head')) as { tree_size: string | number }[];
      if (opened.treeSize === Number(head!.tree_size)) return { note, ...opened };
      await sleep(100);
    }
    throw new Error('no checkpoint covered the tree in 10 s');
  };
  const allLeaves = async (): Promise<string[]> => {
    const leaves: string[] = [];
    for (;;) {
      const page = await request(server.url).get(`/log/leaves?start=${leaves.length}&count=1000`);
      expect(page.status).toBe(200);
      leaves.push(...(page.body.leaves as string[]));
      if (page.body.leaves.length < 1000) return leaves;
    }
  };

  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(agent, human, other), SVC_LOG_ORIGIN: 'ets.test/log' });
    await publishPolicy(server.dataSource);
    jwks = await jwksOf(server.url);
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it('holds every signed record exactly once: records, refusals, intents, verifications, receipts, audit events', async () => {
    const approved = businessTransaction();
    expect((await post('/execute', approved)).status).toBe(200);
    expect((await execute({ signals: { amount: 5, country: 'KP' } })).status).toBe(403);
    expect((await post('/transactions', businessTransaction())).status).toBe(201);
    expect((await execute({ signals: { amount: 20000, country: 'FR' } })).status).toBe(202);
    // Concurrent requests share group commits; the duplicates of one id roll back their job alone.
    const twice = businessTransaction();
    const statuses = await Promise.all([
      ...Array.from({ length: 12 }, () => execute()),
      ...Array.from({ length: 4 }, () => post('/execute', twice)),
      ...Array.from({ length: 4 }, () => execute({ signals: { amount: 1, country: 'IR' } })),
    ]).then((rs) => rs.map((r) => r.status));
    expect(statuses.filter((s) => s === 409)).toHaveLength(3);
    expect((await post('/verify', { businessTransactionId: approved.businessTransactionId })).status).toBe(200);
    expect((await post('/receipt', { businessTransactionId: approved.businessTransactionId })).status).toBe(201);
    expect((await get('/audit/auth-events?limit=1', human)).status).toBe(200);

    const { problems, kinds } = await logMatchingRecords(server.dataSource);
    expect(problems).toEqual([]);
    for (const kind of ['trust-record', 'refusal', 'intent', 'verification', 'receipt', 'audit-event']) expect(kinds[kind]).toBeGreaterThan(0);
    // Governance events: the shipped policies proposed at start by `system`.
    const governance = (await server.dataSource.query("SELECT COUNT(*) AS n FROM audit_events WHERE kind = 'governance'")) as { n: string | number }[];
    expect(Number(governance[0]!.n)).toBeGreaterThan(0);
  });

  it('serves a signed checkpoint that the JWKS verifies, over exactly the leaves it serves', async () => {
    const checkpoint = await currentCheckpoint();
    expect(checkpoint.note).toMatch(/^ets\.test\/log\n\d+\n[A-Za-z0-9+/]{43}=\n\n\u2014 ed25519-\S+ \S+\n$/u);
    const byLibrary = openCheckpoint(checkpoint.note, jwksNoteVerifiers(jwks), { origin: 'ets.test/log' });
    expect(byLibrary.treeSize).toBe(checkpoint.treeSize);
    const leaves = await allLeaves();
    expect(leaves.length).toBeGreaterThanOrEqual(checkpoint.treeSize);
    expect(treeHash(leaves.slice(0, checkpoint.treeSize))).toBe(checkpoint.rootHash);
    // Every stored record's H(C(record)) is among them.
    const [record] = (await server.dataSource.query('SELECT body FROM trust_records LIMIT 1')) as { body: string }[];
    expect(leaves).toContain(leafOf(JSON.parse(record!.body)));
  });

  it('serves inclusion and consistency proofs that hold by the RFC 9162 algorithms and by the offline library', async () => {
    const checkpoint = await currentCheckpoint();
    const n = checkpoint.treeSize;
    const leaves = (await allLeaves()).slice(0, n);
    const verifiers = jwksNoteVerifiers(jwks);
    for (const index of new Set([0, 1, Math.floor(n / 3), Math.floor(n / 2), n - 2, n - 1])) {
      const leaf = leaves[index]!;
      const r = await request(server.url).get(`/log/proof/inclusion?leaf=${leaf}&size=${n}`);
      expect(r.status).toBe(200);
      expect(r.body.leafIndex).toBe(leaves.indexOf(leaf));
      expect(r.body.treeSize).toBe(n);
      expect(inclusionHolds(r.body.leafIndex, n, leaf, r.body.hashes, checkpoint.rootHash)).toBe(true);
      expect(checkInclusion(leaf, { ...r.body, checkpoint: checkpoint.note }, verifiers)).toMatchObject({ ok: true });
      // In a smaller tree that still holds it, against the root of that tree.
      const smaller = r.body.leafIndex + 1;
      const s = await request(server.url).get(`/log/proof/inclusion?leaf=${leaf.toUpperCase()}&size=${smaller}`);
      expect(inclusionHolds(s.body.leafIndex, smaller, leaf, s.body.hashes, treeHash(leaves.slice(0, smaller)))).toBe(true);
    }
    for (const [from, to] of [[1, n], [2, n], [Math.floor(n / 2), n], [n - 1, n], [n, n], [3, Math.max(3, n - 5)]] as const) {
      const r = await request(server.url).get(`/log/proof/consistency?from=${from}&to=${to}`);
      expect(r.status).toBe(200);
      const [a, b] = [treeHash(leaves.slice(0, from)), treeHash(leaves.slice(0, to))];
      expect(consistencyHolds(from, to, a, b, r.body.hashes)).toBe(true);
      expect(verifyConsistency(from, to, fromHex(a)!, fromHex(b)!, r.body.hashes.map((h: string) => fromHex(h)!))).toBe(true);
      // A proof for other roots does not hold.
      if (from < to) expect(consistencyHolds(from, to, treeHash(leaves.slice(1, from + 1)), b, r.body.hashes)).toBe(false);
    }
    // Two signed checkpoints, proved consistent by the route, as `ets log monitor` does.
    expect((await execute()).status).toBe(200);
    const later = await currentCheckpoint();
    const proof = await request(server.url).get(`/log/proof/consistency?from=${n}&to=${later.treeSize}`);
    expect(checkConsistency(checkpoint.note, later.note, proof.body.hashes, verifiers)).toMatchObject({ ok: true });
  });

  it('gives a Receipt its Trust Record’s inclusion proof, and a record with its proof, which `ets verify` checks with only the JWKS', async () => {
    const tx = businessTransaction();
    const executed = await post('/execute', tx);
    const record = executed.body.trustRecord as Json;
    expect((await post('/verify', { businessTransactionId: tx.businessTransactionId })).status).toBe(200);
    const issued = await post('/receipt', { businessTransactionId: tx.businessTransactionId });
    expect(issued.status).toBe(201);
    const receipt = issued.body as Json;
    const t = receipt.transparency as Json;
    expect(t).toEqual({ leafIndex: expect.any(Number), treeSize: expect.any(Number), hashes: expect.any(Array), checkpoint: expect.any(String) });
    // Independently: the leaf is H(C(record)), and the path leads to the signed checkpoint's root.
    expect(receipt.trustRecordHash).toBe(leafOf(record));
    const cp = openCheckpointNote(t.checkpoint, jwks);
    expect(cp.treeSize).toBe(t.treeSize);
    expect(inclusionHolds(t.leafIndex, t.treeSize, receipt.trustRecordHash, t.hashes, cp.rootHash)).toBe(true);
    // The library, and the served latest receipt is the same.
    const report = verifyOffline(receipt, jwks);
    expect(report.checks.filter((c) => !c.ok)).toEqual([]);
    expect(report.checks.map((c) => c.name)).toContain('transparency');
    expect((await get(`/receipt/latest/${tx.businessTransactionId}`)).body).toEqual(receipt);

    const withProof = await get(`/trust-records/${tx.businessTransactionId}/proof`);
    expect(withProof.status).toBe(200);
    expect(withProof.body.trustRecord).toEqual(record);
    const unwrapped = unwrapServedRecord(withProof.body);
    const recordReport = verifyOffline(unwrapped.record, jwks, { transparency: unwrapped.transparency });
    expect(recordReport.checks.filter((c) => !c.ok)).toEqual([]);
    expect(recordReport.checks.map((c) => c.name)).toContain('inclusion');

    const dir = tempDir();
    const keys = path.join(dir, 'jwks.json');
    writeFileSync(keys, JSON.stringify(jwks));
    for (const [name, value] of [['receipt.json', receipt], ['record-with-proof.json', withProof.body]] as const) {
      writeFileSync(path.join(dir, name), JSON.stringify(value));
      const cli = await runCli(['verify', path.join(dir, name), '--keys', keys], {});
      expect(`${name}: ${cli.code} ${cli.stdout}${cli.stderr}`).toMatch(new RegExp(`^${name}: 0 `));
    }
    // A changed proof fails.
    const changed = { ...withProof.body, transparency: { ...withProof.body.transparency, leafIndex: withProof.body.transparency.leafIndex + 1 } };
    writeFileSync(path.join(dir, 'changed.json'), JSON.stringify(changed));
    expect((await runCli(['verify', path.join(dir, 'changed.json'), '--keys', keys], {})).code).toBe(1);
  });

  it('answers 400 for bad parameters and 404 for a leaf that is not in the tree', async () => {
    const { treeSize: n } = await currentCheckpoint();
    const leaves = await allLeaves();
    const last = leaves[n - 1]!;
    const bad = [
      '/log/proof/inclusion',
      `/log/proof/inclusion?size=${n}`,
      `/log/proof/inclusion?leaf=${last}`,
      `/log/proof/inclusion?leaf=${last.slice(2)}&size=${n}`,
      `/log/proof/inclusion?leaf=${last}zz&size=${n}`,
      `/log/proof/inclusion?leaf=${last}&size=0`,
      `/log/proof/inclusion?leaf=${last}&size=-1`,
      `/log/proof/inclusion?leaf=${last}&size=01`,
      `/log/proof/inclusion?leaf=${last}&size=1.5`,
      `/log/proof/inclusion?leaf=${last}&size=${leaves.length + 1}`,
      `/log/proof/inclusion?leaf=${last}&leaf=${last}&size=${n}`,
      '/log/proof/consistency?from=1',
      `/log/proof/consistency?to=${n}`,
      `/log/proof/consistency?from=0&to=${n}`,
      `/log/proof/consistency?from=${n}&to=${n - 1}`,
      `/log/proof/consistency?from=1&to=${leaves.length + 1}`,
      '/log/proof/consistency?from=x&to=2',
      '/log/proof/consistency?from=1&to=99999999999999999999',
      '/log/leaves?start=0',
      '/log/leaves?count=10',
      '/log/leaves?start=-1&count=10',
      '/log/leaves?start=0&count=0',
      '/log/leaves?start=0&count=1001',
      '/log/leaves?start=0&count=%00',
    ];
    for (const p of bad) {
      const r = await request(server.url).get(p);
      expect(`${p} → ${r.status}`).toBe(`${p} → 400`);
      expect(r.body).toEqual({ error: expect.any(String) });
    }
    const unknown = leafOf({ not: 'a record' });
    expect((await request(server.url).get(`/log/proof/inclusion?leaf=${unknown}&size=${n}`)).status).toBe(404);
    // In the tree, but after the first `size` leaves.
    expect((await request(server.url).get(`/log/proof/inclusion?leaf=${last}&size=${n - 1}`)).body).toEqual({ error: `The leaf is not in the tree of size ${n - 1}.` });
    expect((await request(server.url).get(`/log/leaves?start=${leaves.length + 5}&count=10`)).body).toEqual({ leaves: [] });
    expect((await request(server.url).get('/log/leaves?start=1&count=2')).body).toEqual({ leaves: leaves.slice(1, 3) });
    expect((await get('/trust-records/00000000-0000-4000-8000-000000000000/proof')).status).toBe(404);
    // Who reads what: another service's key does not see the record; a USER key does.
    const [own] = (await server.dataSource.query("SELECT business_transaction_id AS id FROM trust_records WHERE body LIKE '%\"callerId\":\"agent-7\"%' LIMIT 1")) as { id: string }[];
    expect((await get(`/trust-records/${own!.id}/proof`, other)).status).toBe(404);
    expect((await get(`/trust-records/${own!.id}/proof`, human)).status).toBe(200);
    expect((await request(server.url).get(`/trust-records/${businessTransaction().businessTransactionId}/proof`)).status).toBe(401);
  });

  it('keeps every checkpoint, at most one a second, each the root of the leaves it covers', async () => {
    await Promise.all(Array.from({ length: 3 }, async () => {
      for (let i = 0; i < 5; i++) await execute();
    }));
    await currentCheckpoint();
    const rows = (await server.dataSource.query('SELECT tree_size, created_at FROM transparency_log_checkpoints ORDER BY tree_size')) as { tree_size: string | number; created_at: string }[];
    expect(rows.length).toBeGreaterThan(1);
    const times = rows.map((r) => Date.parse(r.created_at));
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(900);
    expect((await logMatchingRecords(server.dataSource)).problems).toEqual([]);
  });
});

describe.each(STORAGE_TARGETS)('the transparency log of a profile A server on $name', (factory) => {
  let server: TestServer;
  const post = (p: string, body: unknown) => request(server.url).post(p).set('authorization', bearer(agent)).send(body as object);
  const attest = async (signals: Json): Promise<Json> => {
    const res = await post('/execute', { executionId: `run-${Math.random().toString(36).slice(2)}`, policyId: 'exec-test', policyVersion: '1.0.0', signals });
    expect(res.status).toBe(200);
    return res.body.attestation as Json;
  };

  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(agent, human), SVC_PROFILE: 'attestation' });
    await publishPolicy(server.dataSource);
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it('holds every signed record exactly once: runtime manifest, attestations, override resolutions, confirmation proofs, audit events', async () => {
    const approved = await attest({ amount: 10 });
    const pending = await attest({ amount: 20000 });
    // A human decides, with their own key and in their own name.
    const override = { executionId: pending.executionId, approvedBy: 'ops', approverRole: 'risk officer', reason: 'Called the customer' };
    const decide = (body: object) => request(server.url).post('/override').set('authorization', bearer(human)).send(body);
    expect((await decide({ ...override, approved: true })).status).toBe(200);
    // Resolved once: the second resolution is refused and leaves nothing.
    expect((await decide({ ...override, approved: false })).status).toBe(409);
    const action = { actionType: 'payment', actionId: 'pay-1', actionTimestamp: new Date().toISOString() };
    const matched = await post('/confirm-execution', { attestation: approved, executedAction: action });
    expect(matched.body.matched).toBe(true);
    const mismatched = await post('/confirm-execution', { attestation: approved, executedAction: { ...action, actionId: 'pay-2' } });
    expect(mismatched.body.matched).toBe(false);

    const { problems, kinds } = await logMatchingRecords(server.dataSource);
    expect(problems).toEqual([]);
    expect(kinds).toMatchObject({ 'runtime-manifest': 1, attestation: 2, 'override-resolution': 1, 'confirmation-proof': 2 });
    expect(kinds['audit-event']).toBeGreaterThan(0);
    // A confirmation proof's leaf is H(C(the JWS as served, a JSON string)).
    const leaves = (await request(server.url).get('/log/leaves?start=0&count=1000')).body.leaves as string[];
    expect(leaves).toContain(leafOf(matched.body.proof));
    expect(leaves).toContain(leafOf(approved));
  });
});
