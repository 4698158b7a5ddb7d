/** The service's side of source proofs: key ids from registered PEM keys, and checks on Node's crypto. */
import type { SourceProofVerifier } from '@ets/domain';
import { nodeVerifyCrypto } from './node-verify-crypto.js';
import { SOURCE_KEY_ID_PREFIX, verifySourceProofWith } from './source-proof-check.js';
import { parseEd25519PublicKeyPem } from './step-up.js';

export { SOURCE_KEY_ID_PREFIX, sourceProofStatement } from './source-proof-check.js';

/** The key id of an Ed25519 public key in SPKI PEM form, or undefined when the text is not one. */
export function sourceKeyIdOf(publicKeyPem: string): string | undefined {
  const x = parseEd25519PublicKeyPem(publicKeyPem);
  return x === undefined ? undefined : `${SOURCE_KEY_ID_PREFIX}${x}`;
}

/** True when `proof` verifies with the key `keyId` over the canonical statement. Never throws. */
export const verifySourceProof = (keyId: unknown, statement: unknown, proof: unknown): boolean =>
  verifySourceProofWith(nodeVerifyCrypto, keyId, statement, proof);

export class Ed25519SourceProofs implements SourceProofVerifier {
  keyIdOf(publicKeyPem: string): string | undefined {
    return sourceKeyIdOf(publicKeyPem);
  }

  verify(keyId: string, statement: unknown, proof: string): boolean {
    return verifySourceProof(keyId, statement, proof);
  }
}
