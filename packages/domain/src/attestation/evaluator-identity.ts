/**
 * Identities of the policy engine that an attestation names besides its code (`evaluatorHash`,
 * computed from the files by the runtime adapter):
 *
 * - `evaluatorSemanticHash`: what the engine DOES. A fixed conformance suite (policies and inputs
 *   covering every outcome of `evaluatePolicy`: first match, default, no matching rule, signal
 *   type violation, fail-closed rules, mixed int/double arithmetic and comparison, `has`, `in`,
 *   intent) is compiled and evaluated at start; the hash is H(C({semanticsVersion, cases})) with
 *   every case's input and decision. Any change of behaviour changes a decision and therefore the
 *   hash, even when the code hash alone would not say whether behaviour changed.
 * - `evaluatorArtifactHash`: the compiled policy. H(C({bundleHash, rules, fallback})) where each
 *   rule is its id, its decision and its type-checked CEL syntax tree (operator, arguments and
 *   checked type of every node). The same document compiled by a different CEL compiler that
 *   builds another tree gets another artifact hash.
 */
import type { Hasher } from '../ports/crypto.js';
import { compilePolicy, evaluatePolicy, type CompiledPolicy, type PolicyInput } from '../policy/index.js';
import type { PolicyDocument } from '../policy/document.js';

/** Raised by hand when a change of evaluation semantics is intended (the suite shows the change anyway). */
export const EVALUATOR_SEMANTICS_VERSION = '1';

const SUITE_POLICIES: PolicyDocument[] = [
  {
    name: 'conformance-payments',
    policyVersion: '1',
    signalsSchema: { amount: { type: 'number' }, country: { type: 'string' }, vip: { type: 'boolean' } },
    rules: [
      { id: 'sanctioned', when: "has(signals.country) && signals.country in ['KP', 'IR']", action: 'reject', reason: 'sanctioned' },
      { id: 'vip', when: 'has(signals.vip) && signals.vip', action: 'approve', reason: 'vip' },
      { id: 'large', when: 'signals.amount > 10000', action: 'approve', requires_override: true, reason: 'large' },
      { id: 'exact', when: 'signals.amount == 5 || signals.amount * 2 == 50 || signals.amount in [7, 8]', action: 'reject', reason: 'exact' },
      { id: 'intent', when: "intent.action == 'conformance:block'", action: 'reject', reason: 'intent' },
    ],
    default: { action: 'approve', reason: 'default' },
  },
  {
    name: 'conformance-no-default',
    policyVersion: '1',
    signalsSchema: { score: { type: 'number' } },
    rules: [{ id: 'low', when: 'signals.score < 0.5', action: 'approve', reason: 'low' }],
  },
];

const SUITE_INPUTS: Array<[policy: number, signals: Record<string, unknown>, action?: string]> = [
  [0, { amount: 100, country: 'FR' }],
  [0, { amount: 100, country: 'KP' }],
  [0, { amount: 20000, country: 'FR' }],
  [0, { amount: 20000, vip: true }],
  [0, { amount: 5 }],
  [0, { amount: 25 }],
  [0, { amount: 8 }],
  [0, { amount: 9.5 }],
  [0, { amount: 1 }, 'conformance:block'],
  [0, { country: 'FR' }],
  [0, { amount: '100' }],
  [0, { amount: 100, vip: null }],
  [0, { amount: 100, undeclared: 'x' }],
  [1, { score: 0.25 }],
  [1, { score: 0.75 }],
  [1, {}],
];

/** The conformance suite's cases with the decision this engine makes for each. */
export function evaluatorConformance(): unknown[] {
  const compiled = SUITE_POLICIES.map((p) => compilePolicy(p));
  return SUITE_INPUTS.map(([policy, signals, action]) => {
    const input: PolicyInput = { signals, intent: { action: action ?? '', parameters: {} } };
    return { policy: SUITE_POLICIES[policy]!.name, input, decision: evaluatePolicy(compiled[policy]!, input) };
  });
}

export function evaluatorSemanticHashOf(hasher: Hasher): string {
  return hasher.contentHash({ semanticsVersion: EVALUATOR_SEMANTICS_VERSION, policies: SUITE_POLICIES, cases: evaluatorConformance() });
}

const artifactHashes = new WeakMap<CompiledPolicy, string>();

/** Computed once per compiled policy (published versions never change, and the catalog keeps them). */
export function evaluatorArtifactHashOf(hasher: Hasher, compiled: CompiledPolicy, bundleHash: string): string {
  const known = artifactHashes.get(compiled);
  if (known !== undefined) return known;
  const hash = hasher.contentHash({
    bundleHash,
    rules: compiled.rules.map((r) => ({ id: r.id, decision: r.decision, program: syntaxTree(r.checkedAst, 0) })),
    fallback: compiled.fallback,
  });
  artifactHashes.set(compiled, hash);
  return hash;
}

const isNode = (x: object): x is { op: unknown; args: unknown; checkedType?: unknown } => 'op' in x && 'args' in x;

/** The tree as plain JSON: cel-js nodes carry bigints, typed arrays and circular type objects. */
function syntaxTree(x: unknown, depth: number): unknown {
  if (depth > 256) throw new Error('CEL syntax tree is too deep to fingerprint');
  if (x === null || x === undefined) return null;
  switch (typeof x) {
    case 'string':
    case 'boolean':
      return x;
    case 'number':
      return Number.isFinite(x) ? x : { double: String(x) };
    case 'bigint':
      return { int: x.toString() };
    case 'object':
      break;
    default:
      return { [typeof x]: String(x) };
  }
  if (Array.isArray(x)) return x.map((item: unknown) => syntaxTree(item, depth + 1));
  if (x instanceof Uint8Array) return { bytes: Array.from(x) };
  if (isNode(x)) {
    const type = x.checkedType as { name?: unknown } | undefined;
    return { op: String(x.op), args: syntaxTree(x.args, depth + 1), type: type ? String(type.name ?? type) : null };
  }
  return { [x.constructor?.name ?? 'object']: String(x) };
}
