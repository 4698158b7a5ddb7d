import type { components, operations } from './generated/transaction.js';
import type { EtsClient } from './http.js';
import { approvalPayload, type ApprovalPayload, type SignedApproval } from './approval.js';
import { signCanonical, type Ed25519PrivateKey } from './keys.js';
import { stepUpPayload, STEP_UP_MAX_TTL_SECONDS, type StepUpPayload } from './step-up.js';

/** A held transaction as `GET /overrides/{id}` serves it (CONTRACT "Held transactions"). */
export type HeldTransaction = components['schemas']['HeldTransaction'];
export type HeldStatus = HeldTransaction['status'];
/** A page of `GET /overrides`, newest first. */
export type HeldTransactionPage = operations['listHeldTransactions']['responses'][200]['content']['application/json'];
/** What `POST /overrides/{id}/approve` answers: what `POST /execute` would have answered. */
export type HeldApprovalAnswer = components['schemas']['ExecutionResponse'];
/** The body of `POST /overrides/{id}/reject`: a step-up envelope naming the transaction. */
export type HeldRejectEnvelope = components['schemas']['HeldRejectEnvelope'];

/** An error answer of the service: its HTTP status, its stable `code` when it sent one, and its message. */
export class EtsRequestError extends Error {
  override readonly name = 'EtsRequestError';
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
    /** The whole error body, as the service sent it. */
    readonly body: unknown,
  ) {
    super(message);
  }
}

/**
 * The payload of an approval of a held transaction, not signed yet: bound to its id and action,
 * the `scope` its policy's `approvalScope` asks for (as the service shows it in `held.scope`; the
 * transaction itself when the policy names none), the hash of its signals, a fresh id and nonce, and
 * an expiry at most 15 minutes ahead (the service refuses a longer-lived one). The console shows it
 * to the approver before they sign it; `approveHeld` signs and sends it.
 */
export function heldApprovalPayload(
  held: Pick<HeldTransaction, 'businessTransactionId' | 'action' | 'signals' | 'scope'>,
  approverId: string,
  options: { ttlSeconds?: number; now?: Date } = {},
): ApprovalPayload {
  const ttlSeconds = options.ttlSeconds;
  if (ttlSeconds !== undefined && (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > STEP_UP_MAX_TTL_SECONDS)) {
    throw new RangeError(`ttlSeconds must be a whole number from 1 to ${STEP_UP_MAX_TTL_SECONDS}`);
  }
  const scope = held.scope ?? { field: 'resourceId', resourceId: held.businessTransactionId };
  return approvalPayload({
    approverId,
    businessTransactionId: held.businessTransactionId,
    action: held.action,
    scope: scope.field === 'value' ? { field: 'value', value: scope.value } : { field: 'resourceId', resourceId: String(scope.resourceId) },
    signals: held.signals,
    ...(ttlSeconds !== undefined ? { ttlSeconds } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
}

/** The payload of the step-up envelope that rejects a held transaction, not signed yet. */
export function heldRejectPayload(businessTransactionId: string, reason: string, options: { callerId?: string; ttlSeconds?: number; now?: Date } = {}): StepUpPayload {
  return stepUpPayload({ businessTransactionId, action: 'reject', reason, ...options });
}

export interface HeldDecisionOptions {
  /** The approver's own Ed25519 step-up private key (PKCS#8 PEM, seed or signer): never the bearer key. */
  key: Ed25519PrivateKey;
  /** Seconds until the signed decision expires: 1 to 900, default 300. */
  ttlSeconds?: number;
}

export interface HeldTransactionsClient {
  /** `GET /overrides`: newest first; a USER key sees all, any other key its own caller's. */
  list(query?: { status?: HeldStatus; page?: number; pageSize?: number }): Promise<HeldTransactionPage>;
  /** `GET /overrides/{id}`. */
  get(businessTransactionId: string): Promise<HeldTransaction>;
  /**
   * Approves a held transaction as the client's caller (a USER key with a step-up key, not the
   * requester): reads it, signs the approval of exactly what it shows, and sends it. The answer is
   * what `POST /execute` would have answered (the Trust Record of the release).
   */
  approve(businessTransactionId: string, options: HeldDecisionOptions): Promise<HeldApprovalAnswer>;
  /** Rejects a held transaction with a reason, signed with the caller's step-up key: it becomes `REJECTED`, with a signed Refusal Record. */
  reject(businessTransactionId: string, options: HeldDecisionOptions & { reason: string }): Promise<HeldTransaction>;
}

/**
 * Typed calls for held transactions over a client made by `createClient` (with the deciding
 * caller's API key). Every method throws `EtsRequestError` on an error answer of the service.
 */
export function heldTransactions(client: EtsClient): HeldTransactionsClient {
  const callerId = async (): Promise<string> => {
    const { data, error, response } = await client.GET('/callers/me');
    return answered(data, error, response).callerId;
  };
  const held = {
    async list(query = {}) {
      const { data, error, response } = await client.GET('/overrides', { params: { query } });
      return answered(data, error, response);
    },
    async get(businessTransactionId) {
      const { data, error, response } = await client.GET('/overrides/{id}', { params: { path: { id: businessTransactionId } } });
      return answered(data, error, response);
    },
    async approve(businessTransactionId, options) {
      const [transaction, approverId] = await Promise.all([held.get(businessTransactionId), callerId()]);
      const payload = heldApprovalPayload(transaction, approverId, options.ttlSeconds !== undefined ? { ttlSeconds: options.ttlSeconds } : {});
      const body: SignedApproval = { payload, signature: await signCanonical(options.key, payload) };
      const { data, error, response } = await client.POST('/overrides/{id}/approve', {
        params: { path: { id: businessTransactionId } },
        body: body as components['schemas']['SignedApproval'],
      });
      return answered(data, error, response);
    },
    async reject(businessTransactionId, options) {
      const payload = heldRejectPayload(businessTransactionId, options.reason, {
        callerId: await callerId(),
        ...(options.ttlSeconds !== undefined ? { ttlSeconds: options.ttlSeconds } : {}),
      });
      const body = { payload, signature: await signCanonical(options.key, payload) } as HeldRejectEnvelope;
      const { data, error, response } = await client.POST('/overrides/{id}/reject', { params: { path: { id: businessTransactionId } }, body });
      return answered(data, error, response);
    },
  } satisfies HeldTransactionsClient;
  return held;
}

/** The success body, or the service's error as an `EtsRequestError`. */
function answered<T>(data: T | undefined, error: unknown, response: Response): T {
  if (response.ok && data !== undefined) return data;
  const body = error as { error?: unknown; code?: unknown } | undefined;
  const message = typeof body?.error === 'string' ? body.error : `HTTP ${response.status}`;
  throw new EtsRequestError(response.status, typeof body?.code === 'string' ? body.code : undefined, message, error);
}
