import type { JwksLike } from '../jwk.js';
import { fromBase64Url } from './bytes.js';
import { ed25519NoteVerifier, isValidKeyName, type Ed25519Verify, type NoteVerifier } from './signed-note.js';

/**
 * Note verifiers for the Ed25519 keys of a JWKS, each named by its `kid` (CONTRACT: a checkpoint's
 * key name is the signing key's `kid`). Entries that are not usable Ed25519 keys are skipped: a
 * JWKS read from a file or URL is untrusted input, and its ML-DSA keys sign no note.
 */
export function noteVerifiersFromJwks(jwks: JwksLike, verify: Ed25519Verify): NoteVerifier[] {
  const keys: readonly unknown[] = jwks && Array.isArray(jwks.keys) ? jwks.keys : [];
  const verifiers: NoteVerifier[] = [];
  for (const candidate of keys) {
    if (typeof candidate !== 'object' || candidate === null) continue;
    const jwk = candidate as Record<string, unknown>;
    if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || !isValidKeyName(jwk.kid)) continue;
    if (jwk.alg !== undefined && jwk.alg !== 'EdDSA') continue;
    const publicKey = fromBase64Url(jwk.x);
    if (publicKey?.length === 32) verifiers.push(ed25519NoteVerifier(jwk.kid, publicKey, verify));
  }
  return verifiers;
}
