import type { AuthEvent } from '../ports/audit.js';
import type { OutboundNotice } from '../notifications/pending-items.js';
import type { DecidedTransaction } from './decided.js';
import type { HeldRefusal, HeldStatus, HeldTransaction } from './held.js';
import type { HeldApproval } from './records.js';
import type { DecidedInput } from '../policy/impact.js';
import type { Signed } from '../ports/crypto.js';
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
  /**
   * What became of it: refused, recorded without release, held for a human (HELD until approved or
   * refused), released (EXECUTING until its Trust Record is stored, then EXECUTED).
   */
  outcome: 'REFUSED' | 'RECORDED' | 'HELD' | 'EXECUTING' | 'EXECUTED';
  createdAt: string;
  /**
   * The policy's decision and what it was decided on, when the policy's evaluation decided (not for
   * refusals before it): written with the claim, read back only by the impact preview.
   */
  decided?: DecidedInput;
}

/** Raised by a store when the businessTransactionId is already claimed. */
export class DuplicateTransactionError extends Error {
  override readonly name = 'DuplicateTransactionError';
  constructor(readonly businessTransactionId: string) {
    super(`Business Transaction '${businessTransactionId}' already exists.`);
  }
}

/**
 * Raised by markReleased, markErrored and completeRelease when the intent is missing or not in a
 * state the transition starts from: nothing moved (a stale actor never moves an intent backwards).
 */
export class IntentStateConflictError extends Error {
  override readonly name = 'IntentStateConflictError';
  constructor(
    readonly businessTransactionId: string,
    readonly transition: 'RELEASED' | 'ERRORED',
  ) {
    super(`Execution intent '${businessTransactionId}' cannot move to ${transition} from its current state.`);
  }
}

import type { Page } from '../ports/page.js';
export type { Page };

/**
 * Whose transactions, records, refusals, intents, Verifications and Receipts a read returns
 * (CONTRACT "Requests, reads and lists"): every caller's, or only `callerId`'s. Every read of the
 * execution pipeline's storage takes one, so a read can never forget to be scoped; a record of
 * another caller is simply not found.
 */
export type ReadScope = { readonly every: true } | { readonly callerId: string };
export const EVERY_CALLER: ReadScope = Object.freeze({ every: true });

/** A store's check of a page request (pages and their sizes are whole numbers from 1): a RangeError otherwise. */
export function checkPage(page: number, pageSize: number): void {
  if (!Number.isInteger(page) || page < 1 || !Number.isInteger(pageSize) || pageSize < 1) {
    throw new RangeError('page and pageSize must be whole numbers from 1');
  }
}

/** The callerId a scope is limited to, or undefined when it reads every caller's records. */
export const scopedCaller = (scope: ReadScope): string | undefined => ('callerId' in scope ? scope.callerId : undefined);

/**
 * Signed records as the store keeps them: the JSON text that was signed, never parsed or
 * re-serialised. Read lazily, a few at a time, in the page's order, so that serving a page costs
 * a few records of memory however large the records are.
 */
export interface TextPage {
  items: AsyncIterable<string>;
  page: number;
  pageSize: number;
  total: number;
}

/** What became of a resolution (PREPARED|ERRORED -> RESOLVED). */
export type ResolveOutcome =
  | { outcome: 'resolved' }
  | { outcome: 'not-found' }
  | { outcome: 'not-resolvable'; state: IntentState }
  /** The request that prepared the intent may still be running: it is resolvable after `until`. */
  | { outcome: 'in-flight'; until: string };

/**
 * How long a stored intent counts as in flight: its request may still release the action until it
 * records the outcome (RELEASED or ERRORED). It must outlast the longest a request can take from
 * storing its intent to recording that outcome: an external connector's timeout (at most 30 s) or,
 * in sandbox mode, a pause before release and a connector delay (at most 60 s each), plus storage.
 * Five minutes is twice that and more; after it, an intent left PREPARED by a process that died
 * becomes resolvable.
 */
export const INTENT_IN_FLIGHT_LEASE_MS = 5 * 60_000;

/**
 * Storage of the execution pipeline. Each method is one atomic step: a claim of the id and the
 * record it stores commit together or not at all, so of concurrent requests with one id exactly
 * one wins and a refused body leaves nothing behind.
 */
export interface ExecutionStore {
  /** Cheap early check; the claim in the atomic methods is the real guarantee. */
  isClaimed(businessTransactionId: string): Promise<boolean>;

  /**
   * Claim + signed refusal. Throws DuplicateTransactionError. `audit`, when given, is the request's
   * signed authentication event, stored in the same commit (and not at all when the claim fails).
   */
  storeRefusal(claim: TransactionClaim, refusal: SignedRefusal, audit?: Signed<AuthEvent>): Promise<void>;

  /** Claim + signed trust record without release (`POST /transactions`). Throws DuplicateTransactionError. `audit` as for storeRefusal. */
  storeRecordedTransaction(claim: TransactionClaim, record: SignedTrustRecord, audit?: Signed<AuthEvent>): Promise<void>;

  /**
   * Claim + signed intent in state PREPARED, durable on return, in flight (not resolvable) until
   * `at` + the store's lease (INTENT_IN_FLIGHT_LEASE_MS) unless its outcome is recorded before.
   * Throws DuplicateTransactionError. `audit` as for storeRefusal.
   */
  prepareIntent(claim: TransactionClaim, intent: SignedIntent, at: string, audit?: Signed<AuthEvent>): Promise<void>;

  /** PREPARED -> RELEASED with the saved release context; the intent is no longer in flight. */
  markReleased(businessTransactionId: string, context: ReleaseContext, at: string): Promise<void>;

