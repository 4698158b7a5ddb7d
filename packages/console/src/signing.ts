/**
 * Decisions are signed here, in the page, with WebCrypto Ed25519: the approver's key file (the
 * PKCS#8 PEM that openssl and `ets` write) is imported as a non-extractable key, used once, and
 * dropped; it never leaves the page and is never stored. What is signed is built and shown first:
 * the payloads and the RFC 8785 canonical JSON come from @ets/client, the same code as `ets`.
 */
import { canonicalize, signCanonical, stepUpPayload, webCryptoKeyFromPem, webCryptoSigner, type ApprovalScope } from '@ets/client';

export type Payload = Record<string, unknown>;

/** The exact bytes the signature covers, as text. */
export const canonicalText = (payload: Payload): string => canonicalize(payload);

/** Base64 Ed25519 signature over the canonical JSON of `payload`, by the key in `pem`. */
export async function signWithKeyFile(pem: string, payload: Payload): Promise<string> {
  if (!/-----BEGIN PRIVATE KEY-----/.test(pem)) throw new Error('This is not a private key file: expected a PKCS#8 PEM ("-----BEGIN PRIVATE KEY-----"), as `openssl genpkey -algorithm ed25519` writes.');
  let key: CryptoKey;
  try {
    key = await webCryptoKeyFromPem(pem.trim() + '\n');
  } catch (e) {
    throw new Error(`The key file could not be used: ${(e as Error).message}`);
  }
  return signCanonical(webCryptoSigner(key), payload);
}

/** A step-up envelope's payload: approve or reject a change, or reject a held transaction. */
export function envelopePayload(subject: { changeId: string } | { businessTransactionId: string }, action: 'approve' | 'reject', callerId: string, reason?: string): Payload {
  return stepUpPayload({ ...subject, action, callerId, ...(reason ? { reason } : {}) }) as unknown as Payload;
}

/**
 * What the approval scopes (CONTRACT "Signed approvals"): the value at the policy's
 * `approvalScope.value` path, the resource at its `approvalScope.resourceId` path, or the
 * transaction itself when the policy names neither. Paths are read from what the held transaction
 * shows of its request (`intent.action`, `intent.parameters.…`, `signals.…`, `businessTransactionId`).
 */
export function approvalScopeOf(
  held: { businessTransactionId: string; action: string; parameters: unknown; signals: unknown },
  declared: unknown,
): { scope: ApprovalScope } | { error: string } {
  const request = { businessTransactionId: held.businessTransactionId, intent: { action: held.action, parameters: held.parameters }, signals: held.signals };
  const at = (path: string): unknown =>
    path.split('.').reduce<unknown>((node, key) => (node !== null && typeof node === 'object' && Object.prototype.hasOwnProperty.call(node, key) ? (node as Record<string, unknown>)[key] : undefined), request);
  const d = declared as { value?: unknown; resourceId?: unknown } | undefined;
  if (d && typeof d.value === 'string') {
    const value = at(d.value);
    return value === undefined ? { error: `the policy scopes approvals by ${d.value}, which this transaction does not show` } : { scope: { field: 'value', value } };
  }
  if (d && typeof d.resourceId === 'string') {
    const id = at(d.resourceId);
    return typeof id === 'string' || typeof id === 'number' ? { scope: { field: 'resourceId', resourceId: String(id) } } : { error: `the policy scopes approvals by ${d.resourceId}, which this transaction does not show` };
  }
  return { scope: { field: 'resourceId', resourceId: held.businessTransactionId } };
}

/** What a refusal of a decision means, in plain words; the service's own message follows it. */
export function refusalText(code: string | undefined, status: number): string {
  switch (code) {
    case 'SELF_APPROVAL_DENIED':
      return 'Refused: you cannot decide your own proposal (or one made with your step-up key). Another person must decide it.';
    case 'STEP_UP_EXPIRED':
      return 'Refused: the signed decision expired before it arrived. Prepare and sign it again.';
    case 'STEP_UP_NONCE_REUSED':
    case 'NONCE_ALREADY_CONSUMED':
      return 'Refused: this signed decision was already used once. Prepare and sign a new one.';
    case 'STEP_UP_INVALID':
      return 'Refused: the signature does not verify with the step-up key registered for you. Is this your key file?';
    case 'STEP_UP_REQUIRED':
    case 'NON_HUMAN_CALLER_DENIED':
      return 'Refused: your key has no step-up key registered, so it cannot decide. An operator registers one with `ets keys add --step-up-key -`.';
    case 'CHANGE_ALREADY_DECIDED':
      return 'Refused: someone has decided this already.';
    case 'APPROVAL_INVALID':
      return 'Refused: the service did not accept this approval.';
    case 'CSRF_TOKEN_INVALID':
      return 'Refused: this page’s session token is stale. Reload the page.';
    default:
      return status === 409 ? 'Refused: it has been decided already, or it is no longer waiting.' : status === 404 ? 'Refused: it no longer exists.' : 'Refused.';
  }
}
