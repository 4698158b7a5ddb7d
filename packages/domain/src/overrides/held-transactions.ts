/**
 * Held transactions, decided on the server (CONTRACT "Held transactions"): a `requires_override`
 * decision without an approval waits for a human. An approval (a signed approval from a USER key
 * with a step-up key, never the requester or its principal) releases it exactly once through the
 * pipeline's own stages; a rejection (a step-up envelope) or the end of its time refuses it with a
 * signed Refusal Record. Silence is never consent.
 */
import type { Caller } from '../identity/caller.js';
import { isVerifiedHuman } from '../identity/caller.js';
import type { Clock } from '../ports/clock.js';
import type { Hasher, Signer, StepUpSignatureVerifier } from '../ports/crypto.js';
import type { Page } from '../ports/page.js';
import type { PolicyDecision } from '../policy/index.js';
import { OVERRIDE_EXPIRED_RULE_ID, OVERRIDE_REJECTED_RULE_ID } from '../policy/document.js';
import { DomainError, conflict, forbidden, invalid, notFound } from '../shared/errors.js';
import { checkStepUpEnvelope, readStepUpEnvelope } from '../governance/step-up.js';
import { refusalDecision } from '../execution/decision-stages.js';
import { failureOfPhase, heldNoLongerPending, signRefusal } from '../execution/outcome-stages.js';
import { EVERY_CALLER, type ExecutionStore, type ReadScope } from '../execution/ports.js';
import type { ExecutionOutcome, PolicyCatalog } from '../execution/context.js';
import { expectedApprovalScope, type ApprovalScopeClaim } from '../approvals/approval.js';
import type { DecidedTransaction } from '../execution/decided.js';
import { HELD_STATUSES, type HeldStatus, type HeldTransaction } from '../execution/held.js';
import type { PolicyBinding, SignedTrustRecord } from '../execution/records.js';

/** A held transaction as `GET /overrides/{id}` serves it. */
export interface HeldTransactionView {
  businessTransactionId: string;
  callerId: string;
  action: string;
  parameters: Record<string, unknown>;
  signals: Record<string, unknown>;
  /** What a signed approval's `signalsHash` must be: SHA-256 of the RFC 8785 canonical JSON of `signals`. */
  signalsHash: string;
  /** The `scope` a signed approval must carry, as the policy's `approvalScope` says. */
  scope?: ApprovalScopeClaim;
  businessTransactionHash: string;
  policy: PolicyBinding;
  decision: PolicyDecision;
  status: HeldStatus;
  createdAt: string;
  expiresAt: string;
  decidedBy?: string;
  decidedAt?: string;
  reason?: string;
}

/** How a wait for a held transaction ended. */
export type HeldEnd =
  /** Approved and released: the Trust Record and the connector's result. */
  | { kind: 'executed'; record: SignedTrustRecord; result: unknown }
  /** Approved, and its release did not complete (nothing executed, or an unknown outcome). */
  | { kind: 'failed'; error: DomainError }
  /** Rejected by a human, or refused by expiry. */
  | { kind: 'refused'; status: 'REJECTED' | 'EXPIRED'; reason?: string }
  /** The waiter went away first (it stays held until a human decides or it expires). */
  | { kind: 'abandoned' };

/** How long an approved transaction's release may take before a waiter calls its outcome unknown (an approving process may have died). */
export const RELEASE_WAIT_MS = 120_000;

export interface HeldTransactionsDeps {
  /** The policy versions the held transactions were decided by (for the scope an approval must carry). */
  policies: PolicyCatalog;
  store: Pick<ExecutionStore, 'getHeld' | 'listHeld' | 'refuseHeld' | 'listExpiredHeld' | 'getIntent' | 'getTrustRecord'>;
  /** Releases an approved one through the pipeline (ExecutionService.releaseHeld). */
  execution: { releaseHeld(decided: DecidedTransaction, approval: { approverId: string; approvedAt: string; approval: unknown }): Promise<ExecutionOutcome> };
  signer: Signer;
  hasher: Pick<Hasher, 'contentHash'>;
  clock: Clock;
  stepUpVerifier: StepUpSignatureVerifier;
  /** Resolves after `ms`, or at once when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

const NOT_FOUND = () => notFound('Held transaction not found.');

/** `status` of `GET /overrides`: one of HELD_STATUSES, or every status when absent. */
export function readHeldStatus(raw: unknown): HeldStatus | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !(HELD_STATUSES as readonly string[]).includes(raw)) throw invalid(`status must be one of ${HELD_STATUSES.join(', ')}.`);
  return raw as HeldStatus;
}

