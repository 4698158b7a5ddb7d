/**
 * The policy document (CONTRACT.md "Policy document", spec 2.8): the JSON an operator writes, proposes
 * through maker-checker and that every request is decided by. These types mirror the JSON exactly;
 * `validatePolicyDocument` is what proves an `unknown` value has this shape.
 */

/** The only signal types a policy may declare (spec 2.8). Anything else does not validate. */
export const SIGNAL_TYPES = ['boolean', 'number', 'string'] as const;
export type SignalType = (typeof SIGNAL_TYPES)[number];

export const POLICY_ACTIONS = ['approve', 'reject'] as const;
export type PolicyAction = (typeof POLICY_ACTIONS)[number];

export interface SignalDeclaration {
  type: SignalType;
}

/** What a matched rule (or the default) decides. */
export interface PolicyOutcome {
  action: PolicyAction;
  /** Human-readable; a rejection reaches the caller as `Execution rejected: <reason>`. */
  reason: string;
  /** Approve, but only after a human override. Absent means false. */
  requires_override?: boolean;
}

export interface PolicyRule extends PolicyOutcome {
  /** Unique within the policy; reported as `matchedRuleId`. */
  id: string;
  /** CEL expression over `signals` and `intent` that must be of type bool. */
  when: string;
}

/**
 * A sourced fact (spec 1.7, 2.8): the business system that owns the value of a signal. Only the
 * structure is validated here (`source` names a registered business signal source); the runtime
 * effect (asking the source, SOURCE_UNAVAILABLE) belongs to the application layer. Extra properties
 * are kept as written so later versions can add settings without breaking stored documents.
 */
export interface SignalSourceBinding {
  source: string;
  [setting: string]: unknown;
}

export interface PolicyDocument {
  name: string;
  policyVersion: string;
  description?: string;
  signalsSchema: Record<string, SignalDeclaration>;
  /** Tried in order; the first rule whose `when` is true decides. */
  rules: PolicyRule[];
  /** Decides when no rule matches. Without it, no match is the "no matching rule" outcome. */
  default?: PolicyOutcome;
  requireAuthorityGrant?: boolean;
  /** Declared signal name -> the business system that owns its value. */
  signalSources?: Record<string, SignalSourceBinding>;
  /** Declared signal name -> path into the executed intent (`action` or `parameters.<key>[.<key>…]`). */
  boundSignals?: Record<string, string>;
}

/** Names an exact published policy version (spec 9.3: requests name an exact version). */
export interface PolicyRef {
  name: string;
  version: string;
}

/** True for `.` and `..`, which are refused as a policy name or version (spec 7, proposal 400). */
export const isDotOnly = (s: string): boolean => s === '.' || s === '..';

/** `matchedRuleId` when `default` decided. Rule ids may not use it. */
export const DEFAULT_RULE_ID = 'default';
/** `matchedRuleId` of a refusal because a declared signal had the wrong type (spec 4.3 rule 10). */
export const SIGNAL_TYPE_VIOLATION_RULE_ID = 'signal-type-violation';
/** Ids a rule may not take, because decisions use them for outcomes that are not a rule. */
export const RESERVED_RULE_IDS: readonly string[] = [DEFAULT_RULE_ID, SIGNAL_TYPE_VIOLATION_RULE_ID];
