/**
 * The part of this package that runs anywhere, with no Node API (`@ets/adapters-crypto/portable`):
 * RFC 8785, the offline verifier over primitives the caller brings (@noble's here), and the
 * transparency log's verification. The client library bundles it for Node and for browsers; a
 * test bundles this entry for the browser platform, which fails on any `node:` import.
 */
export { canonicalize, CanonicalJsonError } from './canonical-json.js';
export { canonicalHasher } from './canonical-hasher.js';
export type { JwksLike, PublicJwk, PublicJwkSet } from './jwk.js';
export { portableVerifyCrypto, type VerifyCrypto, type VerifyFn } from './verify-crypto.js';
export { verifyRecord, verifyDetached, JwksSignatureVerifier, type OfflineVerification } from './offline-verifier.js';
export {
  verifyOfflineWith,
  detectKind,
  OFFLINE_RECORD_KINDS,
  type OfflineRecordKind,
  type OfflineCheck,
  type OfflineReport,
  type OfflineOptions,
} from './offline/verify-offline.js';
export { unwrapServedRecord, type UnwrappedRecord } from './offline/unwrap.js';
export { merkleHasher, rfc9162, type MerkleHasher, type Sha256 } from './transparency/merkle-hasher.js';
export { rootFromInclusionProof, verifyConsistency, verifyInclusion } from './transparency/merkle-verify.js';
export { ed25519NoteVerifier, parseVerifierKey, type Ed25519Verify, type NoteVerifier } from './transparency/signed-note.js';
export { CheckpointError, openCheckpoint, parseCheckpoint, type Checkpoint } from './transparency/checkpoint.js';
export { noteVerifiersFromJwks } from './transparency/note-keys.js';
export { checkConsistency, checkInclusion, checkSignedCheckpoint, type ProofCheck, type VerifiedCheckpoint } from './transparency/log-proofs.js';
export { fromBase64, fromBase64Url, fromHex, toBase64, toHex, utf8 } from './transparency/bytes.js';
