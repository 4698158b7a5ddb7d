/**
 * Node's Ed25519 for the transparency log's verification. The rest of the transparency module is
 * free of node: imports; a browser build passes its own `Ed25519Verify` instead of this one.
 */
import type { JwksLike } from '../jwk.js';
import { nodeVerifyCrypto } from '../node-verify-crypto.js';
import { noteVerifiersFromJwks } from './note-keys.js';
import type { Ed25519Verify, NoteVerifier } from './signed-note.js';

/**
 * The records' own verifier (imported keys kept per key; small-order keys refused): OpenSSL
 * accepts, under a small-order key, a signature that verifies any message.
 */
export const nodeEd25519Verify: Ed25519Verify = (publicKey, message, signature) => nodeVerifyCrypto.ed25519(publicKey)(message, signature);

/** `noteVerifiersFromJwks` with Node's Ed25519. */
export function jwksNoteVerifiers(jwks: JwksLike): NoteVerifier[] {
  return noteVerifiersFromJwks(jwks, nodeEd25519Verify);
}
