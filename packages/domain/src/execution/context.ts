/**
 * What the execution pipeline's two phases run over. The decision phase works on a
 * DecisionContext and ends in a DecidedTransaction: plain JSON, so that a transaction held for a
 * human can be stored and released later from exactly what was decided. The outcome phase
 * (refuse, record, hold, or store the intent and release) consumes a DecidedTransaction now, or
 * after an approval, in an OutcomeContext, and ends in an ExecutionOutcome value that each door
 * (REST, MCP, a later approval) maps to its own protocol.
 */
import { DomainError } from '../shared/errors.js';
import { signed } from '../shared/fail-closed.js';
import type { Caller } from '../identity/caller.js';
import type { PendingAuthEvent } from '../identity/auth-audit.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Hasher, Signed, Signer } from '../ports/crypto.js';
import type { AuthEvent } from '../ports/audit.js';
import type { CompiledPolicy, PolicyDecision, PolicyDocument } from '../policy/index.js';
import type { Connector, ConnectorRegistry, ReleaseCondition } from './connectors.js';
import { DuplicateTransactionError, type ExecutionStore, type TransactionClaim } from './ports.js';
import type { Assessment, BusinessTransaction, PolicyBinding, SignedRefusal, SignedTrustRecord } from './records.js';
import type { AskResult, SourcedFact } from '../business-validation/asking.js';
import type { AuthorityGrantStore } from '../authority/ports.js';
import type { ApprovalScope } from '../policy/document.js';
import type { DecidedTransaction } from './decided.js';
import type { HeldApproval } from './records.js';
import type { PendingItemNotifier } from '../notifications/pending-items.js';
import { decidedInput } from '../policy/impact.js';

/** A published, approved policy version, compiled once. */
export interface PublishedPolicy {
  document: PolicyDocument;
  contentHash: string;
  compiled: CompiledPolicy;
}

export interface PolicyCatalog {
  find(name: string, version: string): Promise<PublishedPolicy | undefined>;
}

/** What every stage of the pipeline may use. */
export interface ExecutionDeps {
  store: ExecutionStore;
  signer: Signer;
  hasher: Hasher;
  clock: Clock;
  ids: IdGenerator;
  policies: PolicyCatalog;
  connectors: ConnectorRegistry;
  /** Asks the business signal sources a policy names (at decision and again at release). */
  sources: { askAll(facts: SourcedFact[], tx: BusinessTransaction): Promise<AskResult> };
  /** The authority grants a policy with `requireAuthorityGrant` checks (at decision and again at release). */
  grants: Pick<AuthorityGrantStore, 'forGrantee' | 'get'>;
  /** Accepts the signed approval of a `requires_override` decision, once. */
  approvals: { accept(raw: unknown, request: { requesterId: string; tx: BusinessTransaction; approvalScope?: ApprovalScope; approverId?: string }): Promise<unknown> };
  /** Skips the principal and tenant rules (SVC_AUTH_DISABLED, spec 5.4). */
  isAuthDisabled?(caller: Caller): boolean;
  /** Held transactions: how long one waits for a human (SVC_OVERRIDE_TTL_SECONDS), and who is told of a new one. */
  holds: { ttlSeconds: number; notifier: PendingItemNotifier };
}

/** One request, as a door hands it to the pipeline: the caller and a built Business Transaction. */
export interface ExecutionRequest {
  caller: Caller;
  tx: BusinessTransaction;
  /** The request's signed authentication event, for the pipeline's first commit to carry. */
  audit?: PendingAuthEvent;
  /** How long a `requires_override` decision is held for a human, if not the deployment's TTL (an MCP call waits less). */
  holdSeconds?: number;
}

/** Every way a request can end once it was admitted, as a value; each door maps it to its protocol. */
export type ExecutionOutcome =
  /** Released, and its signed, chained Trust Record stored. */
  | { kind: 'executed'; record: SignedTrustRecord; result: unknown }
  /** Recorded without release (`POST /transactions`). */
  | { kind: 'recorded'; record: SignedTrustRecord }
  /** A `requires_override` decision without an approval: recorded and held for a human. */
  | { kind: 'held'; record: SignedTrustRecord; expiresAt: string }
  /** Refused (by the policy or by business validation), with its signed Refusal Record stored. */
  | { kind: 'refused'; refusal: SignedRefusal }
  /**
   * The intent was stored, and then the release did not complete as it should: nothing was
   * executed (`executionStatus` NOT_EXECUTED: a re-check failed, the connector failed before
   * sending or a condition no longer held), the outcome is unknown (EXECUTION_UNKNOWN), or the
   * action was executed and its record is incomplete (EXECUTED). `error` says which, with its code.
   */
  | { kind: 'failed'; error: DomainError };

