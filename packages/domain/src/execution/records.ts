import type { Signed } from '../ports/crypto.js';
import type { PolicyDecision } from '../policy/index.js';

/**
 * The signed records of the execution pipeline (spec 2.3, 2.4; CONTRACT "Execution chain",
 * "Signed records"). Every record names its own kind in `recordType`, so an offline verifier can
 * tell what it holds. Added fields are optional for older records (spec 9.5).
 */
export interface PolicyBinding {
  name: string;
  version: string;
  /** SHA-256 of the RFC 8785 canonical policy document. */
  contentHash: string;
}

/** The five objects of spec 2.2, as received (already validated), plus the caller's signals. */
export interface BusinessTransaction {
  businessTransactionId: string;
  metadata: Record<string, unknown> & { tenantId?: string };
  authority: Record<string, unknown> & { principalId: string; authorityId: string };
  authorization: Record<string, unknown> & { authorityId: string };
  intent: Record<string, unknown> & { action: string; parameters: Record<string, unknown> };
  policy: Record<string, unknown> & { name: string; version: string };
  signals: Record<string, unknown>;
}

export type CheckStatus = 'VERIFIED' | 'NOT_REQUIRED' | 'FAILED';

/**
 * A fact asked from the business system that owns it (spec 2.3, CONTRACT "Business signal
 * sources"). `sourceProof` is the source's base64 Ed25519 signature over the RFC 8785 canonical
 * JSON of `{fact, subject, value, validUntil, nonce}`; `sourceKeyId` names the source's registered
 * key as `ed25519:<base64url of the 32-byte public key>`, so the proof can be checked offline with
 * the record alone. A source registered without a key is trusted by TLS alone: `sourceKeyId` and
 * `sourceProof` are null and `sourceProofVerified` false.
 */
export interface TrustedSignal {
  signal: string;
  source: string;
  fact: string;
  subject: unknown;
  value: unknown;
  validUntil: string;
  /** The nonce the service sent and the source echoed (covered by the proof). */
  nonce: string;
  sourceKeyId: string | null;
  sourceProof: string | null;
  sourceProofVerified: boolean;
  fetchedAt: string;
}

/** The authority grant checked for the calling key (spec 2.3 `assessment.authority.grant`). */
export interface CheckedGrant {
  grantId: string;
  action: string;
  limits: GrantLimit[];
  expiresAt: string;
}

/** A limit of a grant on one intent path, per request (spec 2.8). */
export interface GrantLimit {
  path: string;
  min?: number;
  max?: number;
  oneOf?: (string | number | boolean)[];
}

export interface Assessment {
  authority: { status: CheckStatus; callerId: string; principalId: string; grant: CheckedGrant | null };
  businessValidation: { status: CheckStatus; sourcedSignals: TrustedSignal[] };
  execution: { status: 'EXECUTED' | 'NOT_RELEASED' | 'REFUSED' };
}

/** One release of the action to a connector, linked into the deployment's execution chain. */
export interface ExecutionEntry {
  executionId: string;
  connector: string;
  action: string;
  status: 'SUCCEEDED';
  releasedAt: string;
  completedAt: string;
  /** SHA-256 of the canonical connector result (the result itself is in `result`). */
  resultHash: string;
  result: unknown;
  /** `chainHash` of the deployment's previous execution; null for the first. */
  previousChainHash?: string | null;
  /** SHA-256 hex of `${previousChainHash ?? ''}:${digest}` where digest is the contentHash of this entry without chain fields. */
  chainHash?: string;
  /** Base64 signature of `chainHash` with the record's signing key (keyId). */
  chainSignature?: string;
}

export interface ExecutionTrustRecord {
  recordType: 'execution-trust-record';
  businessTransactionId: string;
  businessTransactionHash: string;
  callerId: string;
  transaction: Omit<BusinessTransaction, 'policy'> & { policy: BusinessTransaction['policy'] & { contentHash: string } };
  decision: PolicyDecision;
  assessment?: Assessment;
  /** A transaction held for a human and released on their approval: who approved, when, and their signed approval. */
  override?: HeldApproval;
  executions: ExecutionEntry[];
  recordedAt: string;
}

