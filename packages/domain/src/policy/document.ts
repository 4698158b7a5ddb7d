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
 * A sourced fact (spec 1.7, 2.8; CONTRACT "Business signal sources"): the registered business
 * system that owns the value of a declared signal, the fact it is asked for, and the path into the
 * request whose value says what the fact is about (`intent.parameters.invoiceId`).
 */
export interface SignalSourceBinding {
  /** The name of a registered business signal source. */
  source: string;
  /** What the source is asked for (`invoice.amount`). */
  fact: string;
  /** A path into the request: `intent.…`, `metadata.…`, `authority.…`, `authorization.…` or `businessTransactionId`. */
  subject: string;
}

/**
 * What a signed approval scopes (spec 4.3.4): the value it approves (`scope.field: value`, equal to
 * the value at the path) or the resource it approves (`scope.field: resourceId`).
 */
export type ApprovalScope = { value: string } | { resourceId: string };

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
  /**
   * Declared signal name -> path into the executed intent (`intent.parameters.amount`, or without
   * the `intent.` prefix): the signal the decision rests on must equal the value released.
   */
  boundSignals?: Record<string, string>;
  /** What a signed approval of a `requires_override` decision must scope (spec 4.3.4). */
  approvalScope?: ApprovalScope;
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
/** `matchedRuleId` of the refusals of business validation (spec 4.3 rules 11-12; CONTRACT "Business signal sources"). */
export const NOT_AUTHORIZED_RULE_ID = 'NOT_AUTHORIZED';
export const AUTHORITY_EXPIRED_RULE_ID = 'AUTHORITY_EXPIRED';
export const SOURCE_UNAVAILABLE_RULE_ID = 'SOURCE_UNAVAILABLE';
export const SOURCE_MISMATCH_RULE_ID = 'source-mismatch';
/** A bound signal and the intent value it is bound to disagree. */
export const BOUND_SIGNAL_MISMATCH_RULE_ID = 'bound-signal-mismatch';
/** A transaction held for a human was rejected by one, or no one decided it in time (CONTRACT "Held transactions"). */
export const OVERRIDE_REJECTED_RULE_ID = 'override-rejected';
export const OVERRIDE_EXPIRED_RULE_ID = 'override-expired';
/** Ids a rule may not take, because decisions use them for outcomes that are not a rule. */
export const RESERVED_RULE_IDS: readonly string[] = [
  DEFAULT_RULE_ID,
  SIGNAL_TYPE_VIOLATION_RULE_ID,
  NOT_AUTHORIZED_RULE_ID,
  AUTHORITY_EXPIRED_RULE_ID,
  SOURCE_UNAVAILABLE_RULE_ID,
  SOURCE_MISMATCH_RULE_ID,
  BOUND_SIGNAL_MISMATCH_RULE_ID,
  OVERRIDE_REJECTED_RULE_ID,
  OVERRIDE_EXPIRED_RULE_ID,
];
