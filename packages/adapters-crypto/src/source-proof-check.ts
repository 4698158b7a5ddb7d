/**
 * The proofs of business signal sources (CONTRACT "Business signal sources"): a base64 Ed25519
 * signature over the RFC 8785 canonical JSON of `{fact, subject, value, validUntil, nonce}`. A
 * source's key is named `ed25519:<base64url of its 32-byte public key>` (the JWK `x`), a key id
 * that carries the key, so anyone holding a Trusted Signal can check its proof with nothing else.
 * No Node API here: the offline verifier runs this in a browser too, on the primitives it is given.
 */
import { canonicalize } from './canonical-json.js';
import { fromBase64, fromBase64Url, utf8 } from './transparency/bytes.js';
import type { VerifyCrypto } from './verify-crypto.js';

export const SOURCE_KEY_ID_PREFIX = 'ed25519:';

/** The raw 32-byte public key a source key id carries, or undefined when it is not one. */
export function sourceKeyBytes(keyId: unknown): Uint8Array | undefined {
  if (typeof keyId !== 'string' || !keyId.startsWith(SOURCE_KEY_ID_PREFIX)) return undefined;
  const raw = fromBase64Url(keyId.slice(SOURCE_KEY_ID_PREFIX.length));
  return raw && raw.length === 32 ? raw : undefined;
}

/** The statement a source signs. */
export const sourceProofStatement = (a: { fact: unknown; subject: unknown; value: unknown; validUntil: unknown; nonce: unknown }) => ({
  fact: a.fact,
  subject: a.subject,
  value: a.value,
  validUntil: a.validUntil,
  nonce: a.nonce,
});

/** True when `proof` verifies with the key `keyId` over the canonical statement. Never throws. */
export function verifySourceProofWith(crypto: VerifyCrypto, keyId: unknown, statement: unknown, proof: unknown): boolean {
  try {
    const key = sourceKeyBytes(keyId);
    const signature = fromBase64(proof);
    if (!key || !signature || signature.length !== 64) return false;
    return crypto.ed25519(key)(utf8(canonicalize(statement)), signature);
  } catch {
    return false;
  }
}
