import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { KeyRing, KeyRingSigner } from '@ets/adapters-crypto';
import { createDataSource, migrate } from '@ets/adapters-persistence';
import { apiKeysEnv, bearer, businessTransaction, makeKey, publishPolicy, runCli, spawnServer, type SpawnedServer } from '@ets/test-support';

// Needs the built CLI (`npm run build`). One server produces one signed object of every kind the
// profile-T API serves; the server is then stopped and `ets verify` checks them with a saved JWKS.

type Json = Record<string, unknown>;
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const human = makeKey('ops', { holder: 'USER', capabilities: ['*'] });

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ets-verify-data-'));
const out = mkdtempSync(path.join(os.tmpdir(), 'ets-verify-files-'));
afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(out, { recursive: true, force: true });
});
const save = (name: string, value: unknown): string => {
  const file = path.join(out, name);
  writeFileSync(file, JSON.stringify(value, null, 2));
  return file;
};
const rawFile = (name: string, text: string): string => {
  const file = path.join(out, name);
  writeFileSync(file, text);
  return file;
};
const env = { SVC_DATA_DIR: dataDir };
const verify = (args: string[], stdin?: string, extraEnv: Record<string, string> = {}) => runCli(['verify', ...args], { ...env, ...extraEnv }, stdin);

/** What was saved: file name, the kind `ets verify` must report, and the object itself. */
const files: { name: string; kind: string; value: Json; unwrapped?: string }[] = [];
let jwksFile: string;
let serverUrl: string;

