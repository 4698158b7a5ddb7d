import { describe, it, expect } from '@jest/globals';
import { createHash } from 'node:crypto';
import { mlDsa65, nobleMlDsa65, pkcs8PemToSeed, seedToPkcs8Pem } from './ml-dsa65.js';

// RFC 9881 example ML-DSA-65 key: seed 00..1f, seed-form PKCS#8, and the start of its public key.
const SEED = Uint8Array.from({ length: 32 }, (_, i) => i);
const RFC9881_PRIVATE_PEM =
  '-----BEGIN PRIVATE KEY-----\n' +
  'MDQCAQAwCwYJYIZIAWUDBAMSBCKAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZ\n' +
  'GhscHR4f\n' +
  '-----END PRIVATE KEY-----\n';
const RFC9881_PUBLIC_KEY_START = Buffer.from('48683d91978e31eb3dddb8b0473482d2b88a5f62', 'hex');

describe('ML-DSA-65', () => {
  it('writes and reads the RFC 9881 seed-form PKCS#8 encoding', () => {
    expect(seedToPkcs8Pem(SEED)).toBe(RFC9881_PRIVATE_PEM);
    expect(pkcs8PemToSeed(RFC9881_PRIVATE_PEM)).toEqual(SEED);
    expect(() => pkcs8PemToSeed(RFC9881_PRIVATE_PEM.replace('MDQ', 'MDR'))).toThrow();
  });

  it.each([
    ['noble', nobleMlDsa65],
    ['selected', mlDsa65()],
  ])('%s backend derives the RFC 9881 public key and signs verifiably', (_name, backend) => {
    const key = backend.privateKeyFromSeed(SEED);
    expect(key.publicKey).toHaveLength(1952);
    expect(Buffer.from(key.publicKey).subarray(0, 20)).toEqual(RFC9881_PUBLIC_KEY_START);
    expect(createHash('sha256').update(key.publicKey).digest('hex')).toBe(
      'd666806e11cee19a7c989f7445f90dd419cf4d2d51db8c0fdb4c0f0a542238c9',
    );
    const message = Buffer.from('message', 'utf8');
    const signature = key.sign(message);
    expect(signature).toHaveLength(3309);
    const verify = nobleMlDsa65.verifierFor(key.publicKey);
    expect(verify(message, signature)).toBe(true);
    expect(verify(Buffer.from('messagf', 'utf8'), signature)).toBe(false);
    expect(verify(message, signature.subarray(1))).toBe(false);
  });
});
