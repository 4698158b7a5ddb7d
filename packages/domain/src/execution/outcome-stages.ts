/**
 * The outcome phase's stages: what becomes of a decided transaction. A rejection is a signed
 * Refusal Record; a record without release (`POST /transactions`) or a `requires_override`
 * decision without an approval is a Trust Record without executions; anything else is released:
 * a signed intent durably stored BEFORE anything is sent, the release, and the signed, chained
 * Trust Record. Business validation's re-check at release and the signed approval of an override
 * are stages of this phase too (see `executionPhases` in execution-service.ts for the order).
 */
import { buildTrustRecord } from './chain.js';
import { ConnectorError } from './connectors.js';
import {
  assessmentOf,
  claimed,
  claimOf,
  signOrFail,
  type ExecutionDeps,
  type ExecutionOutcome,
  type OutcomeContext,
} from './context.js';
import { established, fail, stage, type Stage } from './pipeline.js';
import type { Assessment, ExecutionIntent, ExecutionTrustRecord, IntentStatus, RefusalRecord, ReleaseContext, SignedTrustRecord } from './records.js';
import type { DecidedTransaction } from './decided.js';
import { HELD_TRANSACTION_KIND } from './held.js';
import type { PolicyDecision } from '../policy/index.js';

export type OutcomeStage = Stage<OutcomeContext, ExecutionOutcome>;

/** The signed Refusal Record of a decided transaction refused by `decision` at `at`. */
export function signRefusal(d: Pick<ExecutionDeps, 'signer'>, decided: DecidedTransaction, decision: PolicyDecision, at: string) {
  const { tx } = decided;
  return signOrFail(d.signer, {
    recordType: 'refusal-record',
    businessTransactionId: tx.businessTransactionId,
    businessTransactionHash: decided.btxHash,
    callerId: decided.callerId,
    principalId: tx.authority.principalId,
    action: tx.intent.action,
    policy: { name: decided.policy.name, version: decided.policy.version },
    policyContentHash: decided.policy.contentHash,
    decision,
    matchedRuleId: decision.matchedRuleId,
    reason: decision.reason,
    assessment: assessmentOf(decided, 'REFUSED'),
    refusedAt: at,
  } satisfies RefusalRecord);
}

/** Stores a signed Refusal Record of a rejection: every refusal of a request ends here. */
export const refuse = (d: ExecutionDeps): OutcomeStage =>
  stage('refuse a rejection', async (ctx) => {
    const { decided } = ctx;
    if (decided.decision.action !== 'reject') return;
    const refusal = await signRefusal(d, decided, decided.decision, ctx.now);
    await claimed(ctx, (audit) => d.store.storeRefusal(claimOf(ctx, 'REFUSED'), refusal, audit), 'EXECUTION_RECORD_INCOMPLETE');
    return { kind: 'refused', refusal };
  });

/** A signed Trust Record without executions: the decision, recorded, nothing released. */
function signNotReleased(d: ExecutionDeps, ctx: OutcomeContext): Promise<SignedTrustRecord> {
  const { decided } = ctx;
  const { tx } = decided;
  return signOrFail(d.signer, {
    recordType: 'execution-trust-record',
    businessTransactionId: tx.businessTransactionId,
    businessTransactionHash: decided.btxHash,
    callerId: decided.callerId,
    transaction: { ...tx, policy: { ...tx.policy, contentHash: decided.policy.contentHash } },
    decision: decided.decision,
    assessment: assessmentOf(decided, 'NOT_RELEASED'),
    executions: [],
    recordedAt: ctx.now,
  } satisfies ExecutionTrustRecord);
}

/** `POST /transactions`: a Trust Record without release, whatever the decision (but a rejection). */
export const recordWithoutRelease = (d: ExecutionDeps): OutcomeStage =>
  stage('record without release', async (ctx) => {
    const record = await signNotReleased(d, ctx);
    await claimed(ctx, (audit) => d.store.storeRecordedTransaction(claimOf(ctx, 'RECORDED'), record, audit), 'EXECUTION_RECORD_INCOMPLETE');
    return { kind: 'recorded', record };
  });

/**
 * A `requires_override` decision that no accepted approval came with is recorded and held for a
 * human (CONTRACT "Held transactions"): its Trust Record without executions, the held transaction
 * PENDING for `holdSeconds`, and the notices that announce it, in the request's one commit.
 */
export const holdForOverride = (d: ExecutionDeps): OutcomeStage =>
  stage('hold for an override', async (ctx) => {
    const { decided } = ctx;
    if (!decided.decision.requires_override || ctx.overrideApproved) return;
    const record = await signNotReleased(d, ctx);
    const id = decided.tx.businessTransactionId;
    const expiresAt = new Date(Date.parse(ctx.now) + ctx.holdSeconds * 1000).toISOString();
    const notices = d.holds.notifier.noticesOf({
      kind: HELD_TRANSACTION_KIND,
      id,
      summary: `${decided.callerId} asks for ${decided.tx.intent.action}: ${decided.decision.reason}`.slice(0, 500),
      createdAt: ctx.now,
    });
    await claimed(ctx, (audit) => d.store.storeHeld(claimOf(ctx, 'HELD'), record, { decided, expiresAt }, audit, notices), 'EXECUTION_RECORD_INCOMPLETE');
    return { kind: 'held', record, expiresAt };
  });

