/**
 * The decision phase's own stages: admission (caller rules, the policy version, the connector, the
 * duplicate check) and the policy's decision. Business validation adds its stages between them
 * (see `executionPhases` in execution-service.ts for the order). A stage that refuses returns the
 * refusal as a decision (`reject`, `matchedRuleId` saying why), which ends the phase.
 */
import { mayAssertPrincipal, mayRequestCapability, mayUseTenant } from '../identity/caller.js';
import { evaluatePolicy, type PolicyDecision } from '../policy/index.js';
import { duplicate, type DecisionContext, type ExecutionDeps } from './context.js';
import { established, fail, stage, type Stage } from './pipeline.js';

export type DecisionStage = Stage<DecisionContext, PolicyDecision>;

export const PRINCIPAL_NOT_PERMITTED = 'Caller is not permitted to assert this authority.principalId.';

/** A refusal that is not a rule of the policy (`matchedRuleId` names why: NOT_AUTHORIZED, source-mismatch, …). */
export const refusalDecision = (matchedRuleId: string, reason: string): PolicyDecision => ({ action: 'reject', reason, requires_override: false, matchedRuleId });

export const callerRules = (d: ExecutionDeps): DecisionStage =>
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

export const policyVersion = (d: ExecutionDeps): DecisionStage =>
  stage('policy version', async (ctx) => {
    const { name, version } = ctx.tx.policy;
    const policy = await d.policies.find(name, version);
    if (!policy) throw fail('not_found', `Policy '${name}' version '${version}' was not found.`);
    ctx.policy = policy;
    ctx.binding = { name, version, contentHash: policy.contentHash };
  });

/** The connector of the action, found through the registry the composition root chains. */
export const connector = (d: ExecutionDeps): DecisionStage =>
  stage('connector', async (ctx) => {
    ctx.connector = await findConnector(d, ctx.tx.intent.action, ctx.tx.policy.name);
  });

/** CONNECTOR_NOT_REGISTERED when none serves the action; 400 when the one found is decided by another policy. */
export async function findConnector(d: Pick<ExecutionDeps, 'connectors'>, action: string, policyName: string) {
  const found = await d.connectors.find(action);
  if (!found) throw fail('unavailable', `No connector is registered for action '${action}'.`, 'CONNECTOR_NOT_REGISTERED');
  if (found.policyName !== undefined && found.policyName !== policyName) {
    throw fail('invalid', `Action '${action}' is decided by policy '${found.policyName}'; policy.name must name it.`);
  }
  return found;
}

/** Cheap early check; the claim in the atomic writes is the real guarantee. */
export const duplicateId = (d: ExecutionDeps): DecisionStage =>
  stage('duplicate id', async ({ tx }) => {
    if (await d.store.isClaimed(tx.businessTransactionId)) throw duplicate(tx.businessTransactionId);
  });

/** The policy's decision on the signals as business validation left them: the phase's last stage. */
export const decide = (): DecisionStage =>
  stage('decide', async (ctx) => {
    const policy = established(ctx.policy, 'policy');
    const { tx } = ctx;
    ctx.byRules = true;
    return evaluatePolicy(policy.compiled, { signals: ctx.signals, intent: { action: tx.intent.action, parameters: tx.intent.parameters } });
  });
