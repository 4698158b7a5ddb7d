import { describe, expect, it } from '@jest/globals';
import { existsSync, readdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { verifyRecord } from '@ets/adapters-crypto';
import { createDataSource, migrate } from '@ets/adapters-persistence';
import { apiKeysEnv, bearer, businessTransaction, makeKey, publishPolicy, runCli, serverStorageEnv, spawnServer, STORAGE_TARGETS, tempDirs } from '@ets/test-support';

const tmp = tempDirs('ets-sk-');

async function keyFor(env: Record<string, string>): Promise<string> {
  return (await runCli(['keys', 'add', '--caller-id', 'ops', '--holder', 'USER'], env)).stdout.trim();
}

async function latestEvent(url: string, key: string): Promise<Record<string, unknown>> {
  await request(url).get('/callers/me').set('authorization', `Bearer ${key}`);
  const res = await request(url).get('/audit/auth-events?limit=1').set('authorization', `Bearer ${key}`);
  return res.body.events[0];
}

describe('service signing keys', () => {
  it('keeps the keyId across restarts, private keys 0600; rotation keeps old keys published and verifying', async () => {
    const env = { SVC_DATA_DIR: tmp() };
    const key = await keyFor(env);
    let server = await spawnServer(env);
    const before = await latestEvent(server.url, key);
    const jwks1 = (await request(server.url).get('/.well-known/jwks.json')).body;
    await server.stop();

    for (const f of readdirSync(path.join(env.SVC_DATA_DIR, 'keys')).filter((n) => n.endsWith('.pem'))) {
      expect(statSync(path.join(env.SVC_DATA_DIR, 'keys', f)).mode & 0o777).toBe(0o600);
    }
    server = await spawnServer(env);
    expect((await request(server.url).get('/.well-known/jwks.json')).body).toEqual(jwks1);
    await server.stop();

    const rotated = await runCli(['signing-keys', 'rotate'], env);
    expect(rotated.code).toBe(0);
    const { keyId: newKeyId } = JSON.parse(rotated.stdout) as { keyId: string };
    expect(newKeyId).not.toBe(before.keyId);

    server = await spawnServer(env);
    try {
      const after = await latestEvent(server.url, key);
      expect(after.keyId).toBe(newKeyId);
      const jwks2 = (await request(server.url).get('/.well-known/jwks.json')).body as { keys: { kid: string }[] };
      expect(jwks2.keys.map((k) => k.kid).sort()).toEqual([before.keyId, newKeyId].sort());
      expect(verifyRecord(before, jwks2).valid).toBe(true);
      expect((await request(server.url).post('/audit/verify').send(before)).body.valid).toBe(true);
      expect((await request(server.url).get(`/keys/${before.keyId}`)).status).toBe(200);
    } finally {
      await server.stop();
    }
  });

  it('signs with Ed25519 and ML-DSA-65 in hybrid mode; either signature changed fails', async () => {
    const env = { SVC_DATA_DIR: tmp(), SVC_SIGNING_MODE: 'hybrid' };
    const key = await keyFor(env);
    const server = await spawnServer(env);
    try {
      const event = await latestEvent(server.url, key);
      expect(event).toEqual(expect.objectContaining({ keyId: expect.any(String), pqKeyId: expect.any(String), signature: expect.any(String), pqSignature: expect.any(String) }));
      const jwks = (await request(server.url).get('/.well-known/jwks.json')).body as { keys: Record<string, string>[] };
      expect(jwks.keys.find((k) => k.kid === event.pqKeyId)).toMatchObject({ kty: 'AKP', alg: 'ML-DSA-65' });
      expect(jwks.keys.find((k) => k.kid === event.keyId)).toMatchObject({ kty: 'OKP', crv: 'Ed25519' });
      expect((await request(server.url).post('/audit/verify').send(event)).body.valid).toBe(true);

      const flip = (b64: string) => {
        const buf = Buffer.from(b64, 'base64');
        buf[5] = buf[5]! ^ 0xff;
        return buf.toString('base64');
      };
      for (const changed of [
        { ...event, signature: flip(event.signature as string) },
        { ...event, pqSignature: flip(event.pqSignature as string) },
        Object.fromEntries(Object.entries(event).filter(([k]) => k !== 'pqSignature')),
      ]) {
        const res = await request(server.url).post('/audit/verify').send(changed);
        expect(res.body.valid).toBe(false);
        expect(verifyRecord(changed, jwks).valid).toBe(false);
      }
    } finally {
      await server.stop();
    }
  });

  it('refuses to start in hybrid mode when the hybrid key files are missing beside Ed25519 keys', async () => {
    const env = { SVC_DATA_DIR: tmp() };
    await keyFor(env);
    const first = await spawnServer(env);
    await first.stop();
    const r = await runCli(['serve'], { ...env, SVC_SIGNING_MODE: 'hybrid', SVC_PORT: '0' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/ML-DSA-65|hybrid/i);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('switching an existing data dir to hybrid signing', () => {
  const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
  const human = makeKey('ops', { holder: 'USER', capabilities: ['*'] });
  const out = tmp();

  it('SVC_SIGNING_MODE=hybrid ets signing-keys rotate adds an ML-DSA-65 key (and a new Ed25519 one); what was signed before still verifies, online and offline', async () => {
    const env = { SVC_DATA_DIR: tmp(), SVC_SANDBOX: 'true', ...apiKeysEnv(agent, human) };
    const ds = createDataSource({ kind: 'sqlite', file: path.join(env.SVC_DATA_DIR, 'ets.sqlite') });
    await ds.initialize();
    await migrate(ds);
    await publishPolicy(ds);
    await ds.destroy();

    // Made in ed25519 mode: a Trust Record and an audit event with no ML-DSA-65 signature.
    let server = await spawnServer(env, 120_000);
    const tx = businessTransaction();
    let oldRecord: Record<string, unknown>;
    let oldEvent: Record<string, unknown>;
    try {
      const executed = await request(server.url).post('/execute').set('authorization', bearer(agent)).send(tx);
      expect(executed.status).toBe(200);
      oldRecord = executed.body.trustRecord as Record<string, unknown>;
      oldEvent = await latestEvent(server.url, human.raw);
    } finally {
      await server.stop();
    }
    expect(oldRecord).not.toHaveProperty('pqSignature');
    const before = readdirSync(path.join(env.SVC_DATA_DIR, 'keys')).sort();

    const rotated = await runCli(['signing-keys', 'rotate'], { ...env, SVC_SIGNING_MODE: 'hybrid' });
    expect({ code: rotated.code, stderr: rotated.stderr }).toEqual({ code: 0, stderr: expect.stringMatching(/ML-DSA-65/) });
    const active = JSON.parse(rotated.stdout) as { keyId: string; pqKeyId: string };
    expect(active).toEqual({ keyId: expect.any(String), pqKeyId: expect.any(String) });
    expect(active.keyId).not.toBe(oldRecord.keyId);
    const after = readdirSync(path.join(env.SVC_DATA_DIR, 'keys')).sort();
    expect(after).toEqual(expect.arrayContaining(before));
    expect(after.filter((f) => /^mldsa65-.*\.pem$/.test(f))).toHaveLength(1);

    server = await spawnServer({ ...env, SVC_SIGNING_MODE: 'hybrid' }, 120_000);
    try {
      const newEvent = await latestEvent(server.url, human.raw);
      expect(newEvent).toMatchObject({ keyId: active.keyId, pqKeyId: active.pqKeyId, pqSignature: expect.any(String) });
      // Online: the stored Trust Record verifies (and gets a Verification), the old event verifies.
      const verified = await request(server.url).post('/verify').set('authorization', bearer(agent)).send({ businessTransactionId: tx.businessTransactionId });
      expect(verified.status).toBe(200);
      expect(JSON.stringify(verified.body)).toMatch(/"VERIFIED"/);
      expect((await request(server.url).post('/audit/verify').send(oldEvent)).body.valid).toBe(true);
      expect((await request(server.url).post('/audit/verify').send(newEvent)).body.valid).toBe(true);
      // Offline, with the JWKS the hybrid server publishes: both keys of before and after.
      const jwks = path.join(out, 'jwks.json');
      writeFileSync(jwks, JSON.stringify((await request(server.url).get('/.well-known/jwks.json')).body));
      for (const [name, value] of [['old-record.json', oldRecord], ['old-event.json', oldEvent], ['new-event.json', newEvent]] as const) {
        const file = path.join(out, name);
        writeFileSync(file, JSON.stringify(value));
        const r = await runCli(['verify', file, '--keys', jwks], {});
        expect({ name, code: r.code }).toEqual({ name, code: 0 });
      }
    } finally {
      await server.stop();
    }
  });

  it('with the env provider hands over both keys; the pkcs11 provider says hybrid signing is not for it', async () => {
    const env = await runCli(['signing-keys', 'rotate'], { SVC_DATA_DIR: tmp(), SVC_SIGNING_PROVIDER: 'env', SVC_SIGNING_MODE: 'hybrid' });
    expect(env.code).toBe(0);
    expect(Object.keys((JSON.parse(env.stdout) as { environment: Record<string, string> }).environment).sort()).toEqual(['SVC_SIGNING_KEY_PEM', 'SVC_SIGNING_PQ_KEY_PEM']);
    const pkcs11 = await runCli(['signing-keys', 'rotate'], {
      SVC_DATA_DIR: tmp(),
      SVC_SIGNING_PROVIDER: 'pkcs11',
      SVC_SIGNING_MODE: 'hybrid',
      SVC_PKCS11_MODULE: '/nonexistent/libsofthsm2.so',
      SVC_PKCS11_TOKEN: 't',
      SVC_PKCS11_PIN: '1234',
    });
    expect(pkcs11.code).toBe(2);
    expect(pkcs11.stderr).toMatch(/SVC_SIGNING_MODE=hybrid with SVC_SIGNING_PROVIDER=pkcs11: the module holds Ed25519 keys only/);
    expect(pkcs11.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe.each(STORAGE_TARGETS)('ets signing-keys list on $name', (factory) => {
  it('lists the keys only the published-keys table remembers (the table opened read-only)', async () => {
    const db = await factory.provision();
    try {
      const env = serverStorageEnv(db.target, tmp);
      const server = await spawnServer(env);
      await server.stop();
      const firstList = await runCli(['signing-keys', 'list'], env);
      expect(firstList.stdout.split('\n')[0]).toBe(`provider: disk (${path.join(env.SVC_DATA_DIR!, 'keys')}), SVC_SIGNING_PROVIDER=disk`);
      const first = firstList.stdout.split('\n')[1]!.split('  ')[0]!;
      // The provider no longer holds the first key (its files moved away): only the table knows it.
      renameSync(path.join(env.SVC_DATA_DIR!, 'keys'), path.join(env.SVC_DATA_DIR!, 'keys.old'));
      const listed = await runCli(['signing-keys', 'list'], env);
      expect(listed.code).toBe(0);
      expect(listed.stderr).toBe('');
      expect(listed.stdout).toMatch(new RegExp(`^${first}  Ed25519  retired  \\S+  published only \\(held by disk when published\\)$`, 'm'));
      // Listing makes no key: the data dir holds none now, and still holds none.
      expect(listed.stdout.split('\n')[0]).toMatch(/no keys yet, the first start generates them/);
      expect(existsSync(path.join(env.SVC_DATA_DIR!, 'keys'))).toBe(false);
    } finally {
      await db.drop();
    }
  });
});