export class HeldTransactions {
  constructor(private readonly d: HeldTransactionsDeps) {}

  async viewOf(held: HeldTransaction): Promise<HeldTransactionView> {
    const { decided } = held;
    const { tx } = decided;
    const policy = await this.d.policies.find(decided.policy.name, decided.policy.version);
    const scope = policy && expectedApprovalScope(tx, policy.document.approvalScope);
    return {
      businessTransactionId: tx.businessTransactionId,
      callerId: decided.callerId,
      action: tx.intent.action,
      parameters: tx.intent.parameters,
      signals: tx.signals,
      signalsHash: this.d.hasher.contentHash(tx.signals),
      ...(scope ? { scope } : {}),
      businessTransactionHash: decided.btxHash,
      policy: decided.policy,
      decision: decided.decision,
      status: held.status,
      createdAt: held.createdAt,
      expiresAt: held.expiresAt,
      ...(held.decidedBy !== undefined ? { decidedBy: held.decidedBy } : {}),
      ...(held.decidedAt !== undefined ? { decidedAt: held.decidedAt } : {}),
      ...(held.reason !== undefined ? { reason: held.reason } : {}),
    };
  }

  async get(id: string, scope: ReadScope): Promise<HeldTransactionView> {
    const held = await this.d.store.getHeld(id, scope);
    if (!held) throw NOT_FOUND();
    return await this.viewOf(held);
  }

  async list(status: HeldStatus | undefined, scope: ReadScope, page: number, pageSize: number): Promise<Page<HeldTransactionView>> {
    const found = await this.d.store.listHeld(status, scope, page, pageSize);
    return { ...found, items: await Promise.all(found.items.map((h) => this.viewOf(h))) };
  }

  /**
   * A human approves: the held transaction is released, once, and the outcome is what
   * `POST /execute` would have given. 409 when it is no longer pending (another approval won, it
   * was rejected, or it has expired: then it is refused by expiry now if nobody did yet).
   */
  async approve(approver: Caller, id: string, approval: unknown): Promise<ExecutionOutcome> {
    const held = await this.pendingFor(approver, id);
    const approvedAt = this.d.clock.now().toISOString();
    return this.d.execution.releaseHeld(held.decided, { approverId: approver.callerId, approvedAt, approval });
  }

  /** A human rejects with a step-up envelope naming the transaction: a signed Refusal Record (`override-rejected`). */
  async reject(checker: Caller, id: string, body: unknown): Promise<HeldTransactionView> {
    requireHuman(checker);
    const now = this.d.clock.now();
    const envelope = readStepUpEnvelope(body, 'reject', now, 'businessTransactionId');
    const held = await this.pendingFor(checker, id);
    checkStepUpEnvelope(envelope, { changeId: held.decided.tx.businessTransactionId, action: 'reject', checker, now, subject: 'businessTransactionId' }, this.d.stepUpVerifier);
    const reason = envelope.payload.reason!;
    const at = now.toISOString();
    const refusal = await signRefusal(this.d, held.decided, refusalDecision(OVERRIDE_REJECTED_RULE_ID, `Rejected by ${checker.callerId}: ${reason}`), at);
    const done = await this.d.store.refuseHeld(id, { status: 'REJECTED', decidedBy: checker.callerId, decidedAt: at, reason, nonce: envelope.payload.nonce }, refusal);
    if (done === 'nonce-reused') throw conflict('The step-up envelope nonce has been used before; sign a new envelope.', 'STEP_UP_NONCE_REUSED');
    if (done === 'not-pending') throw heldNoLongerPending();
    return this.get(id, EVERY_CALLER);
  }

  /**
   * Refuses a held transaction whose time has run out (`override-expired`), once; false when it is
   * not pending or not yet due. Called by the expiry sweep, by an approval or rejection that finds
   * it due, and by a door that held a call until its end.
   */
  async expire(id: string): Promise<boolean> {
    const held = await this.d.store.getHeld(id, EVERY_CALLER);
    const now = this.d.clock.now();
    if (!held || held.status !== 'PENDING' || Date.parse(held.expiresAt) > now.getTime()) return false;
    const at = now.toISOString();
    const reason = `No human approved it before ${held.expiresAt}; silence is never consent`;
    const refusal = await signRefusal(this.d, held.decided, refusalDecision(OVERRIDE_EXPIRED_RULE_ID, reason), at);
    return (await this.d.store.refuseHeld(id, { status: 'EXPIRED', decidedAt: at, reason }, refusal)) === 'refused';
  }

