import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DataSource } from 'typeorm';
import { KeyRing, KeyRingSigner, NoteCheckpointSigner, toHex, fromBase64 } from '@ets/adapters-crypto';
import {
  appendLeaves,
  appendToLog,
  CheckpointRefusedError,
  createDataSource,
  migrate,
  MIGRATIONS,
  storeTransaction,
  TypeOrmAuditEventStore,
  TypeOrmExecutionStore,
  TypeOrmTransparencyLog,
  type LogEntry,
} from '@ets/adapters-persistence';
import { CheckpointPublisher, DuplicateTransactionError, type LogCheckpoint, type SignedRefusal } from '@ets/domain';
import {
  consistencyHolds,
  inclusionHolds,
  leafOf,
  logMatchingRecords,
  logRows,
  openCheckpointNote,
  STORAGE_TARGETS,
  tempDirs,
  treeHash,
  type ProvisionedTarget,
} from '@ets/test-support';

// The log's storage on each database, below the HTTP layer: the RFC 9162 test vectors through the
// stored tree, appends inside the stores' transactions (a rolled-back job leaves nothing, indices
// stay dense), several instances appending at once, and the checkpoint history.

interface Vectors {
  leafInputs: string[];
  nodeHashes: string[][];
  rootHashes: string[];
  inclusion: { file: string; leafIdx: number; treeSize: number; proof: string[] | null; wantErr: boolean }[];
  consistency: { file: string; size1: number; size2: number; proof: string[] | null; wantErr: boolean }[];
}
const VECTORS_FILE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../packages/adapters-crypto/src/transparency/testdata/transparency-dev-merkle.json');
const vectors = JSON.parse(readFileSync(VECTORS_FILE, 'utf8')) as Vectors;
const b64hex = (s: string) => toHex(fromBase64(s)!);
const tempDir = tempDirs('ets-tlog-store-');

const refusalOf = (id: string, n = 0): SignedRefusal =>
  ({ recordType: 'refusal-record', businessTransactionId: id, n, keyId: 'k1', signature: 'c2ln' }) as unknown as SignedRefusal;
const claimOf = (id: string) => ({ businessTransactionId: id, callerId: 'c', outcome: 'REFUSED' as const, createdAt: new Date().toISOString() });
const id = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;

describe.each(STORAGE_TARGETS)('migration 0016 on $name', (factory) => {
  it('makes the signed records stored before it the first leaves of the log', async () => {
    const db = await factory.provision();
    const before = createDataSource(db.target);
    const older = new DataSource({ ...before.options, migrations: MIGRATIONS.filter((m) => new m().name !== 'TransparencyLog1763684700000') } as never);
    try {
      await older.initialize();
      await older.runMigrations({ transaction: 'each' });
      const q = (sql: string, params: unknown[]) => {
        let n = 0;
        return older.query(factory.name === 'postgres' ? sql.replace(/\?/g, () => `$${++n}`) : sql, params);
      };
      const at = new Date().toISOString();
      for (let i = 0; i < 3; i++) {
        const tx = id(100 + i);
        await q('INSERT INTO business_transactions (business_transaction_id, caller_id, outcome, created_at) VALUES (?, ?, ?, ?)', [tx, 'c', 'REFUSED', at]);
        await q('INSERT INTO refusal_records (business_transaction_id, body, created_at) VALUES (?, ?, ?)', [tx, JSON.stringify(refusalOf(tx, i)), at]);
        await q('INSERT INTO audit_events (event_id, kind, caller_id, occurred_at, body) VALUES (?, ?, ?, ?, ?)', [`e-${i}`, 'authentication', 'c', at, JSON.stringify({ eventId: `e-${i}`, n: i })]);
        await q('INSERT INTO receipts (id, business_transaction_id, created_at, body) VALUES (?, ?, ?, ?)', [`r-${i}`, tx, at, JSON.stringify({ receiptId: `r-${i}` })]);
      }
      await older.destroy();
      const ds = createDataSource(db.target);
      await ds.initialize();
      try {
        expect(await migrate(ds)).toEqual(['TransparencyLog1763684700000']);
        const { problems, kinds } = await logMatchingRecords(ds);
        expect(problems).toEqual([]);
        expect(kinds).toEqual({ refusal: 3, 'audit-event': 3, receipt: 3 });
      } finally {
        await ds.destroy();
      }
    } finally {
      if (older.isInitialized) await older.destroy();
      await db.drop();
    }
  });
});