export interface RefusalRecord {
  recordType: 'refusal-record';
  businessTransactionId: string;
  businessTransactionHash: string;
  callerId: string;
  principalId: string;
  action: string;
  policy: { name: string; version: string };
  /** Same value as `transaction.policy.contentHash` of an approval under the same policy. */
  policyContentHash?: string;
  decision: PolicyDecision;
  matchedRuleId: string | null;
  reason: string;
  assessment?: Assessment;
  refusedAt: string;
}

/**
 * Signed and stored before release (spec 2.4): only facts that exist before release, never the
 * parameters (bound through businessTransactionHash) and never the result.
 */
export interface ExecutionIntent {
  recordType: 'execution-intent';
  businessTransactionId: string;
  businessTransactionHash: string;
  action: string;
  connector: string;
  callerId: string;
  principalId: string;
  tenantId?: string;
  policy: PolicyBinding;
  decision: PolicyDecision;
  /** A held transaction released on a human's approval: who approved it. */
  approvedBy?: string;
  preparedAt: string;
}

export type IntentState = 'PREPARED' | 'RELEASED' | 'FINALIZED' | 'ERRORED' | 'RESOLVED';

export interface IntentResolution {
  /** What the operator found at the connector. */
  found: 'EXECUTED' | 'NOT_EXECUTED';
  note: string;
  resolvedBy: string;
  resolvedAt: string;
  previousState: 'PREPARED' | 'ERRORED';
}

/** Operational status beside the intent: not signed, it changes. */
export interface IntentStatus {
  state: IntentState;
  updatedAt: string;
  /**
   * Until when the request that prepared the intent may still be running (a PREPARED intent whose
   * request has not yet recorded the release's outcome); it cannot be resolved before.
   */
  inFlightUntil?: string;
  /** As served: whether that request is still in flight at the time of the read. */
  inFlight?: boolean;
  /**
   * Why the release stage failed (ERRORED). `recheck-failed`: the re-check at release found that a
   * fact or the grant no longer held, and nothing was released (spec 4.3.6).
   */
  error?: { phase: 'before-send' | 'conditions-not-met' | 'outcome-unknown' | 'recheck-failed'; message: string };
  resolution?: IntentResolution;
}

/**
 * The status as served at `now` (CONTRACT: `GET /execution-intents` says which are in flight):
 * `inFlight` always, `inFlightUntil` only while the lease holds.
 */
export function servedIntentStatus(status: IntentStatus, now: Date): IntentStatus {
  const { inFlightUntil, ...rest } = status;
  const inFlight = inFlightUntil !== undefined && Date.parse(inFlightUntil) > now.getTime();
  return { ...rest, inFlight, ...(inFlight ? { inFlightUntil } : {}) };
}

/** Internal: what is saved at RELEASED so the Trust Record can be rebuilt after a crash. Never returned. */
export interface ReleaseContext {
  transaction: BusinessTransaction;
  decision: PolicyDecision;
  policy: PolicyBinding;
  assessment: Assessment;
  override?: HeldApproval;
  execution: Omit<ExecutionEntry, 'previousChainHash' | 'chainHash' | 'chainSignature'>;
}

/** The human approval a held transaction was released with: who, when, and the signed approval itself. */
export interface HeldApproval {
  approverId: string;
  approvedAt: string;
  /** The signed approval (`{ payload, signature }`), the approver's own evidence. */
  approval: unknown;
}

export type SignedTrustRecord = Signed<ExecutionTrustRecord>;
export type SignedRefusal = Signed<RefusalRecord>;
export type SignedIntent = Signed<ExecutionIntent>;

/** What a chain link is computed from: the head before it. */
export interface ChainHead {
  chainHash: string | null;
}
