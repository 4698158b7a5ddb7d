/**
 * Deciding a request by a policy.
 *
 * `compilePolicy` validates once and keeps one parsed, type-checked CEL program per rule;
 * `evaluatePolicy` only runs those programs, so one compiled policy decides many requests quickly.
 * Evaluation is deterministic: no clock, no randomness, no I/O; the same input gives the same
 * decision (including the same reason text).
 *
 * Outcomes, in the order they are considered:
 * 1. Signal types (spec 4.3 rule 10): a declared signal that is sent with another JSON type refuses
 *    the request before any rule runs: `matchedRuleId` `signal-type-violation`
 *    (see `checkSignalTypes`).
 * 2. Rules in document order; the first whose `when` is true decides; `matchedRuleId` is its id.
 * 3. A rule whose `when` cannot be evaluated fails CLOSED: the request is rejected with reason
 *    `Rule '<id>' could not be evaluated: <error>`, `requires_override` false, `matchedRuleId` the id
 *    of that rule, and no later rule is tried. Skipping the rule instead would let a later, more
 *    permissive rule approve a request that an earlier rejecting rule was written to stop. The usual
 *    cause is a signal the caller did not send: unsent signals are not a type violation (rule 10),
 *    but reading one (`signals.amount > 10000` without `amount`) is a CEL "No such key" error. Write
 *    `has(signals.amount) && signals.amount > 10000` (or `!has(...) || ...`) where a signal is
 *    optional; `'k' in intent.parameters` does the same for intent parameters.
 * 4. No rule matched: `default` decides, `matchedRuleId` `default`.
 * 5. No rule matched and there is no `default`: the "no matching rule" outcome, which is a rejection:
 *    `{ action: 'reject', reason: 'No matching rule', requires_override: false, matchedRuleId: null }`.
 */
import { DomainError } from '../shared/errors.js';
import { celErrorSummary } from './cel.js';
import {
  DEFAULT_RULE_ID,
  SIGNAL_TYPE_VIOLATION_RULE_ID,
  type PolicyAction,
  type PolicyDocument,
  type SignalType,
} from './document.js';
import { analysePolicyDocument } from './validate.js';

export interface PolicyDecision {
  action: PolicyAction;
  reason: string;
  requires_override: boolean;
  /** The deciding rule's id; `default`; `signal-type-violation`; or null for "no matching rule". */
  matchedRuleId: string | null;
}

export interface PolicyInput {
  /** The caller's signals (the optional top-level `signals` of the request); `{}` when none. */
  signals: Record<string, unknown>;
  intent: { action: string; parameters: Record<string, unknown> };
}

export const NO_MATCHING_RULE_REASON = 'No matching rule';

/** The "no matching rule" outcome (no rule matched and the policy has no `default`). */
export const NO_MATCHING_RULE_DECISION: Readonly<PolicyDecision> = Object.freeze({
  action: 'reject',
  reason: NO_MATCHING_RULE_REASON,
  requires_override: false,
  matchedRuleId: null,
});

export interface CompiledRule {
  readonly id: string;
  readonly when: string;
  readonly decision: Readonly<PolicyDecision>;
  /** The checked CEL program of `when`; evaluate through `evaluatePolicy`, which contains errors. */
  readonly program: (context: Record<string, unknown>) => unknown;
  /** The type-checked CEL syntax tree of `when` (what `evaluatorArtifactHash` fingerprints). */
  readonly checkedAst: unknown;
}

export interface CompiledPolicy {
  /** A frozen copy of the validated document. */
  readonly document: Readonly<PolicyDocument>;
  readonly rules: readonly CompiledRule[];
  /** Decision when no rule matches: from `default`, or the "no matching rule" outcome. */
  readonly fallback: Readonly<PolicyDecision>;
}

/** Thrown by `compilePolicy` for an invalid document; `errors` are those of `validatePolicyDocument`. */
export class InvalidPolicyError extends DomainError {
  readonly errors: readonly string[];
  constructor(errors: readonly string[]) {
    super('invalid', `Policy document is invalid: ${errors.join('; ')}`);
    this.errors = Object.freeze([...errors]);
  }
}

const deepFreeze = <T>(value: T): T => {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
};

/**
 * Validates `doc` and prepares it for evaluation. Throws `InvalidPolicyError` (a DomainError of kind
 * `invalid`) listing every error when the document does not validate.
 */
