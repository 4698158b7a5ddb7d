import { describe, it, expect, afterEach } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HybridKeyMissingError, KeyFilesMissingError, KeyRingError } from './errors.js';
import { KeyRing } from './key-ring.js';
import { KeyRingSigner } from './record-signer.js';
import { verifyRecord } from './node-verifier.js';

const dirs: string[] = [];
function tempDataDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ets-keyring-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function fileMode(file: string): number {
  return fs.statSync(file).mode & 0o777;
}

describe('KeyRing', () => {
  it('generates an Ed25519 key on first use, private file 0600, metadata beside it', async () => {
    const dataDir = tempDataDir();
    const ring = await KeyRing.open({ dataDir, mode: 'ed25519' });
    const { keyId, pqKeyId } = ring.activeKeyIds;
    expect(keyId).toMatch(/^ed25519-[A-Za-z0-9_-]{43}$/);
    expect(pqKeyId).toBeUndefined();

    const keysDir = path.join(dataDir, 'keys');
    expect(fileMode(path.join(keysDir, `${keyId}.pem`))).toBe(0o600);
    expect(fileMode(keysDir)).toBe(0o700);
    const metadata = JSON.parse(fs.readFileSync(path.join(keysDir, 'keys.json'), 'utf8'));
    expect(metadata.keys).toEqual([
      { keyId, alg: 'Ed25519', createdAt: expect.any(String), active: true, publicKey: expect.any(String) },
    ]);
    expect(fs.readFileSync(path.join(keysDir, 'keys.json'), 'utf8')).not.toContain('PRIVATE');
    expect(fs.readdirSync(keysDir).sort()).toEqual([`${keyId}.pem`, 'keys.json']);
  });

  it('keeps the keyId when the same data dir is opened again', async () => {
    const dataDir = tempDataDir();
    const first = await KeyRing.open({ dataDir, mode: 'ed25519' });
    const second = await KeyRing.open({ dataDir, mode: 'ed25519' });
    expect(second.activeKeyIds).toEqual(first.activeKeyIds);
    expect(second.jwks()).toEqual(first.jwks());
  });

  it('publishes Ed25519 keys as OKP JWKs', async () => {
    const ring = await KeyRing.open({ dataDir: tempDataDir(), mode: 'ed25519' });
    const { keyId } = ring.activeKeyIds;
    expect(ring.jwks()).toEqual({
      keys: [{ kty: 'OKP', crv: 'Ed25519', x: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), kid: keyId, alg: 'EdDSA', use: 'sig' }],
    });
    expect(ring.publicKey(keyId)).toEqual(ring.jwks().keys[0]);
    expect(ring.publicKey('nope')).toBeUndefined();
    expect(JSON.stringify(ring.jwks())).not.toMatch(/"d"|PRIVATE/);
  });

  it('generates both keys in hybrid mode on a fresh dir and publishes ML-DSA-65 as AKP', async () => {
    const dataDir = tempDataDir();
    const ring = await KeyRing.open({ dataDir, mode: 'hybrid' });
    const { keyId, pqKeyId } = ring.activeKeyIds;
    expect(pqKeyId).toMatch(/^mldsa65-[A-Za-z0-9_-]{43}$/);
    expect(fileMode(path.join(dataDir, 'keys', `${pqKeyId}.pem`))).toBe(0o600);
    expect(fileMode(path.join(dataDir, 'keys', `${keyId}.pem`))).toBe(0o600);

    const akp = ring.publicKey(pqKeyId!);
    expect(akp).toEqual({ kty: 'AKP', alg: 'ML-DSA-65', pub: expect.any(String), kid: pqKeyId, use: 'sig' });
    expect(Buffer.from((akp as { pub: string }).pub, 'base64url')).toHaveLength(1952);
    expect(ring.jwks().keys.map((k) => k.kty).sort()).toEqual(['AKP', 'OKP']);

    const reopened = await KeyRing.open({ dataDir, mode: 'hybrid' });
    expect(reopened.activeKeyIds).toEqual({ keyId, pqKeyId });
  });

  it('refuses hybrid mode over Ed25519 keys without an ML-DSA-65 key', async () => {
    const dataDir = tempDataDir();
    await KeyRing.open({ dataDir, mode: 'ed25519' });
    const attempt = KeyRing.open({ dataDir, mode: 'hybrid' });
    await expect(attempt).rejects.toBeInstanceOf(HybridKeyMissingError);
    await expect(attempt).rejects.toThrow(/ML-DSA-65/);
    // Nothing was generated behind the operator's back.
    expect(fs.readdirSync(path.join(dataDir, 'keys')).filter((f) => f.startsWith('mldsa65'))).toEqual([]);
  });

  it('refuses hybrid mode when the ML-DSA-65 key file is missing, naming the file', async () => {
    const dataDir = tempDataDir();
    const ring = await KeyRing.open({ dataDir, mode: 'hybrid' });
    const pqFile = path.join(dataDir, 'keys', `${ring.activeKeyIds.pqKeyId}.pem`);
    fs.rmSync(pqFile);
    const error = await KeyRing.open({ dataDir, mode: 'hybrid' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HybridKeyMissingError);
    expect((error as HybridKeyMissingError).missingFiles).toEqual([pqFile]);
    expect((error as Error).message).toContain(pqFile);
    // ed25519 mode still starts: the ML-DSA key is not needed there.
    await expect(KeyRing.open({ dataDir, mode: 'ed25519' })).resolves.toBeInstanceOf(KeyRing);
  });

  it('adds an ML-DSA-65 key to an Ed25519 data dir only when asked to', async () => {
    const dataDir = tempDataDir();
    const before = await KeyRing.open({ dataDir, mode: 'ed25519' });
    const ring = await KeyRing.open({ dataDir, mode: 'hybrid', addMissingPqKey: true });
    expect(ring.activeKeyIds.keyId).toBe(before.activeKeyIds.keyId);
    expect(ring.activeKeyIds.pqKeyId).toMatch(/^mldsa65-/);
  });

  it('refuses to start when the active Ed25519 key file is missing', async () => {
    const dataDir = tempDataDir();
    const ring = await KeyRing.open({ dataDir, mode: 'ed25519' });
    fs.rmSync(path.join(dataDir, 'keys', `${ring.activeKeyIds.keyId}.pem`));
    await expect(KeyRing.open({ dataDir, mode: 'ed25519' })).rejects.toBeInstanceOf(KeyFilesMissingError);
  });

  it('refuses to generate new keys when keys.json is gone but key files remain', async () => {
    const dataDir = tempDataDir();
    await KeyRing.open({ dataDir, mode: 'ed25519' });
    fs.rmSync(path.join(dataDir, 'keys', 'keys.json'));
    await expect(KeyRing.open({ dataDir, mode: 'ed25519' })).rejects.toThrow(/keys\.json/);
  });

  it('detects a keys.json whose keyId does not match its public key', async () => {
    const dataDir = tempDataDir();
    await KeyRing.open({ dataDir, mode: 'ed25519' });
    const file = path.join(dataDir, 'keys', 'keys.json');
    const metadata = JSON.parse(fs.readFileSync(file, 'utf8'));
    const other = await KeyRing.open({ dataDir: tempDataDir(), mode: 'ed25519' });
    metadata.keys[0].publicKey = (other.jwks().keys[0] as { x: string }).x;
    fs.writeFileSync(file, JSON.stringify(metadata));
    await expect(KeyRing.open({ dataDir, mode: 'ed25519' })).rejects.toBeInstanceOf(KeyRingError);
  });

  it('rotates: new active key, old key still published and old signatures still verify', async () => {
    const dataDir = tempDataDir();
    const ring = await KeyRing.open({ dataDir, mode: 'hybrid' });
    const signer = new KeyRingSigner(ring);
    const old = ring.activeKeyIds;
    const oldRecord = await signer.sign({ kind: 'refusal', n: 1 });

    const outcome = await ring.rotate();
    expect(outcome.kind).toBe('rotated');
    const rotated = outcome.active;
    expect(rotated.keyId).not.toBe(old.keyId);
    expect(rotated.pqKeyId).not.toBe(old.pqKeyId);
    expect(ring.activeKeyIds).toEqual(rotated);
    expect(ring.jwks().keys.map((k) => k.kid).sort()).toEqual([old.keyId, old.pqKeyId, rotated.keyId, rotated.pqKeyId].sort());
    expect(ring.keys().filter((k) => k.active).map((k) => k.keyId).sort()).toEqual([rotated.keyId, rotated.pqKeyId].sort());

    const newRecord = await signer.sign({ kind: 'refusal', n: 2 });
    expect(newRecord.keyId).toBe(rotated.keyId);
    expect(verifyRecord(oldRecord, ring.jwks()).valid).toBe(true);
    expect(verifyRecord(newRecord, ring.jwks()).valid).toBe(true);

    // After a restart the rotated key is active and the retired one still published.
    const reopened = await KeyRing.open({ dataDir, mode: 'hybrid' });
    expect(reopened.activeKeyIds).toEqual(rotated);
    expect(verifyRecord(oldRecord, reopened.jwks()).valid).toBe(true);
    expect(fileMode(path.join(dataDir, 'keys', `${rotated.keyId}.pem`))).toBe(0o600);
  });

  it('serializes concurrent first opens of one data dir onto one key', async () => {
    const dataDir = tempDataDir();
    const rings = await Promise.all([1, 2, 3, 4].map(() => KeyRing.open({ dataDir, mode: 'ed25519' })));
    expect(new Set(rings.map((r) => r.activeKeyIds.keyId)).size).toBe(1);
  });

  it('rejects an unknown signing mode', async () => {
    await expect(KeyRing.open({ dataDir: tempDataDir(), mode: 'rsa' as never })).rejects.toBeInstanceOf(KeyRingError);
  });
});
