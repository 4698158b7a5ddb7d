/** Everything that is the same in the Node and the browser build. */
export { createClient, createAttestationClient, type ClientOptions, type EtsClient, type AttestationClient } from './http.js';
export type { paths, components, operations } from './generated/transaction.js';
export type { paths as AttestationPaths, components as AttestationComponents, operations as AttestationOperations } from './generated/attestation.js';
export { signStepUp, stepUpPayload, STEP_UP_DEFAULT_TTL_SECONDS, STEP_UP_MAX_TTL_SECONDS, type StepUpEnvelope, type StepUpOptions, type StepUpPayload, type StepUpPayloadOptions } from './step-up.js';
export { signApproval, approvalPayload, approvalSignalsHash, APPROVAL_DEFAULT_TTL_SECONDS, type ApprovalOptions, type ApprovalPayloadOptions, type ApprovalPayload, type ApprovalScope, type SignedApproval } from './approval.js';
export {
  heldTransactions,
  heldApprovalPayload,
  heldRejectPayload,
  EtsRequestError,
  type HeldTransaction,
  type HeldStatus,
  type HeldTransactionPage,
  type HeldApprovalAnswer,
  type HeldRejectEnvelope,
  type HeldDecisionOptions,
  type HeldTransactionsClient,
} from './held.js';
export { generateEd25519KeyPair, ed25519PublicKeyPem, signCanonical, webCryptoKeyFromPem, webCryptoSigner, type Ed25519KeyPair, type Ed25519PrivateKey, type Ed25519Signer } from './keys.js';
export * from './release.js';
export { canonicalize } from '@ets/adapters-crypto/portable';
export type {
  CheckpointCheck,
  ConsistencyCheck,
  InclusionProof,
  JwksLike,
  OfflineCheck,
  OfflineRecordKind,
  OfflineReport,
  OfflineVerifier,
  ProofCheck,
  RecordReport,
  VerifiedCheckpoint,
  VerifyRecordOptions,
} from './verification.js';

/** The schemas of the transaction profile's OpenAPI document, by name (`Schemas['TrustRecord']`). */
export type Schemas = import('./generated/transaction.js').components['schemas'];
