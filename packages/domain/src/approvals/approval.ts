/**
 * Signed approvals of `requires_override` decisions in profile T (spec 4.3 rules 4-5; CONTRACT
 * "Signed approvals and overrides in profile T"). A human approver signs, with their step-up key,
 * the RFC 8785 canonical JSON of a payload bound to one transaction, one action, the scope the
 * policy names, and the request's signals; the service accepts it once. In sandbox mode a fixed,
 * published demo approver may approve sandbox actions, and nothing else.
 *
 * Every refusal is 403 APPROVAL_INVALID and stores nothing: the transaction can be sent again
 * with a valid approval. An approval expires at most 15 minutes ahead of the server's clock, like a
 * step-up envelope (review round 2: one valid until 2099 was a standing permission).
 */
import { namespaceOf } from '../execution/connectors.js';
import type { BusinessTransaction } from '../execution/records.js';
import type { Caller } from '../identity/caller.js';
import type { ApproverDirectory } from '../ports/callers.js';
import type { Clock } from '../ports/clock.js';
import type { Hasher, StepUpSignatureVerifier } from '../ports/crypto.js';
import type { SingleUseLedger } from '../ports/single-use.js';
import type { ApprovalScope } from '../policy/document.js';
import { NONCE_PATTERN, STEP_UP_MAX_VALIDITY_MS } from '../governance/step-up.js';
import { DomainError } from '../shared/errors.js';
import { isPlainObject } from '../shared/guards.js';
import { valueAtPath } from '../shared/request-paths.js';
import { sameValue } from '../shared/same-value.js';
import { parseRfc3339 } from '../shared/rfc3339.js';

/** The caller id of the demo approver of sandbox mode. No key may use it. */
export const DEMO_APPROVER_ID = 'sandbox-demo-approver';
/** The scope of used approval ids in the single-use ledger. */
export const APPROVAL_SCOPE = 'approval';
/** The namespace of the actions the demo approver may approve. */
export const SANDBOX_NAMESPACE = 'sandbox';

export interface ApprovalScopeClaim {
  field: 'value' | 'resourceId';
  value?: unknown;
  resourceId?: string;
}

export interface ApprovalPayload {
  approvalId: string;
  approverId: string;
  businessTransactionId: string;
  action: string;
  scope: ApprovalScopeClaim;
  /** SHA-256 hex of the RFC 8785 canonical JSON of the request's signals (`{}` when none). */
  signalsHash: string;
  expiresAt: string;
  nonce: string;
}

export interface SignedApproval {
  payload: ApprovalPayload;
  /** Base64 Ed25519 over the canonical payload. */
  signature: string;
}

export interface ApprovalCheckDeps {
  approvers: ApproverDirectory;
  verifier: StepUpSignatureVerifier;
  used: SingleUseLedger;
  hasher: Pick<Hasher, 'contentHash' | 'canonicalize'>;
  clock: Clock;
  /** Sandbox mode only: the demo approver's public key (SPKI PEM). */
  demoApproverPublicKeyPem?: string;
}

const refused = (why: string): DomainError => new DomainError('forbidden', `The approval is not valid: ${why}.`, 'APPROVAL_INVALID');

const text = (v: unknown, max = 256): v is string => typeof v === 'string' && v.length > 0 && v.length <= max;

/**
 * The `scope` a signed approval of `tx` must carry under a policy's `approvalScope` (rule 4): the
 * value at its `value` path, the resource at its `resourceId` path, or the transaction itself when
 * the policy names none. Undefined when the request does not carry what the policy names.
 */
export function expectedApprovalScope(tx: BusinessTransaction, declared: ApprovalScope | undefined): ApprovalScopeClaim | undefined {
  if (declared && 'value' in declared) {
    const value = valueAtPath(tx, declared.value);
    return value === undefined ? undefined : { field: 'value', value };
  }
  const actual = declared ? valueAtPath(tx, declared.resourceId) : tx.businessTransactionId;
  return typeof actual === 'string' || typeof actual === 'number' ? { field: 'resourceId', resourceId: String(actual) } : undefined;
}

/** Reads the shape of `authorization.approval`; anything else is APPROVAL_INVALID. */
export function readApproval(raw: unknown): SignedApproval {
  if (!isPlainObject(raw) || !isPlainObject(raw.payload) || !text(raw.signature, 1024)) throw refused('it must be {"payload": {…}, "signature": "<base64>"}');
  const p = raw.payload;
  for (const field of ['approvalId', 'approverId', 'businessTransactionId', 'action', 'signalsHash', 'expiresAt'] as const) {
    if (!text(p[field])) throw refused(`payload.${field} is required and must be a string`);
  }
  if (typeof p.nonce !== 'string' || !NONCE_PATTERN.test(p.nonce)) throw refused('payload.nonce must be at least 16 random bytes, base64url');
  const scope = p.scope;
  if (!isPlainObject(scope) || (scope.field !== 'value' && scope.field !== 'resourceId')) throw refused('payload.scope.field must be value or resourceId');
  if (scope.field === 'resourceId' && !text(scope.resourceId, 1024)) throw refused('payload.scope.resourceId is required for scope.field resourceId');
  if (scope.field === 'value' && !Object.prototype.hasOwnProperty.call(scope, 'value')) throw refused('payload.scope.value is required for scope.field value');
  return { payload: p as unknown as ApprovalPayload, signature: raw.signature };
}

