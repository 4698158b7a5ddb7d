import { describe, expect, it } from '@jest/globals';
import { createHash, createPublicKey, generateKeyPairSync, verify as nodeVerify, webcrypto } from 'node:crypto';
import canonicalizeReference from 'canonicalize';
import { Ed25519StepUpVerifier, signStepUpPayload } from '@ets/adapters-crypto';
import { approvalSignalsHash, signApproval, type ApprovalScope } from './approval.js';
import { ed25519PublicKeyPem, generateEd25519KeyPair, webCryptoSigner } from './keys.js';
import { signStepUp, STEP_UP_MAX_TTL_SECONDS } from './step-up.js';

/**
 * The signing helpers make exactly what the service checks: the same bytes as `ets step-up sign`
 * (the server's own verifier accepts them with the registered public key) and approvals of the
 * shape CONTRACT "Signed approvals and overrides in profile T" fixes, checked here with an
 * independent RFC 8785 implementation and Node's crypto.
 */
const canonical = canonicalizeReference as unknown as (v: unknown) => string;
const serverVerifier = new Ed25519StepUpVerifier();
const NONCE = /^[A-Za-z0-9_-]{22,512}$/; // the OpenAPI document's pattern
const now = new Date('2026-11-21T12:00:00.000Z');

function keyPair(): { privateKeyPem: string; publicKeyPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }) as string };
}

