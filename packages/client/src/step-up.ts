import type { components } from './generated/transaction.js';
import { signCanonical, type Ed25519PrivateKey } from './keys.js';
import { randomNonce } from './random.js';

/** The body of every `…/approve` and `…/reject` of a pending change (CONTRACT "Governance"). */
export type StepUpEnvelope = components['schemas']['StepUpEnvelope'];

/** The service refuses an envelope that expires more than 15 minutes ahead of its clock. */
export const STEP_UP_MAX_TTL_SECONDS = 900;
export const STEP_UP_DEFAULT_TTL_SECONDS = 300;

export interface StepUpOptions {
  /** The checker's own step-up private key (never the bearer key). */
  key: Ed25519PrivateKey;
  /** The id of the pending change, of any kind: a policy version, an external connector, an authority grant, a signal source. */
  changeId: string;
  action: 'approve' | 'reject';
  /** Required to reject: recorded as the rejection reason. */
  reason?: string;
  /** The checker's caller id; when given, the service requires it to be the caller presenting the envelope. */
  callerId?: string;
  /** Seconds until the envelope expires: 1 to 900, default 300. */
  ttlSeconds?: number;
  /** The time it is signed at; default now. */
  now?: Date;
}

/**
 * A step-up envelope, exactly what `ets step-up sign` prints: the payload (change, action, expiry,
 * a single-use nonce of 32 random bytes, optional caller and reason) and a base64 Ed25519 signature
 * over its RFC 8785 canonical JSON. Post it with the checker's own API key:
 * `client.POST('/policies/pending-changes/{id}/approve', { params: { path: { id } }, body: envelope })`.
 */
export async function signStepUp(options: StepUpOptions): Promise<StepUpEnvelope> {
  const { changeId, action, reason, callerId } = options;
  if (typeof changeId !== 'string' || changeId.trim() === '') throw new TypeError('changeId is required: the id of the pending change');
  if (action !== 'approve' && action !== 'reject') throw new TypeError('action must be approve or reject');
  if (action === 'reject' && (reason === undefined || reason.trim() === '')) throw new TypeError('a rejection needs a reason: it is recorded as the rejection reason');
  const ttl = options.ttlSeconds ?? STEP_UP_DEFAULT_TTL_SECONDS;
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > STEP_UP_MAX_TTL_SECONDS) throw new RangeError(`ttlSeconds must be a whole number from 1 to ${STEP_UP_MAX_TTL_SECONDS}`);
  const payload: StepUpEnvelope['payload'] = {
    pendingPolicyChangeId: changeId,
    action,
    expiresAt: expiresAfter(options.now, ttl),
    nonce: randomNonce(),
    ...(callerId !== undefined ? { callerId } : {}),
    ...(reason !== undefined ? { reason } : {}),
  };
  return { payload, signature: await signCanonical(options.key, payload) };
}

/** RFC 3339 time `ttlSeconds` after `now`. */
export function expiresAfter(now: Date = new Date(), ttlSeconds: number): string {
  return new Date(now.getTime() + ttlSeconds * 1000).toISOString();
}