describe.each(STORAGE_TARGETS)('the transparency log store on $name', (factory) => {
  let db: ProvisionedTarget;
  let ds: DataSource;
  const extra: DataSource[] = [];
  /**
   * Another instance's connection. PostgreSQL: another pool. SQLite: the same DataSource, since
   * better-sqlite3 waits for another connection's write lock synchronously, which in one process
   * would wait for itself (instances of an SQLite deployment are processes: see test/src/e2e).
   */
  const open = async (): Promise<DataSource> => {
    if (factory.name === 'sqlite') return ds;
    const d = createDataSource(db.target);
    await d.initialize();
    extra.push(d);
    return d;
  };

  beforeEach(async () => {
    db = await factory.provision();
    ds = createDataSource(db.target);
    await ds.initialize();
    await migrate(ds);
  });
  afterEach(async () => {
    for (const d of extra.splice(0)) await d.destroy();
    await ds.destroy();
    await db.drop();
  });

  it('stores exactly the nodes, roots and proofs of the RFC 9162 test vectors (transparency-dev/merkle)', async () => {
    const log = new TypeOrmTransparencyLog(ds);
    const dialect = factory.name;
    expect(await log.treeHead()).toEqual({ treeSize: 0, rootHash: vectors.rootHashes[0] });
    // One leaf per commit, then the root of every size.
    for (const [i, leaf] of vectors.leafInputs.entries()) {
      await storeTransaction(ds, (run) => appendLeaves(run, dialect, [{ leaf, kind: 'refusal', id: `v${i}` }]));
      expect(await log.treeHead()).toEqual({ treeSize: i + 1, rootHash: vectors.rootHashes[i + 1] });
    }
    const nodes = (await ds.query('SELECT level, node_index, hash FROM transparency_log_nodes')) as { level: number; node_index: string | number; hash: string }[];
    const stored = nodes.map((n) => `${Number(n.level)}/${Number(n.node_index)} ${n.hash}`).sort();
    expect(stored).toEqual(vectors.nodeHashes.flatMap((level, l) => level.map((h, i) => `${l}/${i} ${h}`)).sort());
    for (const p of vectors.inclusion.filter((q) => !q.wantErr && q.treeSize <= vectors.leafInputs.length)) {
      const proof = await log.inclusionProof(vectors.leafInputs[p.leafIdx]!, p.treeSize);
      expect({ file: p.file, hashes: proof?.hashes }).toEqual({ file: p.file, hashes: (p.proof ?? []).map(b64hex) });
    }
    for (const p of vectors.consistency.filter((q) => !q.wantErr && q.size1 > 0 && q.size2 <= vectors.leafInputs.length)) {
      expect({ file: p.file, hashes: (await log.consistencyProof(p.size1, p.size2)).hashes }).toEqual({ file: p.file, hashes: (p.proof ?? []).map(b64hex) });
    }
    expect(await log.leaves(2, 3)).toEqual(vectors.leafInputs.slice(2, 5));
  });

  it('appends in the records’ commit: a job rolled back in a group commit leaves no leaf, and indices stay dense', async () => {
    const store = new TypeOrmExecutionStore(ds);
    // Duplicates of one id race; every failed claim rolls back its job (on SQLite, to its savepoint).
    const results = await Promise.allSettled(
      Array.from({ length: 60 }, (_, i) => store.storeRefusal(claimOf(id(i % 20)), refusalOf(id(i % 20), i))),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(20);
    expect(results.filter((r) => r.status === 'rejected').every((r) => (r as PromiseRejectedResult).reason instanceof DuplicateTransactionError)).toBe(true);
    // A job that fails after asking for its leaf leaves none either.
    const failing = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) =>
        storeTransaction(ds, async (run) => {
          appendToLog(run, [{ kind: 'receipt', id: `r-${i}`, body: JSON.stringify({ r: i }) }]);
          if (i % 2 === 0) throw new Error('fails after appending');
        }),
      ),
    );
    expect(failing.filter((r) => r.status === 'rejected')).toHaveLength(5);
    const rows = await logRows(ds);
    expect(rows.map((r) => r.index)).toEqual(Array.from({ length: 25 }, (_, i) => i));
    expect(rows.filter((r) => r.kind === 'receipt').map((r) => r.id).sort()).toEqual(['r-1', 'r-3', 'r-5', 'r-7', 'r-9']);
    const refusals = (await ds.query('SELECT business_transaction_id AS id, body FROM refusal_records')) as { id: string; body: string }[];
    expect(rows.filter((r) => r.kind === 'refusal').map((r) => `${r.id} ${r.leaf}`).sort()).toEqual(refusals.map((r) => `${r.id} ${leafOf(JSON.parse(r.body))}`).sort());
    expect((await new TypeOrmTransparencyLog(ds).treeHead()).rootHash).toBe(treeHash(rows.map((r) => r.leaf)));
  });

  it('several instances appending records and batches of audit events at once build one tree without forks', async () => {
    const instances = [ds, await open(), await open()];
    await Promise.all(
      instances.flatMap((d, n) => {
        const store = new TypeOrmExecutionStore(d);
        const audit = new TypeOrmAuditEventStore(d);
        return Array.from({ length: 40 }, async (_, i) => {
          await store.storeRefusal(claimOf(id(n * 1000 + i)), refusalOf(id(n * 1000 + i)));
          await audit.append({ eventId: `e-${n}-${i}`, kind: 'authentication', callerId: 'c', occurredAt: new Date().toISOString(), keyId: 'k', signature: 's' } as never);
        });
      }),
    );
    const { problems, size, kinds } = await logMatchingRecords(ds);
    expect(problems).toEqual([]);
    expect(size).toBe(240);
    expect(kinds).toEqual({ refusal: 120, 'audit-event': 120 });
  });

  it('keeps checkpoints that fit the stored tree, refuses the others, and refuses all once the stored tree was rewritten', async () => {
    const log = new TypeOrmTransparencyLog(ds);
    const leaves = Array.from({ length: 7 }, (_, i) => leafOf({ n: i }));
    const entries = (list: string[]): LogEntry[] => list.map((leaf, i) => ({ leaf, kind: 'refusal', id: `x${i}` }));
    await storeTransaction(ds, (run) => appendLeaves(run, factory.name, entries(leaves)));
    const cp = (treeSize: number, rootHash = treeHash(leaves.slice(0, treeSize))): LogCheckpoint => ({ origin: 'o', keyId: 'k', note: `note ${treeSize}`, treeSize, rootHash });

    await log.saveCheckpoint(cp(3));
    await log.saveCheckpoint(cp(3)); // the same again: kept once
    await log.saveCheckpoint(cp(5));
    await expect(log.saveCheckpoint(cp(4))).rejects.toThrow(CheckpointRefusedError); // smaller than the latest
    await expect(log.saveCheckpoint(cp(8))).rejects.toThrow(/larger than the tree/);
    await expect(log.saveCheckpoint(cp(6, treeHash(leaves.slice(1, 7))))).rejects.toThrow(/not the root/);
    await log.saveCheckpoint(cp(7));
    expect((await log.latestCheckpoint())?.treeSize).toBe(7);
    expect(await log.checkpointAt(5)).toEqual(cp(5));
    const sizes = (await ds.query('SELECT tree_size FROM transparency_log_checkpoints ORDER BY tree_size')) as { tree_size: string | number }[];
    expect(sizes.map((r) => Number(r.tree_size))).toEqual([3, 5, 7]);

    // Someone rewrites the stored tree (leaf 2 changed) and appends: no checkpoint is kept anymore.
    const rewritten = [...leaves.slice(0, 2), leafOf({ n: 'changed' }), ...leaves.slice(3)];
    await storeTransaction(ds, async (run) => {
      for (const t of ['transparency_log_leaves', 'transparency_log_nodes']) await run(`DELETE FROM ${t}`, []);
      await run("UPDATE transparency_log_head SET tree_size = 0, border = '' WHERE id = 1", []);
      await appendLeaves(run, factory.name, entries([...rewritten, leafOf({ n: 8 })]));
    });
    await expect(log.saveCheckpoint(cp(8, treeHash([...rewritten, leafOf({ n: 8 })])))).rejects.toThrow(/stored log was changed/);
  });

  it('publishers of two instances converge on one history of consistent, signed checkpoints, at most one a second each', async () => {
    const ring = await KeyRing.open({ dataDir: tempDir(), mode: 'ed25519' });
    const jwks = JSON.parse(JSON.stringify(ring.jwks())) as { keys: Record<string, unknown>[] };
    const other = await open();
    const publishers = [ds, other].map(
      (d) =>
        new CheckpointPublisher({
          log: new TypeOrmTransparencyLog(d),
          signer: new NoteCheckpointSigner('ets.test/log', new KeyRingSigner(ring), ring),
          published: { location: 'memory', latest: async () => undefined, remember: async () => undefined },
          clock: { now: () => new Date() },
        }),
    );
    const stores = [ds, other].map((d) => new TypeOrmExecutionStore(d));
    const started = Date.now();
    let n = 0;
    while (Date.now() - started < 3500) {
      await Promise.all(stores.map((s) => s.storeRefusal(claimOf(id(++n)), refusalOf(id(n)))));
      await Promise.all(publishers.map((p) => p.publish()));
    }
    // A Receipt's need: a checkpoint that covers a leaf just appended.
    await stores[0]!.storeRefusal(claimOf(id(++n)), refusalOf(id(n)));
    const leaf = leafOf(refusalOf(id(n)));
    const proof = await publishers[1]!.proofOf(leaf);
    const cp = openCheckpointNote(proof!.checkpoint, jwks);
    expect(inclusionHolds(proof!.leafIndex, proof!.treeSize, leaf, proof!.hashes, cp.rootHash)).toBe(true);

    const log = new TypeOrmTransparencyLog(ds);
    const rows = (await ds.query('SELECT tree_size, note FROM transparency_log_checkpoints ORDER BY tree_size')) as { tree_size: string | number; note: string }[];
    expect(rows.length).toBeGreaterThanOrEqual(3);
    // Two publishers, each at most once a second, over about four seconds.
    expect(rows.length).toBeLessThanOrEqual(2 * 5 + 1);
    const opened = rows.map((r) => openCheckpointNote(r.note, jwks));
    for (let i = 1; i < opened.length; i++) {
      const [a, b] = [opened[i - 1]!, opened[i]!];
      if (a.treeSize === 0) continue;
      const { hashes } = await log.consistencyProof(a.treeSize, b.treeSize);
      expect(consistencyHolds(a.treeSize, b.treeSize, a.rootHash, b.rootHash, hashes)).toBe(true);
    }
    expect((await logMatchingRecords(ds)).problems).toEqual([]);
  });
});
