import type { Page } from '../ports/page.js';
import type { GovernanceEvent } from '../ports/audit.js';
import type { Signed } from '../ports/crypto.js';
import type { ChangeStatus, PendingChange } from './change.js';
import type { OutboundNotice } from '../notifications/pending-items.js';

/** Step (a) of a decision: one atomic call (see PendingChangeStore.decide). */
export interface DecisionRequest {
  id: string;
  kind: string;
  decision: Exclude<ChangeStatus, 'PENDING_APPROVAL'>;
  decider: string;
  decidedAt: string;
  rejectionReason?: string;
  /** The step-up envelope's nonce: single use across every kind of change. */
  nonce: string;
  /** For an approval: the deciding request takes the right to apply (step b) with the decision. */
  applyClaim?: ApplyClaim;
  /** The signed governance event of the decision: stored with it, in its transaction, if and only if this call decides. */
  event: Signed<GovernanceEvent>;
}

/** Completing an approval left unapplied (see PendingChangeStore.claimApply). */
export interface ApplyClaimRequest {
  id: string;
  kind: string;
  decider: string;
  claim: ApplyClaim;
  now: string;
  /** The signed governance event of the completion: stored in the claim's transaction, if and only if the claim is taken. */
  event: Signed<GovernanceEvent>;
}

/**
 * The right to apply an approved change (step b). One request holds it at a time: the one that
 * decided, or the approver's retry once the holder gave it back after a failure or its lease ran
 * out (the holder's process stopped).
 */
export interface ApplyClaim {
  /** Unique per request. */
  token: string;
  /** ISO 8601 (UTC, `toISOString`): the lease ends then. */
  until: string;
}

export interface DecisionResult {
  /** False when the nonce had been used before; then nothing was changed. */
  nonceFresh: boolean;
  /** True when this call moved the change out of PENDING_APPROVAL (it won the compare-and-set). */
  decided: boolean;
  /** The change as stored after the call; undefined when there is no such change of that kind. */
  change?: PendingChange;
}

/**
 * Pending changes of every kind, and the durable ledger of used step-up nonces. The two steps of a
 * decision are single calls, so that no interleaving of requests (or of processes sharing a
 * database) can apply a change twice or accept a nonce twice. A proposal, a decision and the
 * completion of an approval each come with their signed governance event, which the store keeps
 * (a leaf of the transparency log too) in the same transaction, only when the call changes
 * something: the event row exists if and only if what it records does.
 * (a) `decide`: consume the nonce and compare-and-set the status, in one transaction, taking the
 *     apply claim for an approval;
 * (b) the claimant runs the kind's applier (idempotently), then `markApplied`. Completing an
 *     approval left unapplied starts with `claimApply`, which only one request can win.
 */
export interface PendingChangeStore {
  /**
   * Stores a new change, its `propose` event and the notices announcing it (the outbox, see
   * notifications/pending-items.ts), in one transaction. Returns false, storing none of them, when
   * its kind already has a PENDING_APPROVAL change with the same `subject` (checked atomically by
   * the store).
   */
  create(change: PendingChange, event: Signed<GovernanceEvent>, notices?: readonly OutboundNotice[]): Promise<boolean>;
  get(id: string): Promise<PendingChange | undefined>;
  /** Oldest first. */
  list(query: { kind: string; status?: ChangeStatus; subject?: string }): Promise<PendingChange[]>;
  /** One page of `list` (pages from 1), and how many there are in all. */
  page(query: { kind: string; status?: ChangeStatus }, page: number, pageSize: number): Promise<Page<PendingChange>>;
  /**
   * Atomically: record the nonce as used (it stays used whatever follows), and only if it was
   * fresh, set the decision on the change if, and only if, it is still PENDING_APPROVAL
   * (a conditional update whose affected row count says who won), storing `request.event` with it.
   * The winner of an approval holds `request.applyClaim`.
   */
  decide(request: DecisionRequest): Promise<DecisionResult>;
  /**
   * Atomically takes the apply claim of an APPROVED change of `kind` decided by `decider` and not
   * yet applied, when no request holds it: never taken, given back (`releaseApply`), or its lease
   * ended before `now`, storing `request.event` with it. Of concurrent calls (any process) at most
   * one returns true.
   */
  claimApply(request: ApplyClaimRequest): Promise<boolean>;
  /** Gives the claim back after a failed apply, if `token` still holds it. */
  releaseApply(id: string, token: string): Promise<void>;
  /**
   * Step (b) done: sets `appliedAt` and drops the claim, if `token` still holds it and the change is
   * not applied yet. False when another request took the claim over (this one's lease ran out).
   */
  markApplied(id: string, at: string, token: string): Promise<boolean>;
}

/** Makes an approved change of one kind take effect. */
export interface ChangeApplier<P> {
  /**
   * Must be idempotent: after a partial failure (applied, but not marked applied) it runs again
   * for the same change, and must then succeed without applying twice.
   */
  apply(change: PendingChange<P>): Promise<void>;
}
