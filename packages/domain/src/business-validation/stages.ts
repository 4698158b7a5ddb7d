/**
 * The pipeline stages of business validation (spec 1.7-1.8, 4.3 rules 6, 11, 12): the sources a
 * policy names are asked, a caller value that differs from a source's is refused, signals bound to
 * the intent must equal the values released, and just before release the facts and the grant are
 * checked again. Each refusal is a signed Refusal Record (403 POLICY_DENIED) naming why in
 * `matchedRuleId`.
 */
import { inForce } from '../authority/grants.js';
import { established, fail, stage } from '../execution/pipeline.js';
import type { DecisionContext, ExecutionDeps, OutcomeContext } from '../execution/context.js';
import { refusalDecision, type DecisionStage } from '../execution/decision-stages.js';
import { markErrored, type OutcomeStage } from '../execution/outcome-stages.js';
import { BOUND_SIGNAL_MISMATCH_RULE_ID, SOURCE_MISMATCH_RULE_ID, SOURCE_UNAVAILABLE_RULE_ID } from '../policy/document.js';
import { isSent } from '../policy/evaluate.js';
import { valueAtPath } from '../shared/request-paths.js';
import { sameValue } from '../shared/same-value.js';
import { conditionsOf, sourcedFacts } from './asking.js';

/** Business validation failed: the refusal (a decision) ends the decision phase. */
const failValidation = (ctx: DecisionContext, matchedRuleId: string, reason: string) => {
  ctx.assessment.businessValidation.status = 'FAILED';
  return refusalDecision(matchedRuleId, reason);
};

export const askSources = (d: ExecutionDeps): DecisionStage =>
  stage('ask the sources', async (ctx) => {
    const facts = sourcedFacts(established(ctx.policy, 'policy').document);
    if (facts.length === 0) return;
    const asked = await d.sources.askAll(facts, ctx.tx);
    if (!asked.ok) return failValidation(ctx, SOURCE_UNAVAILABLE_RULE_ID, `A business signal source cannot be asked or trusted: ${asked.reason}`);
    ctx.assessment.businessValidation = { status: 'VERIFIED', sourcedSignals: asked.signals };
    ctx.conditions = conditionsOf(asked.signals);
  });

/** The caller never decides a sourced value: one that differs is refused, and the policy decides on the source's. */
export const refuseSourceMismatch = (d: ExecutionDeps): DecisionStage =>
  stage('source mismatch', async (ctx) => {
    const sourced = ctx.assessment.businessValidation.sourcedSignals;
    if (sourced.length === 0) return;
    const sent = ctx.tx.signals;
    for (const s of sourced) {
      if (isSent(sent, s.signal) && !sameValue(d.hasher, sent[s.signal], s.value)) {
        return failValidation(ctx, SOURCE_MISMATCH_RULE_ID, `Signal '${s.signal}' differs from the value of its source '${s.source}'`);
      }
    }
    ctx.signals = { ...sent, ...Object.fromEntries(sourced.map((s) => [s.signal, s.value])) };
  });

/** A signal bound to an intent path must equal the value released (spec 2.8 `boundSignals`). */
export const checkBoundSignals = (d: ExecutionDeps): DecisionStage =>
  stage('bound signals', async (ctx) => {
    const bound = established(ctx.policy, 'policy').document.boundSignals ?? {};
    for (const [signal, path] of Object.entries(bound)) {
      const intentPath = path.startsWith('intent.') ? path : `intent.${path}`;
      const released = valueAtPath(ctx.tx, intentPath);
      const problem = !isSent(ctx.signals, signal)
        ? `Signal '${signal}' is bound to ${intentPath} but was not sent`
        : released === undefined
          ? `Signal '${signal}' is bound to ${intentPath}, which the intent does not carry`
          : !sameValue(d.hasher, ctx.signals[signal], released)
            ? `Signal '${signal}' and ${intentPath} disagree`
            : undefined;
      if (problem) return failValidation(ctx, BOUND_SIGNAL_MISMATCH_RULE_ID, problem);
    }
  });

/**
 * Spec 4.3.6: after the intent is stored and before anything is sent, the facts' `validUntil`, the
 * sources' answers and the grant are checked again. When one no longer holds, nothing is sent:
 * 409 AUTHORIZATION_NO_LONGER_VALID, and the intent is ERRORED with phase `recheck-failed`.
 */
export const recheckAtRelease = (d: ExecutionDeps): OutcomeStage =>
  stage('re-check at release', async (ctx) => {
    const problem = await whatNoLongerHolds(d, ctx);
    if (problem === undefined) return;
    await markErrored(d, ctx.decided.tx.businessTransactionId, 'recheck-failed', `Nothing was released: ${problem}.`);
    return {
      kind: 'failed',
      error: fail('conflict', `The authorization no longer holds; nothing was released: ${problem}.`, 'AUTHORIZATION_NO_LONGER_VALID', { executionStatus: 'NOT_EXECUTED' }),
    };
  });

async function whatNoLongerHolds(d: ExecutionDeps, ctx: OutcomeContext): Promise<string | undefined> {
  const now = d.clock.now().getTime();
  const { assessment, tx } = ctx.decided;
  const sourced = assessment.businessValidation.sourcedSignals;
  for (const s of sourced) {
    if (!(Date.parse(s.validUntil) > now)) return `the fact '${s.signal}' of source '${s.source}' held only until ${s.validUntil}`;
  }
  const grant = assessment.authority.grant;
  if (grant) {
    const current = await d.grants.get(grant.grantId).catch(() => undefined);
    if (!inForce(current, now)) return `the authority grant ${grant.grantId} was revoked or has expired`;
  }
  if (sourced.length > 0) {
    const again = await d.sources.askAll(sourcedFacts(ctx.policy.document), tx);
    if (!again.ok) return `a business signal source cannot be asked again: ${again.reason}`;
    for (const s of sourced) {
      const current = again.signals.find((n) => n.signal === s.signal);
      if (!current || !sameValue(d.hasher, current.value, s.value)) return `source '${s.source}' no longer answers the value the decision rested on for '${s.signal}'`;
    }
  }
  return undefined;
}
