import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  checkpointCoversLog,
  makeKey,
  onDatabase,
  postMany,
  publishPolicy,
  refusedTransaction,
  runCli,
  serverStorageEnv,
  spawnServer,
  STORAGE_TARGETS,
  tempDirs,
  type ProvisionedTarget,
  type SpawnedServer,
} from '@ets/test-support';

// Needs the built CLI (`npm run build`). A real server makes 10,000 signed records through its
// pipeline (3,000 executions: an authentication audit event, an intent and a Trust Record each;
// 500 refusals: an audit event and a Refusal Record each; a few Verifications and Receipts);
// `ets export` writes them, in log order, while the server keeps executing, and `ets verify --all`
// checks every one, the chain across them, and that no leaf of the log is missing, repeated, moved
// or foreign: a line removed of any kind, repeated or moved makes the file NOT VALID.

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const tmp = tempDirs('ets-export-');
const EXECUTED = 3000;
const REFUSED = 500;
/** Executions that are also verified and get a Receipt. */
const RECEIPTED = 3;

type Line = { kind: string; record: Record<string, unknown>; transparency: { leafIndex: number; treeSize: number } };
type Header = { export: { format: string; checkpoint: string; period?: object; leaves: { first: number; last: number } | null } };

describe.each(STORAGE_TARGETS)('ets export and ets verify --all on $name', (factory) => {
  let db: ProvisionedTarget;
  let server: SpawnedServer;
  let env: Record<string, string>;
  let dir: string;
  let jwksFile: string;
  /** The export's record lines (its header is `header`). */
  let lines: string[];
  let header: string;
  let midpoint: string;

  const check = async (name: string, content: string[]) => {
    const file = path.join(dir, name);
    writeFileSync(file, content.join('\n') + '\n');
    return runCli(['verify', '--all', file, '--keys', jwksFile], {});
  };
  /** Until a checkpoint covers `leaves` leaves (the publisher signs at most once a second and lags under load). */
  const checkpointCovers = async (leaves: number) => {
    for (let i = 0; ; i++) {
      const note = await (await fetch(`${server.url}/log/checkpoint`)).text();
      if (Number(note.split('\n')[1]) >= leaves) return;
      if (i > 600) throw new Error(`no checkpoint covers the ${leaves} leaves written: ${note}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  beforeAll(async () => {
    db = await factory.provision();
    await onDatabase(db.target, publishPolicy);
    dir = tmp();
    env = serverStorageEnv(db.target, tmp);
    // A server process of its own: the load and the server share the machine's cores.
    server = await spawnServer({ ...env, ...apiKeysEnv(agent), RATE_LIMIT_EXECUTE_PER_MINUTE: '1000000' }, 60_000);
    jwksFile = path.join(dir, 'jwks.json');
    writeFileSync(jwksFile, await (await fetch(`${server.url}/.well-known/jwks.json`)).text());

    const half = EXECUTED / 2;
    expect(new Set(await postMany(server.url, agent, half, { concurrency: 24 }))).toEqual(new Set([200]));
    await new Promise((r) => setTimeout(r, 20));
    midpoint = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 20));
    const [executed, refused] = await Promise.all([
      postMany(server.url, agent, EXECUTED - half, { concurrency: 24 }),
      postMany(server.url, agent, REFUSED, { concurrency: 8, body: refusedTransaction }),
    ]);
    expect(new Set(executed)).toEqual(new Set([200]));
    expect(new Set(refused)).toEqual(new Set([403]));
    // Verifications and Receipts are leaves too.
    const post = (route: string, body: object) =>
      fetch(`${server.url}${route}`, { method: 'POST', headers: { authorization: bearer(agent), 'content-type': 'application/json' }, body: JSON.stringify(body) });
    for (let i = 0; i < RECEIPTED; i++) {
      const tx = businessTransaction();
      expect((await post('/execute', tx)).status).toBe(200);
      expect((await post('/verify', { businessTransactionId: tx.businessTransactionId })).status).toBe(200);
      expect((await post('/receipt', { businessTransactionId: tx.businessTransactionId })).status).toBe(201);
    }
  }, 300_000);
  afterAll(async () => {
    if (server && server.child.exitCode === null) await server.stop();
    await db?.drop();
  });

  it('exports 10,000 records in log order (beside a server that keeps executing) and verifies every one, the whole run of leaves and the chain', async () => {
    // Leaf 0 (the runtime manifest), the shipped policy's proposal event, and every record; each
    // receipted execution adds 3 leaves, its verification 2 and its receipt 2.
    const written = 3 * EXECUTED + 2 * REFUSED + 1 + 1 + 7 * RECEIPTED;
    await checkpointCovers(written);
    const [exported, more] = await Promise.all([runCli(['export'], env), postMany(server.url, agent, 40, { concurrency: 4 })]);
    expect(new Set(more)).toEqual(new Set([200]));
    expect(exported.stderr).toMatch(/ets export: done, \d+ records/);
    expect(exported.code).toBe(0);
    [header, ...lines] = exported.stdout.trimEnd().split('\n');
    const h = JSON.parse(header!) as Header;
    expect(h.export.format).toBe('ets-export/2');
    const treeSize = Number(h.export.checkpoint.split('\n')[1]);
    // One snapshot, up to its newest checkpoint: every leaf of that checkpoint, and no other.
    expect(h.export.leaves).toEqual({ first: 0, last: treeSize - 1 });
    expect(lines).toHaveLength(treeSize);
    expect(treeSize).toBeGreaterThanOrEqual(written);
    expect(treeSize).toBeLessThanOrEqual(written + 3 * 40);
    const parsed = lines.map((l) => JSON.parse(l) as Line);
    expect(parsed.map((l) => l.transparency.leafIndex)).toEqual(lines.map((_, i) => i));
    const counts: Record<string, number> = {};
    for (const l of parsed) counts[l.kind] = (counts[l.kind] ?? 0) + 1;
    expect(counts).toMatchObject({ 'refusal-record': REFUSED, verification: RECEIPTED, receipt: RECEIPTED, 'runtime-manifest': 1 });
    expect(counts['execution-trust-record']).toBeGreaterThanOrEqual(EXECUTED + RECEIPTED);
    expect(counts['execution-intent']).toBeGreaterThanOrEqual(counts['execution-trust-record']!);
    expect(parsed[0]!.kind).toBe('runtime-manifest');
    const exportFile = path.join(dir, 'records.jsonl');
    writeFileSync(exportFile, exported.stdout);

    const verified = await runCli(['verify', '--all', exportFile, '--keys', jwksFile], {});
    expect(verified.stdout).toContain(`records: ${lines.length}`);
    expect(verified.stdout).toMatch(new RegExp(`\nexport: the whole log, in the checkpoint of ${treeSize} leaves of \\S+\n`));
    expect(verified.stdout).toMatch(new RegExp(`chain: ${counts['execution-trust-record']} links, from the deployment's first execution, head [0-9a-f]{64}; no break`));
    expect(verified.stdout).toContain(`log: leaves 0..${treeSize - 1}, each once and in order: the whole log up to its checkpoint`);
    expect(verified.stdout).toContain('VALID: every record verifies, no leaf of the run is missing, repeated or out of order, and the chain is unbroken.');
    expect(verified.code).toBe(0);
  }, 180_000);

  /** Leaves `first..last` of the export with the header of a period export that holds them (the whole file takes long to verify). */
  const periodRun = (first: number, last: number) => {
    const h = (JSON.parse(header) as Header).export;
    return [JSON.stringify({ export: { ...h, period: { since: '2026-01-01T00:00:00.000Z' }, leaves: { first, last } } }), ...lines.slice(first, last + 1)];
  };

  it('a line removed, of any kind, is NOT VALID (exit 1), and the first failure names the missing leaf', async () => {
    /** The run of 201 leaves around `leaf`. */
    const runAround = (leaf: number) => periodRun(Math.max(0, leaf - 100), Math.min(lines.length - 1, leaf + 100));
    expect((await check('run.jsonl', runAround(5000))).code).toBe(0);
    for (const kind of ['execution-trust-record', 'execution-intent', 'refusal-record', 'verification', 'receipt', 'audit-event', 'runtime-manifest']) {
      // The last record of that kind (leaf 0 for the runtime manifest).
      const leaf = lines.findLastIndex((l) => l.startsWith(`{"kind":"${kind}"`));
      const run = runAround(leaf);
      const i = run.indexOf(lines[leaf]!);
      const res = await check(`without-${kind}.jsonl`, run.filter((_, k) => k !== i));
      expect({ kind, code: res.code }).toEqual({ kind, code: 1 });
      const at = i === run.length - 1 ? 'at the end of the file' : `line ${i + 1} \\([a-z-]+ [^)]*\\)`;
      expect({ kind, failure: res.stdout }).toEqual({ kind, failure: expect.stringMatching(new RegExp(`first failure: ${at}:\n {2}leaf: .*leaf ${leaf} is not in the file`)) });
      expect(res.stdout).toMatch(/\nlog: leaves \d+\.\.\d+: 1 MISSING\n/);
      expect(res.stderr).toMatch(new RegExp(`does NOT verify: ${at}: leaf: `));
    }
  }, 180_000);

  it('a repeated, moved, changed, mislabelled or foreign line is NOT VALID', async () => {
    // The first 1,000 leaves as a period export: the same checks as the whole file's, a tenth of the work.
    const file = periodRun(0, 999);
    // The audit's case: line 500 removed and line 600 repeated, so the count of lines is right.
    // (Line n holds leaf n - 2: line 1 is the header.)
    const repeated = [...file.slice(0, 499), ...file.slice(500, 600), file[599]!, ...file.slice(600)];
    expect(repeated).toHaveLength(file.length);
    const r = await check('repeated.jsonl', repeated);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/first failure: line 500 \([a-z-]+ [^)]*\):\n {2}leaf: the line is leaf 499, but the run's next leaf is 498: leaf 498 is not in the file here/);
    expect(r.stdout).toMatch(/log: leaves 0\.\.\d+: 1 MISSING, 1 REPEATED or OUT OF ORDER/);

    const moved = [...file];
    [moved[300], moved[301]] = [moved[301]!, moved[300]!];
    const m = await check('moved.jsonl', moved);
    expect(m.code).toBe(1);
    expect(m.stdout).toMatch(/first failure: line 301 [^\n]*\n {2}leaf: the line is leaf 300, but the run's next leaf is 299/);

    const i = file.findIndex((l) => l.startsWith('{"kind":"execution-trust-record"'));
    const tampered = [...file];
    tampered[i] = tampered[i]!.replace('"amount":120', '"amount":121');
    const changed = await check('changed.jsonl', tampered);
    expect(changed.code).toBe(1);
    expect(changed.stdout).toMatch(new RegExp(`first failure: line ${i + 1} \\(execution-trust-record [0-9a-f-]{36}\\):\n {2}signature: `));
    expect(changed.stdout).toContain('NOT VALID: 1 failure(s); the first is above.');

    const mislabelled = [...file];
    mislabelled[i] = mislabelled[i]!.replace('"kind":"execution-trust-record"', '"kind":"receipt"');
    expect((await check('kind.jsonl', mislabelled)).stdout).toContain('kind: the line says "receipt", the record is execution-trust-record');

    // A record of this deployment that is not in this export's checkpoint: from a later export.
    expect(new Set(await postMany(server.url, agent, 2))).toEqual(new Set([200]));
    await checkpointCoversLog(server.url);
    const later = (await runCli(['export'], env)).stdout.trimEnd().split('\n');
    const newer = later.at(-1)!;
    expect((JSON.parse(newer) as Line).transparency.leafIndex).toBeGreaterThanOrEqual(lines.length);
    const foreign = await check('foreign.jsonl', [...file.slice(0, 200), newer, ...file.slice(200)]);
    expect(foreign.code).toBe(1);
    expect(foreign.stdout).toMatch(/first failure: line 201 [^\n]*\n {2}leaf: the proof is to another checkpoint than the export's[^\n]*\n {2}leaf: the line is leaf \d+, outside the export's run/);

    // No header: a file of records alone proves no run.
    const headless = await check('headless.jsonl', file.slice(1));
    expect(headless.code).toBe(1);
    expect(headless.stdout).toContain('first failure: line 1 (the header):');
  }, 240_000);

  it('--threads 2 checks the records on two threads: the same report as one thread, and a changed record in the middle is found with its line', async () => {
    const file = [header, ...lines];
    writeFileSync(path.join(dir, 'threads.jsonl'), file.join('\n') + '\n');
    const [one, two] = await Promise.all([1, 2].map((n) => runCli(['verify', '--all', path.join(dir, 'threads.jsonl'), '--keys', jwksFile, '--threads', String(n)], {})));
    expect(two.code).toBe(0);
    expect(two.stdout).toBe(one.stdout);

    // A Trust Record past the middle, far from any batch's edge, changed after it was signed.
    const i = file.findIndex((l, n) => n > file.length / 2 + 37 && l.startsWith('{"kind":"execution-trust-record"'));
    const tampered = [...file];
    tampered[i] = tampered[i]!.replace('"amount":120', '"amount":121');
    writeFileSync(path.join(dir, 'threads-changed.jsonl'), tampered.join('\n') + '\n');
    const verify = (n: number) => runCli(['verify', '--all', path.join(dir, 'threads-changed.jsonl'), '--keys', jwksFile, '--threads', String(n)], {});
    const [changedOne, changedTwo] = [await verify(1), await verify(2)];
    expect(changedTwo.code).toBe(1);
    expect(changedTwo.stdout).toMatch(new RegExp(`first failure: line ${i + 1} \\(execution-trust-record [0-9a-f-]{36}\\):\n {2}signature: `));
    expect(changedTwo.stdout).toContain('NOT VALID: 1 failure(s); the first is above.');
    expect(changedTwo.stderr).toContain(`does NOT verify: line ${i + 1} (execution-trust-record`);
    expect(changedTwo.stdout).toBe(changedOne.stdout);
    expect(changedTwo.stderr).toBe(changedOne.stderr);

    for (const bad of ['0', 'two', '1.5']) {
      const r = await runCli(['verify', '--all', path.join(dir, 'threads.jsonl'), '--keys', jwksFile, '--threads', bad], {});
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('--threads must be a whole number of threads, 1 or more.');
    }
  }, 240_000);

  it("exports a period: the run of leaves from the period's first record to its last, every leaf in between, complete", async () => {
    const res = await runCli(['export', '--since', midpoint], env);
    expect(res.code).toBe(0);
    const [first, ...rest] = res.stdout.trimEnd().split('\n');
    const h = (JSON.parse(first!) as Header).export;
    expect(h.period).toEqual({ since: midpoint });
    const period = rest.map((l) => JSON.parse(l) as Line);
    expect(period.map((l) => l.transparency.leafIndex)).toEqual(period.map((_, i) => h.leaves!.first + i));
    expect(h.leaves!.first).toBeGreaterThan(0);
    // The same records, in the same order, as the whole export holds at those leaves.
    const whole = lines.slice(h.leaves!.first).map((l) => JSON.stringify((JSON.parse(l) as Line).record));
    expect(period.slice(0, whole.length).map((l) => JSON.stringify(l.record))).toEqual(whole);
    expect(period.filter((l) => l.kind === 'refusal-record')).toHaveLength(REFUSED);
    const trust = period.filter((l) => l.kind === 'execution-trust-record');
    expect(trust.length).toBeGreaterThanOrEqual(EXECUTED / 2);
    expect(trust.length).toBeLessThan(EXECUTED);
    const file = path.join(dir, 'period.jsonl');
    writeFileSync(file, res.stdout);
    const verified = await runCli(['verify', '--all', file, '--keys', jwksFile], {});
    expect(verified.stdout).toMatch(/chain: \d+ links, continuing from [0-9a-f]{64} \(earlier records are not in the file\)/);
    expect(verified.stdout).toContain(`export: the period from ${midpoint} until the checkpoint, in the checkpoint of `);
    expect(verified.stdout).toContain(`log: leaves ${h.leaves!.first}..${h.leaves!.last}, each once and in order (the run the period selects`);
    expect(verified.code).toBe(0);
    // Its first line left out: the run no longer starts where its header says.
    const cut = await check('period-cut.jsonl', [first!, ...rest.slice(1)]);
    expect(cut.code).toBe(1);
    expect(cut.stdout).toContain(`leaf ${h.leaves!.first} is not in the file`);

    // A period with no record: the header alone, which proves nothing.
    const none = await runCli(['export', '--until', '2000-01-01'], env);
    expect(none.code).toBe(0);
    expect((JSON.parse(none.stdout) as Header).export).toMatchObject({ period: { until: '2000-01-01T00:00:00.000Z' }, leaves: null });
    const empty = await check('empty.jsonl', [none.stdout.trimEnd()]);
    expect(empty.code).toBe(1);
    expect(empty.stdout).toContain('NOT VALID: the file holds no record.');
  }, 180_000);

  it('refuses bad dates, a missing database and an existing backup file with exit 2, and answers --help', async () => {
    expect((await runCli(['export', '--since', 'yesterday'], env)).stderr).toMatch(/--since "yesterday": give a date/);
    expect((await runCli(['export', '--since', '2025-02-01', '--until', '2025-01-01'], env)).code).toBe(2);
    expect((await runCli(['export', '--without-proofs'], env)).code).toBe(2);
    const missing = await runCli(['export'], { SVC_DATA_DIR: tmp() });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no database at .*ets\.sqlite/);
    expect(readFileSync(jwksFile, 'utf8')).toContain('"keys"');
    if (db.target.kind === 'sqlite') {
      const exists = await runCli(['backup', jwksFile], env);
      expect(exists.code).toBe(2);
      expect(exists.stderr).toMatch(/exists already/);
      expect((await runCli(['backup', path.join(tmp(), 'b.sqlite')], { SVC_DATA_DIR: tmp() })).stderr).toMatch(/no database at/);
    }
    for (const [args, usage] of [
      [['export', '--help'], /^Usage: ets export \[--since DATE\] \[--until DATE\] > records\.jsonl/],
      [['backup', '--help'], /^Usage: ets backup FILE/],
      [['verify', '--help'], /\n {7}ets verify --all FILE\|- /],
    ] as const) {
      const help = await runCli([...args], env);
      expect(help.code).toBe(0);
      expect(help.stdout).toMatch(usage);
    }
  }, 60_000);
});
