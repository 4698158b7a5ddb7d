import { fail, established, stage } from '../execution/pipeline.js';
import type { ExecutionDeps } from '../execution/context.js';
import { refusalDecision, type DecisionStage } from '../execution/decision-stages.js';
import { AUTHORITY_EXPIRED_RULE_ID, NOT_AUTHORIZED_RULE_ID } from '../policy/document.js';
import { brokenLimit, checkedGrant } from './grants.js';

/**
 * Spec 4.3.11: a policy with `requireAuthorityGrant` refuses a calling key with no grant in force
 * for the action, or outside every grant's limits, as NOT_AUTHORIZED, and one whose grants have
 * all expired as AUTHORITY_EXPIRED. The grant checked goes into `assessment.authority.grant`.
 * It runs before the sources are asked: a caller without authority makes no outbound call happen.
 */
export const authorityGrant = (d: ExecutionDeps): DecisionStage =>
  stage('authority grant', async (ctx) => {
    if (established(ctx.policy, 'policy').document.requireAuthorityGrant !== true) return;
    const { caller, tx } = ctx;
    const authority = ctx.assessment.authority;
    const grants = await d.grants.forGrantee(caller.callerId, tx.intent.action).catch((e: unknown) => {
      throw fail('unavailable', 'Storage is unavailable; nothing was executed.', 'EXECUTION_INTENT_UNAVAILABLE', undefined, e);
    });
    const now = Date.parse(ctx.now);
    const current = grants.filter((g) => Date.parse(g.expiresAt) > now);
    authority.status = 'FAILED';
    if (current.length === 0) {
      const expired = grants[0];
      authority.grant = expired ? checkedGrant(expired) : null;
      const reason = expired
        ? `The authority grant of '${caller.callerId}' for '${tx.intent.action}' expired at ${expired.expiresAt}`
        : `'${caller.callerId}' holds no authority grant for '${tx.intent.action}'`;
      return refusalDecision(expired ? AUTHORITY_EXPIRED_RULE_ID : NOT_AUTHORIZED_RULE_ID, reason);
    }
    for (const g of current) {
      if (brokenLimit(g.limits, tx) === undefined) {
        ctx.assessment.authority = { ...authority, status: 'VERIFIED', grant: checkedGrant(g) };
        return;
      }
    }
    authority.grant = checkedGrant(current[0]!);
    return refusalDecision(NOT_AUTHORIZED_RULE_ID, `Outside the limits of the authority grant: ${brokenLimit(current[0]!.limits, tx)!}`);
  });
