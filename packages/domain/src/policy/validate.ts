/**
 * `validatePolicyDocument`: structure (JSON Schema), then what the schema cannot express, then every
 * `when` parsed and type-checked against `signalsSchema`. Each error is `<json path>: <message>`.
 *
 * Order of the errors: schema errors, then duplicate rule ids and undeclared keys of
 * `signalSources` / `boundSignals`, then the `when` errors in rule order. The checks after the schema
 * run on whatever parts of the document are well-formed, so one pass reports as much as it can. If
 * `signalsSchema` itself is invalid the `when`s are only parsed (syntax errors), because their types
 * cannot be known.
 */
import type { ParseResult } from '@marcbachmann/cel-js';
import { checkWhen, policyEnvironment, syntaxError } from './cel.js';
import type { SignalType } from './document.js';
import { formatJsonPath, schemaIssues } from './schema.js';
import { isPlainObject } from '../shared/guards.js';
import { isName, NAME_RULES } from '../shared/names.js';

export interface PolicyValidationResult {
  valid: boolean;
  errors: string[];
}


const has = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/** @internal Validation plus the checked program of each rule, for `compilePolicy`. */
export function analysePolicyDocument(doc: unknown): { errors: string[]; programs: (ParseResult | undefined)[] } {
  const issues = schemaIssues(doc);
  const errors = issues.map((i) => i.text);
  const programs: (ParseResult | undefined)[] = [];
  if (!isPlainObject(doc)) return { errors, programs };

  const rules = Array.isArray(doc.rules) ? (doc.rules as unknown[]) : [];
  const signalsSchema = isPlainObject(doc.signalsSchema) ? doc.signalsSchema : undefined;

  // Rule ids are unique: matchedRuleId must name one rule.
  const firstIndexOfId = new Map<string, number>();
  rules.forEach((rule, i) => {
    if (!isPlainObject(rule) || typeof rule.id !== 'string') return;
    const first = firstIndexOfId.get(rule.id);
    if (first === undefined) firstIndexOfId.set(rule.id, i);
    else errors.push(`${formatJsonPath(['rules', String(i), 'id'], doc)}: duplicate rule id '${rule.id}' (already used by rules[${first}])`);
  });

  // signalSources and boundSignals only speak about declared signals.
  for (const key of ['signalSources', 'boundSignals'] as const) {
    const map = doc[key];
    if (!isPlainObject(map) || !signalsSchema) continue;
    for (const name of Object.keys(map)) {
      if (!has(signalsSchema, name)) {
        errors.push(`${formatJsonPath([key, name], doc)}: signal '${name}' is not declared in signalsSchema`);
      }
    }
  }

  // Every when: parsed and type-checked against the declared signals.
  const signalsSchemaValid = signalsSchema !== undefined && !issues.some((i) => i.segments[0] === 'signalsSchema');
  const env = signalsSchemaValid
    ? policyEnvironment(signalsSchema as Record<string, { type: SignalType }>)
    : undefined;
  const declared = new Set(signalsSchema ? Object.keys(signalsSchema) : []);
  rules.forEach((rule, i) => {
    if (!isPlainObject(rule) || typeof rule.when !== 'string' || rule.when === '') return;
    const path = formatJsonPath(['rules', String(i), 'when'], doc);
    if (!env) {
      const err = syntaxError(rule.when);
      if (err) errors.push(`${path}: ${err}`);
      return;
    }
    const checked = checkWhen(env, rule.when, declared);
    if (checked.ok) programs[i] = checked.program;
    else for (const e of checked.errors) errors.push(`${path}: ${e}`);
  });

  return { errors, programs };
}

/**
 * Validates a policy document (CONTRACT.md "Policy document"). Never throws; `valid` is true exactly
 * when `errors` is empty. This is what `POST /policies/validate` and `ets policy validate` report.
 */
export function validatePolicyDocument(doc: unknown): PolicyValidationResult {
  const { errors } = analysePolicyDocument(doc);
  return { valid: errors.length === 0, errors };
}

/**
 * The checks of a version about to be proposed (a proposal, a shipped policy, `ets policy
 * validate`): the document's, and its `policyVersion` one of POLICY_VERSION_PATTERN, visible ASCII
 * (review round 2: `1.0.0 ` or `1.0.0` with an invisible character must not be published beside
 * `1.0.0`). Published versions are compiled with `validatePolicyDocument` alone, so a version
 * published before the pattern existed keeps deciding.
 */
export function validateNewPolicyVersion(doc: unknown): PolicyValidationResult {
  const { errors } = analysePolicyDocument(doc);
  if (isPlainObject(doc) && typeof doc.policyVersion === 'string' && !errors.some((e) => e.startsWith('policyVersion:')) && !isName('policyVersion', doc.policyVersion)) {
    const { says, pattern } = NAME_RULES.policyVersion;
    errors.push(`policyVersion: must be ${says} (${pattern})`);
  }
  return { valid: errors.length === 0, errors };
}
