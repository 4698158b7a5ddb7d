/**
 * The impact preview of a pending policy change (CONTRACT "Approvers' console and impact preview"):
 * the proposed version replayed over the last N recorded decisions of its policy name, so that an
 * approver sees what would have been decided differently before approving it.
 *
 * What can be replayed: every decision the policy's evaluation made (`evaluatePolicy`: the rules,
 * the default, the "no matching rule" outcome and the signal-type check of spec 4.3 rule 10, which
 * a new `signalsSchema` may decide differently). Its input is stored with the transaction's claim
 * in the commit that records the decision (see `decidedInput`). Refusals made before the rules
 * were evaluated (NOT_AUTHORIZED, AUTHORITY_EXPIRED, SOURCE_UNAVAILABLE, source-mismatch,
 * bound-signal-mismatch) have no decision of the rules to compare and are not replayed; neither
 * are transactions recorded before decisions kept their input (migration 0017).
 *
 * Counting, exactly:
 * - `action` is the outcome a caller gets: `reject`, `approve`, or `requires_override` (approved,
 *   but only released after a human override).
 * - `replayed`: decisions replayed (at most `limit`, newest first).
 * - `changed`: of those, the ones whose `action` differs under the proposed version.
 * - `byTransition["<before>-><after>"]`: the changed ones by their two actions (so its values add
 *   up to `changed`; a decision whose action stays the same is never a transition, even when
 *   another rule decides it now).
 * - `byRule["<matchedRuleId after>"]`: EVERY replayed decision by the rule that decides it under
 *   the proposed version (so its values add up to `replayed`): `default` when the default decides,
 *   `signal-type-violation`, and `(none)` for the "no matching rule" outcome (a rule id cannot be
 *   `(none)`: it must start with a letter or digit).
 * - `examples`: the first 20 changed decisions, newest first.
 */
import type { Caller } from '../identity/caller.js';
import { isVerifiedHuman } from '../identity/caller.js';
import type { PendingChangeStore } from '../governance/ports.js';
import { conflict, forbidden, invalid, notFound } from '../shared/errors.js';
import { compilePolicy, evaluatePolicy, type CompiledPolicy, type PolicyDecision, type PolicyInput } from './evaluate.js';
import { POLICY_CHANGE_KIND, type PolicyChangePayload } from './policy-governance.js';

/** What a caller gets from a decision: a rejection, an approval, or an approval that waits for a human. */
export type DecidedAction = 'approve' | 'reject' | 'requires_override';

export const actionOf = (d: Pick<PolicyDecision, 'action' | 'requires_override'>): DecidedAction =>
  d.action === 'reject' ? 'reject' : d.requires_override ? 'requires_override' : 'approve';

/**
 * A decision of a policy's evaluation and what it was made on, kept with the transaction's claim:
 * `input` is exactly what `evaluatePolicy` decided on (the caller's signals with every sourced one
 * replaced by its source's value, and the intent).
 */
export interface DecidedInput {
  policyName: string;
  policyVersion: string;
  action: DecidedAction;
  matchedRuleId: string | null;
  input: PolicyInput;
}

/** The input of a decision as `decide` made it, for the claim that records it. */
export function decidedInput(policy: { name: string; version: string }, input: PolicyInput, decision: PolicyDecision): DecidedInput {
  return { policyName: policy.name, policyVersion: policy.version, action: actionOf(decision), matchedRuleId: decision.matchedRuleId, input };
}

/** A stored decision, as the impact preview reads it back. */
export interface RecordedDecision extends DecidedInput {
  businessTransactionId: string;
  /** When it was decided (the claim's `createdAt`). */
  decidedAt: string;
}

/** Reads the decisions kept with the claims (storage port). */
export interface RecordedDecisions {
  /**
   * The latest `limit` replayable decisions of `policyName`, newest first (by decision time, then
   * id), a few at a time: a decision's input may be large, so never all of them in memory at once.
   */
  latest(policyName: string, limit: number): AsyncIterable<RecordedDecision>;
}

export interface DecisionSummary {
  action: DecidedAction;
  matchedRuleId: string | null;
}

export interface ImpactExample {
  businessTransactionId: string;
  before: DecisionSummary;
  after: DecisionSummary;
}

export interface ImpactReport {
  policyName: string;
  fromVersion: string;
  toVersion: string;
  replayed: number;
  changed: number;
  byTransition: Record<string, number>;
  byRule: Record<string, number>;
  examples: ImpactExample[];
}

