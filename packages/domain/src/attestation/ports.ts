import type {
  ApiCall,
  ConfirmationBinding,
  ConfirmationProofEntry,
  DecisionDetail,
  DecisionRow,
  ExecutionState,
  SecurityEvent,
  SignedAttestation,
  SignedOverrideResolution,
  SignedRuntimeManifest,
  VerificationEntry,
} from './records.js';

/** A decision to store with its attestation (in the state it was attested in); `requestId` is the replay guard. */
export type DecisionEntry = Omit<DecisionRow, 'execution_state'> & { execution_state: ExecutionState; attestation: SignedAttestation };

/**
 * What `recordDecision` did: stored the decision, or nothing because its request id was used
 * before. A replay is an answer of the store like an override's outcome, not a failure, so the
 * fail-closed wrapper of audit writes (`audited`) never takes it for an unavailable audit.
 */
export type DecisionOutcome = 'recorded' | 'replayed';

/** Filters of `GET /audit/decisions`; `callerId` restricts to one caller's decisions. */
export interface DecisionQuery {
  limit: number;
  offset: number;
  policyId?: string;
  action?: 'approve' | 'reject';
  /** Inclusive bounds on `createdAt` (ISO 8601, as `Date.toISOString` writes it). */
  from?: string;
  to?: string;
  callerId?: string;
}

export interface SecurityEventQuery {
  limit: number;
  from?: string;
  to?: string;
  callerId?: string;
}

/** Who won the compare-and-set of an override. */
export type OverrideOutcome = 'resolved' | 'already-resolved' | 'not-pending';

export interface AuditCounts {
  totalDecisions: number;
  decisionsSince: number;
  totalVerifications: number;
  validVerifications: number;
  totalSecurityEvents: number;
  totalApiCalls: number;
}

/**
 * Storage of the attestation profile. Each method is one atomic step: a decision and its replay
 * guard commit together or not at all; an override is a compare-and-set on the decision's state,
 * so of simultaneous overrides exactly one resolves it.
 */
export interface AttestationStore {
  /** Cheap early check; `recordDecision` is the real guarantee. */
  isReplay(requestId: string): Promise<boolean>;
  /** Replay guard + decision, durable on return: `recorded`; `replayed` (nothing stored) when the request id was used before. */
  recordDecision(entry: DecisionEntry): Promise<DecisionOutcome>;
  getDecision(executionId: string): Promise<DecisionDetail | undefined>;
  /** Newest first. */
  listDecisions(query: DecisionQuery): Promise<DecisionRow[]>;
  /**
   * Moves the decision from `pending_override` to `resolution.status` and stores the resolution,
   * only if it is still pending: `resolved` for the one call that did, `already-resolved` when it
   * had been resolved before, `not-pending` when there is no such decision or it never needed one.
   */
  resolveOverride(resolution: SignedOverrideResolution): Promise<OverrideOutcome>;
  /** Binds the action to the execution unless one is bound already; returns the binding that holds. */
  bindConfirmation(binding: ConfirmationBinding): Promise<ConfirmationBinding>;
  /** Keeps a signed confirmation proof (a leaf of the transparency log), durable on return. */
  recordConfirmationProof(entry: ConfirmationProofEntry): Promise<void>;
  recordVerification(entry: VerificationEntry): Promise<void>;
  recordSecurityEvent(event: SecurityEvent): Promise<void>;
  /** Newest first. */
  listSecurityEvents(query: SecurityEventQuery): Promise<SecurityEvent[]>;
  /** Cheap: queued and written in batches, never awaited by the request it describes. */
  recordApiCall(call: ApiCall): void;
  /** Counts (queued API calls are written first); `since` bounds `decisionsSince`. */
  counts(query: { since: string; callerId?: string }): Promise<AuditCounts>;
  /** Every runtime manifest this deployment signed, so older attestations keep verifying. */
  saveManifest(manifest: SignedRuntimeManifest): Promise<void>;
  findManifest(manifestHash: string): Promise<SignedRuntimeManifest | undefined>;
  /** The manifests (at most a few dozen, newest first) of starts that ran code with this runtimeHash. */
  manifestsWithRuntimeHash(runtimeHash: string): Promise<SignedRuntimeManifest[]>;
  /** True when the attestation tables answer. */
  isAvailable(): Promise<boolean>;
}

/**
 * Signs a statement as a compact JWS (RFC 7515, `alg: EdDSA`, `kid` in the JWKS), so that anyone
 * with the published keys can check it with any JOSE library.
 */
export interface ProofSigner {
  signProof(claims: Record<string, unknown>, type: string): Promise<string>;
}
