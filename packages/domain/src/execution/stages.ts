/**
 * The stages of the execution pipeline that every request passes: admission (caller rules, the
 * policy version, the connector, the duplicate check), the decision, and the release with its
 * records. Business validation adds its own stages between them (see `pipeline` in
 * execution-service.ts for the order).
 */
import { mayAssertPrincipal, mayRequestCapability, mayUseTenant } from '../identity/caller.js';
import { evaluatePolicy, type PolicyDecision } from '../policy/index.js';
import { buildTrustRecord } from './chain.js';
import { ConnectorError } from './connectors.js';
import {
  assessmentOf,
  claimed,
  claimOf,
  duplicate,
  established,
  fail,
  signOrFail,
  stage,
  type ExecutionContext,
  type ExecutionDeps,
  type Stage,
} from './pipeline.js';
import type { Assessment, ExecutionIntent, ExecutionTrustRecord, IntentStatus, RefusalRecord, ReleaseContext } from './records.js';

export const PRINCIPAL_NOT_PERMITTED = 'Caller is not permitted to assert this authority.principalId.';

export const callerRules = (d: ExecutionDeps): Stage =>
  stage('caller rules', async ({ caller, tx }) => {
    const unchecked = d.isAuthDisabled?.(caller) ?? false;
    if (!unchecked && !mayAssertPrincipal(caller, tx.authority.principalId)) throw fail('forbidden', PRINCIPAL_NOT_PERMITTED);
    if (!unchecked && !mayUseTenant(caller, tx.metadata.tenantId)) {
      throw fail('forbidden', 'Caller is not permitted to act for this metadata.tenantId.', 'TENANT_NOT_ALLOWED');
    }
    if (!mayRequestCapability(caller, tx.intent.action)) {
      throw fail('forbidden', `Caller is not permitted to request capability '${tx.intent.action}'.`, 'CAPABILITY_NOT_ALLOWED');
    }
  });

export const policyVersion = (d: ExecutionDeps): Stage =>
  stage('policy version', async (ctx) => {
    const { name, version } = ctx.tx.policy;
    const policy = await d.policies.find(name, version);
    if (!policy) throw fail('not_found', `Policy '${name}' version '${version}' was not found.`);
    ctx.policy = policy;
    ctx.binding = { name, version, contentHash: policy.contentHash };
  });

export const connector = (d: ExecutionDeps): Stage =>
  stage('connector', async (ctx) => {
    const { tx } = ctx;
    const found = await d.connectors.find(tx.intent.action);
    if (!found) throw fail('unavailable', `No connector is registered for action '${tx.intent.action}'.`, 'CONNECTOR_NOT_REGISTERED');
    if (found.policyName !== undefined && found.policyName !== tx.policy.name) {
      throw fail('invalid', `Action '${tx.intent.action}' is decided by policy '${found.policyName}'; policy.name must name it.`);
    }
    ctx.connector = found;
  });

/** Cheap early check; the claim in the atomic writes is the real guarantee. */
export const duplicateId = (d: ExecutionDeps): Stage =>
  stage('duplicate id', async ({ tx }) => {
    if (await d.store.isClaimed(tx.businessTransactionId)) throw duplicate(tx.businessTransactionId);
  });

/**
 * Stores a signed Refusal Record of `decision` and answers 403 POLICY_DENIED. Every refusal of the
 * pipeline goes through here: a policy's rejection, and the refusals of business validation.
 */
export async function refuse(d: ExecutionDeps, ctx: ExecutionContext, decision: PolicyDecision): Promise<never> {
  const { tx, caller } = ctx;
  const binding = established(ctx.binding, 'policy');
  const refusal = await signOrFail(d.signer, {
    recordType: 'refusal-record',
    businessTransactionId: tx.businessTransactionId,
    businessTransactionHash: ctx.btxHash,
    callerId: caller.callerId,
    principalId: tx.authority.principalId,
    action: tx.intent.action,
    policy: { name: binding.name, version: binding.version },
    policyContentHash: binding.contentHash,
    decision,
    matchedRuleId: decision.matchedRuleId,
    reason: decision.reason,
    assessment: assessmentOf(ctx, 'REFUSED'),
    refusedAt: ctx.now,
  } satisfies RefusalRecord);
  await claimed(ctx, (audit) => d.store.storeRefusal(claimOf(ctx, 'REFUSED'), refusal, audit), 'EXECUTION_RECORD_INCOMPLETE');
  throw fail('forbidden', `Execution rejected: ${decision.reason}`, 'POLICY_DENIED');
}