/** The signed intent of a decided transaction, about to be released at `ctx.now`. */
function signIntent(d: ExecutionDeps, ctx: OutcomeContext) {
  const { decided } = ctx;
  const { tx } = decided;
  return signOrFail(d.signer, {
    recordType: 'execution-intent',
    businessTransactionId: tx.businessTransactionId,
    businessTransactionHash: decided.btxHash,
    action: tx.intent.action,
    connector: ctx.connector.namespace,
    callerId: decided.callerId,
    principalId: tx.authority.principalId,
    ...(tx.metadata.tenantId !== undefined ? { tenantId: tx.metadata.tenantId } : {}),
    policy: decided.policy,
    decision: decided.decision,
    ...(ctx.heldApproval ? { approvedBy: ctx.heldApproval.approverId } : {}),
    preparedAt: ctx.now,
  } satisfies ExecutionIntent);
}

/** The name of the stage after which the release may begin: the signed intent is durable. */
export const STORE_THE_INTENT = 'store the intent';

/** The signed intent is durably committed before anything is released (spec 4.3.9). */
export const storeIntent = (d: ExecutionDeps): OutcomeStage =>
  stage(STORE_THE_INTENT, async (ctx) => {
    const intent = await signIntent(d, ctx);
    await claimed(ctx, (audit) => d.store.prepareIntent(claimOf(ctx, 'EXECUTING'), intent, ctx.now, audit), 'EXECUTION_INTENT_UNAVAILABLE');
  });

/**
 * A held transaction's release: the human's approval and the signed intent in ONE durable commit,
 * before anything is released. Of concurrent approvals exactly one gets here; the others, and an
 * approval after the transaction expired or was rejected, are 409 and change nothing.
 */
export const storeApprovedIntent = (d: ExecutionDeps): OutcomeStage =>
  stage(STORE_THE_INTENT, async (ctx) => {
    const approval = established(ctx.heldApproval, 'approval');
    const intent = await signIntent(d, ctx);
    let approved: boolean;
    try {
      approved = await d.store.approveHeld(ctx.decided.tx.businessTransactionId, approval, intent, ctx.now);
    } catch (e) {
      throw fail('unavailable', 'Storage is unavailable; nothing was executed.', 'EXECUTION_INTENT_UNAVAILABLE', undefined, e);
    }
    if (!approved) throw heldNoLongerPending();
  });

export const heldNoLongerPending = () =>
  fail('conflict', 'This held transaction is no longer pending: it was approved, rejected or has expired.', 'CHANGE_ALREADY_DECIDED');

/** Marks the stored intent ERRORED; it stays PREPARED if even that fails, listed for reconciliation either way. */
export async function markErrored(d: ExecutionDeps, id: string, phase: NonNullable<IntentStatus['error']>['phase'], message: string): Promise<void> {
  await d.store.markErrored(id, { phase, message }, d.clock.now().toISOString()).catch(() => undefined);
}

/** What a connector's failure means for the request; the intent is ERRORED with its phase. */
function releaseFailure(e: unknown) {
  const phase = e instanceof ConnectorError ? e.phase : 'outcome-unknown';
  return failureOfPhase(phase, e instanceof Error ? e.message : String(e), e);
}

/**
 * The error a request answers for a release that ended in `phase` (the phase an ERRORED intent
 * keeps): nothing was executed (a re-check failed, a condition no longer held, the connector failed
 * before sending), or the outcome is unknown.
 */
export function failureOfPhase(phase: NonNullable<IntentStatus['error']>['phase'], message: string, cause?: unknown) {
  if (phase === 'recheck-failed') {
    return fail('conflict', `The authorization no longer holds; ${message.replace(/^Nothing was released: /, 'nothing was released: ')}`, 'AUTHORIZATION_NO_LONGER_VALID', { executionStatus: 'NOT_EXECUTED' }, cause);
  }
  if (phase === 'conditions-not-met') {
    return fail('conflict', `A condition of the authorization no longer holds; nothing was executed. ${message}`.trim(), 'AUTHORIZATION_NO_LONGER_VALID', { executionStatus: 'NOT_EXECUTED' }, cause);
  }
  if (phase === 'before-send') {
    return fail('bad_gateway', 'The connector failed before sending; the action was not executed.', 'RUNTIME_ERROR', { executionStatus: 'NOT_EXECUTED' }, cause);
  }
  return fail('bad_gateway', 'The outcome of the release is unknown; the intent must be reconciled.', 'EXECUTION_OUTCOME_UNKNOWN', { executionStatus: 'EXECUTION_UNKNOWN' }, cause);
}

