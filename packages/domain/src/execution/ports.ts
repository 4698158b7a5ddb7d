import type {
  ChainHead,
  IntentResolution,
  IntentState,
  IntentStatus,
  ReleaseContext,
  SignedIntent,
  SignedRefusal,
  SignedTrustRecord,
} from './records.js';

/** A row of the transaction index: claims the businessTransactionId (spec 4.3.1). */
export interface TransactionClaim {
  businessTransactionId: string;
  callerId: string;
  /** What became of it: refused by policy, recorded without release, released (EXECUTING until its Trust Record is stored, then EXECUTED). */
  outcome: 'REFUSED' | 'RECORDED' | 'EXECUTING' | 'EXECUTED';
  createdAt: string;
}

/** Raised by a store when the businessTransactionId is already claimed. */
export class DuplicateTransactionError extends Error {
  override readonly name = 'DuplicateTransactionError';
  constructor(readonly businessTransactionId: string) {
    super(`Business Transaction '${businessTransactionId}' already exists.`);
  }
}

export interface Page<T> {
  items: T[];
  page: number;
  pageSize: number;
  total: number;
}

/**
 * Storage of the execution pipeline. Each method is one atomic step: a claim of the id and the
 * record it stores commit together or not at all, so of concurrent requests with one id exactly
 * one wins and a refused body leaves nothing behind.
 */
export interface ExecutionStore {
  /** Cheap early check; the claim in the atomic methods is the real guarantee. */
  isClaimed(businessTransactionId: string): Promise<boolean>;

  /** Claim + signed refusal. Throws DuplicateTransactionError. */
  storeRefusal(claim: TransactionClaim, refusal: SignedRefusal): Promise<void>;

  /** Claim + signed trust record without release (`POST /transactions`). Throws DuplicateTransactionError. */
  storeRecordedTransaction(claim: TransactionClaim, record: SignedTrustRecord): Promise<void>;

  /** Claim + signed intent in state PREPARED, durable on return. Throws DuplicateTransactionError. */
  prepareIntent(claim: TransactionClaim, intent: SignedIntent, at: string): Promise<void>;

  /** PREPARED -> RELEASED with the saved release context. */
  markReleased(businessTransactionId: string, context: ReleaseContext, at: string): Promise<void>;

  /** PREPARED|RELEASED -> ERRORED. */
  markErrored(businessTransactionId: string, error: NonNullable<IntentStatus['error']>, at: string): Promise<void>;

  /**
   * RELEASED -> FINALIZED: under the deployment's chain lock, hands the current chain head to
   * `build` (which links and signs the record) and stores the record, the new head and the state
   * in one transaction. Several processes on one PostgreSQL never fork the chain.
   * Returns undefined when the intent is not RELEASED (already finalized by someone else).
   */
  finalize(businessTransactionId: string, build: (head: ChainHead) => Promise<SignedTrustRecord>, at: string): Promise<SignedTrustRecord | undefined>;

  /** PREPARED|ERRORED -> RESOLVED; returns false when the intent is in another state. */
  resolve(businessTransactionId: string, resolution: IntentResolution, at: string): Promise<boolean>;

  getIntent(businessTransactionId: string): Promise<{ intent: SignedIntent; status: IntentStatus } | undefined>;
  /** Internal: the saved release context of a RELEASED intent. */
  getReleaseContext(businessTransactionId: string): Promise<ReleaseContext | undefined>;
  listIntents(states: IntentState[], limit: number): Promise<{ intent: SignedIntent; status: IntentStatus }[]>;

  getTrustRecord(businessTransactionId: string): Promise<SignedTrustRecord | undefined>;
  getRefusal(businessTransactionId: string): Promise<SignedRefusal | undefined>;
  getClaim(businessTransactionId: string): Promise<TransactionClaim | undefined>;
  listTrustRecords(page: number, pageSize: number): Promise<Page<SignedTrustRecord>>;
  listClaims(page: number, pageSize: number): Promise<Page<TransactionClaim>>;
}
