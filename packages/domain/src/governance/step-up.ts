/**
 * The step-up authorization envelope (spec 2.6, CONTRACT "Governance"): the body of every approve
 * and reject. The checker signs the RFC 8785 canonical JSON of `payload` with their own Ed25519
 * step-up key (never the bearer key).
 *
 * Refusals, in the order they are checked (statuses in the OpenAPI document):
 * - malformed envelope (shape, types, nonce format, reject without reason, an `expiresAt` that is
 *   not a real RFC 3339 date-time or lies more than `STEP_UP_MAX_VALIDITY_MS` ahead of the
 *   server's clock): 400, no code;
 * - signature does not verify against the caller's registered step-up key, or
 *   `pendingPolicyChangeId` is not the change in the URL, or `action` is not the endpoint's, or
 *   `callerId` (when present) is not the authenticated caller: 403 `STEP_UP_INVALID`;
 * - `expiresAt` has passed: 403 `STEP_UP_EXPIRED`;
 * - the nonce was used before (by any envelope, for any change): 409 `STEP_UP_NONCE_REUSED`
 *   (checked by the store, atomically with the decision).
 */
import type { Caller } from '../identity/caller.js';
import type { StepUpSignatureVerifier } from '../ports/crypto.js';
import { DomainError, forbidden, invalid } from '../shared/errors.js';
import { charLength, REASON_MAX_LENGTH, type DecisionAction } from './change.js';
import { isPlainObject } from '../shared/guards.js';
import { parseRfc3339 } from '../shared/rfc3339.js';

/**
 * How far ahead of the server's clock an envelope may expire: an envelope is a fresh, explicit
 * decision, not a standing permission. `ets step-up sign --ttl` allows at most this.
 */
export const STEP_UP_MAX_VALIDITY_MS = 15 * 60_000;

/**
 * What an envelope names as the item it decides: a pending change (`pendingPolicyChangeId`, every
 * maker-checker registry) or a held transaction (`businessTransactionId`).
 */
export type StepUpSubject = 'pendingPolicyChangeId' | 'businessTransactionId';

export interface StepUpPayload {
  /** The change decided (or, for a held transaction, `businessTransactionId` instead). */
  pendingPolicyChangeId?: string;
  businessTransactionId?: string;
  action: string;
  expiresAt: string;
  /** At least 16 random bytes, base64url. */
  nonce: string;
  /** The checker's caller id. Optional; when present it must be the authenticated caller. */
  callerId?: string;
  /** Required to reject; recorded as the rejection reason. */
  reason?: string;
  /** Further fields are allowed; they are covered by the signature like the others. */
  [field: string]: unknown;
}

export interface StepUpEnvelope {
  payload: StepUpPayload;
  /** Base64 Ed25519 signature over the RFC 8785 canonical JSON of `payload`. */
  signature: string;
  /** `payload.expiresAt` in milliseconds since the epoch. */
  expiresAtMs: number;
}

/** 16 bytes are 22 base64url characters (unpadded). */
export const NONCE_PATTERN = /^[A-Za-z0-9_-]{22,512}$/;

const nonEmptyString = (x: unknown): x is string => typeof x === 'string' && x.length > 0;

/** Checks the shape of an envelope (400 on anything malformed) and returns it typed. */
export function readStepUpEnvelope(body: unknown, action: DecisionAction, now: Date, subject: StepUpSubject = 'pendingPolicyChangeId'): StepUpEnvelope {
  if (!isPlainObject(body) || !isPlainObject(body.payload)) {
    throw invalid('The body must be a step-up envelope: {"payload": {…}, "signature": "…"}.');
  }
  const p = body.payload;
  if (!nonEmptyString(body.signature)) throw invalid('signature is required: a base64 Ed25519 signature over the canonical JSON of payload.');
  if (!nonEmptyString(p[subject])) throw invalid(`payload.${subject} is required.`);
  if (!nonEmptyString(p.action)) throw invalid('payload.action is required (approve or reject).');
  const expiresAtMs = typeof p.expiresAt === 'string' ? parseRfc3339(p.expiresAt) : undefined;
  if (expiresAtMs === undefined) {
    throw invalid('payload.expiresAt must be a real RFC 3339 date-time, such as 2026-11-21T12:05:00Z.');
  }
  if (expiresAtMs > now.getTime() + STEP_UP_MAX_VALIDITY_MS) {
    throw invalid(`payload.expiresAt must be at most ${STEP_UP_MAX_VALIDITY_MS / 60_000} minutes ahead of the server's clock (now ${now.toISOString()}).`);
  }
  if (typeof p.nonce !== 'string' || !NONCE_PATTERN.test(p.nonce)) {
    throw invalid('payload.nonce must be at least 16 random bytes, base64url-encoded without padding.');
  }
  if (p.callerId !== undefined && !nonEmptyString(p.callerId)) throw invalid('payload.callerId must be a non-empty string.');
  if (p.reason !== undefined && typeof p.reason !== 'string') throw invalid('payload.reason must be a string.');
  if (typeof p.reason === 'string' && charLength(p.reason) > REASON_MAX_LENGTH) {
    throw invalid(`payload.reason must be at most ${REASON_MAX_LENGTH} characters.`);
  }
  if (action === 'reject' && (typeof p.reason !== 'string' || p.reason.trim() === '')) {
    throw invalid('payload.reason is required to reject a change: it is recorded as the rejection reason.');
  }
  return { payload: p as StepUpPayload, signature: body.signature, expiresAtMs };
}

/**
 * Checks what the server can check without storage: the signature against the checker's
 * registered key, the binding to this change, this action and this caller, and the expiry.
 */
export function checkStepUpEnvelope(
  envelope: StepUpEnvelope,
  expected: { changeId: string; action: DecisionAction; checker: Caller; now: Date; subject?: StepUpSubject },
  verifier: StepUpSignatureVerifier,
): void {
  const { payload } = envelope;
  const key = expected.checker.stepUpPublicKeyPem;
  if (!key || !verifier.verify(key, payload, envelope.signature)) {
    throw forbidden("The step-up signature does not verify against the caller's registered step-up key.", 'STEP_UP_INVALID');
  }
  if (payload[expected.subject ?? 'pendingPolicyChangeId'] !== expected.changeId) {
    throw forbidden(`The step-up envelope names another ${expected.subject === 'businessTransactionId' ? 'transaction' : 'change'} than the one in the URL.`, 'STEP_UP_INVALID');
  }
  if (payload.action !== expected.action) {
    throw forbidden(`The step-up envelope authorizes '${payload.action}', not '${expected.action}'.`, 'STEP_UP_INVALID');
  }
  if (payload.callerId !== undefined && payload.callerId !== expected.checker.callerId) {
    throw forbidden('The step-up envelope was made for another caller.', 'STEP_UP_INVALID');
  }
  if (envelope.expiresAtMs <= expected.now.getTime()) {
    throw new DomainError('forbidden', 'The step-up envelope has expired; sign a new one.', 'STEP_UP_EXPIRED');
  }
}
