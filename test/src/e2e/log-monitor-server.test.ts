import { afterAll, describe, expect, it } from '@jest/globals';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import type { DataSource } from 'typeorm';
import { appendLeaves, createDataSource, storeTransaction, type LogEntry, type LoggedRecordKind } from '@ets/adapters-persistence';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  checkpointCoversLog,
  logRows,
  makeKey,
  onDatabase,
  publishPolicy,
  runCli,
  serveRefused,
  spawnServer,
  STORAGE_TARGETS,
  type ProvisionedTarget,
  type SpawnedServer,
} from '@ets/test-support';

// `ets log monitor` against a real `ets serve`, whose database is then changed directly, as an
// operator with full access (and the signing key) would to hide or alter a record: the log is
// rewritten and re-signed. The service itself refuses to start on a log that does not extend what
// it published (kept in its data dir, `transparency-log/`), so the operator deletes that too.
// Whatever was done, the monitor that saw the log before says so.

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(STORAGE_TARGETS)('ets log monitor against a server on $name', (factory) => {
  let db: ProvisionedTarget;
  let dataDir: string;
  let env: Record<string, string>;
  let server: SpawnedServer | undefined;

  const start = async () => (server = await spawnServer(env));
  const stop = async () => {
    await server?.stop();
    server = undefined;
  };
  const withDb = async <T>(fn: (ds: DataSource) => Promise<T>): Promise<T> => {
    const ds = createDataSource(db.target);
    await ds.initialize();
    try {
      return await fn(ds);
    } finally {
      await ds.destroy();
    }
  };
  const execute = async (n: number, over: Record<string, unknown> = {}) => {
    for (let i = 0; i < n; i++) {
      const r = await request(server!.url).post('/execute').set('authorization', bearer(agent)).send(businessTransaction(over));
      expect([200, 403]).toContain(r.status);
    }
  };
  /** Waits until the served checkpoint covers every leaf (a checkpoint follows within a second). */
  const settled = () => checkpointCoversLog(server!.url, 10_000);
  const monitor = (state: string) => runCli(['log', 'monitor', '--state', state, server!.url], {});
  /** A state file of a monitor that has seen the log as it is now. */
  const watching = async (name: string): Promise<string> => {
    await settled();
    const state = path.join(dataDir, `${name}.json`);
    const first = await monitor(state);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toMatch(/^first run: /);
    return state;
  };

  /** What the service published, kept in its data dir out of the database's reach. */
  const published = () => path.join(dataDir, 'transparency-log');
  /**
   * Rewrites the log from `leaves` (with the server stopped), as an operator who changed records
   * would, and drops the checkpoint history that would contradict it, in the database and in the
   * data dir, so that the service signs the rewritten tree as if it had always been so.
   */
  const rewriteLog = (change: (entries: LogEntry[]) => LogEntry[], keepCheckpoints = false) =>
    withDb(async (ds) => {
      if (!keepCheckpoints) rmSync(published(), { recursive: true, force: true });
      const entries = (await logRows(ds)).map((r): LogEntry => ({ leaf: r.leaf, kind: r.kind as LoggedRecordKind, id: r.id }));
      await storeTransaction(ds, async (run) => {
        for (const t of ['transparency_log_leaves', 'transparency_log_nodes', ...(keepCheckpoints ? [] : ['transparency_log_checkpoints'])]) await run(`DELETE FROM ${t}`, []);
        await run("UPDATE transparency_log_head SET tree_size = 0, border = '' WHERE id = 1", []);
        await appendLeaves(run, factory.name, change(entries));
      });
    });

  it('prepares a server with some history', async () => {
    db = await factory.provision();
    dataDir = db.target.kind === 'sqlite' ? path.dirname(db.target.file) : mkdtempSync(path.join(os.tmpdir(), 'ets-monitor-'));
    cleanups.push(async () => {
      await stop();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    });
    env = { SVC_DATA_DIR: dataDir, SVC_LOG_ORIGIN: 'ets.test/log', ...apiKeysEnv(agent), ...(db.target.kind === 'postgres' ? { SVC_DATABASE_URL: db.target.url } : {}) };
    await onDatabase(db.target, publishPolicy);
    await start();
    await execute(6);
    await execute(2, { signals: { amount: 1, country: 'KP' } });
  });

  it('accepts the honest log as it grows', async () => {
    const state = await watching('honest');
    await execute(3);
    await settled();
    const run = await monitor(state);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^consistent: ets\.test\/log grew from \d+ to \d+ leaves/);
  });

  it('a changed leaf: the service refuses to start, then to sign over it; re-signed from scratch, the monitor reports a FORK', async () => {
    const state = await watching('changed');
    const saved = JSON.parse(readFileSync(state, 'utf8')) as { treeSize: number };
    await stop();
    // A refusal is rewritten: its leaf changes (the log lists it as another record).
    const changed = (entries: LogEntry[]) => entries.map((e, i) => (i === 3 ? { ...e, leaf: 'ab'.repeat(32) } : e));
    await rewriteLog(changed, true);
    // The tree does not have the leaves of the checkpoint it published: it refuses to start.
    expect(existsSync(published())).toBe(true);
    const refused = await serveRefused(env);
    expect(refused).toMatchObject({ code: 2, listening: false });
    expect(refused.stderr).toMatch(/^ets: the transparency log in the database does not have the first \d+ leaves of the checkpoint this service published for ets\.test\/log /);
    // Its history kept, but not the data dir's record: it starts, and signs nothing over the change.
    rmSync(published(), { recursive: true, force: true });
    await start();
    await execute(2);
    await sleep(1500);
    expect(server!.output()).toContain('no checkpoint could be signed');
    expect((await monitor(state)).stdout).toMatch(/^unchanged: /);
    // The operator drops the history too; the service signs the rewritten tree.
    await stop();
    await rewriteLog((e) => e);
    await start();
    await settled();
    const run = await monitor(state);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^ets: FORK: the log's size \d+ \(root .*\) does not extend the size \d+ .*a leaf was removed, changed or reordered/);
    expect(JSON.parse(readFileSync(`${state}.evidence.json`, 'utf8'))).toMatchObject({ problem: expect.stringContaining('FORK') });
    expect(saved.treeSize).toBeGreaterThan(3);
  });

  it('a removed record and its leaf, then new records: FORK', async () => {
    const state = await watching('removed');
    await stop();
    const removed = await withDb(async (ds) => {
      const [row] = (await ds.query('SELECT business_transaction_id AS id FROM refusal_records ORDER BY created_at LIMIT 1')) as { id: string }[];
      await storeTransaction(ds, (run) => run(`DELETE FROM refusal_records WHERE business_transaction_id = ${factory.name === 'postgres' ? '$1' : '?'}`, [row!.id]));
      return row!.id;
    });
    await rewriteLog((entries) => entries.filter((e) => !(e.kind === 'refusal' && e.id === removed)));
    await start();
    await execute(3);
    await settled();
    const run = await monitor(state);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^ets: FORK: .* does not extend /);
    // Record and leaf are gone without a trace in the database: only an outside observer can tell.
    const leaves = await withDb(logRows);
    expect(leaves.map((l) => l.id)).not.toContain(removed);
    expect(leaves.map((l) => l.index)).toEqual(leaves.map((_, i) => i));
  });

  it('two leaves swapped: FORK', async () => {
    const state = await watching('reordered');
    await stop();
    await rewriteLog((entries) => {
      const out = [...entries];
      [out[1], out[2]] = [out[2]!, out[1]!];
      return out;
    });
    await start();
    await settled();
    const run = await monitor(state);
    expect(run.code).toBe(1);
    // (A start signs a runtime manifest, so the rewritten tree is one leaf larger than the saved one.)
    expect(run.stderr).toMatch(/^ets: FORK: the log's size \d+ .* does not extend the size \d+ .*a leaf was removed, changed or reordered/);
  });

  it('the newest leaves dropped: ROLLBACK', async () => {
    const state = await watching('rollback');
    const copy = `${state}.copy`;
    copyFileSync(state, copy);
    await stop();
    await rewriteLog((entries) => entries.slice(0, entries.length - 4));
    await start();
    await settled();
    const run = await monitor(copy);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^ets: ROLLBACK: the log serves size \d+ .*smaller than size \d+/);
  });
});