export const IMPACT_MAX_EXAMPLES = 20;
export const IMPACT_DEFAULT_LIMIT = 1000;
export const IMPACT_MAX_LIMIT = 10_000;
/** `byRule`'s key for the "no matching rule" outcome (matchedRuleId null). */
export const NO_RULE_KEY = '(none)';

/** Counts the replay of one proposed version over decisions given newest first (pure, exact). */
export class ImpactTally {
  private replayed = 0;
  private changed = 0;
  // Prototype-less: a rule id such as `constructor` or `__proto__` is counted like any other.
  private readonly byTransition: Record<string, number> = Object.create(null) as Record<string, number>;
  private readonly byRule: Record<string, number> = Object.create(null) as Record<string, number>;
  private readonly examples: ImpactExample[] = [];

  constructor(private readonly proposed: CompiledPolicy) {}

  add(d: Pick<RecordedDecision, 'businessTransactionId' | 'action' | 'matchedRuleId' | 'input'>): void {
    const decision = evaluatePolicy(this.proposed, d.input);
    const after: DecisionSummary = { action: actionOf(decision), matchedRuleId: decision.matchedRuleId };
    this.replayed++;
    const rule = after.matchedRuleId ?? NO_RULE_KEY;
    this.byRule[rule] = (this.byRule[rule] ?? 0) + 1;
    if (after.action === d.action) return;
    this.changed++;
    const transition = `${d.action}->${after.action}`;
    this.byTransition[transition] = (this.byTransition[transition] ?? 0) + 1;
    if (this.examples.length < IMPACT_MAX_EXAMPLES) {
      this.examples.push({ businessTransactionId: d.businessTransactionId, before: { action: d.action, matchedRuleId: d.matchedRuleId }, after });
    }
  }

  report(about: Pick<ImpactReport, 'policyName' | 'fromVersion' | 'toVersion'>): ImpactReport {
    return {
      ...about,
      replayed: this.replayed,
      changed: this.changed,
      byTransition: { ...this.byTransition },
      byRule: { ...this.byRule },
      examples: this.examples.map((e) => structuredClone(e)),
    };
  }
}

/**
 * `limit` of the preview: absent is the default, else a whole number from 1 to 10,000 written in
 * decimal digits (400 otherwise; `1e3`, `010`, `+5`, ` 5` included).
 */
export function readImpactLimit(raw: unknown): number {
  if (raw === undefined) return IMPACT_DEFAULT_LIMIT;
  if (typeof raw === 'string' && /^[1-9]\d{0,4}$/.test(raw) && Number(raw) <= IMPACT_MAX_LIMIT) return Number(raw);
  throw invalid(`limit must be a whole number from 1 to ${IMPACT_MAX_LIMIT} (default ${IMPACT_DEFAULT_LIMIT}).`);
}

export interface PolicyImpactPreviewDeps {
  changes: Pick<PendingChangeStore, 'get'>;
  decisions: RecordedDecisions;
}

/** `GET /policies/pending-changes/{id}/impact`. */
export class PolicyImpactPreview {
  constructor(private readonly deps: PolicyImpactPreviewDeps) {}

  /**
   * USER keys only (403 NON_HUMAN_CALLER_DENIED); `rawLimit` is the query's `limit` (400 unless
   * `readImpactLimit` takes it); an id that is not a policy change is 404; a
   * change already decided is 409: the preview informs a decision, and after an approval the
   * newest decisions were made by the proposed version itself, which would show no change.
   */
  async preview(caller: Caller, changeId: string, rawLimit: unknown): Promise<ImpactReport> {
    if (!isVerifiedHuman(caller)) throw forbidden('Only a verified human (a USER key) may preview the impact of a change.', 'NON_HUMAN_CALLER_DENIED');
    const limit = readImpactLimit(rawLimit);
    const change = await this.deps.changes.get(changeId);
    if (!change || change.kind !== POLICY_CHANGE_KIND) throw notFound(`Pending change '${changeId}' was not found.`);
    if (change.status !== 'PENDING_APPROVAL') throw conflict(`Pending change '${changeId}' is already decided (${change.status}); the impact preview is for changes awaiting a decision.`);
    const p = change.payload as PolicyChangePayload;
    const tally = new ImpactTally(compilePolicy(p.content));
    for await (const d of this.deps.decisions.latest(p.policyName, limit)) tally.add(d);
    return tally.report({ policyName: p.policyName, fromVersion: p.baseVersion, toVersion: p.policyVersion });
  }
}
