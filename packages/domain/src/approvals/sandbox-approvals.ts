/**
 * `POST /sandbox/approvals` (sandbox mode only; CONTRACT "Signed approvals and overrides in profile
 * T"): the demo approver signs an approval of a sandbox action, valid 5 minutes, accepted once, so
 * that the override flow can be tried without a second human.
 */
import { checkTransactionId } from '../execution/transaction-request.js';
import { isCapability } from '../shared/names.js';
import { namespaceOf } from '../execution/connectors.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Hasher } from '../ports/crypto.js';
import type { NonceGenerator } from '../ports/single-use.js';
import { invalid } from '../shared/errors.js';
import { isPlainObject } from '../shared/guards.js';
import { DEMO_APPROVER_ID, SANDBOX_NAMESPACE, type ApprovalPayload, type ApprovalScopeClaim, type SignedApproval } from './approval.js';

export const SANDBOX_APPROVAL_VALIDITY_MS = 5 * 60_000;

/** Signs an approval payload with the demo approver's key (base64 Ed25519 over the canonical payload). */
export interface ApprovalSigner {
  sign(payload: ApprovalPayload): Promise<string>;
}

export interface SandboxApprovalDeps {
  signer: ApprovalSigner;
  hasher: Pick<Hasher, 'contentHash'>;
  clock: Clock;
  ids: IdGenerator;
  nonces: NonceGenerator;
}

const FIELDS = ['businessTransactionId', 'action', 'scope', 'signals'];

export class SandboxApprovals {
  constructor(private readonly d: SandboxApprovalDeps) {}

  async issue(body: unknown): Promise<SignedApproval> {
    if (!isPlainObject(body)) throw invalid('The body must be {"businessTransactionId", "action": "sandbox:…", "scope": {…}, "signals"?: {…}}.');
    for (const field of Object.keys(body)) if (!FIELDS.includes(field)) throw invalid(`${field} is not a field of a sandbox approval request (fields: ${FIELDS.join(', ')}).`);
    const businessTransactionId = checkTransactionId(body.businessTransactionId);
    const action = body.action;
    if (!isCapability(action) || namespaceOf(action) !== SANDBOX_NAMESPACE) {
      throw invalid('action must be a sandbox action (sandbox:<verb>): the demo approver approves nothing else.');
    }
    if (body.signals !== undefined && !isPlainObject(body.signals)) throw invalid('signals must be an object: the signals the request will carry.');
    const now = this.d.clock.now();
    const payload: ApprovalPayload = {
      approvalId: this.d.ids.uuid(),
      approverId: DEMO_APPROVER_ID,
      businessTransactionId,
      action,
      scope: readScope(body.scope),
      signalsHash: this.d.hasher.contentHash(body.signals ?? {}),
      expiresAt: new Date(now.getTime() + SANDBOX_APPROVAL_VALIDITY_MS).toISOString(),
      nonce: this.d.nonces.nonce(),
    };
    return { payload, signature: await this.d.signer.sign(payload) };
  }
}

function readScope(scope: unknown): ApprovalScopeClaim {
  if (isPlainObject(scope) && scope.field === 'value' && Object.prototype.hasOwnProperty.call(scope, 'value') && Object.keys(scope).length === 2) {
    return { field: 'value', value: scope.value };
  }
  if (isPlainObject(scope) && scope.field === 'resourceId' && typeof scope.resourceId === 'string' && scope.resourceId !== '' && scope.resourceId.length <= 1024 && Object.keys(scope).length === 2) {
    return { field: 'resourceId', resourceId: scope.resourceId };
  }
  throw invalid('scope must be {"field": "value", "value": <the approved value>} or {"field": "resourceId", "resourceId": "<the approved resource>"}.');
}
