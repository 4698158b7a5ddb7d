export { canonicalize, CanonicalJsonError } from './canonical-json.js';
export { Sha256Hasher, sha256Hex } from './sha256-hasher.js';
export { KeyRingError, KeyFilesMissingError, HybridKeyMissingError } from './errors.js';
export {
  ed25519KeyId,
  frozenJwks,
  mlDsa65KeyId,
  type Ed25519PublicJwk,
  type MlDsa65PublicJwk,
  type PublicJwk,
  type PublicJwkSet,
  type JwksLike,
} from './jwk.js';
export type { KeyAlgorithm } from './key-store.js';
export type {
  KeyProvider,
  SigningMode,
  ActiveKeyIds,
  ActiveSigningKeys,
  ProducedSignatures,
  KeyInfo,
  ProviderKey,
  RotationOutcome,
} from './key-provider.js';
export { KeyRing, type KeyRingOptions } from './key-ring.js';
export { EnvKeyProvider, ENV_KEY_VARIABLES, type EnvKeyProviderOptions } from './env-key-provider.js';
export { Pkcs11KeyProvider, type Pkcs11KeyProviderOptions } from './pkcs11/pkcs11-key-provider.js';
export { Pkcs11SetupError } from './pkcs11/module.js';
export { ServiceSigningKeys, PUBLIC_KEY_CACHE_MS, type ServiceSigningKeysOptions, type PublishedKeyInfo } from './service-signing-keys.js';
export { KeyRingSigner, canonicalJsonOf, type SigningKeySource } from './record-signer.js';
export { JwsProofSigner } from './jws-proof-signer.js';
export { verifyRecord, verifyDetached, JwksSignatureVerifier, type OfflineVerification } from './node-verifier.js';
export { portableVerifyCrypto, type VerifyCrypto, type VerifyFn } from './verify-crypto.js';
export { nodeVerifyCrypto } from './node-verify-crypto.js';
export { canonicalHasher } from './canonical-hasher.js';
export { Ed25519StepUpVerifier, signStepUpPayload, isEd25519PublicKeyPem, parseEd25519PublicKeyPem } from './step-up.js';
export { mlDsa65 as mlDsa65Backend, nobleMlDsa65 as nobleMlDsa65Backend, type MlDsa65Backend } from './ml-dsa65.js';
export {
  verifyOffline,
  verifyOfflineWith,
  detectKind,
  unwrapServedRecord,
  OFFLINE_RECORD_KINDS,
  type OfflineRecordKind,
  type OfflineCheck,
  type OfflineReport,
  type OfflineOptions,
  type UnwrappedRecord,
  ExportVerifier,
  ExportLineChecker,
  type CheckedLine,
  EXPORT_FORMAT,
  type ExportHeader,
  type ExportSummary,
  type LineFailure,
} from './offline/index.js';
export { KeyRingReleaseSigner, RELEASE_TOKEN_TYPE } from './release-signer.js';
export * from './transparency/index.js';
export { Ed25519SourceProofs, sourceKeyIdOf, verifySourceProof, sourceProofStatement, SOURCE_KEY_ID_PREFIX } from './source-proofs.js';
export { StandardWebhookSigner, readWebhookSecret, WEBHOOK_SECRET_PREFIX } from './webhook-signer.js';