describe('signStepUp', () => {
  it('signs what `ets step-up sign` signs, and the server accepts it with the checker\'s registered key', async () => {
    const { privateKeyPem, publicKeyPem } = keyPair();
    const envelope = await signStepUp({ key: privateKeyPem, changeId: 'chg-1', action: 'approve', callerId: 'bob', now });
    expect(Object.keys(envelope.payload)).toEqual(['pendingPolicyChangeId', 'action', 'expiresAt', 'nonce', 'callerId']);
    expect(envelope.payload).toEqual({ pendingPolicyChangeId: 'chg-1', action: 'approve', expiresAt: '2026-11-21T12:05:00.000Z', nonce: expect.stringMatching(NONCE), callerId: 'bob' });
    expect(serverVerifier.verify(publicKeyPem, envelope.payload, envelope.signature)).toBe(true);
    // Ed25519 is deterministic: the CLI's signer gives the very same signature for the same payload.
    expect(envelope.signature).toBe(signStepUpPayload(privateKeyPem, envelope.payload));
    expect(serverVerifier.verify(publicKeyPem, { ...envelope.payload, action: 'reject' }, envelope.signature)).toBe(false);
  });

  it('a rejection carries its reason; nonces are fresh', async () => {
    const { privateKeyPem, publicKeyPem } = keyPair();
    const a = await signStepUp({ key: privateKeyPem, changeId: 'chg-2', action: 'reject', reason: 'Not like this' });
    const b = await signStepUp({ key: privateKeyPem, changeId: 'chg-2', action: 'reject', reason: 'Not like this' });
    expect(a.payload.reason).toBe('Not like this');
    expect(a.payload.callerId).toBeUndefined();
    expect(a.payload.nonce).not.toBe(b.payload.nonce);
    expect(Date.parse(a.payload.expiresAt) - Date.now()).toBeGreaterThan(290_000);
    expect(serverVerifier.verify(publicKeyPem, b.payload, b.signature)).toBe(true);
  });

  it('takes the key as PKCS#8 PEM, as its 32-byte seed, or as a signer holding it (a WebCrypto key)', async () => {
    const generated = generateEd25519KeyPair();
    expect(ed25519PublicKeyPem(generated.privateKeyPem)).toBe(generated.publicKeyPem);
    // The PEMs are what OpenSSL and Node read.
    expect(createPublicKey(generated.publicKeyPem).asymmetricKeyType).toBe('ed25519');
    const seed = Buffer.from(generated.privateKeyPem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64').subarray(16);
    const fromSeed = await signStepUp({ key: new Uint8Array(seed), changeId: 'c', action: 'approve', now });
    expect(serverVerifier.verify(generated.publicKeyPem, fromSeed.payload, fromSeed.signature)).toBe(true);

    const pair = (await webcrypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
    const spki = Buffer.from(await webcrypto.subtle.exportKey('spki', pair.publicKey)).toString('base64');
    const pem = `-----BEGIN PUBLIC KEY-----\n${spki}\n-----END PUBLIC KEY-----\n`;
    const viaWebCrypto = await signStepUp({ key: webCryptoSigner(pair.privateKey as Parameters<typeof webCryptoSigner>[0]), changeId: 'c', action: 'approve' });
    expect(serverVerifier.verify(pem, viaWebCrypto.payload, viaWebCrypto.signature)).toBe(true);
  });

  it('refuses what the service would refuse, before signing anything', async () => {
    const { privateKeyPem } = keyPair();
    const base = { key: privateKeyPem, changeId: 'c', action: 'approve' as const };
    await expect(signStepUp({ ...base, action: 'reject' })).rejects.toThrow(/reason/);
    await expect(signStepUp({ ...base, action: 'reject', reason: '  ' })).rejects.toThrow(/reason/);
    await expect(signStepUp({ ...base, changeId: '' })).rejects.toThrow(/changeId/);
    await expect(signStepUp({ ...base, action: 'maybe' as 'approve' })).rejects.toThrow(/approve or reject/);
    for (const ttlSeconds of [0, STEP_UP_MAX_TTL_SECONDS + 1, 1.5]) await expect(signStepUp({ ...base, ttlSeconds })).rejects.toThrow(/ttlSeconds/);
    await expect(signStepUp({ ...base, key: 'not a key' })).rejects.toThrow(/PKCS#8/);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    await expect(signStepUp({ ...base, key: rsa })).rejects.toThrow(/Ed25519/);
    await expect(signStepUp({ ...base, key: new Uint8Array(31) })).rejects.toThrow(/32 bytes/);
    await expect(signStepUp({ ...base, key: { sign: () => new Uint8Array(10) } })).rejects.toThrow(/64-byte/);
  });
});

describe('signApproval (CONTRACT "Signed approvals and overrides in profile T")', () => {
  const signals = { amount: 12_500, country: 'FR', note: 'é😀', nested: { b: 1, a: [true, null] } };

  it.each<[string, ApprovalScope]>([
    ['value', { field: 'value', value: 12_500 }],
    ['resourceId', { field: 'resourceId', resourceId: 'inv-42' }],
  ])('signs the contract\'s payload, scope by %s, over its canonical JSON', async (_name, scope) => {
    const { privateKeyPem, publicKeyPem } = keyPair();
    const approval = await signApproval({ key: privateKeyPem, approverId: 'bob', businessTransactionId: 'tx-1', action: 'payments:transfer', scope, signals, now });
    expect(Object.keys(approval).sort()).toEqual(['payload', 'signature']);
    expect(Object.keys(approval.payload).sort()).toEqual(['action', 'approvalId', 'approverId', 'businessTransactionId', 'expiresAt', 'nonce', 'scope', 'signalsHash']);
    expect(approval.payload).toEqual({
      approvalId: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      approverId: 'bob',
      businessTransactionId: 'tx-1',
      action: 'payments:transfer',
      scope,
      signalsHash: createHash('sha256').update(canonical(signals)).digest('hex'),
      expiresAt: '2026-11-21T12:05:00.000Z',
      nonce: expect.stringMatching(NONCE),
    });
    const signed = Buffer.from(canonical(approval.payload), 'utf8');
    expect(nodeVerify(null, signed, createPublicKey(publicKeyPem), Buffer.from(approval.signature, 'base64'))).toBe(true);
    expect(serverVerifier.verify(publicKeyPem, approval.payload, approval.signature)).toBe(true);
  });

  it('hashes `{}` when the request has no signals; approvals are unique and single-use by id and nonce', async () => {
    const empty = createHash('sha256').update('{}').digest('hex');
    expect(approvalSignalsHash(undefined)).toBe(empty);
    expect(approvalSignalsHash({})).toBe(empty);
    const { privateKeyPem } = keyPair();
    const base = { key: privateKeyPem, approverId: 'bob', businessTransactionId: 'tx-2', action: 'sandbox:echo', scope: { field: 'resourceId', resourceId: 'r' } as const };
    const [a, b] = await Promise.all([signApproval(base), signApproval(base)]);
    expect(a.payload.signalsHash).toBe(empty);
    expect(a.payload.approvalId).not.toBe(b.payload.approvalId);
    expect(a.payload.nonce).not.toBe(b.payload.nonce);
  });

  it('refuses an approval that names nothing', async () => {
    const { privateKeyPem } = keyPair();
    const base = { key: privateKeyPem, approverId: 'bob', businessTransactionId: 'tx', action: 'sandbox:echo', scope: { field: 'value', value: 1 } as ApprovalScope };
    await expect(signApproval({ ...base, approverId: '' })).rejects.toThrow(/approverId/);
    await expect(signApproval({ ...base, businessTransactionId: ' ' })).rejects.toThrow(/businessTransactionId/);
    await expect(signApproval({ ...base, scope: { field: 'resourceId' } as unknown as ApprovalScope })).rejects.toThrow(/scope/);
    await expect(signApproval({ ...base, scope: { field: 'value' } as unknown as ApprovalScope })).rejects.toThrow(/scope/);
    await expect(signApproval({ ...base, ttlSeconds: 0 })).rejects.toThrow(/ttlSeconds/);
  });
});
