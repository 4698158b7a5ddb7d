import type { SigningKeySource } from './record-signer.js';

const b64url = (text: string): string => Buffer.from(text, 'utf8').toString('base64url');

/**
 * A compact JWS (RFC 7515) over `payload` (JSON text) with the active Ed25519 key of whatever
 * provider holds it: header `{alg: "EdDSA", kid, typ}`, `kid` the key's id in the JWKS. The
 * signature is the provider's own Ed25519 over the JWS signing input: a PKCS#11 key never leaves
 * its module, so no JWS library can be handed it; only the encoding is done here. Ed25519 only,
 * also in hybrid mode: JWS has no registered ML-DSA-65 algorithm in the libraries clients use.
 */
export async function signCompactJws(keys: SigningKeySource, typ: string, payload: string): Promise<string> {
  // One snapshot: the kid in the header is always the key that signed.
  const active = keys.signingKeys();
  const input = `${b64url(JSON.stringify({ alg: 'EdDSA', kid: active.keyId, typ }))}.${b64url(payload)}`;
  const signature = await active.signEd25519(Buffer.from(input, 'ascii'));
  return `${input}.${Buffer.from(signature, 'base64').toString('base64url')}`;
}
