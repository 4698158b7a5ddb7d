import type { Caller } from '../identity/caller.js';
import type { PendingAuthEvent } from '../identity/auth-audit.js';
import { transactionHash } from './chain.js';
import { EVERY_CALLER } from './ports.js';
import {
  runStages,
  type ExecutionContext,
  type ExecutionDeps,
  type ExecutionOutcome,
  type Stage,
} from './pipeline.js';
import type { ReleaseContext, SignedTrustRecord } from './records.js';
import {
  callerRules,
  connector,
  decide,
  duplicateId,
  finalizeIntent,
  policyVersion,
  recordRelease,
  recordWithoutRelease,
  refuseRejection,
  release,
  storeIntent,
} from './stages.js';
import { parseBusinessTransaction } from './transaction-request.js';
import { askSources, checkBoundSignals, recheckAtRelease, refuseSourceMismatch } from '../business-validation/stages.js';
import { authorityGrant } from '../authority/stage.js';
import { signedApproval } from '../approvals/stage.js';


/**
 * The pipeline of `POST /execute` (release) and `POST /transactions` (record only), as named stages
 * run in order over one context: validate, caller rules, policy, connector, duplicate id; business
 * validation (the grant, the sources, the caller's values against theirs, bound signals); the
 * decision; then either a signed refusal, a record without release (`POST /transactions`, or a
 * `requires_override` decision without a valid signed approval), or a signed intent durably stored
 * BEFORE anything is released, the re-check at release, the release, and the signed Trust Record.
 */
export function pipeline(d: ExecutionDeps): readonly Stage[] {
  return [
    callerRules(d),
    policyVersion(d),
    connector(d),
    duplicateId(d),
    authorityGrant(d),
    askSources(d),
    refuseSourceMismatch(d),
    checkBoundSignals(d),
    decide(),
    refuseRejection(d),
    signedApproval(d),
    recordWithoutRelease(d),
    storeIntent(d),
    recheckAtRelease(d),
    release(d),
    recordRelease(d),
  ];
}

export class ExecutionService {
  private readonly stages: readonly Stage[];

  constructor(private readonly d: ExecutionDeps) {
    this.stages = pipeline(d);
  }

  /**
   * Runs one request. `audit`: the request's signed authentication event, which the pipeline's
   * first commit stores with its record (the caller settles it when the pipeline stored nothing).
   */
  async run(caller: Caller, body: unknown, mode: 'release' | 'record', audit?: PendingAuthEvent): Promise<ExecutionOutcome> {
    const tx = parseBusinessTransaction(body);
    const ctx: ExecutionContext = {
      caller,
      audit,
      mode,
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
    return runStages(this.stages, ctx);
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
      for (const { intent } of fresh) {
        tried.add(intent.businessTransactionId);
        const context = await this.d.store.getReleaseContext(intent.businessTransactionId);
        if (context && (await finalizeIntent(this.d, intent.businessTransactionId, context, intent.callerId, intent.businessTransactionHash))) done++;
      }
    }
  }
}
