import { established, stage, type ExecutionDeps, type Stage } from '../execution/pipeline.js';

/**
 * Spec 4.3.4-5: a `requires_override` decision is released when `authorization.approval` carries
 * a valid signed approval (accepted once), and recorded as pending override when it carries none.
 * An invalid one is 403 APPROVAL_INVALID and stores nothing.
 */
export const signedApproval = (d: ExecutionDeps): Stage =>
  stage('signed approval', async (ctx) => {
    const decision = established(ctx.decision, 'decision');
    if (ctx.mode !== 'release' || !decision.requires_override) return;
    const approval = ctx.tx.authorization.approval;
    if (approval === undefined) return;
    await d.approvals.accept(approval, { caller: ctx.caller, tx: ctx.tx, approvalScope: established(ctx.policy, 'policy').document.approvalScope });
    ctx.overrideApproved = true;
  });
