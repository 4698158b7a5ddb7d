/**
 * Node's Ed25519 for the transparency log's verification. The rest of the transparency module is
 * free of node: imports; a browser build passes its own `Ed25519Verify` instead of this one.
 */
import { createPublicKey, verify as nodeVerify, type KeyObject } from 'node:crypto';
import type { JwksLike } from '../jwk.js';
import { noteVerifiersFromJwks } from './note-keys.js';
import type { Ed25519Verify, NoteVerifier } from './signed-note.js';

// Imported keys by their bytes; bounded, since keys may come from anyone's JWKS.
const imported = new Map<string, KeyObject>();

export const nodeEd25519Verify: Ed25519Verify = (publicKey, message, signature) => {
  const x = Buffer.from(publicKey).toString('base64url');
  let key = imported.get(x);
  if (!key) {
    key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
    if (imported.size >= 256) imported.clear();
    imported.set(x, key);
  }
  return nodeVerify(null, message, key, signature);
};

/** `noteVerifiersFromJwks` with Node's Ed25519. */
export function jwksNoteVerifiers(jwks: JwksLike): NoteVerifier[] {
  return noteVerifiersFromJwks(jwks, nodeEd25519Verify);
}
