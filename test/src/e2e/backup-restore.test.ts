import { afterAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  apiKeysEnv,
  checkpointCoversLog,
  makeKey,
  onDatabase,
  postgresTarget,
  postMany,
  publishPolicy,
  runCli,
  serveRefused,
  spawnServer,
  sqliteTarget,
  tempDirs,
  type ProvisionedTarget,
  type SpawnedServer,
  type TargetFactory,
} from '@ets/test-support';

// Needs the built CLI (`npm run build`), and pg_dump/pg_restore for PostgreSQL. A live server is
// backed up while it executes (SQLite: `ets backup`; PostgreSQL: `pg_dump`, as the operator guide
// says); then it goes on, and publishes checkpoints a witness (`ets log monitor`) sees. Restored the
// documented way (SQLite: the copy becomes <data dir>/ets.sqlite; PostgreSQL: a new database, the
// same data dir), the database's log lacks what was published after the backup: the server refuses
// to start, with one line saying so and what to do, rather than sign checkpoints that fork the log.
// Under a new origin (SVC_LOG_ORIGIN) it starts: a new log whose checkpoints verify and which a
// monitor of the new origin finds consistent as it grows, while the old origin's monitor is told
// the origin changed; every restored record verifies and new executions extend the chain from the
// restored head (`ets export`, `ets verify --all` from the deployment's first execution).

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const tmp = tempDirs('ets-backup-');
const run = promisify(execFile);

/** pg_dump and pg_restore: on PATH, else where Debian's PostgreSQL packages put them. */
function pgTool(name: string): string {
  const found = (process.env.PATH ?? '').split(':').map((d) => path.join(d, name)).find((p) => existsSync(p));
  if (found) return found;
  for (const v of ['17', '16', '15', '14', '13']) if (existsSync(`/usr/lib/postgresql/${v}/bin/${name}`)) return `/usr/lib/postgresql/${v}/bin/${name}`;
  throw new Error(`${name} not found (install the PostgreSQL client tools)`);
}

interface Store {
  factory: TargetFactory;
  /** Settings that name the store, for the server and the CLI. */
  env(db: ProvisionedTarget, dataDir: string): Record<string, string>;
  /** Backs up the live store of `env` into `dir`; returns what restore needs. */
  backup(env: Record<string, string>, dir: string): Promise<string>;
  /** Restores the backup the documented way, for a server stopped; returns the settings that name the restored store. */
  restore(backup: string, original: ProvisionedTarget, dataDir: string, dbs: ProvisionedTarget[]): Promise<Record<string, string>>;
}