/** A refusal that is not a rule of the policy (`matchedRuleId` names why: NOT_AUTHORIZED, source-mismatch, …). */
export const refusalDecision = (matchedRuleId: string, reason: string): PolicyDecision => ({ action: 'reject', reason, requires_override: false, matchedRuleId });

export const decide = (): Stage =>
  stage('decide', async (ctx) => {
    const policy = established(ctx.policy, 'policy');
    const { tx } = ctx;
    ctx.decision = evaluatePolicy(policy.compiled, { signals: ctx.signals, intent: { action: tx.intent.action, parameters: tx.intent.parameters } });
  });

export const refuseRejection = (d: ExecutionDeps): Stage =>
  stage('refuse a rejection', async (ctx) => {
    const decision = established(ctx.decision, 'decision');
    if (decision.action === 'reject') await refuse(d, ctx, decision);
  });

/** `POST /transactions`, and an approval that waits for a human override: a Trust Record without release. */
export const recordWithoutRelease = (d: ExecutionDeps): Stage =>
  stage('record without release', async (ctx) => {
    const decision = established(ctx.decision, 'decision');
    if (ctx.mode === 'release' && (!decision.requires_override || ctx.overrideApproved)) return;
    const { tx } = ctx;
    const record = await signOrFail(d.signer, {
      recordType: 'execution-trust-record',
      businessTransactionId: tx.businessTransactionId,
      businessTransactionHash: ctx.btxHash,
      callerId: ctx.caller.callerId,
      transaction: { ...tx, policy: { ...tx.policy, contentHash: established(ctx.binding, 'policy').contentHash } },
      decision,
      assessment: assessmentOf(ctx, 'NOT_RELEASED'),
      executions: [],
      recordedAt: ctx.now,
    } satisfies ExecutionTrustRecord);
    await claimed(ctx, (audit) => d.store.storeRecordedTransaction(claimOf(ctx, 'RECORDED'), record, audit), 'EXECUTION_RECORD_INCOMPLETE');
    return ctx.mode === 'record' ? { kind: 'recorded', record } : { kind: 'pending-override', record };
  });

/** The signed intent is durably committed before anything is released (spec 4.3.9). */
export const storeIntent = (d: ExecutionDeps): Stage =>
  stage('store the intent', async (ctx) => {
    const { tx } = ctx;
    const intent = await signOrFail(d.signer, {
      recordType: 'execution-intent',
      businessTransactionId: tx.businessTransactionId,
      businessTransactionHash: ctx.btxHash,
      action: tx.intent.action,
      connector: established(ctx.connector, 'connector').namespace,
      callerId: ctx.caller.callerId,
      principalId: tx.authority.principalId,
      ...(tx.metadata.tenantId !== undefined ? { tenantId: tx.metadata.tenantId } : {}),
      policy: established(ctx.binding, 'policy'),
      decision: established(ctx.decision, 'decision'),
      preparedAt: ctx.now,
    } satisfies ExecutionIntent);
    await claimed(ctx, (audit) => d.store.prepareIntent(claimOf(ctx, 'EXECUTING'), intent, ctx.now, audit), 'EXECUTION_INTENT_UNAVAILABLE');
    await d.hooks?.beforeRelease?.(tx);
  });

/** Marks the stored intent ERRORED; it stays PREPARED if even that fails, listed for reconciliation either way. */
export async function markErrored(d: ExecutionDeps, id: string, phase: NonNullable<IntentStatus['error']>['phase'], message: string): Promise<void> {
  await d.store.markErrored(id, { phase, message }, d.clock.now().toISOString()).catch(() => undefined);
}

