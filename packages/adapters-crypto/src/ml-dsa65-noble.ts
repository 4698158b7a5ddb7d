/** ML-DSA-65 verification by @noble/post-quantum, free of Node APIs (ml-dsa65.ts holds the rest). */
import { ml_dsa65 } from '@noble/post-quantum/ml-dsa.js';

export const ML_DSA_65_SEED_BYTES = 32;
export const ML_DSA_65_PUBLIC_KEY_BYTES = 1952;
export const ML_DSA_65_SIGNATURE_BYTES = 3309;

export type MlDsa65Verify = (message: Uint8Array, signature: Uint8Array) => boolean;

/** Throws when `publicKey` is not a well-formed ML-DSA-65 public key. */
export function nobleMlDsa65Verifier(publicKey: Uint8Array): MlDsa65Verify {
  if (publicKey.length !== ML_DSA_65_PUBLIC_KEY_BYTES) throw new TypeError('bad ML-DSA-65 public key');
  const key = Uint8Array.from(publicKey);
  return (message, signature) => {
    if (signature.length !== ML_DSA_65_SIGNATURE_BYTES) return false;
    try {
      return ml_dsa65.verify(signature, message, key);
    } catch {
      return false;
    }
  };
}
