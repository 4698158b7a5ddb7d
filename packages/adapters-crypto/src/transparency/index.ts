export { merkleHasher, rfc9162, HASH_BYTES, type MerkleHasher, type Sha256 } from './merkle-hasher.js';
export { nodeRfc9162 } from './node-merkle-hasher.js';
export {
  completeSubtrees,
  consistencyProof,
  consistencyProofPlan,
  foldRight,
  inclusionProof,
  inclusionProofPlan,
  MerkleTreeError,
  resolveSteps,
  treeRoot,
  treeRootPlan,
  type NodeId,
  type NodeReader,
  type ProofStep,
} from './merkle-tree.js';
export { appendToCompactRange, compactRangeRoot, EMPTY_RANGE, type CompactRange, type StoredNode } from './compact-range.js';
export { rootFromInclusionProof, verifyConsistency, verifyInclusion } from './merkle-verify.js';
export {
  ed25519NoteKeyId,
  ed25519NoteVerifier,
  formatKeyId,
  formatSignedNote,
  NoteError,
  openSignedNote,
  parseSignedNote,
  parseVerifierKey,
  signatureLine,
  type Ed25519Verify,
  type NoteSignature,
  type NoteVerifier,
  type ParsedNote,
} from './signed-note.js';
export { CheckpointError, formatCheckpoint, openCheckpoint, parseCheckpoint, type Checkpoint } from './checkpoint.js';
export { noteVerifiersFromJwks } from './note-keys.js';
export { checkConsistency, checkInclusion, checkSignedCheckpoint, parseHashList, type ProofCheck, type VerifiedCheckpoint } from './log-proofs.js';
export { NoteCheckpointSigner, type PublicKeyDirectory } from './checkpoint-signer.js';
export { InMemoryTransparencyLog } from './in-memory-log.js';
export { jwksNoteVerifiers, nodeEd25519Verify } from './node-ed25519.js';
export { fromBase64, fromHex, toBase64, toHex } from './bytes.js';
