import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  apiKeysEnv,
  bearer,
  checkpointCoversLog,
  makeKey,
  onDatabase,
  postMany,
  publishPolicy,
  runCli,
  serverStorageEnv,
  spawnServer,
  STORAGE_TARGETS,
  tempDirs,
  type ProvisionedTarget,
  type SpawnedServer,
} from '@ets/test-support';

// Needs the built CLI (`npm run build`). Every start signs a runtime manifest, a leaf of the
// transparency log (the first one is leaf 0), and profile A's confirmation proofs are leaves too.
// A deployment started three times (profile T, profile A, profile T again), with executions
// before and after each restart and one confirmation proof, exports every leaf: `ets verify --all`
// proves the whole run from leaf 0, and a removed manifest, attestation or confirmation proof
// makes the file NOT VALID.

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const tmp = tempDirs('ets-export-restart-');

type Line = { kind: string; record: unknown; transparency?: { leafIndex: number } };

describe.each(STORAGE_TARGETS)('ets export after restarts on $name: every leaf of the log, from leaf 0', (factory) => {
  let db: ProvisionedTarget;
  let env: Record<string, string>;
  let dir: string;
  let jwksFile: string;
  /** The export's record lines, after its header. */
  let lines: string[];
  let header: string;
  let parsed: Line[];
  let secondStart: string;
  let verified: { code: number | null; stdout: string; stderr: string };
  const servers: SpawnedServer[] = [];

  const start = async (extra: Record<string, string> = {}) => {
    const s = await spawnServer({ ...env, ...apiKeysEnv(agent), RATE_LIMIT_EXECUTE_PER_MINUTE: '1000000', ...extra }, 60_000);
    servers.push(s);
    return s;
  };
  const verifyAll = async (name: string, content: string[]) => {
    const file = path.join(dir, name);
    writeFileSync(file, content.join('\n') + '\n');
    return runCli(['verify', '--all', file, '--keys', jwksFile], {});
  };

  beforeAll(async () => {
    db = await factory.provision();
    await onDatabase(db.target, publishPolicy);
    dir = tmp();
    env = serverStorageEnv(db.target, tmp);

    const first = await start();
    jwksFile = path.join(dir, 'jwks.json');
    writeFileSync(jwksFile, await (await fetch(`${first.url}/.well-known/jwks.json`)).text());
    expect(new Set(await postMany(first.url, agent, 12, { concurrency: 4 }))).toEqual(new Set([200]));
    expect(await first.stop()).toBe(0);

    // Profile A on the same database: an attestation, and the confirmation proof of its action.
    await new Promise((r) => setTimeout(r, 20));
    secondStart = new Date().toISOString();
    const second = await start({ SVC_PROFILE: 'attestation' });
    const post = async (route: string, body: object) => {
      const res = await fetch(`${second.url}${route}`, { method: 'POST', headers: { authorization: bearer(agent), 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect({ route, status: res.status }).toEqual({ route, status: 200 });
      return (await res.json()) as Record<string, unknown>;
    };
    const { attestation } = await post('/execute', { executionId: 'restart-1', policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: 120, country: 'FR' } });
    const confirmed = await post('/confirm-execution', { attestation, executedAction: { actionType: 'payment', actionId: 'p-1', actionTimestamp: new Date().toISOString() } });
    expect(confirmed.matched).toBe(true);
    expect(await second.stop()).toBe(0);

    const third = await start();
    expect(new Set(await postMany(third.url, agent, 12, { concurrency: 4 }))).toEqual(new Set([200]));
    await checkpointCoversLog(third.url);
    expect(await third.stop()).toBe(0);

    const exported = await runCli(['export'], env);
    expect(exported.code).toBe(0);
    [header, ...lines] = exported.stdout.trimEnd().split('\n');
    parsed = lines.map((l) => JSON.parse(l) as Line);
    writeFileSync(path.join(dir, 'records.jsonl'), exported.stdout);
    verified = await runCli(['verify', '--all', path.join(dir, 'records.jsonl'), '--keys', jwksFile], {});
  }, 240_000);
  afterAll(async () => {
    for (const s of servers) if (s.child.exitCode === null) await s.stop();
    await db?.drop();
  });

  it('exports the three runtime manifests and the confirmation proof with their proofs; verify --all proves leaves 0..N-1, each once and in order', async () => {
    const counts: Record<string, number> = {};
    for (const l of parsed) counts[l.kind] = (counts[l.kind] ?? 0) + 1;
    expect(counts).toMatchObject({ 'runtime-manifest': 3, 'confirmation-proof': 1, attestation: 1, 'execution-trust-record': 24 });
    // Every line carries its proof, and the lines are the leaves 0..N-1 in order: the whole log.
    expect(parsed.map((l) => l.transparency?.leafIndex)).toEqual(lines.map((_, i) => i));
    expect(JSON.parse(header)).toMatchObject({ export: { format: 'ets-export/2', leaves: { first: 0, last: lines.length - 1 } } });
    const [leafZero] = parsed.filter((l) => l.transparency!.leafIndex === 0);
    expect(leafZero!.kind).toBe('runtime-manifest');
    const proof = parsed.find((l) => l.kind === 'confirmation-proof')!;
    expect(typeof proof.record).toBe('string');

    expect(verified.stdout).toMatch(/\n {2}runtime-manifest +3 valid\n/);
    expect(verified.stdout).toMatch(/\n {2}confirmation-proof +1 valid\n/);
    expect(verified.stdout).toMatch(/chain: 24 links, from the deployment's first execution, head [0-9a-f]{64}; no break/);
    expect(verified.stdout).toContain(`log: leaves 0..${lines.length - 1}, each once and in order: the whole log up to its checkpoint`);
    expect(verified.stdout).toContain('VALID: every record verifies, no leaf of the run is missing, repeated or out of order, and the chain is unbroken.');
    expect(verified.code).toBe(0);
  });

  it('a removed runtime manifest (leaf 0 too), attestation or confirmation proof makes the file NOT VALID, naming the missing leaf', async () => {
    const file = [header, ...lines];
    const manifests = file.map((l, i) => [l, i] as const).filter(([l]) => l.startsWith('{"kind":"runtime-manifest"'));
    const others = ['attestation', 'confirmation-proof'].map((kind) => file.findIndex((l) => l.startsWith(`{"kind":"${kind}"`)));
    // File line i + 1 holds leaf i - 1 (line 1 is the header).
    for (const i of [...manifests.map(([, i]) => i), ...others]) {
      const res = await verifyAll(`without-${i}.jsonl`, file.filter((_, k) => k !== i));
      const kind = (JSON.parse(file[i]!) as Line).kind;
      expect({ kind, code: res.code }).toEqual({ kind, code: 1 });
      expect({ kind, out: res.stdout }).toEqual({ kind, out: expect.stringMatching(new RegExp(`first failure: (line ${i + 1} |at the end)[^\\n]*\\n {2}leaf: .*leaf ${i - 1} is not in the file`)) });
      expect(res.stdout).toContain(`log: leaves 0..${lines.length - 1}: 1 MISSING`);
    }
    expect(manifests[0]![1]).toBe(1);
    // A changed manifest does not verify.
    const [line, i] = manifests[2]!;
    const tampered = [...file];
    tampered[i] = line.replace(/"platform":"[^"]*"/, '"platform":"node v0.0.0"');
    const changed = await verifyAll('changed-manifest.jsonl', tampered);
    expect(changed.code).toBe(1);
    expect(changed.stdout).toMatch(/first failure: line \d+ \(runtime-manifest [0-9a-f]{64}\):\n {2}manifestHash: does not recompute from the manifest/);
  }, 60_000);

  it('verifies one manifest or one confirmation proof with ets verify FILE, its inclusion proof too', async () => {
    for (const kind of ['runtime-manifest', 'confirmation-proof']) {
      const line = lines.find((l) => l.startsWith(`{"kind":"${kind}"`))!;
      const file = path.join(dir, `${kind}.json`);
      writeFileSync(file, line);
      const res = await runCli(['verify', file, '--keys', jwksFile], {});
      expect({ kind, code: res.code }).toEqual({ kind, code: 0 });
      expect(res.stdout).toMatch(new RegExp(`^kind: ${kind} \\(the \`record\` of the response\\)`));
      expect(res.stdout).toMatch(/inclusion +ok \(the record is leaf \d+ of \d+/);
      // The record alone, as stored.
      const alone = path.join(dir, `${kind}-alone.json`);
      writeFileSync(alone, JSON.stringify((JSON.parse(line) as Line).record));
      expect((await runCli(['verify', alone, '--keys', jwksFile], {})).code).toBe(0);
    }
  }, 60_000);

  it('honours --since: the manifests and the proof of the period only', async () => {
    const res = await runCli(['export', '--since', secondStart], env);
    expect(res.code).toBe(0);
    const period = res.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as Line);
    expect(JSON.parse(res.stdout.split('\n')[0]!)).toMatchObject({ export: { period: { since: secondStart } } });
    const manifests = period.filter((l) => l.kind === 'runtime-manifest').map((l) => (l.record as { manifest: { startedAt: string } }).manifest.startedAt);
    expect(manifests).toHaveLength(2);
    for (const t of manifests) expect(t >= secondStart).toBe(true);
    expect(period.filter((l) => l.kind === 'confirmation-proof')).toHaveLength(1);
    const before = await runCli(['export', '--until', secondStart], env);
    const early = before.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as Line);
    expect(early.filter((l) => l.kind === 'runtime-manifest')).toHaveLength(1);
    expect(early.filter((l) => l.kind === 'confirmation-proof')).toHaveLength(0);
  }, 60_000);
});
