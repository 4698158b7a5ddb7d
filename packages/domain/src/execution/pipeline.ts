import { DomainError } from '../shared/errors.js';
import { signed } from '../shared/fail-closed.js';
import type { Caller } from '../identity/caller.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Hasher, Signed, Signer } from '../ports/crypto.js';
import type { AuthEvent } from '../ports/audit.js';
import type { PendingAuthEvent } from '../identity/auth-audit.js';
import type { CompiledPolicy, PolicyDecision, PolicyDocument } from '../policy/index.js';
import { decidedInput } from '../policy/impact.js';
import type { Connector, ConnectorRegistry, ReleaseCondition } from './connectors.js';
import { DuplicateTransactionError, type ExecutionStore, type TransactionClaim } from './ports.js';
import type { Assessment, BusinessTransaction, PolicyBinding, ReleaseContext, SignedTrustRecord } from './records.js';
import type { SignalSourceClient } from '../business-validation/asking.js';
import type { AuthorityGrantStore } from '../authority/ports.js';
import type { ApprovalChecker } from '../approvals/approval.js';

/** A published, approved policy version, compiled once. */
export interface PublishedPolicy {
  document: PolicyDocument;
  contentHash: string;
  compiled: CompiledPolicy;
}

export interface PolicyCatalog {
  find(name: string, version: string): Promise<PublishedPolicy | undefined>;
}

/** Test seams that only sandbox mode wires (crash tests pause between the pipeline's steps). */
export interface ExecutionHooks {
  /** After the intent is stored, before the connector is called. */
  beforeRelease?(tx: BusinessTransaction): Promise<void>;
  /**
   * True: record RELEASED (with the saved context) on its own, then call `afterRelease`, then
   * finalize, instead of one commit for both: crash tests kill the process in between to prove
   * that a RELEASED intent is finalized at restart.
   */
  splitRelease?(tx: BusinessTransaction): boolean;
  afterRelease?(tx: BusinessTransaction): Promise<void>;
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
  hooks?: ExecutionHooks;
  /** Asks the business signal sources a policy names (at decision and again at release). */
  sources: Pick<SignalSourceClient, 'askAll'>;
  /** The authority grants a policy with `requireAuthorityGrant` checks (at decision and again at release). */
  grants: Pick<AuthorityGrantStore, 'forGrantee' | 'get'>;
  /** Accepts the signed approval of a `requires_override` decision, once. */
  approvals: Pick<ApprovalChecker, 'accept'>;
  /** Skips the principal and tenant rules (SVC_AUTH_DISABLED, spec 5.4). */
  isAuthDisabled?(caller: Caller): boolean;
}

export type ExecutionOutcome =
  | { kind: 'executed'; record: SignedTrustRecord; result: unknown }
  | { kind: 'recorded'; record: SignedTrustRecord }
  | { kind: 'pending-override'; record: SignedTrustRecord };

/**
 * The one context the stages run over. The request and what is known before any stage runs are
 * fixed; each stage fills in what it establishes (the policy, the connector, the decision, the
 * business validation, the release) for the stages after it.
 */
export interface ExecutionContext {
  readonly caller: Caller;
  /** The request's signed authentication event, for the pipeline's first commit to carry. */
  readonly audit?: PendingAuthEvent;
  readonly mode: 'release' | 'record';
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
  decision?: PolicyDecision;
  /** A `requires_override` decision whose signed approval was accepted: it is released. */
  overrideApproved?: boolean;
  /** Authority and business validation as established so far; the execution status is added per record. */
  assessment: Omit<Assessment, 'execution'>;
  /** The facts the decision rested on: a release carries them as conditions. */
  conditions: ReleaseCondition[];
  /** Set by the release stage. */
  released?: { releasedAt: string; result: unknown };
}

/** A named step of the pipeline. It ends the run by returning an outcome or throwing a DomainError. */
export interface Stage {
  readonly name: string;
  run(ctx: ExecutionContext): Promise<ExecutionOutcome | void>;
}

export const stage = (name: string, run: Stage['run']): Stage => ({ name, run });

/** Runs the stages in order until one returns an outcome. */
export async function runStages(stages: readonly Stage[], ctx: ExecutionContext): Promise<ExecutionOutcome> {
  for (const s of stages) {
    const outcome = await s.run(ctx);
    if (outcome) return outcome;
  }
  throw new DomainError('internal', 'The execution pipeline ended without an outcome.');
}

/** A value an earlier stage must have set; its absence is a bug in the order of the stages. */
export function established<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new DomainError('internal', `The execution pipeline has no ${what} yet.`);
  return value;
}

export const fail = (kind: DomainError['kind'], message: string, code?: DomainError['code'], extra?: Record<string, string>, cause?: unknown) =>
  new DomainError(kind, message, code, extra, { cause });

export const duplicate = (id: string) => new DomainError('conflict', `Business Transaction '${id}' already exists.`);

export function claimOf(ctx: ExecutionContext, outcome: TransactionClaim['outcome']): TransactionClaim {
  const claim: TransactionClaim = { businessTransactionId: ctx.tx.businessTransactionId, callerId: ctx.caller.callerId, outcome, createdAt: ctx.now };
  // Only a decision of the policy's evaluation is replayable by the impact preview: `ctx.decision` is set by `decide` alone.
  if (ctx.decision && ctx.binding) {
    const { tx } = ctx;
    claim.decided = decidedInput(ctx.binding, { signals: ctx.signals, intent: { action: tx.intent.action, parameters: tx.intent.parameters } }, ctx.decision);
  }
  return claim;
}

export function assessmentOf(ctx: ExecutionContext, execution: Assessment['execution']['status']): Assessment {
  return { ...structuredClone(ctx.assessment), execution: { status: execution } };
}

/** Signs, or fails with SIGNING_UNAVAILABLE: nothing was executed. */
export const signOrFail = <T extends object>(signer: Signer, record: T) => signed(() => signer.sign(record), 'Signing is unavailable; nothing was executed.');

/**
 * An atomic write that claims the id: a duplicate is 409, any other failure 503 with `code`. The
 * write carries the request's pending authentication event, if it has one not stored yet (one
 * commit for both instead of two); it is stored then, else it is still pending.
 */
export async function claimed(ctx: ExecutionContext, write: (audit: Signed<AuthEvent> | undefined) => Promise<void>, code: DomainError['code']): Promise<void> {
  const audit = ctx.audit && !ctx.audit.stored ? ctx.audit : undefined;
  try {
    await write(audit?.event);
    if (audit) audit.stored = true;
  } catch (e) {
    const id = ctx.tx.businessTransactionId;
    if (e instanceof DuplicateTransactionError) throw duplicate(id);
    throw fail('unavailable', 'Storage is unavailable; nothing was executed.', code, undefined, e);
  }
}