const STORES: Store[] = [
  {
    factory: sqliteTarget,
    env: (db) => ({ SVC_DATA_DIR: path.dirname((db.target as { file: string }).file) }),
    async backup(env, dir) {
      const file = path.join(dir, 'ets-backup.sqlite');
      const res = await runCli(['backup', file], env);
      expect(res.stderr).toBe('');
      expect(res.stdout).toMatch(/^backed up .* to .*ets-backup\.sqlite: \d+ pages; \d+ trust_records/);
      expect(res.stdout).toContain('integrity check of the copy: ok');
      expect(res.code).toBe(0);
      return file;
    },
    async restore(backup, original, dataDir) {
      // The guide: remove ets.sqlite-wal and ets.sqlite-shm, copy the file to <data dir>/ets.sqlite.
      const file = (original.target as { file: string }).file;
      for (const f of [`${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
      cpSync(backup, file);
      return { SVC_DATA_DIR: dataDir };
    },
  },
  {
    factory: postgresTarget,
    env: (db, dataDir) => ({ SVC_DATA_DIR: dataDir, SVC_DATABASE_URL: (db.target as { url: string }).url }),
    async backup(env, dir) {
      const file = path.join(dir, 'ets.dump');
      await run(pgTool('pg_dump'), ['--format=custom', `--file=${file}`, env.SVC_DATABASE_URL!]);
      // ets backup names pg_dump instead of copying a PostgreSQL database.
      const refused = await runCli(['backup', path.join(dir, 'x')], env);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/pg_dump --format=custom/);
      return file;
    },
    async restore(backup, _original, dataDir, dbs) {
      // The guide: a new, empty database, then SVC_DATABASE_URL points at it.
      const restored = await postgresTarget.provision();
      dbs.push(restored);
      const url = (restored.target as { url: string }).url;
      await run(pgTool('pg_restore'), ['--no-owner', `--dbname=${url}`, backup]);
      return { SVC_DATA_DIR: dataDir, SVC_DATABASE_URL: url };
    },
  },
];

describe.each(STORES)('backup of a live $factory.name store and restore', (store) => {
  const servers: SpawnedServer[] = [];
  const dbs: ProvisionedTarget[] = [];
  afterAll(async () => {
    for (const s of servers) if (s.child.exitCode === null) await s.stop('SIGKILL');
    for (const db of dbs) await db.drop();
  });

  it('restores every record; refuses to start on a log that lacks published checkpoints; under a new origin starts a consistent new log and extends the chain', async () => {
    const dir = tmp();
    const original = await store.factory.provision();
    dbs.push(original);
    const dataDir = store.factory.name === 'sqlite' ? path.dirname((original.target as { file: string }).file) : tmp();
    await onDatabase(original.target, publishPolicy);
    const common = { RATE_LIMIT_EXECUTE_PER_MINUTE: '1000000', ...apiKeysEnv(agent) };
    const env = { ...store.env(original, dataDir), ...common };
    const live = await spawnServer(env, 60_000);
    servers.push(live);
    expect(new Set(await postMany(live.url, agent, 60))).toEqual(new Set([200]));
    // A checkpoint holds those 60 (an export is a checkpoint's tree), then a backup while the server executes.
    await checkpointCoversLog(live.url);
    const [, backup] = await Promise.all([postMany(live.url, agent, 60, { concurrency: 4 }), store.backup(env, dir)]);
    const jwks = path.join(dir, 'jwks.json');
    writeFileSync(jwks, await (await fetch(`${live.url}/.well-known/jwks.json`)).text());
    // After the backup: more records, and a checkpoint of them that a witness saw.
    expect(new Set(await postMany(live.url, agent, 5))).toEqual(new Set([200]));
    const published = await checkpointCoversLog(live.url);
    const state = path.join(dir, 'witness.json');
    const seen = await runCli(['log', 'monitor', '--state', state, live.url], {});
    expect(seen.code).toBe(0);
    expect((JSON.parse(readFileSync(state, 'utf8')) as { treeSize: number }).treeSize).toBe(published);
    expect(await live.stop()).toBe(0);

    // Restored the documented way; the data dir stays (its keys/, and transparency-log/).
    const restoredEnv = { ...(await store.restore(backup, original, dataDir, dbs)), ...common };
    const before = await runCli(['export'], restoredEnv);
    expect(before.code).toBe(0);
    const restoredLines = before.stdout.trimEnd().split('\n').slice(1);
    expect(restoredLines.filter((l) => l.startsWith('{"kind":"execution-trust-record"')).length).toBeGreaterThanOrEqual(60);
    expect(restoredLines.length).toBeLessThan(published);

    // Its log lacks what was published after the backup: signing would fork it. Refused, in one line.
    const refused = await serveRefused(restoredEnv);
    expect(refused).toMatchObject({ code: 2, listening: false });
    expect(refused.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(
      new RegExp(
        `^ets: the transparency log in the database holds \\d+ leaves, fewer than the (\\d+) of the checkpoint this service published for ets/log \\(size \\d+, root [0-9a-f]{16}…, kept in ${dataDir.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}/transparency-log\\): ` +
          'the database was restored from a backup or changed, and signing now would fork the log its witnesses saw\\. ' +
          "Start the log under a new origin: set SVC_LOG_ORIGIN to a new name \\(e\\.g\\. ets/log-2\\), tell the log's witnesses, and start again",
      ),
    );
    expect(Number(/fewer than the (\d+)/.exec(refused.stderr)![1])).toBeGreaterThanOrEqual(published);
    // Nothing was signed or stored by the refused start.
    expect((await runCli(['export'], restoredEnv)).stdout).toBe(before.stdout);

    // Under a new origin: a new log, over the restored leaves and the new ones.
    const newEnv = { ...restoredEnv, SVC_LOG_ORIGIN: 'ets/log-2' };
    const again = await spawnServer(newEnv, 60_000);
    servers.push(again);
    await checkpointCoversLog(again.url);
    const checkpoint = await (await fetch(`${again.url}/log/checkpoint`)).text();
    expect(checkpoint.split('\n')[0]).toBe('ets/log-2');
    // The old origin's witness is told; a witness of the new one finds it consistent as it grows.
    const old = await runCli(['log', 'monitor', '--state', state, again.url], {});
    expect(old.code).toBe(1);
    expect(old.stderr).toMatch(/ORIGIN CHANGED: the log now signs checkpoints for "ets\/log-2", not "ets\/log" as saved/);
    const newState = path.join(dir, 'witness-2.json');
    expect(await runCli(['log', 'monitor', '--state', newState, again.url], {})).toMatchObject({ code: 0, stdout: expect.stringMatching(/^first run: .* ets\/log-2 at /) });
    expect(new Set(await postMany(again.url, agent, 20))).toEqual(new Set([200]));
    await checkpointCoversLog(again.url);
    const grown = await runCli(['log', 'monitor', '--state', newState, again.url], {});
    expect(grown.code).toBe(0);
    expect(grown.stdout).toMatch(/^consistent: ets\/log-2 grew from \d+ to \d+ leaves/);
    expect(await again.stop()).toBe(0);
    // And it starts again under the new origin: its new log extends what it published.
    const third = await spawnServer(newEnv, 60_000);
    servers.push(third);
    expect(await third.stop()).toBe(0);

    const after = await runCli(['export'], newEnv);
    expect(after.code).toBe(0);
    const file = path.join(dir, 'after-restore.jsonl');
    writeFileSync(file, after.stdout);
    const lines = after.stdout.trimEnd().split('\n').slice(1);
    // Every restored record is still there, at its leaf, signed bytes unchanged (plus what the new
    // executions signed). Only the inclusion proof beside each record differs: it is to the newer checkpoint.
    const signedPart = (l: string): string => JSON.stringify({ ...JSON.parse(l), transparency: undefined });
    expect(lines.slice(0, restoredLines.length).map(signedPart)).toEqual(restoredLines.map(signedPart));
    // At least the 20 new executions; one more when the copy held an execution in flight, which
    // the restarted server resolves and records.
    expect(lines.filter((l) => l.startsWith('{"kind":"execution-trust-record"')).length).toBeGreaterThanOrEqual(
      restoredLines.filter((l) => l.startsWith('{"kind":"execution-trust-record"')).length + 20,
    );
    const verified = await runCli(['verify', '--all', file, '--keys', jwks], {});
    expect(verified.stdout).toContain('export: the whole log, in the checkpoint of ');
    expect(verified.stdout).toMatch(/ leaves of ets\/log-2\n/);
    expect(verified.stdout).toMatch(/chain: \d+ links, from the deployment's first execution, head [0-9a-f]{64}; no break/);
    expect(verified.stdout).toContain('VALID: every record verifies, no leaf of the run is missing, repeated or out of order, and the chain is unbroken.');
    expect(verified.code).toBe(0);
  }, 240_000);
});