export function compilePolicy(doc: unknown): CompiledPolicy {
  const { errors, programs } = analysePolicyDocument(doc);
  if (errors.length > 0) throw new InvalidPolicyError(errors);
  // A private, frozen copy: later changes to the caller's object cannot change the policy.
  const document = deepFreeze(JSON.parse(JSON.stringify(doc)) as PolicyDocument);
  const rules: CompiledRule[] = document.rules.map((rule, i) => {
    const program = programs[i];
    if (!program) throw new DomainError('internal', `rules[${i}].when was not compiled`);
    return Object.freeze({
      id: rule.id,
      when: rule.when,
      decision: Object.freeze({
        action: rule.action,
        reason: rule.reason,
        requires_override: rule.requires_override === true,
        matchedRuleId: rule.id,
      }),
      program,
      checkedAst: program.ast,
    });
  });
  const fallback: Readonly<PolicyDecision> = document.default
    ? Object.freeze({
        action: document.default.action,
        reason: document.default.reason,
        requires_override: document.default.requires_override === true,
        matchedRuleId: DEFAULT_RULE_ID,
      })
    : NO_MATCHING_RULE_DECISION;
  return Object.freeze({ document, rules: Object.freeze(rules), fallback });
}

const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

const HAS_TYPE: Readonly<Record<SignalType, (v: unknown) => boolean>> = {
  boolean: (v) => typeof v === 'boolean',
  number: (v) => typeof v === 'number' && Number.isFinite(v),
  string: (v) => typeof v === 'string',
};

/** True when `value` has the JSON type a signal of `type` must have (a number must be finite). */
export const hasSignalType = (type: SignalType, value: unknown): boolean => HAS_TYPE[type](value);

/** A signal counts as sent when it is an own property with a value other than `undefined`. */
export const isSent = (signals: object, name: string): boolean =>
  hasOwn(signals, name) && (signals as Record<string, unknown>)[name] !== undefined;

/**
 * Spec 4.3 rule 10: every declared signal that is sent must have its declared JSON type (a number
 * must be finite; `null` is sent and is not of any declared type). The first violation, in
 * `signalsSchema` order, refuses the request:
 * `{ action: 'reject', reason: "Signal '<name>' must be of type <type>", requires_override: false,
 * matchedRuleId: 'signal-type-violation' }`. Undeclared signals and declared signals that are not
 * sent are not affected. Returns null when there is no violation. `evaluatePolicy` applies this
 * itself first; it is exported for callers that need the check alone.
 */
export function checkSignalTypes(
  doc: Pick<PolicyDocument, 'signalsSchema'>,
  signals: Readonly<Record<string, unknown>> | null | undefined,
): PolicyDecision | null {
  if (signals === null || typeof signals !== 'object') return null;
  for (const [name, decl] of Object.entries(doc.signalsSchema)) {
    if (!isSent(signals, name)) continue;
    if (!HAS_TYPE[decl.type](signals[name])) {
      return {
        action: 'reject',
        reason: `Signal '${name}' must be of type ${decl.type}`,
        requires_override: false,
        matchedRuleId: SIGNAL_TYPE_VIOLATION_RULE_ID,
      };
    }
  }
  return null;
}

const failClosed = (ruleId: string, why: string): PolicyDecision => ({
  action: 'reject',
  reason: `Rule '${ruleId}' could not be evaluated: ${why}`,
  requires_override: false,
  matchedRuleId: ruleId,
});

/**
 * Decides `input` by `compiled` (see the module comment for the order of outcomes). Never throws for
 * any input: what cannot be evaluated is a rejection. Returns a fresh object each call.
 */
export function evaluatePolicy(compiled: CompiledPolicy, input: PolicyInput): PolicyDecision {
  const signals: unknown = input?.signals;
  const violation = checkSignalTypes(
    compiled.document,
    signals !== null && typeof signals === 'object' ? (signals as Record<string, unknown>) : null,
  );
  if (violation) return violation;

  // Only declared, sent signals reach CEL, in an object without a prototype: nothing else of the
  // caller's object can be read through `signals`.
  const declared: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  if (signals !== null && typeof signals === 'object') {
    for (const name of Object.keys(compiled.document.signalsSchema)) {
      if (isSent(signals, name)) declared[name] = (signals as Record<string, unknown>)[name];
    }
  }
  const context = {
    signals: declared,
    intent: { action: input?.intent?.action, parameters: input?.intent?.parameters },
  };

  for (const rule of compiled.rules) {
    let result: unknown;
    try {
      result = rule.program(context);
    } catch (e) {
      return failClosed(rule.id, celErrorSummary(e));
    }
    if (result === true) return { ...rule.decision };
    if (result !== false) return failClosed(rule.id, 'the condition did not evaluate to true or false');
  }
  return { ...compiled.fallback };
}