/**
 * The decision phase's context. The request and what is known before any stage runs are fixed;
 * each stage fills in what it establishes (the policy, the connector, business validation) for the
 * stages after it.
 */
export interface DecisionContext {
  readonly caller: Caller;
  readonly tx: BusinessTransaction;
  /** When the request was decided (ISO 8601). */
  readonly now: string;
  /** businessTransactionHash: binds the records to the exact request. */
  readonly btxHash: string;
  policy?: PublishedPolicy;
  binding?: PolicyBinding;
  connector?: Connector;
  /** What the policy decides on: the caller's signals, with every sourced one replaced by the source's value. */
  signals: Record<string, unknown>;
  /** Authority and business validation as established so far; the execution status is added per record. */
  assessment: Omit<Assessment, 'execution'>;
  /** The facts the decision rests on: a release carries them as conditions. */
  conditions: ReleaseCondition[];
  /** Set by the `decide` stage: the policy's rules decided. */
  byRules?: boolean;
}


/** The outcome phase's context: a decided transaction and the live parts it is consumed with. */
export interface OutcomeContext {
  readonly decided: DecidedTransaction;
  readonly audit?: PendingAuthEvent;
  readonly policy: PublishedPolicy;
  readonly connector: Connector;
  /** When this phase acts (ISO 8601): the decision's time on the request path, the approval's for a held one. */
  readonly now: string;
  /** How long a `requires_override` decision without an approval is held (seconds). */
  readonly holdSeconds: number;
  /** A held transaction's release: the human approval it is released with. */
  readonly heldApproval?: HeldApproval;
  /** A `requires_override` decision whose signed approval was accepted: it is released. */
  overrideApproved?: boolean;
  /** Set by the release stage. */
  released?: { releasedAt: string; result: unknown };
}

export const duplicate = (id: string) => new DomainError('conflict', `Business Transaction '${id}' already exists.`);

export function claimOf(ctx: OutcomeContext, outcome: TransactionClaim['outcome']): TransactionClaim {
  const { decided } = ctx;
  const { tx } = decided;
  const claim: TransactionClaim = { businessTransactionId: tx.businessTransactionId, callerId: decided.callerId, outcome, createdAt: ctx.now };
  // Only a decision of the policy's rules is replayable by the impact preview.
  if (decided.byRules) {
    claim.decided = decidedInput(decided.policy, { signals: decided.signals, intent: { action: tx.intent.action, parameters: tx.intent.parameters } }, decided.decision);
  }
  return claim;
}

export function assessmentOf(decided: DecidedTransaction, execution: Assessment['execution']['status']): Assessment {
  return { ...structuredClone(decided.assessment), execution: { status: execution } };
}

/** Signs, or fails with SIGNING_UNAVAILABLE: nothing was executed. */
export const signOrFail = <T extends object>(signer: Signer, record: T) => signed(() => signer.sign(record), 'Signing is unavailable; nothing was executed.');

/**
 * An atomic write that claims the id: a duplicate is 409, any other failure 503 with `code`. The
 * write carries the request's pending authentication event, if it has one not stored yet (one
 * commit for both instead of two); it is stored then, else it is still pending.
 */
export async function claimed(ctx: OutcomeContext, write: (audit: Signed<AuthEvent> | undefined) => Promise<void>, code: DomainError['code']): Promise<void> {
  const audit = ctx.audit && !ctx.audit.stored ? ctx.audit : undefined;
  try {
    await write(audit?.event);
    if (audit) audit.stored = true;
  } catch (e) {
    if (e instanceof DuplicateTransactionError) throw duplicate(ctx.decided.tx.businessTransactionId);
    throw new DomainError('unavailable', 'Storage is unavailable; nothing was executed.', code, undefined, { cause: e });
  }
}
