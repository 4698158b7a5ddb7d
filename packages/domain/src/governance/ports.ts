import type { ChangeStatus, PendingChange } from './change.js';

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
 * database) can apply a change twice or accept a nonce twice:
 * (a) `decide`: consume the nonce and compare-and-set the status, in one transaction;
 * (b) the kind's applier runs (idempotently), then `markApplied`.
 */
export interface PendingChangeStore {
  /**
   * Stores a new change. Returns false, storing nothing, when its kind already has a
   * PENDING_APPROVAL change with the same `subject` (checked atomically by the store).
   */
  create(change: PendingChange): Promise<boolean>;
  get(id: string): Promise<PendingChange | undefined>;
  /** Oldest first. */
  list(query: { kind: string; status?: ChangeStatus; subject?: string }): Promise<PendingChange[]>;
  /**
   * Atomically: record the nonce as used (it stays used whatever follows), and only if it was
   * fresh, set the decision on the change if, and only if, it is still PENDING_APPROVAL
   * (a conditional update whose affected row count says who won).
   */
  decide(request: DecisionRequest): Promise<DecisionResult>;
  /** Step (b) done: sets `appliedAt` unless already set (idempotent). */
  markApplied(id: string, at: string): Promise<void>;
}

/** Makes an approved change of one kind take effect. */
export interface ChangeApplier<P> {
  /**
   * Must be idempotent: after a partial failure (applied, but not marked applied) it runs again
   * for the same change, and must then succeed without applying twice.
   */
  apply(change: PendingChange<P>): Promise<void>;
}