describe('ets verify', () => {
  let server: SpawnedServer;

  beforeAll(async () => {
    const ds = createDataSource({ kind: 'sqlite', file: path.join(dataDir, 'ets.sqlite') });
    await ds.initialize();
    await migrate(ds);
    await publishPolicy(ds);
    await ds.destroy();
    server = await spawnServer({ ...env, SVC_SANDBOX: 'true', ...apiKeysEnv(agent, human) });
    serverUrl = server.url;
  });
  afterAll(async () => {
    if (server.child.exitCode === null) await server.stop();
  });

  it('the server produces a record of every kind (saved as served)', async () => {
    const post = (p: string, body: unknown) => request(serverUrl).post(p).set('authorization', bearer(agent)).send(body as object);
    const get = (p: string, key = agent) => request(serverUrl).get(p).set('authorization', bearer(key));

    const tx = businessTransaction();
    const id = tx.businessTransactionId as string;
    const executed = await post('/execute', tx);
    expect(executed.status).toBe(200);
    files.push({ name: 'trust-record.json', kind: 'execution-trust-record', value: executed.body.trustRecord });
    files.push({ name: 'execute-response.json', kind: 'execution-trust-record', value: executed.body, unwrapped: 'trustRecord' });

    const refusedTx = businessTransaction({ signals: { amount: 10, country: 'KP' } });
    expect((await post('/execute', refusedTx)).body.code).toBe('POLICY_DENIED');
    const refusal = await get(`/refusal/${refusedTx.businessTransactionId as string}`);
    expect(refusal.status).toBe(200);
    files.push({ name: 'refusal.json', kind: 'refusal-record', value: refusal.body });

    const intent = await get(`/execution-intents/${id}`);
    expect(intent.status).toBe(200);
    files.push({ name: 'intent.json', kind: 'execution-intent', value: intent.body.intent });
    files.push({ name: 'intent-response.json', kind: 'execution-intent', value: intent.body, unwrapped: 'intent' });

    const events = await get('/audit/auth-events?limit=1', human);
    expect(events.status).toBe(200);
    files.push({ name: 'audit-event.json', kind: 'audit-event', value: events.body.events[0] });

    const verification = await post('/verify', { businessTransactionId: id });
    expect(verification.status).toBe(200);
    expect(verification.body.status).toBe('VERIFIED');
    files.push({ name: 'verification.json', kind: 'verification', value: verification.body });
    const receipt = await post('/receipt', { businessTransactionId: id });
    expect([200, 201]).toContain(receipt.status);
    files.push({ name: 'receipt.json', kind: 'receipt', value: receipt.body });

    for (const f of files) save(f.name, f.value);
    jwksFile = save('jwks.json', (await request(serverUrl).get('/.well-known/jwks.json')).body);
  });

  it('takes the keys from a URL while the server runs: the JWKS URL, the bare address, or SVC_HOST:SVC_PORT by default', async () => {
    const record = path.join(out, 'trust-record.json');
    const port = new URL(serverUrl).port;
    const [full, bare, byDefault] = await Promise.all([
      verify([record, '--keys', `${serverUrl}/.well-known/jwks.json`]),
      verify([record, '--keys', serverUrl]),
      verify([record], undefined, { SVC_HOST: '127.0.0.1', SVC_PORT: port }),
    ]);
    for (const r of [full, bare, byDefault]) {
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      expect(r.stdout).toMatch(/^kind: execution-trust-record$/m);
      expect(r.stdout).toContain(`keys: ${serverUrl}`);
    }
    expect(byDefault.stdout).toContain(`keys: http://127.0.0.1:${port}/.well-known/jwks.json`);
  });

  it('with the server stopped, every saved object verifies with the saved JWKS (exit 0), naming its kind and every check', async () => {
    expect(await server.stop()).toBe(0);
    const results = await Promise.all(files.map((f) => verify([path.join(out, f.name), '--keys', jwksFile])));
    files.forEach((f, i) => {
      const r = results[i]!;
      expect({ file: f.name, code: r.code, stderr: r.stderr }).toEqual({ file: f.name, code: 0, stderr: '' });
      expect(r.stdout.split('\n')[0]).toBe(`kind: ${f.kind}${f.unwrapped ? ` (the \`${f.unwrapped}\` of the response)` : ''}`);
      expect(r.stdout).toMatch(/^ {2}signature +ok \(Ed25519, key ed25519-/m);
      expect(r.stdout).toMatch(/^ {2}fields +ok$/m);
      expect(r.stdout).not.toContain('FAILED');
      expect(r.stdout).toMatch(/VALID: every check passed\.\n$/);
    });
    const trust = results[0]!.stdout;
    for (const check of ['businessTransactionHash', 'resultHash', 'executionChain']) expect(trust).toMatch(new RegExp(`^ {2}${check} +ok`, 'm'));
    expect(results[files.findIndex((f) => f.name === 'intent.json')]!.stdout).toMatch(/^ {2}noParameters +ok/m);
    // The answer of POST /execute says what happened, under the kind of the record it carries.
    expect(results[files.findIndex((f) => f.name === 'execute-response.json')]!.stdout.split('\n')[1]).toBe('answer: executionStatus EXECUTED, decision approve (Within limits)');
  });

  it('a changed copy of each does not verify (exit 1), and the failed check is named', async () => {
    const change: Record<string, (v: Json) => void> = {
      'trust-record.json': (v) => ((((v.executions as Json[])[0]!.result as Json).echo as Json).amount = 121),
      'execute-response.json': (v) => ((v.trustRecord as Json).callerId = 'someone-else'),
      'refusal.json': (v) => (v.reason = 'Within limits'),
      'intent.json': (v) => (v.principalId = 'agent-8'),
      'intent-response.json': (v) => ((v.intent as Json).businessTransactionHash = '0'.repeat(64)),
      'audit-event.json': (v) => (v.outcome = v.outcome === 'SUCCESS' ? 'FAILURE' : 'SUCCESS'),
      'verification.json': (v) => (v.status = 'FAILED'),
      'receipt.json': (v) => (v.executionStatus = 'NOT_EXECUTED'),
    };
    expect(Object.keys(change).sort()).toEqual(files.map((f) => f.name).sort());
    const results = await Promise.all(
      files.map((f) => {
        const copy = JSON.parse(JSON.stringify(f.value)) as Json;
        change[f.name]!(copy);
        return verify([save(`changed-${f.name}`, copy), '--keys', jwksFile]);
      }),
    );
    files.forEach((f, i) => {
      const r = results[i]!;
      expect({ file: f.name, code: r.code }).toEqual({ file: f.name, code: 1 });
      expect(r.stdout).toMatch(/^ {2}signature +FAILED: signature: does not verify$/m);
      expect(r.stdout).toMatch(/NOT VALID\.\n$/);
      expect(r.stderr).toMatch(new RegExp(`changed-${f.name.replace('.', '\\.')} does NOT verify \\(failed: signature`));
    });
  });

  it('a record re-signed after a change (a faulty or dishonest signer) still fails the checks beyond the signature', async () => {
    const signer = new KeyRingSigner(await KeyRing.open({ dataDir, mode: 'ed25519' }));
    const trust = JSON.parse(JSON.stringify(files[0]!.value)) as Json;
    ((trust.transaction as Json).intent as Json).parameters = { amount: 1_000_000, currency: 'EUR' };
    const r = await verify([save('resigned-transaction.json', await signer.sign(trust)), '--keys', jwksFile]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^ {2}signature +ok/m);
    expect(r.stdout).toMatch(/^ {2}businessTransactionHash +FAILED: businessTransactionHash: does not recompute from transaction$/m);

    const chained = JSON.parse(JSON.stringify(files[0]!.value)) as Json;
    (chained.executions as Json[])[0]!.releasedAt = '2020-01-01T00:00:00.000Z';
    const c = await verify([save('resigned-execution.json', await signer.sign(chained)), '--keys', jwksFile]);
    expect(c.code).toBe(1);
    expect(c.stdout).toMatch(/^ {2}executionChain +FAILED: executions\[0\]\.chainHash: does not recompute/m);
    expect(c.stderr).toContain('(failed: executionChain)');
  });

  it('reads standard input with -', async () => {
    const r = await verify(['-', '--keys', jwksFile], JSON.stringify(files.find((f) => f.name === 'intent-response.json')!.value));
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^kind: execution-intent \(the `intent` of the response\)$/m);
  });

  it('exit 1 for a key set without the key or an object that is no signed record', async () => {
    const emptyKeys = save('empty-jwks.json', { keys: [] });
    const [noKey, notRecord, list] = await Promise.all([
      verify([path.join(out, 'trust-record.json'), '--keys', emptyKeys]),
      verify([jwksFile, '--keys', jwksFile]),
      verify([save('list.json', [files[0]!.value]), '--keys', jwksFile]),
    ]);
    expect(noKey.code).toBe(1);
    expect(noKey.stdout).toMatch(/^ {2}signature +FAILED: keyId: unknown key ed25519-/m);
    expect(notRecord.code).toBe(1);
    expect(notRecord.stdout).toMatch(/^kind: unknown$/m);
    expect(notRecord.stdout).toMatch(/^ {2}kind +FAILED: not a record this service signs/m);
    expect(list.code).toBe(1);
    expect(list.stdout).toContain('a list, not one signed object');
  });

  it('an error answer piped in (curl … /execute | ets verify -) is named as such: exit 1, nothing verified', async () => {
    const r = await verify(['-', '--keys', jwksFile], JSON.stringify({ error: 'Execution rejected: Country is sanctioned', code: 'POLICY_DENIED' }));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim()).toBe('ets: standard input holds an error answer of the service, not a signed record: {"error":"Execution rejected: Country is sanctioned","code":"POLICY_DENIED"}');
  });

  it('exit 2, with one clear line and nothing on stdout, for usage and I/O errors', async () => {
    const record = path.join(out, 'trust-record.json');
    const cases: [string, string[], RegExp][] = [
      ['no FILE', [], /FILE is required/],
      ['two files', [record, record], /Usage: ets verify/],
      ['an unknown option', [record, '--key', jwksFile], /Unknown option '--key'/],
      ['a missing file', [path.join(out, 'nope.json'), '--keys', jwksFile], /cannot read .*nope\.json: ENOENT/],
      ['a file that is not JSON', [rawFile('text.json', 'not json {'), '--keys', jwksFile], /is not JSON/],
      ['keys that are not JSON', [record, '--keys', rawFile('text-jwks.json', '{"keys": [')], /keys from .* are not JSON/],
      ['a missing keys file', [record, '--keys', path.join(out, 'nope-jwks.json')], /cannot read the keys file/],
      ['keys that are not a JWKS', [record, '--keys', save('not-jwks.json', { kid: 'x' })], /not a JWKS/],
      ['a keys URL nobody answers (the server is stopped)', [record, '--keys', `${serverUrl}/.well-known/jwks.json`], /cannot fetch the keys from .*ECONNREFUSED/],
    ];
    const results = await Promise.all(cases.map(([, args]) => verify(args)));
    cases.forEach(([what, , message], i) => {
      const r = results[i]!;
      expect({ what, code: r.code, stdout: r.stdout }).toEqual({ what, code: 2, stdout: '' });
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    });
  });
});
