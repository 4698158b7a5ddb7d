import { established, stage } from '../execution/pipeline.js';
import type { ExecutionDeps } from '../execution/context.js';
import type { OutcomeStage } from '../execution/outcome-stages.js';

/**
 * Spec 4.3.4-5: a `requires_override` decision is released when `authorization.approval` carries
 * a valid signed approval (accepted once), and held for a human when it carries none. An invalid
 * one is 403 APPROVAL_INVALID and stores nothing.
 */
export const signedApproval = (d: ExecutionDeps): OutcomeStage =>
  stage('signed approval', async (ctx) => {
    const { decision, tx, callerId } = ctx.decided;
    if (!decision.requires_override) return;
    const approval = tx.authorization.approval;
    if (approval === undefined) return;
    await d.approvals.accept(approval, { requesterId: callerId, tx, approvalScope: ctx.policy.document.approvalScope });
    ctx.overrideApproved = true;
  });

/**
 * A held transaction's approval (CONTRACT "Held transactions"): the signed approval must name this
 * transaction, be signed by the approver who sent it (never the requester or its principal), scope
 * what the policy says, carry the hash of the request's signals, be unexpired and unused; it is
 * accepted once. An invalid one is 403 APPROVAL_INVALID and changes nothing.
 */
export const acceptHeldApproval = (d: ExecutionDeps): OutcomeStage =>
  stage('accept the approval', async (ctx) => {
    const { tx, callerId } = ctx.decided;
    const held = established(ctx.heldApproval, 'approval');
    await d.approvals.accept(held.approval, { requesterId: callerId, tx, approvalScope: ctx.policy.document.approvalScope, approverId: held.approverId });
  });
