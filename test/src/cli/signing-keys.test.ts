import { describe, expect, it } from '@jest/globals';
import { existsSync, readdirSync, renameSync, statSync } from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { verifyRecord } from '@ets/adapters-crypto';
import { runCli, serverStorageEnv, spawnServer, STORAGE_TARGETS, tempDirs } from '@ets/test-support';

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
