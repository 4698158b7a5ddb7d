/**
 * The offline verifier (offline-verifier.ts) on Node's crypto: what the service's public /verify
 * routes, its chain checks and `ets verify` use.
 */
import type { SignatureFields } from '@ets/domain';
import type { JwksLike } from './jwk.js';
import { nodeVerifyCrypto } from './node-verify-crypto.js';
import * as portable from './offline-verifier.js';

export type { OfflineVerification } from './offline-verifier.js';

/** Verifies a signed record (`keyId`, `signature`, and in hybrid mode `pqKeyId`, `pqSignature`). */
export function verifyRecord(record: unknown, jwks: JwksLike): portable.OfflineVerification {
  return portable.verifyRecord(record, jwks, nodeVerifyCrypto);
}

/** Verifies signature fields made over a detached UTF-8 string (the execution chain). */
export function verifyDetached(text: string, sig: SignatureFields, jwks: JwksLike): portable.OfflineVerification {
  return portable.verifyDetached(text, sig, jwks, nodeVerifyCrypto);
}

/** The domain's SignatureVerifier over a key set (a JWKS, a function returning one, or the KeyRing). */
export class JwksSignatureVerifier extends portable.JwksSignatureVerifier {
  constructor(keys: JwksLike | (() => JwksLike) | { jwks(): JwksLike }) {
    super(keys, nodeVerifyCrypto);
  }
}