/**
 * Checks an approval against the request it comes with and accepts it (once). Order: shape,
 * binding (transaction, action), expiry (passed, or more than 15 minutes ahead), not self-approved, the scope (rule 4), the signals hash
 * (rule 5), the signature, then the single use.
 */
export class ApprovalChecker {
  constructor(private readonly d: ApprovalCheckDeps) {}

  /**
   * `approverId`, when given (a held transaction's approval, sent by the approver themself), is who
   * must have signed it.
   */
  async accept(raw: unknown, request: { requesterId: string; tx: BusinessTransaction; approvalScope?: ApprovalScope; approverId?: string }): Promise<ApprovalPayload> {
    const { requesterId, tx } = request;
    const { payload, signature } = readApproval(raw);
    if (payload.businessTransactionId.toLowerCase() !== tx.businessTransactionId) throw refused('it approves another transaction');
    if (payload.action !== tx.intent.action) throw refused('it approves another action');
    const expiresAt = parseRfc3339(payload.expiresAt);
    if (expiresAt === undefined) throw refused('payload.expiresAt must be an RFC 3339 date-time');
    const now = this.d.clock.now();
    if (expiresAt <= now.getTime()) throw refused('it has expired');
    // A fresh, explicit decision, not a standing permission: no longer-lived than a step-up envelope.
    if (expiresAt > now.getTime() + STEP_UP_MAX_VALIDITY_MS) {
      throw refused(`it expires more than ${STEP_UP_MAX_VALIDITY_MS / 60_000} minutes ahead of the server's clock (now ${now.toISOString()}); sign one that expires sooner`);
    }
    if (payload.approverId === requesterId || payload.approverId === tx.authority.principalId) throw refused('the requester cannot approve its own request');
    if (request.approverId !== undefined && payload.approverId !== request.approverId) throw refused('its approverId is not the caller who sends it');
    this.checkScope(payload.scope, tx, request.approvalScope);
    if (payload.signalsHash !== this.d.hasher.contentHash(tx.signals)) throw refused("its signalsHash is not the hash of the request's signals");
    const keys = this.keysOf(payload.approverId, tx.intent.action);
    if (!keys.some((pem) => this.d.verifier.verify(pem, payload, signature))) throw refused('its signature does not verify with a key of the approver');
    if (!(await this.d.used.consume(APPROVAL_SCOPE, payload.approvalId, now.toISOString()))) throw refused('it has been used before');
    return payload;
  }

  /** Rule 4: `value` when the policy declares a value, otherwise `resourceId` (the transaction itself when the policy names no resource). */
  private checkScope(scope: ApprovalScopeClaim, tx: BusinessTransaction, declared: ApprovalScope | undefined): void {
    if (declared && 'value' in declared) {
      if (scope.field !== 'value') throw refused(`the policy scopes approvals by value (${declared.value}); scope.field must be value`);
      const actual = valueAtPath(tx, declared.value);
      if (actual === undefined || !sameValue(this.d.hasher, actual, scope.value)) throw refused(`scope.value is not the request's ${declared.value}`);
      return;
    }
    if (scope.field !== 'resourceId') throw refused('the policy scopes approvals by resource; scope.field must be resourceId');
    const actual = declared ? valueAtPath(tx, declared.resourceId) : tx.businessTransactionId;
    const resource = typeof actual === 'string' || typeof actual === 'number' ? String(actual) : undefined;
    const what = declared ? declared.resourceId : 'businessTransactionId';
    if (resource === undefined || scope.resourceId !== resource) throw refused(`scope.resourceId is not the request's ${what}`);
  }

  private keysOf(approverId: string, action: string): readonly string[] {
    if (approverId === DEMO_APPROVER_ID) {
      // The demo approver's private key is published: it may approve sandbox actions in sandbox mode, nothing else.
      if (!this.d.demoApproverPublicKeyPem) throw refused('the demo approver exists only in sandbox mode');
      if (namespaceOf(action) !== SANDBOX_NAMESPACE) throw refused('the demo approver may approve sandbox actions only');
      return [this.d.demoApproverPublicKeyPem];
    }
    const keys = this.d.approvers.stepUpKeysOf(approverId);
    if (keys.length === 0) throw refused(`'${approverId}' is not a verified human with a step-up key`);
    return keys;
  }
}
