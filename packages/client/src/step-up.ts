import type { components } from './generated/transaction.js';
import { signCanonical, type Ed25519PrivateKey } from './keys.js';
import { randomNonce } from './random.js';

/** The body of every `…/approve` and `…/reject` of a pending change (CONTRACT "Governance"). */
export type StepUpEnvelope = components['schemas']['StepUpEnvelope'];

/** The service refuses an envelope that expires more than 15 minutes ahead of its clock. */
export const STEP_UP_MAX_TTL_SECONDS = 900;
export const STEP_UP_DEFAULT_TTL_SECONDS = 300;

/**
 * What a step-up envelope signs (CONTRACT "Governance"; "Held transactions" for a held
 * transaction's rejection, which names `businessTransactionId` instead of `pendingPolicyChangeId`).
 */
export interface StepUpPayload {
  pendingPolicyChangeId?: string;
  businessTransactionId?: string;
  action: 'approve' | 'reject';
  expiresAt: string;
  nonce: string;
  callerId?: string;
  reason?: string;
}

export interface StepUpPayloadOptions {
  /** The id of the pending change, of any kind: a policy version, an external connector, an authority grant, a signal source, an MCP server. */
  changeId?: string;
  /** Instead of `changeId`: the held transaction (`POST /overrides/{id}/reject`). */
  businessTransactionId?: string;
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

export interface StepUpOptions extends StepUpPayloadOptions {
  /** The checker's own step-up private key (never the bearer key). */
  key: Ed25519PrivateKey;
  changeId: string;
}

/**
 * The payload of a step-up envelope, not signed yet: a page shows it to the person before they
 * sign it (`signCanonical(key, payload)`). A single-use nonce of 32 random bytes, an expiry.
 */
export function stepUpPayload(options: StepUpPayloadOptions): StepUpPayload {
  const { changeId, businessTransactionId, action, reason, callerId } = options;
  const subject = changeId ?? businessTransactionId;
  if ((changeId === undefined) === (businessTransactionId === undefined) || typeof subject !== 'string' || subject.trim() === '') {
    throw new TypeError('changeId (a pending change) or businessTransactionId (a held transaction) is required, not both');
  }
  if (action !== 'approve' && action !== 'reject') throw new TypeError('action must be approve or reject');
  if (action === 'reject' && (reason === undefined || reason.trim() === '')) throw new TypeError('a rejection needs a reason: it is recorded as the rejection reason');
  const ttl = options.ttlSeconds ?? STEP_UP_DEFAULT_TTL_SECONDS;
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > STEP_UP_MAX_TTL_SECONDS) throw new RangeError(`ttlSeconds must be a whole number from 1 to ${STEP_UP_MAX_TTL_SECONDS}`);
  return {
    ...(changeId !== undefined ? { pendingPolicyChangeId: changeId } : { businessTransactionId: subject }),
    action,
    expiresAt: expiresAfter(options.now, ttl),
    nonce: randomNonce(),
    ...(callerId !== undefined ? { callerId } : {}),
    ...(reason !== undefined ? { reason } : {}),
  };
}

/**
 * A step-up envelope, exactly what `ets step-up sign` prints: the payload (change, action, expiry,
 * a single-use nonce of 32 random bytes, optional caller and reason) and a base64 Ed25519 signature
 * over its RFC 8785 canonical JSON. Post it with the checker's own API key:
 * `client.POST('/policies/pending-changes/{id}/approve', { params: { path: { id } }, body: envelope })`.
 */
export async function signStepUp(options: StepUpOptions): Promise<StepUpEnvelope> {
  if (typeof options.changeId !== 'string' || options.changeId.trim() === '') throw new TypeError('changeId is required: the id of the pending change');
  const payload = stepUpPayload({ ...options, businessTransactionId: undefined }) as StepUpEnvelope['payload'];
  return { payload, signature: await signCanonical(options.key, payload) };
}

/** RFC 3339 time `ttlSeconds` after `now`. */
export function expiresAfter(now: Date = new Date(), ttlSeconds: number): string {
  return new Date(now.getTime() + ttlSeconds * 1000).toISOString();
}