  /** Refuses every held transaction whose time has run out (a periodic sweep on every instance). Returns how many. */
  async expireDue(limit = 100): Promise<number> {
    let n = 0;
    for (const id of await this.d.store.listExpiredHeld(this.d.clock.now().toISOString(), limit)) if (await this.expire(id)) n++;
    return n;
  }

  /**
   * Waits for what becomes of a held transaction (a door that holds its caller, such as an MCP
   * call): a human's approval and the release it starts (on any instance), a rejection, or the end
   * of its time, when it is refused by expiry here if nobody did yet. `onWaiting` runs at every
   * look while it is pending (progress for the caller). Polls the store: the decision may be taken
   * on another instance.
   */
  async awaitOutcome(id: string, options: { pollMs?: number; signal?: AbortSignal; onWaiting?: (held: HeldTransaction) => Promise<void> } = {}): Promise<HeldEnd> {
    const pollMs = options.pollMs ?? 500;
    let approvedAt: number | undefined;
    for (;;) {
      if (options.signal?.aborted) return { kind: 'abandoned' };
      const held = await this.d.store.getHeld(id, EVERY_CALLER);
      if (!held) throw NOT_FOUND();
      const now = this.d.clock.now().getTime();
      if (held.status === 'REJECTED' || held.status === 'EXPIRED') return { kind: 'refused', status: held.status, ...(held.reason !== undefined ? { reason: held.reason } : {}) };
      if (held.status === 'PENDING') {
        if (Date.parse(held.expiresAt) <= now) {
          await this.expire(id);
          continue;
        }
        await options.onWaiting?.(held);
      } else {
        approvedAt ??= Date.parse(held.decidedAt ?? held.createdAt);
        const ended = await this.releaseOutcome(id);
        if (ended) return ended;
        if (now - approvedAt > RELEASE_WAIT_MS) {
          return { kind: 'failed', error: failureOfPhase('outcome-unknown', 'The approved release did not record its outcome in time.') };
        }
      }
      await this.d.sleep(pollMs, options.signal);
    }
  }

  /** What an approved transaction's release came to, once it is recorded. */
  private async releaseOutcome(id: string): Promise<HeldEnd | undefined> {
    const stored = await this.d.store.getIntent(id, EVERY_CALLER);
    if (!stored) return undefined;
    const { state, error } = stored.status;
    if (state === 'FINALIZED') {
      const record = await this.d.store.getTrustRecord(id, EVERY_CALLER);
      return record ? { kind: 'executed', record, result: record.executions[0]?.result ?? null } : undefined;
    }
    if (state === 'ERRORED') return { kind: 'failed', error: failureOfPhase(error?.phase ?? 'outcome-unknown', error?.message ?? '') };
    if (state === 'RESOLVED') return { kind: 'failed', error: failureOfPhase('outcome-unknown', 'A human reconciled the release at its connector.') };
    return undefined;
  }

  /** The held transaction, PENDING and unexpired, that `decider` may decide; else the refusal. */
  private async pendingFor(decider: Caller, id: string): Promise<HeldTransaction> {
    requireHuman(decider);
    const held = await this.d.store.getHeld(id, EVERY_CALLER);
    if (!held) throw NOT_FOUND();
    const { decided } = held;
    if (decided.callerId === decider.callerId || decided.tx.authority.principalId === decider.callerId) {
      throw forbidden('The requester (or its principal) cannot decide its own held transaction.', 'SELF_APPROVAL_DENIED');
    }
    if (held.status !== 'PENDING') throw heldNoLongerPending();
    if (Date.parse(held.expiresAt) <= this.d.clock.now().getTime()) {
      await this.expire(id);
      throw new DomainError('conflict', `This held transaction expired at ${held.expiresAt}: it is refused, nothing was executed.`, 'CHANGE_ALREADY_DECIDED');
    }
    return held;
  }
}

function requireHuman(caller: Caller): void {
  if (!isVerifiedHuman(caller)) throw forbidden('Only a verified human (a USER key) may decide a held transaction.', 'NON_HUMAN_CALLER_DENIED');
}
