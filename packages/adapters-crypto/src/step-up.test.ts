import { describe, it, expect } from '@jest/globals';
import { createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import { Ed25519StepUpVerifier, isEd25519PublicKeyPem, signStepUpPayload } from './step-up.js';

function checkerKeys() {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }) as string,
  };
}

const payload = {
  pendingPolicyChangeId: 'chg-1',
  action: 'approve',
  expiresAt: '2026-11-21T12:05:00Z',
  nonce: 'AAECAwQFBgcICQoLDA0ODw',
  callerId: 'checker',
};

describe('step-up envelopes', () => {
  const verifier = new Ed25519StepUpVerifier();

  it('round-trips: a payload signed with the private key verifies with the public key', () => {
    const { privatePem, publicPem } = checkerKeys();
    const signature = signStepUpPayload(privatePem, payload);
    expect(Buffer.from(signature, 'base64')).toHaveLength(64);
    expect(verifier.verify(publicPem, payload, signature)).toBe(true);
    // Key order does not matter: the signature is over the canonical JSON.
    const reordered = Object.fromEntries(Object.entries(payload).reverse());
    expect(verifier.verify(publicPem, reordered, signature)).toBe(true);
  });

  it('fails for a tampered payload, another key, or malformed input, without throwing', () => {
    const { privatePem, publicPem } = checkerKeys();
    const other = checkerKeys();
    const signature = signStepUpPayload(privatePem, payload);
    expect(verifier.verify(publicPem, { ...payload, action: 'reject' }, signature)).toBe(false);
    expect(verifier.verify(publicPem, { ...payload, reason: 'x' }, signature)).toBe(false);
    expect(verifier.verify(other.publicPem, payload, signature)).toBe(false);
    expect(verifier.verify(publicPem, payload, 'garbage')).toBe(false);
    expect(verifier.verify(publicPem, payload, '')).toBe(false);
    expect(verifier.verify('not a pem', payload, signature)).toBe(false);
    expect(verifier.verify(privatePem, payload, signature)).toBe(false);
    expect(verifier.verify(publicPem, null, signature)).toBe(false);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(verifier.verify(publicPem, cyclic, signature)).toBe(false);
    expect(verifier.verify(undefined as never, payload, undefined as never)).toBe(false);
  });

  it('refuses a signature under a small-order key, which OpenSSL alone accepts for any payload', () => {
    const identity = Buffer.alloc(32);
    identity[0] = 1;
    const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), identity]);
    const weakPem = createPublicKey({ key: spki, format: 'der', type: 'spki' }).export({ type: 'spki', format: 'pem' }) as string;
    const forged = Buffer.alloc(64);
    forged[0] = 1;
    expect(verify(null, Buffer.from('any payload'), createPublicKey(weakPem), forged)).toBe(true);
    expect(verifier.verify(weakPem, payload, forged.toString('base64'))).toBe(false);
  });

  it('accepts only Ed25519 public key PEMs as step-up keys', () => {
    const { privatePem, publicPem } = checkerKeys();
    expect(isEd25519PublicKeyPem(publicPem)).toBe(true);
    expect(isEd25519PublicKeyPem(privatePem)).toBe(false);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }) as string;
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }) as string;
    expect(isEd25519PublicKeyPem(rsa)).toBe(false);
    expect(isEd25519PublicKeyPem(ec)).toBe(false);
    expect(isEd25519PublicKeyPem('')).toBe(false);
    expect(isEd25519PublicKeyPem(publicPem.replace('A', '!'))).toBe(false);
  });

  it('refuses to sign with a key that is not Ed25519', () => {
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    expect(() => signStepUpPayload(ec, payload)).toThrow(/Ed25519/);
    expect(() => signStepUpPayload('nope', payload)).toThrow(/PEM/);
  });
});