export const release = (d: ExecutionDeps): OutcomeStage =>
  stage('release', async (ctx) => {
    const { tx, btxHash, conditions } = ctx.decided;
    const releasedAt = d.clock.now().toISOString();
    try {
      const { result } = await ctx.connector.release({
        businessTransactionId: tx.businessTransactionId,
        action: tx.intent.action,
        parameters: tx.intent.parameters,
        intentHash: btxHash,
        conditions,
      });
      ctx.released = { releasedAt, result };
    } catch (e) {
      const phase = e instanceof ConnectorError ? e.phase : 'outcome-unknown';
      await markErrored(d, tx.businessTransactionId, phase, e instanceof Error ? e.message : String(e));
      return { kind: 'failed', error: releaseFailure(e) };
    }
  });

/** The release's context: what its Trust Record is built from, now or, after a crash, at the next start. */
function releaseContextOf(d: ExecutionDeps, ctx: OutcomeContext, completedAt: string): ReleaseContext {
  const { decided } = ctx;
  const { tx } = decided;
  const { releasedAt, result } = established(ctx.released, 'release');
  return {
    transaction: tx,
    decision: decided.decision,
    policy: decided.policy,
    assessment: assessmentOf(decided, 'EXECUTED') satisfies Assessment,
    ...(ctx.heldApproval ? { override: ctx.heldApproval } : {}),
    execution: {
      executionId: d.ids.uuid(),
      connector: ctx.connector.namespace,
      action: tx.intent.action,
      status: 'SUCCEEDED',
      releasedAt,
      completedAt,
      resultHash: d.hasher.contentHash(result ?? null),
      result: result ?? null,
    },
  };
}

const notRecorded = (e: unknown) =>
  fail('unavailable', 'The action was executed but its result could not be recorded; the intent must be reconciled.', 'EXECUTION_INTENT_RESULT_NOT_RECORDED', { executionStatus: 'EXECUTED' }, e);
const incomplete = (e?: unknown) =>
  fail('unavailable', 'The action was executed; its Trust Record will be completed at the next start.', 'EXECUTION_RECORD_INCOMPLETE', { executionStatus: 'EXECUTED' }, e);

/**
 * The release is recorded with its signed, chained Trust Record in ONE durable commit (FINALIZED).
 * Should building the record fail, that commit keeps RELEASED with the context the record is
 * rebuilt from at the next start.
 */
export const recordRelease = (d: ExecutionDeps): OutcomeStage =>
  stage('record the release', async (ctx) => {
    const { tx, callerId, btxHash } = ctx.decided;
    const completedAt = d.clock.now().toISOString();
    const context = releaseContextOf(d, ctx, completedAt);
    const result = established(ctx.released, 'release').result;
    let done;
    try {
      done = await d.store.completeRelease(tx.businessTransactionId, context, (head) => buildTrustRecord(d, context, head, callerId, completedAt, btxHash), completedAt);
    } catch (e) {
      return { kind: 'failed', error: notRecorded(e) };
    }
    if (done.record === undefined) return { kind: 'failed', error: incomplete(done.buildError) };
    return { kind: 'executed', record: done.record, result };
  });

/**
 * The release recorded in two commits, RELEASED first and then FINALIZED, with `between` run in
 * between. Sandbox mode puts it before 'record the release' for the requests that ask for it:
 * crash tests kill the process in between, to prove that a RELEASED intent is finalized at the
 * next start.
 */
export const recordReleaseInTwoSteps = (
  d: ExecutionDeps,
  applies: (ctx: OutcomeContext) => boolean,
  between: (ctx: OutcomeContext) => Promise<void>,
): OutcomeStage =>
  stage('record the release in two steps', async (ctx) => {
    if (!applies(ctx)) return;
    const { tx, callerId, btxHash } = ctx.decided;
    const id = tx.businessTransactionId;
    const completedAt = d.clock.now().toISOString();
    const context = releaseContextOf(d, ctx, completedAt);
    try {
      await d.store.markReleased(id, context, completedAt);
    } catch (e) {
      return { kind: 'failed', error: notRecorded(e) };
    }
    await between(ctx);
    let record;
    try {
      record = await finalizeIntent(d, id, context, callerId, btxHash);
    } catch (e) {
      return { kind: 'failed', error: incomplete(e) };
    }
    if (!record) return { kind: 'failed', error: fail('unavailable', 'The action was executed; its Trust Record was completed elsewhere.', 'EXECUTION_RECORD_INCOMPLETE', { executionStatus: 'EXECUTED' }) };
    return { kind: 'executed', record, result: established(ctx.released, 'release').result };
  });

/** Finalizes a RELEASED intent from its context (request path and restart recovery). */
export function finalizeIntent(d: ExecutionDeps, id: string, context: ReleaseContext, callerId: string, businessTransactionHash: string) {
  const at = d.clock.now().toISOString();
  return d.store.finalize(id, (head) => buildTrustRecord(d, context, head, callerId, at, businessTransactionHash), at);
}
