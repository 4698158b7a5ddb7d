/**
 * Held transactions (CONTRACT "Held transactions"): a `requires_override` decision that came
 * without an approval waits on the server for a human, who approves it (it is then released, once,
 * through the same stages as any execution) or rejects it; one nobody decides in time is refused by
 * expiry. Silence is never consent.
 */
import type { DecidedTransaction } from './decided.js';
export type { HeldApproval } from './records.js';

export const HELD_STATUSES = ['PENDING', 'APPROVED', 'REJECTED', 'EXPIRED'] as const;
export type HeldStatus = (typeof HELD_STATUSES)[number];

/** The kind of pending item a held transaction is (notifications, the console). */
export const HELD_TRANSACTION_KIND = 'held-transaction';

/** How long a held transaction waits for a human by default (SVC_OVERRIDE_TTL_SECONDS). */
export const OVERRIDE_TTL_SECONDS_DEFAULT = 86_400;

/** A held transaction as stored: what was decided, and what a human decided about it. */
export interface HeldTransaction {
  decided: DecidedTransaction;
  status: HeldStatus;
  createdAt: string;
  expiresAt: string;
  decidedBy?: string;
  decidedAt?: string;
  /** The rejection's reason, or why it expired. */
  reason?: string;
}


/** How a held transaction was refused: by a human with a step-up envelope, or by its expiry. */
export type HeldRefusal =
  | { status: 'REJECTED'; decidedBy: string; decidedAt: string; reason: string; nonce: string }
  | { status: 'EXPIRED'; decidedAt: string; reason: string };
