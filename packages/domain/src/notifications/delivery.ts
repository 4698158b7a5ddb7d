/**
 * Delivering the outbox's notices (see pending-items.ts): a worker claims the notices that are due,
 * signs each as Standard Webhooks says (`webhook-id`, `webhook-timestamp`, `webhook-signature`) at
 * the moment it is sent, posts it through the Egress port (every endpoint rule of spec 2.5 holds),
 * and records what became of it. A 2xx answer is a delivery; anything else (another status, nothing
 * sent, an unknown outcome) is retried with backoff, and given up after the last delay.
 *
 * Once per notice across instances: a claim is a lease taken atomically by one worker (of several
 * processes on one PostgreSQL exactly one gets each notice). A worker that stops between sending
 * and recording leaves its lease to run out, and the notice is sent again: at least once, with the
 * same `webhook-id`, which is what Standard Webhooks receivers deduplicate by.
 */
import type { Egress } from '../egress/ports.js';
import { jsonBodyText } from '../egress/ports.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { OutboundNotice } from './pending-items.js';

/** Storage of the outbox (written by the item stores in their commits; read and updated here). */
export interface NoticeOutbox {
  /**
   * Takes up to `limit` notices due at `now` (next attempt at or before it) that no lease holds
   * (none, or ended before `now`), oldest due first, leasing them to `token` until `leaseUntil`.
   * Atomic: of concurrent claims (any process) each notice goes to one.
   */
  claimDue(request: { now: string; leaseUntil: string; token: string; limit: number }): Promise<ClaimedNotice[]>;
  /** Delivered: the notice is removed, if `token` still holds it. */
  delivered(deliveryId: string, token: string): Promise<void>;
  /**
   * Not delivered: `attempts` made so far, the next attempt at `nextAttemptAt` (null: given up, kept
   * for the operator with its last error), the lease dropped; only if `token` still holds it.
   */
  failed(deliveryId: string, token: string, outcome: { attempts: number; nextAttemptAt: string | null; error: string }): Promise<void>;
}

export interface ClaimedNotice extends OutboundNotice {
  /** Attempts made before this one. */
  attempts: number;
}

/** Standard Webhooks signing (the adapter holds the secret). */
export interface WebhookSigner {
  /** `v1,<base64 HMAC-SHA256 of "<messageId>.<timestamp>.<body>">`. */
  sign(messageId: string, timestamp: number, body: string): string;
}

/**
 * The wait after each failed attempt: the first retry 5 s after the first failure, the last about
 * a day after the first attempt; after the last delay's attempt fails, the notice is given up.
 */
export const NOTICE_RETRY_DELAYS_MS: readonly number[] = [5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000, 28_800_000];
export const NOTICE_TIMEOUT_MS = 10_000;
/** Longer than a batch can take (its deliveries run side by side, each within the timeout). */
export const NOTICE_LEASE_MS = 60_000;
export const NOTICE_BATCH = 20;

export type DeliveryReport =
  | { deliveryId: string; messageId: string; host: string; outcome: 'delivered'; attempts: number }
  | { deliveryId: string; messageId: string; host: string; outcome: 'retry' | 'gave-up'; attempts: number; error: string; nextAttemptAt: string | null };

export interface NoticeDeliveryDeps {
  outbox: NoticeOutbox;
  egress: Pick<Egress, 'postJson'>;
  signer: WebhookSigner;
  clock: Clock;
  ids: IdGenerator;
  timeoutMs?: number;
  retryDelaysMs?: readonly number[];
}

/** The endpoint's host, for reports and logs: a webhook URL's path may itself be a secret. */
const hostOf = (endpoint: string): string => {
  try {
    return new URL(endpoint).host;
  } catch {
    return '(not a URL)';
  }
};

export class NoticeDelivery {
  private readonly timeoutMs: number;
  private readonly delays: readonly number[];

  constructor(private readonly d: NoticeDeliveryDeps) {
    this.timeoutMs = d.timeoutMs ?? NOTICE_TIMEOUT_MS;
    this.delays = d.retryDelaysMs ?? NOTICE_RETRY_DELAYS_MS;
  }

  /** Claims the notices due now and tries each once, side by side. */
  async deliverDue(limit = NOTICE_BATCH): Promise<DeliveryReport[]> {
    const now = this.d.clock.now();
    const token = this.d.ids.uuid();
    const due = await this.d.outbox.claimDue({ now: now.toISOString(), leaseUntil: new Date(now.getTime() + NOTICE_LEASE_MS).toISOString(), token, limit });
    return Promise.all(due.map((n) => this.deliver(n, token)));
  }

  private async deliver(n: ClaimedNotice, token: string): Promise<DeliveryReport> {
    const base = { deliveryId: n.deliveryId, messageId: n.messageId, host: hostOf(n.endpoint) };
    // Signed when sent: receivers refuse a timestamp far from their clock (a replay window).
    const timestamp = Math.floor(this.d.clock.now().getTime() / 1000);
    const headers = {
      'webhook-id': n.messageId,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': this.d.signer.sign(n.messageId, timestamp, jsonBodyText(n.body)),
    };
    const r = await this.d.egress.postJson({ endpoint: n.endpoint, body: n.body, headers, timeoutMs: this.timeoutMs });
    const attempts = n.attempts + 1;
    if (r.outcome === 'answered' && r.status >= 200 && r.status < 300) {
      await this.d.outbox.delivered(n.deliveryId, token);
      return { ...base, outcome: 'delivered', attempts };
    }
    const error = r.outcome === 'answered' ? `answered ${r.status}` : `${r.outcome} (${r.reason}): ${r.message}`;
    const delay = this.delays[attempts - 1];
    const nextAttemptAt = delay === undefined ? null : new Date(this.d.clock.now().getTime() + delay).toISOString();
    await this.d.outbox.failed(n.deliveryId, token, { attempts, nextAttemptAt, error });
    return { ...base, outcome: nextAttemptAt === null ? 'gave-up' : 'retry', attempts, error, nextAttemptAt };
  }
}