  /**
   * The release happened, in ONE durable commit: PREPARED -> FINALIZED with the Trust Record that
   * `build` makes from the chain head (as `finalize` does), the claim EXECUTED. When `build` fails
   * the same commit stores RELEASED with `context` instead, so that the record is completed at the
   * next start. Throws when the intent is not PREPARED, or when nothing could be stored.
   */
  completeRelease(
    businessTransactionId: string,
    context: ReleaseContext,
    build: (head: ChainHead) => Promise<SignedTrustRecord>,
    at: string,
  ): Promise<CompletedRelease>;

  /** PREPARED|RELEASED -> ERRORED; the intent is no longer in flight. */
  markErrored(businessTransactionId: string, error: NonNullable<IntentStatus['error']>, at: string): Promise<void>;

  /**
   * RELEASED -> FINALIZED: under the deployment's chain lock, hands the current chain head to
   * `build` (which links and signs the record) and stores the record, the new head and the state
   * in one transaction. Several processes on one PostgreSQL never fork the chain.
   * Returns undefined when the intent is not RELEASED (already finalized by someone else).
   */
  finalize(businessTransactionId: string, build: (head: ChainHead) => Promise<SignedTrustRecord>, at: string): Promise<SignedTrustRecord | undefined>;

  /**
   * PREPARED|ERRORED -> RESOLVED, as one atomic step on the intent's row: refused while the
   * intent is in flight (its request may still release the action), or in another state. The
   * store fills in `previousState` from the state it moved.
   */
  resolve(businessTransactionId: string, resolution: Omit<IntentResolution, 'previousState'>, at: string): Promise<ResolveOutcome>;

  /**
   * Claim (HELD) + the held decision's Trust Record without executions + the held transaction,
   * PENDING until `held.expiresAt`, + the request's authentication event and the notices that
   * announce it, in one commit. Throws DuplicateTransactionError.
   */
  storeHeld(
    claim: TransactionClaim,
    record: SignedTrustRecord,
    held: { decided: DecidedTransaction; expiresAt: string },
    audit?: Signed<AuthEvent>,
    notices?: readonly OutboundNotice[],
  ): Promise<void>;

  /**
   * A human approved it: PENDING (and not expired at `at`) -> APPROVED, and the signed intent stored
   * PREPARED and in flight (the claim HELD -> EXECUTING), in ONE commit, so that of concurrent
   * approvals, on any instance, exactly one releases it. The held decision's Trust Record moves from
   * the records to the held transaction (the release's Trust Record takes its place; its log leaf
   * still finds it). False when it is no longer PENDING or has expired: nothing changed.
   */
  approveHeld(businessTransactionId: string, approval: HeldApproval, intent: SignedIntent, at: string): Promise<boolean>;

  /**
   * Rejected by a human or expired: PENDING -> REJECTED | EXPIRED with the signed refusal (the claim
   * HELD -> REFUSED), in one commit; the held decision's Trust Record moves to the held transaction.
   * A rejection consumes its step-up nonce in the same commit (used before: `nonce-reused`, nothing
   * changed) and needs the transaction unexpired at `decidedAt`; an expiry needs it expired.
   */
  refuseHeld(businessTransactionId: string, refusal: HeldRefusal, record: SignedRefusal): Promise<'refused' | 'not-pending' | 'nonce-reused'>;

  getHeld(businessTransactionId: string, scope: ReadScope): Promise<HeldTransaction | undefined>;
  /** Newest first; every status when `status` is undefined; pages start at 1. */
  listHeld(status: HeldStatus | undefined, scope: ReadScope, page: number, pageSize: number): Promise<Page<HeldTransaction>>;
  /** The ids of PENDING held transactions whose `expiresAt` is at or before `at`, oldest expiry first. */
  listExpiredHeld(at: string, limit: number): Promise<string[]>;

  getIntent(businessTransactionId: string, scope: ReadScope): Promise<StoredIntent | undefined>;
  /** Internal: the saved release context of a RELEASED intent. */
  getReleaseContext(businessTransactionId: string): Promise<ReleaseContext | undefined>;
  /** Oldest first (reconciliation works through the backlog in order); pages start at 1. */
  listIntents(states: readonly IntentState[], scope: ReadScope, page: number, pageSize: number): Promise<Page<StoredIntent>>;

  getTrustRecord(businessTransactionId: string, scope: ReadScope): Promise<SignedTrustRecord | undefined>;
  /** Whether the record exists (in the scope), without reading it: records can be large. */
  hasTrustRecord(businessTransactionId: string, scope: ReadScope): Promise<boolean>;
  /** The record's stored JSON text (what was signed), for serving it without parsing it. */
  getTrustRecordText(businessTransactionId: string, scope: ReadScope): Promise<string | undefined>;
  getRefusal(businessTransactionId: string, scope: ReadScope): Promise<SignedRefusal | undefined>;
  getClaim(businessTransactionId: string, scope: ReadScope): Promise<TransactionClaim | undefined>;
  /**
   * In chain order, oldest first: the records with executions by their position in the
   * deployment's chain (each links to the one before), then the records without executions
   * (recorded without release, pending override) by creation time. Pages start at 1.
   */
  listTrustRecordTexts(scope: ReadScope, page: number, pageSize: number): Promise<TextPage>;
  /** Newest first; pages start at 1. */
  listClaims(scope: ReadScope, page: number, pageSize: number): Promise<Page<TransactionClaim>>;
}

/** What `completeRelease` stored: the Trust Record, or (its build failed) the release context. */
export type CompletedRelease = { record: SignedTrustRecord } | { record: undefined; buildError: unknown };

export interface StoredIntent {
  intent: SignedIntent;
  status: IntentStatus;
}
