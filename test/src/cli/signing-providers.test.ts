import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { verifyRecord } from '@ets/adapters-crypto';
import { loadSettings, openKeyProvider } from '@ets/server';
import { apiKeysEnv, bearer, createSoftHsmToken, makeKey, runCli, spawnServer, tempDirs, type SoftHsmToken } from '@ets/test-support';

type Json = Record<string, unknown>;
const ops = makeKey('ops', { holder: 'USER', capabilities: ['*'] });
const tmp = tempDirs('ets-providers-cli-');
let token: SoftHsmToken;
beforeAll(() => {
  token = createSoftHsmToken('cli');
});
afterAll(() => {
  token?.destroy();
});

async function latestEvent(url: string): Promise<Json> {
  await request(url).get('/callers/me').set('authorization', bearer(ops));
  const res = await request(url).get('/audit/auth-events?limit=1').set('authorization', bearer(ops));
  return res.body.events[0] as Json;
}

/** Every file under a directory, recursively. */
const filesUnder = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });

describe('signing key providers at the command line', () => {
  it.each<[string, () => Record<string, string>, RegExp]>([
    ['hybrid signing with the module', () => ({ ...token.env, SVC_SIGNING_MODE: 'hybrid' }), /SVC_SIGNING_MODE=hybrid with SVC_SIGNING_PROVIDER=pkcs11/],
    ['the env provider without its PEM', () => ({ SVC_SIGNING_PROVIDER: 'env' }), /SVC_SIGNING_PROVIDER=env needs SVC_SIGNING_KEY_PEM/],
    ['a module that cannot be opened', () => ({ ...token.env, SVC_PKCS11_MODULE: '/nonexistent/libpkcs11.so' }), /cannot open the PKCS#11 module SVC_PKCS11_MODULE=\/nonexistent\/libpkcs11\.so/],
    ['a wrong PIN', () => ({ ...token.env, SVC_PKCS11_PIN: 'wrong-pin-secret' }), /the token "cli-[0-9a-f]+" refused the PIN \(SVC_PKCS11_PIN or SVC_PKCS11_PIN_FILE\)/],
    ['a token label not found', () => ({ ...token.env, SVC_PKCS11_TOKEN: 'missing' }), /no token labelled "missing"/],
  ])('refuses to start with %s: one line, the settings exit code, no secret, nothing stored', async (_what, env, message) => {
    const dataDir = tmp();
    const r = await runCli(['serve'], { SVC_DATA_DIR: dataDir, ...env() });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    for (const secret of [token.pin, 'wrong-pin-secret']) expect(r.stdout + r.stderr).not.toContain(secret);
    expect(existsSync(path.join(dataDir, 'ets.sqlite'))).toBe(false);
  });

  // The same settings path in-process, for the rest (the process above shows how any of them ends).
  it.each<[string, Record<string, string>, RegExp]>([
    ['an unknown provider', { SVC_SIGNING_PROVIDER: 'kms' }, /SVC_SIGNING_PROVIDER.*disk, env, pkcs11/],
    ['an env PEM that is not an Ed25519 key', { SVC_SIGNING_PROVIDER: 'env', SVC_SIGNING_KEY_PEM: 'not-a-pem-secret' }, /SVC_SIGNING_KEY_PEM is not an Ed25519 private key/],
    ['hybrid signing without the ML-DSA-65 PEM', { SVC_SIGNING_PROVIDER: 'env', SVC_SIGNING_MODE: 'hybrid', SVC_SIGNING_KEY_PEM: 'not-a-pem-secret' }, /hybrid signing mode: SVC_SIGNING_PQ_KEY_PEM .* is not set/],
    ['pkcs11 without a PIN', { SVC_SIGNING_PROVIDER: 'pkcs11', SVC_PKCS11_MODULE: 'm.so', SVC_PKCS11_TOKEN: 't' }, /SVC_PKCS11_PIN, SVC_PKCS11_PIN_FILE: .*exactly one/],
    ['pkcs11 without a module', { SVC_SIGNING_PROVIDER: 'pkcs11', SVC_PKCS11_TOKEN: 't', SVC_PKCS11_PIN: 'not-a-pem-secret' }, /Missing setting SVC_PKCS11_MODULE/],
    ['a PIN file that cannot be read', { SVC_SIGNING_PROVIDER: 'pkcs11', SVC_PKCS11_MODULE: 'm.so', SVC_PKCS11_TOKEN: 't', SVC_PKCS11_PIN_FILE: '/nonexistent/pin' }, /SVC_PKCS11_PIN_FILE=.*cannot read the file \(ENOENT\)/],
  ])('refuses %s in one line naming the setting, never its value', async (_what, env, message) => {
    const error = await Promise.resolve()
      .then(() => openKeyProvider(loadSettings({ SVC_DATA_DIR: tmp(), ...env })))
      .then(async (p) => p.close(), (e: unknown) => e);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('\n');
    expect((error as Error).message).not.toContain('not-a-pem-secret');
  });

  it('serves from the module with the PIN in a file; nothing on disk or in the logs holds a private key or the PIN; rotate and list work', async () => {
    const dataDir = tmp();
    const pinFile = path.join(tmp(), 'pin');
    writeFileSync(pinFile, `${token.pin}\n`, { mode: 0o600 });
    const env = { ...token.env, SVC_PKCS11_PIN: '', SVC_PKCS11_PIN_FILE: pinFile, SVC_DATA_DIR: dataDir, ...apiKeysEnv(ops) };

    let server = await spawnServer(env);
    let before: Json;
    let output = '';
    try {
      before = await latestEvent(server.url);
      const listening = server.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Json).find((l) => l.msg === 'listening');
      expect(listening).toMatchObject({ signingProvider: 'pkcs11', signingKeys: { keyId: before.keyId } });
    } finally {
      await server.stop();
      output += server.output();
    }

    // With the server's settings it says it reads the module, and lists the module's keys.
    const listed = await runCli(['signing-keys', 'list'], env);
    expect({ code: listed.code, stderr: listed.stderr }).toEqual({ code: 0, stderr: '' });
    expect(listed.stdout.trim().split('\n')).toEqual([
      `provider: pkcs11 (token "${token.label}" of ${token.module}), SVC_SIGNING_PROVIDER=pkcs11`,
      expect.stringMatching(new RegExp(`^${before.keyId}  Ed25519  active  \\d{4}-\\S+  pkcs11$`)),
    ]);
    // Without them it says which provider it read, lists no disk key as the server's, makes none,
    // and notes that the server signs with the module.
    const withoutModule: Record<string, string> = { ...env };
    for (const name of ['SVC_SIGNING_PROVIDER', 'SVC_PKCS11_MODULE', 'SVC_PKCS11_TOKEN', 'SVC_PKCS11_PIN', 'SVC_PKCS11_PIN_FILE']) delete withoutModule[name];
    const elsewhere = await runCli(['signing-keys', 'list'], withoutModule);
    expect(elsewhere.code).toBe(0);
    expect(elsewhere.stdout.trim().split('\n')).toEqual([
      `provider: disk (${path.join(dataDir, 'keys')}: no keys yet, the first start generates them), SVC_SIGNING_PROVIDER=disk`,
      expect.stringMatching(new RegExp(`^${before.keyId}  Ed25519  retired  \\S+  published only \\(held by pkcs11 when published\\)$`)),
    ]);
    expect(elsewhere.stderr).toContain(`Note: the newest published key, ${before.keyId}`);
    expect(elsewhere.stderr).toContain("was held by the pkcs11 provider, but this lists disk (SVC_SIGNING_PROVIDER=disk here): if the server signs with pkcs11, run this with the server's settings.");
    expect(existsSync(path.join(dataDir, 'keys'))).toBe(false);

    const rotated = await runCli(['signing-keys', 'rotate'], env);
    expect(rotated.code).toBe(0);
    const { keyId: newKeyId } = JSON.parse(rotated.stdout) as { keyId: string };
    expect(newKeyId).not.toBe(before.keyId);
    expect(rotated.stderr).toMatch(/generated in the token "cli-[0-9a-f]+"/);

    server = await spawnServer(env);
    try {
      const after = await latestEvent(server.url);
      expect(after.keyId).toBe(newKeyId);
      const jwks = (await request(server.url).get('/.well-known/jwks.json')).body as { keys: Json[] };
      expect(jwks.keys.map((k) => k.kid).sort()).toEqual([before.keyId, newKeyId].sort());
      expect(verifyRecord(before, jwks).valid).toBe(true);
      expect((await request(server.url).post('/audit/verify').send(before)).body.valid).toBe(true);
    } finally {
      await server.stop();
      output += server.output();
    }

    const relisted = await runCli(['signing-keys', 'list'], env);
    expect(relisted.stdout).toContain(`${before.keyId}  Ed25519  retired`);
    expect(relisted.stdout).toContain(`${newKeyId}  Ed25519  active`);

    // The module holds the keys: no key files, and the PIN is nowhere the service writes.
    expect(existsSync(path.join(dataDir, 'keys'))).toBe(false);
    for (const file of filesUnder(dataDir)) {
      expect(file).not.toMatch(/\.pem$/);
      const bytes = readFileSync(file);
      expect(bytes.includes(token.pin)).toBe(false);
      expect(bytes.includes('PRIVATE KEY')).toBe(false);
    }
    for (const text of [output, listed.stdout, listed.stderr, elsewhere.stdout, elsewhere.stderr, rotated.stdout, rotated.stderr, relisted.stdout]) expect(text).not.toContain(token.pin);
  });
});
