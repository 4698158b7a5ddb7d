import { describe, expect, it } from '@jest/globals';
import { DomainError } from '../shared/errors.js';
import {
  InvalidPolicyError,
  checkSignalTypes,
  compilePolicy,
  evaluatePolicy,
  type PolicyDocument,
  type PolicyInput,
  type PolicyRule,
} from './index.js';
import { contractSamplePolicy } from './sample.fixture.js';

const sample = contractSamplePolicy;

const policyOf = (rules: PolicyRule[], over: Partial<PolicyDocument> = {}): PolicyDocument => ({
  name: 'test-policy',
  policyVersion: '1',
  signalsSchema: {
    amount: { type: 'number' },
    country: { type: 'string' },
    vip: { type: 'boolean' },
  },
  rules,
  ...over,
});

const input = (signals: Record<string, unknown>, parameters: Record<string, unknown> = {}): PolicyInput => ({
  signals,
  intent: { action: 'payments:transfer', parameters },
});

describe('compilePolicy', () => {
  it('compiles the contract sample', () => {
    const compiled = compilePolicy(sample());
    expect(compiled.rules.map((r) => r.id)).toEqual(['sanctioned', 'large', 'ok']);
    expect(compiled.document).toEqual(sample());
  });

  it('throws a DomainError of kind invalid that lists every error', () => {
    const doc = { ...sample(), name: 'Bad', rules: [{ id: 'x', when: 'signals.nope', action: 'approve', reason: 'r' }] };
    let thrown: unknown;
    try {
      compilePolicy(doc);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(DomainError);
    expect(thrown).toBeInstanceOf(InvalidPolicyError);
    const error = thrown as InvalidPolicyError;
    expect(error.kind).toBe('invalid');
    expect(error.code).toBeUndefined();
    expect(error.errors).toEqual([
      'name: must be 1 to 128 lowercase letters, digits or hyphens, starting with a letter or digit',
      "rules[0].when: unknown signal 'nope': it is not declared in signalsSchema",
    ]);
    expect(error.message).toContain('name: must be');
    expect(error.message).toContain("rules[0].when: unknown signal 'nope'");
  });

  it('keeps a frozen copy: changing the source document later changes nothing', () => {
    const doc = sample();
    const compiled = compilePolicy(doc);
    doc.rules[0]!.reason = 'changed';
    doc.rules.pop();
    expect(compiled.document.rules).toHaveLength(3);
    expect(compiled.document.rules[0]!.reason).toBe('Country is sanctioned');
    expect(Object.isFrozen(compiled.document.rules[0])).toBe(true);
  });
});

describe('evaluatePolicy: the contract sample', () => {
  const compiled = compilePolicy(sample());

  it('rejects a sanctioned country (in with a list literal)', () => {
    expect(evaluatePolicy(compiled, input({ amount: 5, country: 'KP' }))).toEqual({
      action: 'reject',
      reason: 'Country is sanctioned',
      requires_override: false,
      matchedRuleId: 'sanctioned',
    });
    expect(evaluatePolicy(compiled, input({ amount: 5, country: 'IR' })).matchedRuleId).toBe('sanctioned');
  });

  it('approves a large transfer with requires_override (integer literal against a JSON number)', () => {
    expect(evaluatePolicy(compiled, input({ amount: 10000.01, country: 'FR' }))).toEqual({
      action: 'approve',
      reason: 'Large transfer needs a second look',
      requires_override: true,
      matchedRuleId: 'large',
    });
    expect(evaluatePolicy(compiled, input({ amount: 25000, country: 'FR' })).matchedRuleId).toBe('large');
  });

  it('approves within limits', () => {
    expect(evaluatePolicy(compiled, input({ amount: 10000, country: 'FR' }))).toEqual({
      action: 'approve',
      reason: 'Within limits',
      requires_override: false,
      matchedRuleId: 'ok',
    });
  });

  it('ignores undeclared signals', () => {
    expect(evaluatePolicy(compiled, input({ amount: 1, country: 'FR', extra: { deep: [1] }, other: 'x' })).matchedRuleId).toBe('ok');
  });
});

describe('evaluatePolicy: rule order, default and no match', () => {
  const rules: PolicyRule[] = [
    { id: 'small', when: 'signals.amount < 100', action: 'approve', reason: 'Small' },
    { id: 'small-too', when: 'signals.amount < 1000', action: 'reject', reason: 'Never reached for small amounts' },
    { id: 'vip', when: 'signals.vip', action: 'approve', requires_override: true, reason: 'VIP' },
  ];

  it('lets the first matching rule decide', () => {
    const compiled = compilePolicy(policyOf(rules));
    expect(evaluatePolicy(compiled, input({ amount: 50, vip: true })).matchedRuleId).toBe('small');
    expect(evaluatePolicy(compiled, input({ amount: 500, vip: true })).matchedRuleId).toBe('small-too');
    expect(evaluatePolicy(compiled, input({ amount: 5000, vip: true }))).toEqual({
      action: 'approve',
      reason: 'VIP',
      requires_override: true,
      matchedRuleId: 'vip',
    });
  });

  it('uses default when no rule matches', () => {
    const compiled = compilePolicy(policyOf(rules, { default: { action: 'reject', reason: 'No rule matched' } }));
    expect(evaluatePolicy(compiled, input({ amount: 5000, vip: false }))).toEqual({
      action: 'reject',
      reason: 'No rule matched',
      requires_override: false,
      matchedRuleId: 'default',
    });
  });

  it('propagates requires_override of default', () => {
    const compiled = compilePolicy(policyOf([], { default: { action: 'approve', reason: 'Ask a human', requires_override: true } }));
    expect(evaluatePolicy(compiled, input({}))).toEqual({
      action: 'approve',
      reason: 'Ask a human',
      requires_override: true,
      matchedRuleId: 'default',
    });
  });

  it('without default, no match is the "no matching rule" rejection', () => {
    const compiled = compilePolicy(policyOf(rules));
    expect(evaluatePolicy(compiled, input({ amount: 5000, vip: false }))).toEqual({
      action: 'reject',
      reason: 'No matching rule',
      requires_override: false,
      matchedRuleId: null,
    });
    expect(evaluatePolicy(compilePolicy(policyOf([])), input({})).matchedRuleId).toBeNull();
  });
});

describe('evaluatePolicy: what cannot be evaluated fails closed', () => {
  it('rejects, naming the rule, when a rule reads a signal that was not sent, and tries no later rule', () => {
    const compiled = compilePolicy(sample());
    expect(evaluatePolicy(compiled, input({ country: 'FR' }))).toEqual({
      action: 'reject',
      reason: "Rule 'large' could not be evaluated: No such key: amount",
      requires_override: false,
      matchedRuleId: 'large',
    });
    expect(evaluatePolicy(compiled, input({})).matchedRuleId).toBe('sanctioned');
  });

  it('lets has() make a signal optional', () => {
    const compiled = compilePolicy(
      policyOf([
        { id: 'large', when: 'has(signals.amount) && signals.amount > 10000', action: 'reject', reason: 'Too large' },
        { id: 'ok', when: 'true', action: 'approve', reason: 'Fine' },
      ]),
    );
    expect(evaluatePolicy(compiled, input({})).matchedRuleId).toBe('ok');
    expect(evaluatePolicy(compiled, input({ amount: 20000 })).matchedRuleId).toBe('large');
  });

  it('rejects on a missing intent parameter and on other runtime errors', () => {
    const compiled = compilePolicy(
      policyOf([
        { id: 'param', when: 'intent.parameters.amount > 5', action: 'approve', reason: 'r' },
      ]),
    );
    expect(evaluatePolicy(compiled, input({}, {}))).toEqual({
      action: 'reject',
      reason: "Rule 'param' could not be evaluated: No such key: amount",
      requires_override: false,
      matchedRuleId: 'param',
    });
    // a dyn value of the wrong type at runtime
    const decision = evaluatePolicy(compiled, input({}, { amount: 'lots' }));
    expect(decision.action).toBe('reject');
    expect(decision.matchedRuleId).toBe('param');
    expect(decision.reason).toMatch(/^Rule 'param' could not be evaluated: /);
  });

  it('does not throw on a malformed input', () => {
    const compiled = compilePolicy(sample());
    const bad = [
      { signals: null, intent: null },
      { signals: 'x', intent: { action: 1, parameters: 'y' } },
      {},
      undefined,
    ] as unknown as PolicyInput[];
    for (const i of bad) {
      const decision = evaluatePolicy(compiled, i);
      expect(decision.action).toBe('reject');
      expect(decision.matchedRuleId).toBe('sanctioned');
    }
  });

  it('never lets an error in an earlier reject rule fall through to a later approve rule', () => {
    const compiled = compilePolicy(
      policyOf([
        { id: 'blocked', when: "intent.parameters.to == 'blocked'", action: 'reject', reason: 'Blocked' },
        { id: 'ok', when: 'true', action: 'approve', reason: 'Fine' },
      ]),
    );
    expect(evaluatePolicy(compiled, input({}, {}))).toMatchObject({ action: 'reject', matchedRuleId: 'blocked' });
    expect(evaluatePolicy(compiled, input({}, { to: 'someone' }))).toMatchObject({ action: 'approve', matchedRuleId: 'ok' });
  });
});

describe('evaluatePolicy: numbers, booleans, strings, intent', () => {
  const decide = (when: string, signals: Record<string, unknown>, parameters: Record<string, unknown> = {}): string | null =>
    evaluatePolicy(
      compilePolicy(policyOf([{ id: 'hit', when, action: 'approve', reason: 'r' }])),
      input(signals, parameters),
    ).matchedRuleId;

  it('evaluates plain number literals against JSON numbers', () => {
    expect(decide('signals.amount > 10000', { amount: 10001 })).toBe('hit');
    expect(decide('signals.amount > 10000', { amount: 10000 })).toBeNull();
    expect(decide('signals.amount == 5', { amount: 5 })).toBe('hit');
    expect(decide('signals.amount == 5', { amount: 5.5 })).toBeNull();
    expect(decide('signals.amount != 5', { amount: 5.5 })).toBe('hit');
    expect(decide('signals.amount * 2 == 11', { amount: 5.5 })).toBe('hit');
    expect(decide('100 - signals.amount == 90', { amount: 10 })).toBe('hit');
    expect(decide('signals.amount / 4 == 2.5', { amount: 10 })).toBe('hit');
    expect(decide('signals.amount in [100, 200]', { amount: 200 })).toBe('hit');
    expect(decide('signals.amount in [100, 200]', { amount: 150 })).toBeNull();
    expect(decide('signals.amount in [100, 200.5]', { amount: 200.5 })).toBe('hit');
    expect(decide('intent.parameters.amount == 12 && intent.parameters.amount > 10', {}, { amount: 12 })).toBe('hit');
    expect(decide('intent.parameters.amount in [12, 13]', {}, { amount: 12 })).toBe('hit');
  });

  it('evaluates string membership with a list literal', () => {
    expect(decide("signals.country in ['KP', 'IR']", { country: 'IR' })).toBe('hit');
    expect(decide("signals.country in ['KP', 'IR']", { country: 'ir' })).toBeNull();
  });

  it('evaluates booleans and intent.action', () => {
    expect(decide('signals.vip', { vip: true })).toBe('hit');
    expect(decide('!signals.vip', { vip: true })).toBeNull();
    expect(decide("intent.action == 'payments:transfer'", {})).toBe('hit');
    expect(decide("intent.action.startsWith('payments:')", {})).toBe('hit');
  });

  it('is deterministic: the same input gives the same decision, every time', () => {
    const compiled = compilePolicy(sample());
    const cases = [
      input({ amount: 5, country: 'KP' }),
      input({ amount: 50000, country: 'FR' }),
      input({ amount: 5, country: 'FR' }),
      input({ country: 'FR' }),
      input({ amount: 'x' }),
    ];
    const first = cases.map((c) => evaluatePolicy(compiled, c));
    for (let round = 0; round < 50; round++) {
      expect(cases.map((c) => evaluatePolicy(compiled, c))).toEqual(first);
    }
    const recompiled = compilePolicy(sample());
    expect(cases.map((c) => evaluatePolicy(recompiled, c))).toEqual(first);
  });

  it('returns a fresh decision object each time', () => {
    const compiled = compilePolicy(sample());
    const a = evaluatePolicy(compiled, input({ amount: 5, country: 'FR' }));
    a.reason = 'mutated';
    expect(evaluatePolicy(compiled, input({ amount: 5, country: 'FR' })).reason).toBe('Within limits');
  });

  it('decides thousands of requests per second', () => {
    const compiled = compilePolicy(sample());
    const n = 5000;
    const started = performance.now();
    for (let i = 0; i < n; i++) evaluatePolicy(compiled, input({ amount: i * 3, country: i % 7 === 0 ? 'KP' : 'FR' }));
    const perSecond = n / ((performance.now() - started) / 1000);
    expect(perSecond).toBeGreaterThan(5000);
  });
});

describe('checkSignalTypes (spec 4.3 rule 10)', () => {
  const doc = policyOf([]);

  it('refuses a declared signal sent with another type, naming it', () => {
    expect(checkSignalTypes(doc, { amount: '100' })).toEqual({
      action: 'reject',
      reason: "Signal 'amount' must be of type number",
      requires_override: false,
      matchedRuleId: 'signal-type-violation',
    });
    expect(checkSignalTypes(doc, { country: 7 })?.reason).toBe("Signal 'country' must be of type string");
    expect(checkSignalTypes(doc, { vip: 'true' })?.reason).toBe("Signal 'vip' must be of type boolean");
    expect(checkSignalTypes(doc, { vip: 1 })?.reason).toBe("Signal 'vip' must be of type boolean");
    expect(checkSignalTypes(doc, { amount: null })?.reason).toBe("Signal 'amount' must be of type number");
    expect(checkSignalTypes(doc, { amount: [1] })?.matchedRuleId).toBe('signal-type-violation');
    expect(checkSignalTypes(doc, { amount: Number.NaN })?.matchedRuleId).toBe('signal-type-violation');
    expect(checkSignalTypes(doc, { amount: Number.POSITIVE_INFINITY })?.matchedRuleId).toBe('signal-type-violation');
  });

  it('reports the first violation in signalsSchema order', () => {
    expect(checkSignalTypes(doc, { vip: 'x', country: 1, amount: 'y' })?.reason).toBe("Signal 'amount' must be of type number");
  });

  it('accepts correctly typed signals', () => {
    expect(checkSignalTypes(doc, { amount: 0, country: '', vip: false })).toBeNull();
    expect(checkSignalTypes(doc, { amount: -12.5 })).toBeNull();
  });

  it('ignores undeclared signals', () => {
    expect(checkSignalTypes(doc, { other: 'x', nested: { a: 1 }, amount: 3 })).toBeNull();
  });

  it('ignores unsent signals', () => {
    expect(checkSignalTypes(doc, {})).toBeNull();
    expect(checkSignalTypes(doc, { amount: undefined })).toBeNull();
    expect(checkSignalTypes(doc, null)).toBeNull();
    expect(checkSignalTypes(doc, undefined)).toBeNull();
  });

  it('is applied by evaluatePolicy before any rule runs', () => {
    const compiled = compilePolicy(sample());
    // The first rule would reject KP; the type violation is what decides.
    expect(evaluatePolicy(compiled, input({ amount: '5', country: 'KP' }))).toEqual({
      action: 'reject',
      reason: "Signal 'amount' must be of type number",
      requires_override: false,
      matchedRuleId: 'signal-type-violation',
    });
  });
});
