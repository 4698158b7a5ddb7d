import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canonicalize } from './canonical-json.js';
import { signCompactJws } from './compact-jws.js';
import { KeyRing } from './key-ring.js';
import { JwksSignatureVerifier, verifyDetached, verifyRecord } from './node-verifier.js';
import { KeyRingSigner } from './record-signer.js';

const dirs: string[] = [];
function tempDataDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ets-signer-'));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const record = () => ({
  recordId: 'rec-1',
  transaction: { policy: { contentHash: 'ab'.repeat(32), version: '1.0.0' } },
  executions: [{ chainHash: 'cd'.repeat(32), previousChainHash: null, amount: 12.5 }],
  approved: true,
});

function flipBase64(signature: string): string {
  const bytes = Buffer.from(signature, 'base64');
  bytes[0] = bytes[0]! ^ 1;
  return bytes.toString('base64');
}

describe('KeyRingSigner + verifyRecord, Ed25519 mode', () => {
  let ring: KeyRing;
  let signer: KeyRingSigner;
  beforeAll(async () => {
    ring = await KeyRing.open({ dataDir: tempDataDir(), mode: 'ed25519' });
    signer = new KeyRingSigner(ring);
  });

  it('signs a record that verifies offline with the JWKS', async () => {
    const input = record();
    const signed = await signer.sign(input);
    expect(signed.keyId).toBe(ring.activeKeyIds.keyId);
    expect(Buffer.from(signed.signature, 'base64')).toHaveLength(64);
    expect(signed.pqKeyId).toBeUndefined();
    expect(signed.pqSignature).toBeUndefined();
    expect(input).toEqual(record()); // input untouched
    expect(verifyRecord(signed, ring.jwks())).toEqual({ valid: true, keyId: signed.keyId, errors: [] });
    // Records travel as JSON: what a client parses back must verify too.
    expect(verifyRecord(JSON.parse(JSON.stringify(signed)), ring.jwks()).valid).toBe(true);
  });

  it('signs the canonical JSON of the record without the signature (keyId included)', async () => {
    const signed = await signer.sign(record());
    const { signature, ...rest } = signed;
    const { createPublicKey, verify } = await import('node:crypto');
    const key = createPublicKey({ key: ring.publicKey(signed.keyId) as never, format: 'jwk' });
    expect(verify(null, Buffer.from(canonicalize(rest)), key, Buffer.from(signature, 'base64'))).toBe(true);
  });

  it('fails when any field changes, including keyId and nested values', async () => {
    const signed = await signer.sign(record());
    const tampered: Array<Record<string, unknown>> = [
      { ...signed, recordId: 'rec-2' },
      { ...signed, approved: false },
      { ...signed, extra: 1 },
      { ...signed, executions: [{ ...signed.executions[0], amount: 12.6 }] },
      { ...signed, transaction: { policy: { ...signed.transaction.policy, version: '1.0.1' } } },
      { ...signed, signature: flipBase64(signed.signature) },
    ];
    for (const candidate of tampered) {
      const result = verifyRecord(candidate, ring.jwks());
      expect(result.valid).toBe(false);
      expect(result.errors).toEqual(['signature: does not verify']);
    }
    const { recordId: _dropped, ...withoutField } = signed;
    expect(verifyRecord(withoutField, ring.jwks()).valid).toBe(false);
  });

  it('says which check failed', async () => {
    const signed = await signer.sign(record());
    const jwks = ring.jwks();
    const { signature: _s, ...unsigned } = signed;
    const { keyId: _k, ...noKey } = signed;
    expect(verifyRecord(unsigned, jwks).errors).toEqual(['signature: missing']);
    expect(verifyRecord(noKey, jwks).errors).toEqual(['keyId: missing']);
    expect(verifyRecord({ ...signed, keyId: 'ed25519-unknown' }, jwks).errors).toEqual(['keyId: unknown key ed25519-unknown']);
    expect(verifyRecord({ ...signed, signature: 'not base64!' }, jwks).errors).toEqual(['signature: not standard base64']);
    expect(verifyRecord({ ...signed, signature: 'AAAA' }, jwks).errors).toEqual(['signature: wrong length']);
    expect(verifyRecord({ ...signed, pqKeyId: 'x' }, jwks).errors).toEqual([
      'pqKeyId: unknown key x',
      'pqSignature: missing',
      'signature: does not verify', // pqKeyId is covered by the Ed25519 signature
    ]);
    expect(verifyRecord({ ...signed, pqSignature: flipBase64(signed.signature) }, jwks).errors).toEqual([
      'pqKeyId: missing',
      'pqSignature: wrong length',
    ]);
    expect(verifyRecord(signed, { keys: [] }).errors).toEqual([`keyId: unknown key ${signed.keyId}`]);
    for (const notARecord of [null, 'text', 42, [signed], undefined]) {
      expect(verifyRecord(notARecord, jwks)).toEqual({ valid: false, errors: ['record: not a JSON object'] });
    }
  });

  it('keeps an own __proto__ key in the signed record and covers it', async () => {
    const input = JSON.parse('{"id":"p1","__proto__":{"role":"reader"}}') as Record<string, unknown>;
    const signed = (await signer.sign(input)) as Record<string, unknown>;
    expect(Object.prototype.hasOwnProperty.call(signed, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(signed)).toBe(Object.prototype);
    expect(JSON.stringify(signed)).toContain('"__proto__":{"role":"reader"}');
    const served = JSON.parse(JSON.stringify(signed));
    expect(verifyRecord(served, ring.jwks()).valid).toBe(true);
    const changed = JSON.parse(JSON.stringify(signed).replace('"reader"', '"admin"'));
    expect(verifyRecord(changed, ring.jwks()).errors).toEqual(['signature: does not verify']);
  });

  it('re-signing replaces earlier signature fields', async () => {
    const signed = await signer.sign(record());
    const again = await signer.sign({ ...signed, pqKeyId: 'stale', pqSignature: 'stale' });
    expect(again.pqKeyId).toBeUndefined();
    expect(verifyRecord(again, ring.jwks()).valid).toBe(true);
  });

  it('signs detached text (execution chain)', async () => {
    const fields = await signer.signText('chain-hash-value');
    expect(fields).toEqual({ keyId: ring.activeKeyIds.keyId, signature: expect.any(String) });
    expect(verifyDetached('chain-hash-value', fields, ring.jwks()).valid).toBe(true);
    expect(verifyDetached('chain-hash-valuf', fields, ring.jwks()).errors).toEqual(['signature: does not verify']);
  });

  it('JwksSignatureVerifier follows the key ring across rotations', async () => {
    const dataDir = tempDataDir();
    const own = await KeyRing.open({ dataDir, mode: 'ed25519' });
    const ownSigner = new KeyRingSigner(own);
    const verifier = new JwksSignatureVerifier(own);
    const before = await ownSigner.sign(record());
    expect(verifier.verify(before).valid).toBe(true);
    await own.rotate();
    const after = await ownSigner.sign(record());
    expect(after.keyId).not.toBe(before.keyId);
    expect(verifier.verify(after).valid).toBe(true);
    expect(verifier.verify(before).valid).toBe(true);
    const text = await ownSigner.signText('abc');
    expect(verifier.verifyText('abc', text)).toEqual({ valid: true, keyId: text.keyId, errors: [] });
    // A record from another service's key is not accepted.
    expect(verifier.verify(await signer.sign(record())).errors[0]).toMatch(/^keyId: unknown key/);
  });
});

describe('KeyRingSigner + verifyRecord, hybrid mode', () => {
  let ring: KeyRing;
  let signer: KeyRingSigner;
  beforeAll(async () => {
    ring = await KeyRing.open({ dataDir: tempDataDir(), mode: 'hybrid' });
    signer = new KeyRingSigner(ring);
  });

  it('adds pqKeyId and pqSignature, and both verify', async () => {
    const signed = await signer.sign(record());
    expect(signed.keyId).toBe(ring.activeKeyIds.keyId);
    expect(signed.pqKeyId).toBe(ring.activeKeyIds.pqKeyId);
    expect(Buffer.from(signed.pqSignature!, 'base64')).toHaveLength(3309);
    expect(verifyRecord(JSON.parse(JSON.stringify(signed)), ring.jwks())).toEqual({ valid: true, keyId: signed.keyId, errors: [] });
  });

  it('fails when either signature changes or the post-quantum part is dropped', async () => {
    const signed = await signer.sign(record());
    const jwks = ring.jwks();
    expect(verifyRecord({ ...signed, signature: flipBase64(signed.signature) }, jwks).errors).toEqual(['signature: does not verify']);
    expect(verifyRecord({ ...signed, pqSignature: flipBase64(signed.pqSignature!) }, jwks).errors).toEqual([
      'pqSignature: does not verify',
    ]);
    const { pqSignature: _p, ...noPqSignature } = signed;
    expect(verifyRecord(noPqSignature, jwks).errors).toEqual(['pqSignature: missing']);
    // Dropping both post-quantum fields changes the signed bytes (pqKeyId is signed), so the
    // Ed25519 signature no longer verifies: no downgrade to an Ed25519-only record.
    const { pqSignature: _q, pqKeyId: _i, ...noPq } = signed;
    expect(verifyRecord(noPq, jwks).errors).toEqual(['signature: does not verify']);
    expect(verifyRecord({ ...signed, recordId: 'other' }, jwks).errors).toEqual([
      'signature: does not verify',
      'pqSignature: does not verify',
    ]);
    expect(verifyRecord({ ...signed, pqKeyId: signed.keyId }, jwks).errors).toContain(`pqKeyId: key ${signed.keyId} is not an ML-DSA-65 key`);
  });

  it('signs detached text with both algorithms', async () => {
    const fields = await signer.signText('chain');
    expect(fields.pqKeyId).toBe(ring.activeKeyIds.pqKeyId);
    expect(verifyDetached('chain', fields, ring.jwks()).valid).toBe(true);
    expect(verifyDetached('chain', { ...fields, pqSignature: flipBase64(fields.pqSignature!) }, ring.jwks()).errors).toEqual([
      'pqSignature: does not verify',
    ]);
  });

  it('signs detached text with Ed25519 alone when asked: the same signature, no ML-DSA-65 one', async () => {
    const both = await signer.signText('chain');
    const ed25519 = await signer.signText('chain', 'ed25519');
    expect(ed25519).toEqual({ keyId: ring.activeKeyIds.keyId, signature: both.signature });
    expect(verifyDetached('chain', ed25519, ring.jwks()).valid).toBe(true);
  });

  it('signs a compact JWS with the Ed25519 key: the signature over the signing input that `sign` makes', async () => {
    const [header, payload, signature] = (await signCompactJws(ring, 'test+jwt', '{"n":1}')).split('.') as [string, string, string];
    expect(JSON.parse(Buffer.from(header, 'base64url').toString('utf8'))).toEqual({ alg: 'EdDSA', kid: ring.activeKeyIds.keyId, typ: 'test+jwt' });
    const produced = await ring.signingKeys().sign(Buffer.from(`${header}.${payload}`, 'ascii'));
    expect(Buffer.from(signature, 'base64url').toString('base64')).toBe(produced.signature);
  });
});
