import { sha256 } from '@noble/hashes/sha2.js';
import { canonicalHasher } from '@ets/adapters-crypto/portable';
import { signCanonical, type Ed25519PrivateKey } from './keys.js';
import { randomNonce, randomUuid } from './random.js';
import { expiresAfter } from './step-up.js';

/**
 * What an approval covers (CONTRACT "Signed approvals and overrides in profile T"): the value at
 * the policy's `approvalScope.value` path (e.g. the amount), or the resource at its
 * `approvalScope.resourceId` path (e.g. the invoice id).
 */
export type ApprovalScope = { field: 'value'; value: unknown } | { field: 'resourceId'; resourceId: string };

export interface ApprovalPayload {
  approvalId: string;
  approverId: string;
  businessTransactionId: string;
  action: string;
  scope: ApprovalScope;
  /** Lower-case hex SHA-256 of the RFC 8785 canonical JSON of the request's signals (`{}` when it has none). */
  signalsHash: string;
  expiresAt: string;
  nonce: string;
}

/** A human's approval of one `requires_override` transaction: put it in the request's `authorization.approval`. */
export interface SignedApproval {
  payload: ApprovalPayload;
  /** Base64 Ed25519 over the RFC 8785 canonical JSON of `payload`. */
  signature: string;
}

export interface ApprovalPayloadOptions {
  /** The approver's caller id. */
  approverId: string;
  businessTransactionId: string;
  /** The capability of the transaction's intent (`namespace:verb`). */
  action: string;
  scope: ApprovalScope;
  /** The transaction's `signals` exactly as it sends them; none: `{}`. */
  signals?: Record<string, unknown>;
  /** Seconds until the approval expires; default 300. */
  ttlSeconds?: number;
  now?: Date;
  /** Default: a fresh UUID. */
  approvalId?: string;
}

export interface ApprovalOptions extends ApprovalPayloadOptions {
  /** The approver's step-up private key (a USER caller other than the one requesting). */
  key: Ed25519PrivateKey;
}

export const APPROVAL_DEFAULT_TTL_SECONDS = 300;

const hasher = canonicalHasher(sha256);

/** `signalsHash` of an approval: SHA-256 hex of the canonical signals, `{}` when there are none. */
export function approvalSignalsHash(signals: Record<string, unknown> | undefined): string {
  return hasher.contentHash(signals ?? {});
}

/**
 * The payload of an approval, not signed yet: a page shows it to the approver before they sign it
 * (`signCanonical(key, payload)`). Bound to one transaction, its action, the scope the policy
 * names and the request's signals; single use (a fresh nonce and id) and short-lived.
 */
export function approvalPayload(options: ApprovalPayloadOptions): ApprovalPayload {
  const { approverId, businessTransactionId, action, scope } = options;
  for (const [name, value] of Object.entries({ approverId, businessTransactionId, action })) {
    if (typeof value !== 'string' || value.trim() === '') throw new TypeError(`${name} is required`);
  }
  if (!(scope?.field === 'value' && 'value' in scope) && !(scope?.field === 'resourceId' && typeof scope.resourceId === 'string')) {
    throw new TypeError('scope is { field: "value", value } or { field: "resourceId", resourceId }');
  }
  const ttl = options.ttlSeconds ?? APPROVAL_DEFAULT_TTL_SECONDS;
  if (!Number.isInteger(ttl) || ttl < 1) throw new RangeError('ttlSeconds must be a positive whole number');
  return {
    approvalId: options.approvalId ?? randomUuid(),
    approverId,
    businessTransactionId,
    action,
    scope,
    signalsHash: approvalSignalsHash(options.signals),
    expiresAt: expiresAfter(options.now, ttl),
    nonce: randomNonce(),
  };
}

/**
 * Signs an approval of a transaction that a rule marked `requires_override`, bound to its id,
 * action, scope and signals, single use (a fresh nonce) and short-lived.
 */
export async function signApproval(options: ApprovalOptions): Promise<SignedApproval> {
  const payload = approvalPayload(options);
  return { payload, signature: await signCanonical(options.key, payload) };
}