export const release = (d: ExecutionDeps): Stage =>
  stage('release', async (ctx) => {
    const { tx } = ctx;
    const releasedAt = d.clock.now().toISOString();
    try {
      const { result } = await established(ctx.connector, 'connector').release({
        businessTransactionId: tx.businessTransactionId,
        action: tx.intent.action,
        parameters: tx.intent.parameters,
        intentHash: ctx.btxHash,
        conditions: ctx.conditions,
      });
      ctx.released = { releasedAt, result };
    } catch (e) {
      const phase = e instanceof ConnectorError ? e.phase : 'outcome-unknown';
      const message = e instanceof Error ? e.message : String(e);
      await markErrored(d, tx.businessTransactionId, phase, message);
      if (phase === 'conditions-not-met') {
        throw fail('conflict', `A condition of the authorization no longer holds; nothing was executed. ${message}`.trim(), 'AUTHORIZATION_NO_LONGER_VALID', { executionStatus: 'NOT_EXECUTED' }, e);
      }
      if (phase === 'before-send') {
        throw fail('bad_gateway', 'The connector failed before sending; the action was not executed.', 'RUNTIME_ERROR', { executionStatus: 'NOT_EXECUTED' }, e);
      }
      throw fail('bad_gateway', 'The outcome of the release is unknown; the intent must be reconciled.', 'EXECUTION_OUTCOME_UNKNOWN', { executionStatus: 'EXECUTION_UNKNOWN' }, e);
    }
  });

/**
 * The release is recorded with its signed, chained Trust Record in ONE durable commit (FINALIZED).
 * Should building the record fail, that commit keeps RELEASED with the context the record is
 * rebuilt from at the next start. (Sandbox crash tests may ask for the two steps apart, RELEASED
 * first, to kill the process between them: see ExecutionHooks.splitRelease.)
 */
export const recordRelease = (d: ExecutionDeps): Stage =>
  stage('record the release', async (ctx) => {
    const { tx } = ctx;
    const id = tx.businessTransactionId;
    const { releasedAt, result } = established(ctx.released, 'release');
    const completedAt = d.clock.now().toISOString();
    const context: ReleaseContext = {
      transaction: tx,
      decision: established(ctx.decision, 'decision'),
      policy: established(ctx.binding, 'policy'),
      assessment: assessmentOf(ctx, 'EXECUTED') satisfies Assessment,
      execution: {
        executionId: d.ids.uuid(),
        connector: established(ctx.connector, 'connector').namespace,
        action: tx.intent.action,
        status: 'SUCCEEDED',
        releasedAt,
        completedAt,
        resultHash: d.hasher.contentHash(result ?? null),
        result: result ?? null,
      },
    };
    const notRecorded = (e: unknown) =>
      fail('unavailable', 'The action was executed but its result could not be recorded; the intent must be reconciled.', 'EXECUTION_INTENT_RESULT_NOT_RECORDED', { executionStatus: 'EXECUTED' }, e);
    const incomplete = (e?: unknown) =>
      fail('unavailable', 'The action was executed; its Trust Record will be completed at the next start.', 'EXECUTION_RECORD_INCOMPLETE', { executionStatus: 'EXECUTED' }, e);

    if (d.hooks?.splitRelease?.(tx)) {
      await d.store.markReleased(id, context, completedAt).catch((e: unknown) => Promise.reject(notRecorded(e)));
      await d.hooks.afterRelease?.(tx);
      const record = await finalizeIntent(d, id, context, ctx.caller.callerId, ctx.btxHash).catch((e: unknown) => Promise.reject(incomplete(e)));
      if (!record) throw fail('unavailable', 'The action was executed; its Trust Record was completed elsewhere.', 'EXECUTION_RECORD_INCOMPLETE', { executionStatus: 'EXECUTED' });
      return { kind: 'executed', record, result };
    }
    const done = await d.store
      .completeRelease(id, context, (head) => buildTrustRecord(d, context, head, ctx.caller.callerId, completedAt, ctx.btxHash), completedAt)
      .catch((e: unknown) => Promise.reject(notRecorded(e)));
    if (done.record === undefined) throw incomplete(done.buildError);
    return { kind: 'executed', record: done.record, result };
  });

/** Finalizes a RELEASED intent from its context (request path and restart recovery). */
export function finalizeIntent(d: ExecutionDeps, id: string, context: ReleaseContext, callerId: string, businessTransactionHash: string) {
  const at = d.clock.now().toISOString();
  return d.store.finalize(id, (head) => buildTrustRecord(d, context, head, callerId, at, businessTransactionHash), at);
}
