/**
 * Fakes for unit tests of maker-checker and of every kind of change (no crypto in the domain):
 * a step-up "signature" is the key's name and the payload's sorted-key JSON, so only a test that
 * names the key can make one, and any change to the payload breaks it. Not exported by the package.
 */
import type { Signer, StepUpSignatureVerifier } from '../ports/crypto.js';

/** Deterministic JSON with sorted keys (a stand-in for RFC 8785 in tests). */
export const stableJson = (v: unknown): string =>
  Array.isArray(v)
    ? `[${v.map(stableJson).join(',')}]`
    : v !== null && typeof v === 'object'
      ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`).join(',')}}`
      : JSON.stringify(v);

export const fakeStepUpSign = (key: string, payload: unknown): string => `sig(${key}):${stableJson(payload)}`;

/** Keys are names; a key's identity ignores surrounding whitespace, as a PEM's does its line breaks. */
export const fakeStepUpVerifier: StepUpSignatureVerifier = {
  verify: (key, payload, sig) => sig === fakeStepUpSign(key, payload),
  publicKeyOf: (key) => key.trim() || undefined,
};

/** Signs nothing: adds fixed signature fields. */
export const fakeSigner: Signer = {
  sign: async <T extends object>(r: T) => ({ ...r, keyId: 'k1', signature: 'sig' }),
  signText: async () => ({ keyId: 'k1', signature: 'sig' }),
};
