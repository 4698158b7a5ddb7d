/**
 * Maker-checker (spec 1.6, 2.5, 3): one human proposes a change, a different human approves or
 * rejects it with a step-up signature. One module serves every kind of governed change (policies
 * now; external connectors, authority grants and business signal sources later): a change is a
 * `kind`, an opaque `payload` and a status, and each kind supplies the applier that makes an
 * approved payload take effect.
 */

export const CHANGE_STATUSES = ['PENDING_APPROVAL', 'APPROVED', 'REJECTED'] as const;
export type ChangeStatus = (typeof CHANGE_STATUSES)[number];

export type DecisionAction = 'approve' | 'reject';

/** The proposer of changes the product makes itself (shipped policies). Never a key's caller. */
export const SYSTEM_PROPOSER = 'system';

/** Longest proposal reason and rejection reason, in characters (spec 8). */
export const REASON_MAX_LENGTH = 2000;

export interface PendingChange<P = unknown> {
  /** UUID; the step-up envelope names it in `payload.pendingPolicyChangeId`. */
  id: string;
  /** What kind of change this is (`policy`, …): selects the applier. */
  kind: string;
  /**
   * What the change is about, when a kind allows at most one pending change per subject (a
   * policy name and version). Undefined: no such limit.
   */
  subject?: string;
  payload: P;
  status: ChangeStatus;
  /** Caller id of the proposer: a human key, or `system`. */
  proposer: string;
  /**
   * The proposer's step-up key when they proposed (StepUpSignatureVerifier.publicKeyOf), if they
   * had one: a checker holding the same key is the proposer under another caller id.
   */
  proposerStepUpKey?: string;
  reason?: string;
  createdAt: string;
  /** Who approved or rejected; never the proposer. */
  decider?: string;
  decidedAt?: string;
  /** Present when REJECTED. */
  rejectionReason?: string;
  /**
   * When the approved change took effect. An APPROVED change without it was decided but not
   * (yet) applied: a retry by the same approver completes it.
   */
  appliedAt?: string;
}

export const isChangeStatus = (s: unknown): s is ChangeStatus =>
  typeof s === 'string' && (CHANGE_STATUSES as readonly string[]).includes(s);

/** Length in characters (code points), as limits on human text are stated. */
export const charLength = (s: string): number => {
  let n = 0;
  for (const _ of s) n++;
  return n;
};
