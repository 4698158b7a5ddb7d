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

export type OutcomeStage = Stage<OutcomeContext, ExecutionOutcome>;

/** Stores a signed Refusal Record of a rejection: every refusal of the pipeline ends here. */
export const refuse = (d: ExecutionDeps): OutcomeStage =>
  stage('refuse a rejection', async (ctx) => {
    const { decided } = ctx;
    const { tx, decision } = decided;
    if (decision.action !== 'reject') return;
    const refusal = await signOrFail(d.signer, {
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
      refusedAt: ctx.now,
    } satisfies RefusalRecord);
    await claimed(ctx, (audit) => d.store.storeRefusal(claimOf(ctx, 'REFUSED'), refusal, audit), 'EXECUTION_RECORD_INCOMPLETE');
    return { kind: 'refused', refusal };
  });

/** A signed Trust Record without executions: the decision, recorded, nothing released. */
async function recordNotReleased(d: ExecutionDeps, ctx: OutcomeContext): Promise<SignedTrustRecord> {
  const { decided } = ctx;
  const { tx } = decided;
  const record = await signOrFail(d.signer, {
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
  await claimed(ctx, (audit) => d.store.storeRecordedTransaction(claimOf(ctx, 'RECORDED'), record, audit), 'EXECUTION_RECORD_INCOMPLETE');
  return record;
}

/** `POST /transactions`: a Trust Record without release, whatever the decision (but a rejection). */
export const recordWithoutRelease = (d: ExecutionDeps): OutcomeStage =>
  stage('record without release', async (ctx) => ({ kind: 'recorded', record: await recordNotReleased(d, ctx) }));

/** A `requires_override` decision that no accepted approval came with is recorded and held for a human. */
export const holdForOverride = (d: ExecutionDeps): OutcomeStage =>
  stage('hold for an override', async (ctx) => {
    if (!ctx.decided.decision.requires_override || ctx.overrideApproved) return;
    return { kind: 'held', record: await recordNotReleased(d, ctx) };
  });

/** The signed intent is durably committed before anything is released (spec 4.3.9). */
export const storeIntent = (d: ExecutionDeps): OutcomeStage =>
  stage('store the intent', async (ctx) => {
    const { decided } = ctx;
    const { tx } = decided;
    const intent = await signOrFail(d.signer, {
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
      preparedAt: ctx.now,
    } satisfies ExecutionIntent);
    await claimed(ctx, (audit) => d.store.prepareIntent(claimOf(ctx, 'EXECUTING'), intent, ctx.now, audit), 'EXECUTION_INTENT_UNAVAILABLE');
  });

/** Marks the stored intent ERRORED; it stays PREPARED if even that fails, listed for reconciliation either way. */
export async function markErrored(d: ExecutionDeps, id: string, phase: NonNullable<IntentStatus['error']>['phase'], message: string): Promise<void> {
  await d.store.markErrored(id, { phase, message }, d.clock.now().toISOString()).catch(() => undefined);
}

/** What a connector's failure means for the request; the intent is ERRORED with its phase. */
function releaseFailure(e: unknown) {
  const phase = e instanceof ConnectorError ? e.phase : 'outcome-unknown';
  const message = e instanceof Error ? e.message : String(e);
  if (phase === 'conditions-not-met') {
    return fail('conflict', `A condition of the authorization no longer holds; nothing was executed. ${message}`.trim(), 'AUTHORIZATION_NO_LONGER_VALID', { executionStatus: 'NOT_EXECUTED' }, e);
  }
  if (phase === 'before-send') {
    return fail('bad_gateway', 'The connector failed before sending; the action was not executed.', 'RUNTIME_ERROR', { executionStatus: 'NOT_EXECUTED' }, e);
  }
  return fail('bad_gateway', 'The outcome of the release is unknown; the intent must be reconciled.', 'EXECUTION_OUTCOME_UNKNOWN', { executionStatus: 'EXECUTION_UNKNOWN' }, e);
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
