import { EVERY_CALLER, type StoredIntent } from './ports.js';
import { transactionHash } from './chain.js';
import type { DecisionContext, ExecutionDeps, ExecutionOutcome, ExecutionRequest, OutcomeContext } from './context.js';
import type { DecidedTransaction } from './decided.js';
import { callerRules, connector, decide, duplicateId, findConnector, policyVersion, type DecisionStage } from './decision-stages.js';
import { finalizeIntent, holdForOverride, recordRelease, recordWithoutRelease, refuse, release, storeApprovedIntent, storeIntent, type OutcomeStage } from './outcome-stages.js';
import type { HeldApproval } from './records.js';
import { established, runStages } from './pipeline.js';
import { askSources, checkBoundSignals, recheckAtRelease, refuseSourceMismatch } from '../business-validation/stages.js';
import { authorityGrant } from '../authority/stage.js';
import { acceptHeldApproval, signedApproval } from '../approvals/stage.js';
import { DomainError } from '../shared/errors.js';

/**
 * The execution pipeline as phases of named stages. `decision` ends in the decision (a refusal by
 * business validation included). `execute` (`POST /execute`, and every other door that releases)
 * and `record` (`POST /transactions`) consume the decided transaction; the composition root may add
 * stages of its own to a phase (sandbox mode's pauses) with `insertAfter`.
 */
export interface ExecutionPhases {
  decision: readonly DecisionStage[];
  execute: readonly OutcomeStage[];
  record: readonly OutcomeStage[];
  /** A held transaction released on a human's approval: the same stages as `execute` from the intent on. */
  releaseHeld: readonly OutcomeStage[];
}

/**
 * The phases in their order: admission (caller rules, the policy version, the connector, the
 * duplicate id); business validation (the grant, the sources, the caller's values against theirs,
 * bound signals); the decision. Then a rejection becomes a signed refusal; `record` records without
 * release; `execute` accepts a signed approval of a `requires_override` decision or holds it for a
 * human, and otherwise stores the signed intent BEFORE anything is released, re-checks the facts and
 * the grant, releases, and stores the signed Trust Record.
 */
export function executionPhases(d: ExecutionDeps): ExecutionPhases {
  return {
    decision: [
      callerRules(d),
      policyVersion(d),
      connector(d),
      duplicateId(d),
      authorityGrant(d),
      askSources(d),
      refuseSourceMismatch(d),
      checkBoundSignals(d),
      decide(),
    ],
    execute: [refuse(d), signedApproval(d), holdForOverride(d), storeIntent(d), recheckAtRelease(d), release(d), recordRelease(d)],
    record: [refuse(d), recordWithoutRelease(d)],
    releaseHeld: [acceptHeldApproval(d), storeApprovedIntent(d), recheckAtRelease(d), release(d), recordRelease(d)],
  };
}

export class ExecutionService {
  constructor(
    private readonly d: ExecutionDeps,
    private readonly phases: ExecutionPhases = executionPhases(d),
  ) {}

  /** Decides a request and releases it (or refuses, or holds it for a human). */
  async execute(request: ExecutionRequest): Promise<ExecutionOutcome> {
    return this.consume(this.phases.execute, request, await this.decide(request));
  }

  /** Decides a request and records it without release (or refuses it). */
  async record(request: ExecutionRequest): Promise<ExecutionOutcome> {
    return this.consume(this.phases.record, request, await this.decide(request));
  }

  /**
   * Releases a held transaction on a human's approval, from the decision on: the policy version it
   * was decided by and its connector found again, the signed approval accepted, the approval and the
   * signed intent stored in one commit, the re-check at release, the release, the Trust Record.
   * Nothing changes (409) when it is no longer pending.
   */
  async releaseHeld(decided: DecidedTransaction, approval: HeldApproval): Promise<ExecutionOutcome> {
    const policy = await this.d.policies.find(decided.policy.name, decided.policy.version);
    if (!policy || policy.contentHash !== decided.policy.contentHash) {
      throw new DomainError(
        'conflict',
        `Policy '${decided.policy.name}' version '${decided.policy.version}' is no longer the one this transaction was decided by; nothing was executed.`,
        'AUTHORIZATION_NO_LONGER_VALID',
        { executionStatus: 'NOT_EXECUTED' },
      );
    }
    const connector = await findConnector(this.d, decided.tx.intent.action, decided.policy.name);
    const ctx: OutcomeContext = { decided, policy, connector, now: approval.approvedAt, holdSeconds: 0, heldApproval: approval };
    return established(await runStages(this.phases.releaseHeld, ctx), 'outcome');
  }

  /** The decision phase: a decided transaction, with the live policy and connector it was decided with. */
  private async decide({ caller, tx }: ExecutionRequest): Promise<{ decided: DecidedTransaction; ctx: DecisionContext }> {
    const ctx: DecisionContext = {
      caller,
      tx,
      now: this.d.clock.now().toISOString(),
      btxHash: transactionHash(this.d.hasher, tx),
      signals: tx.signals,
      assessment: {
        authority: { status: 'VERIFIED', callerId: caller.callerId, principalId: tx.authority.principalId, grant: null },
        businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] },
      },
      conditions: [],
    };
    const decision = established(await runStages(this.phases.decision, ctx), 'decision');
    const decided: DecidedTransaction = {
      tx,
      callerId: caller.callerId,
      btxHash: ctx.btxHash,
      decidedAt: ctx.now,
      policy: established(ctx.binding, 'policy'),
      connector: established(ctx.connector, 'connector').namespace,
      decision,
      byRules: ctx.byRules === true,
      signals: ctx.signals,
      assessment: ctx.assessment,
      conditions: ctx.conditions,
    };
    return { decided, ctx };
  }

  private async consume(phase: readonly OutcomeStage[], request: ExecutionRequest, { decided, ctx }: { decided: DecidedTransaction; ctx: DecisionContext }): Promise<ExecutionOutcome> {
    const outcome: OutcomeContext = {
      decided,
      audit: request.audit,
      policy: established(ctx.policy, 'policy'),
      connector: established(ctx.connector, 'connector'),
      now: ctx.now,
      holdSeconds: request.holdSeconds ?? this.d.holds.ttlSeconds,
    };
    const ended = await runStages(phase, outcome);
    if (!ended) throw new DomainError('internal', 'The execution pipeline ended without an outcome.');
    return ended;
  }

  /**
   * At start: every intent a crash left RELEASED gets its Trust Record. Returns how many. Reads the
   * first page again after each round, because finalizing moves intents out of the list; a page of
   * intents tried once and still listed (no saved context) is stepped over, so every one is seen.
   */
  async recoverReleased(): Promise<number> {
    let done = 0;
    const tried = new Set<string>();
    for (let page = 1; ; ) {
      const { items } = await this.d.store.listIntents(['RELEASED'], EVERY_CALLER, page, 100);
      if (items.length === 0) return done;
      const fresh = items.filter(({ intent }) => !tried.has(intent.businessTransactionId));
      page = fresh.length === 0 ? page + 1 : 1;
      for (const { intent } of fresh as StoredIntent[]) {
        tried.add(intent.businessTransactionId);
        const context = await this.d.store.getReleaseContext(intent.businessTransactionId);
        if (context && (await finalizeIntent(this.d, intent.businessTransactionId, context, intent.callerId, intent.businessTransactionHash))) done++;
      }
    }
  }
}
