export { canonicalize, CanonicalJsonError } from './canonical-json.js';
export { Sha256Hasher, sha256Hex } from './sha256-hasher.js';
export { KeyRingError, KeyFilesMissingError, HybridKeyMissingError } from './errors.js';
export {
  ed25519KeyId,
  mlDsa65KeyId,
  type Ed25519PublicJwk,
  type MlDsa65PublicJwk,
  type PublicJwk,
  type PublicJwkSet,
  type JwksLike,
} from './jwk.js';
export type { KeyAlgorithm } from './key-store.js';
export {
  KeyRing,
  type SigningMode,
  type KeyRingOptions,
  type ActiveKeyIds,
  type ActiveSigningKeys,
  type ProducedSignatures,
  type KeyInfo,
} from './key-ring.js';
export { KeyRingSigner, type SigningKeySource } from './record-signer.js';
export { verifyRecord, verifyDetached, JwksSignatureVerifier, type OfflineVerification } from './offline-verifier.js';
export { Ed25519StepUpVerifier, signStepUpPayload, isEd25519PublicKeyPem } from './step-up.js';
export { mlDsa65 as mlDsa65Backend, type MlDsa65Backend } from './ml-dsa65.js';
export {
  verifyOffline,
  detectKind,
  unwrapServedRecord,
  OFFLINE_RECORD_KINDS,
  type OfflineRecordKind,
  type OfflineCheck,
  type OfflineReport,
  type UnwrappedRecord,
} from './offline/index.js';
