import { describe, expect, it } from '@jest/globals';
import {
  POLICY_DOCUMENT_SCHEMA,
  isDotOnly,
  schemaErrors,
  validatePolicyDocument,
  type PolicyDocument,
} from './index.js';
import { contractSamplePolicy } from './sample.fixture.js';

const sample = contractSamplePolicy;

/** The sample with some top-level fields replaced (as plain JSON, so invalid values are allowed). */
const withFields = (fields: Record<string, unknown>): unknown => ({ ...sample(), ...fields });

const rule = (when: string, over: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: 'r',
  when,
  action: 'approve',
  reason: 'because',
  ...over,
});

const errorsOf = (doc: unknown): string[] => validatePolicyDocument(doc).errors;

describe('validatePolicyDocument: the contract sample', () => {
  it('validates the CONTRACT.md example', () => {
    expect(validatePolicyDocument(sample())).toEqual({ valid: true, errors: [] });
  });

  it('accepts the minimal document (optional fields absent, no rules)', () => {
    expect(validatePolicyDocument({ name: 'p', policyVersion: '1', signalsSchema: {}, rules: [] })).toEqual({
      valid: true,
      errors: [],
    });
  });

  it('exports the JSON Schema it validates with', () => {
    expect(POLICY_DOCUMENT_SCHEMA.type).toBe('object');
    expect(POLICY_DOCUMENT_SCHEMA.additionalProperties).toBe(false);
    expect(POLICY_DOCUMENT_SCHEMA.properties.name.pattern).toBe('^[a-z0-9][a-z0-9-]{0,127}$');
  });

  it('never throws, whatever it is given', () => {
    for (const doc of [undefined, null, 0, 'x', [], [1], true, { rules: 'x' }, { rules: [null, 1, []] }]) {
      const result = validatePolicyDocument(doc);
      expect(result.valid).toBe(false);
      expect(result.errors.length).toBeGreaterThan(0);
    }
    expect(errorsOf(null)).toEqual(['$: must be an object']);
  });
});

describe('validatePolicyDocument: schema errors carry their JSON path', () => {
  it('reports missing required fields at their own path', () => {
    expect(errorsOf({})).toEqual([
      'name: is required',
      'policyVersion: is required',
      'signalsSchema: is required',
      'rules: is required',
    ]);
  });

  it('refuses unknown top-level properties', () => {
    expect(errorsOf(withFields({ extra: 1 }))).toEqual(['extra: is not an allowed property']);
  });

  it('checks the name pattern', () => {
    for (const name of ['Payments', '-x', '', 'a_b', 'a/b', 'a'.repeat(129)]) {
      expect(errorsOf(withFields({ name }))).toEqual([
        'name: must be 1 to 128 lowercase letters, digits or hyphens, starting with a letter or digit',
      ]);
    }
    for (const name of ['a', '0', 'payments-transfer', 'a'.repeat(128)]) expect(errorsOf(withFields({ name }))).toEqual([]);
    expect(errorsOf(withFields({ name: 7 }))).toEqual(['name: must be a string']);
  });

  it('checks policyVersion: non-empty, at most 64 characters, no slash, not . or ..', () => {
    expect(errorsOf(withFields({ policyVersion: '' }))).toEqual(['policyVersion: must not be empty']);
    expect(errorsOf(withFields({ policyVersion: 'v'.repeat(65) }))).toEqual(['policyVersion: must be at most 64 characters']);
    expect(errorsOf(withFields({ policyVersion: '1/2' }))).toEqual(["policyVersion: must not contain '/'"]);
    expect(errorsOf(withFields({ policyVersion: '.' }))).toEqual(["policyVersion: must not be '.' or '..'"]);
    expect(errorsOf(withFields({ policyVersion: '..' }))).toEqual(["policyVersion: must not be '.' or '..'"]);
    for (const v of ['1.0.0', '...', '.1', '2026-01-01', 'v'.repeat(64)]) expect(errorsOf(withFields({ policyVersion: v }))).toEqual([]);
  });

  it('accepts only boolean, number and string as signal types (spec 2.8)', () => {
    for (const type of ['boolean', 'number', 'string']) {
      expect(errorsOf(withFields({ signalsSchema: { amount: { type: 'number' }, country: { type: 'string' }, s: { type } } }))).toEqual([]);
    }
    for (const type of ['integer', 'object', 'array', 'null', 'bool', 'double', 'int', 'Number']) {
      const errors = errorsOf(withFields({ signalsSchema: { amount: { type }, country: { type: 'string' } } }));
      expect(errors).toEqual(['signalsSchema.amount.type: must be one of boolean, number, string']);
    }
    expect(errorsOf(withFields({ signalsSchema: { amount: {}, country: { type: 'string' } } }))).toEqual([
      'signalsSchema.amount.type: is required',
    ]);
    expect(
      errorsOf(withFields({ signalsSchema: { amount: { type: 'number', format: 'x' }, country: { type: 'string' } } })),
    ).toEqual(['signalsSchema.amount.format: is not an allowed property']);
  });

  it('requires identifier-like signal names', () => {
    const schemaWith = (name: string): unknown =>
      withFields({ signalsSchema: { amount: { type: 'number' }, country: { type: 'string' }, [name]: { type: 'string' } } });
    expect(errorsOf(schemaWith('bad name'))).toEqual([
      'signalsSchema["bad name"]: is not a valid signal name (1 to 64 letters, digits or underscores, starting with a letter)',
    ]);
    expect(errorsOf(schemaWith('1st'))).toEqual([
      'signalsSchema["1st"]: is not a valid signal name (1 to 64 letters, digits or underscores, starting with a letter)',
    ]);
    expect(errorsOf(schemaWith('_x'))).toHaveLength(1);
    expect(errorsOf(schemaWith('a-b'))).toHaveLength(1);
    expect(errorsOf(schemaWith('in'))).toEqual(['signalsSchema.in: is a reserved name']);
    expect(errorsOf(schemaWith('constructor'))).toEqual(['signalsSchema.constructor: is a reserved name']);
    for (const ok of ['x', 'riskScore', 'is_vip', 'a1']) expect(errorsOf(schemaWith(ok))).toEqual([]);
  });

  it('reports rule errors at rules[i].<field>', () => {
    const doc = withFields({
      rules: [
        rule('true', { id: 'a' }),
        rule('true', { id: 'b', action: 'allow' }),
        rule('true', { id: 'c', reason: '' }),
        { id: 'd', when: 'true', action: 'reject' },
        rule('true', { id: 'e', requires_override: 'yes' }),
        rule('true', { id: 'f', extra: true }),
        rule('', { id: 'g' }),
        'not a rule',
      ],
    });
    expect(errorsOf(doc)).toEqual([
      'rules[1].action: must be one of approve, reject',
      'rules[2].reason: must not be empty',
      'rules[3].reason: is required',
      'rules[4].requires_override: must be a boolean',
      'rules[5].extra: is not an allowed property',
      'rules[6].when: must not be empty',
      'rules[7]: must be an object',
    ]);
  });

  it('reserves the rule ids that decisions use for non-rule outcomes', () => {
    for (const id of ['default', 'signal-type-violation']) {
      expect(errorsOf(withFields({ rules: [rule('true', { id })] }))).toEqual([
        "rules[0].id: must not be any of 'default', 'signal-type-violation', 'NOT_AUTHORIZED', 'AUTHORITY_EXPIRED', 'SOURCE_UNAVAILABLE', 'source-mismatch', 'bound-signal-mismatch', 'override-rejected', 'override-expired'",
      ]);
    }
    expect(errorsOf(withFields({ rules: [rule('true', { id: 'has space' })] }))[0]).toMatch(/^rules\[0\]\.id: must be/);
  });

  it('reports duplicate rule ids (checked in code) at the later rule', () => {
    const doc = withFields({ rules: [rule('true', { id: 'x' }), rule('true', { id: 'y' }), rule('false', { id: 'x' })] });
    expect(errorsOf(doc)).toEqual(["rules[2].id: duplicate rule id 'x' (already used by rules[0])"]);
  });

  it('checks default', () => {
    expect(errorsOf(withFields({ default: { action: 'deny', reason: 'x' } }))).toEqual([
      'default.action: must be one of approve, reject',
    ]);
    expect(errorsOf(withFields({ default: { action: 'approve' } }))).toEqual(['default.reason: is required']);
    expect(errorsOf(withFields({ default: { action: 'approve', reason: 'x', requires_override: true } }))).toEqual([]);
  });

  it('checks requireAuthorityGrant, signalSources, boundSignals and approvalScope, naming each bad binding by its JSON path', () => {
    const erp = { source: 'erp', fact: 'invoice.amount', subject: 'intent.parameters.invoiceId' };
    expect(errorsOf(withFields({ requireAuthorityGrant: 'yes' }))).toEqual(['requireAuthorityGrant: must be a boolean']);
    expect(errorsOf(withFields({ signalSources: { amount: erp } }))).toEqual([]);
    expect(errorsOf(withFields({ signalSources: { amount: { ...erp, subject: 'metadata.customer' }, country: { ...erp, subject: 'businessTransactionId' } } }))).toEqual([]);
    expect(errorsOf(withFields({ signalSources: { amount: {} } }))).toEqual([
      'signalSources.amount.source: is required',
      'signalSources.amount.fact: is required',
      'signalSources.amount.subject: is required',
    ]);
    expect(errorsOf(withFields({ signalSources: { amount: { ...erp, cacheSeconds: 30 } } }))).toEqual(['signalSources.amount.cacheSeconds: is not an allowed property']);
    expect(errorsOf(withFields({ signalSources: { amount: { ...erp, source: 'ERP' } } }))).toEqual([
      'signalSources.amount.source: must be the name of a business signal source: 1 to 64 lowercase letters, digits or hyphens, starting with a letter or digit',
    ]);
    expect(errorsOf(withFields({ signalSources: { amount: { ...erp, fact: '' } } }))).toEqual(['signalSources.amount.fact: must not be empty']);
    expect(errorsOf(withFields({ signalSources: { amount: { ...erp, subject: 'signals.amount' } } }))).toEqual([
      "signalSources.amount.subject: must be a path into the request: 'businessTransactionId' or a key under intent, metadata, authority or authorization (e.g. intent.parameters.invoiceId)",
    ]);
    expect(errorsOf(withFields({ signalSources: { amount: 'ledger' } }))).toEqual(['signalSources.amount: must be an object']);
    expect(errorsOf(withFields({ signalSources: { nope: erp } }))).toEqual(["signalSources.nope: signal 'nope' is not declared in signalsSchema"]);
    expect(errorsOf(withFields({ boundSignals: { amount: 'parameters.amount', country: 'intent.parameters.to.country' } }))).toEqual([]);
    expect(errorsOf(withFields({ boundSignals: { amount: 'action' } }))).toEqual([]);
    expect(errorsOf(withFields({ boundSignals: { amount: 'amount' } }))).toEqual([
      "boundSignals.amount: must be an intent path: 'intent.action' or 'intent.parameters.<key>' (e.g. intent.parameters.amount; the 'intent.' prefix may be left out)",
    ]);
    expect(errorsOf(withFields({ boundSignals: { amount: 5 } }))).toEqual(['boundSignals.amount: must be a string']);
    expect(errorsOf(withFields({ boundSignals: { other: 'parameters.other' } }))).toEqual([
      "boundSignals.other: signal 'other' is not declared in signalsSchema",
    ]);
    expect(errorsOf(withFields({ approvalScope: { value: 'intent.parameters.amount' } }))).toEqual([]);
    expect(errorsOf(withFields({ approvalScope: { resourceId: 'intent.parameters.invoiceId' } }))).toEqual([]);
    expect(errorsOf(withFields({ approvalScope: {} }))).toEqual(['approvalScope: must have exactly one entry']);
    expect(errorsOf(withFields({ approvalScope: { value: 'intent.parameters.amount', resourceId: 'intent.parameters.invoiceId' } }))).toEqual(['approvalScope: must have exactly one entry']);
    expect(errorsOf(withFields({ approvalScope: { value: 'parameters.amount' } }))).toEqual([
      "approvalScope.value: must be an intent path: 'intent.action' or 'intent.parameters.<key>' (e.g. intent.parameters.amount)",
    ]);
    expect(errorsOf(withFields({ approvalScope: { amount: 'intent.parameters.amount' } }))).toEqual(['approvalScope.amount: is not an allowed property']);
  });

  it.each(['default', 'signal-type-violation', 'NOT_AUTHORIZED', 'AUTHORITY_EXPIRED', 'SOURCE_UNAVAILABLE', 'source-mismatch', 'bound-signal-mismatch'])(
    "a rule may not take the id '%s': decisions use it for outcomes that are not a rule",
    (id) => {
      expect(errorsOf(withFields({ rules: [rule('true', { id })] }))[0]).toMatch(/^rules\[0\]\.id: must not be /);
    },
  );

  it('schemaErrors reports the structure only', () => {
    expect(schemaErrors(sample())).toEqual([]);
    expect(schemaErrors(withFields({ rules: [rule('signals.nope')] }))).toEqual([]);
  });
});

describe('validatePolicyDocument: every when is type-checked against signalsSchema', () => {
  const whenErrors = (...whens: string[]): string[] =>
    errorsOf(withFields({ rules: whens.map((when, i) => rule(when, { id: `r${i}` })) }));

  it('refuses comparing a string signal with a number', () => {
    expect(whenErrors('true', 'signals.country > 3')).toEqual([
      'rules[1].when: type error: no such overload: string > int (at character 1)',
    ]);
    expect(whenErrors('signals.country == 3')).toEqual([
      'rules[0].when: type error: no such overload: string == int (at character 1)',
    ]);
    expect(whenErrors('signals.amount == "big"')).toHaveLength(1);
  });

  it('refuses an undeclared signal, also inside has() and with index syntax', () => {
    expect(whenErrors('signals.riskScore > 3')).toEqual([
      "rules[0].when: unknown signal 'riskScore': it is not declared in signalsSchema",
    ]);
    expect(whenErrors('has(signals.vip)')).toEqual([
      "rules[0].when: unknown signal 'vip': it is not declared in signalsSchema",
    ]);
    expect(whenErrors("signals['vip'] == true")).toEqual([
      "rules[0].when: unknown signal 'vip': it is not declared in signalsSchema",
    ]);
  });

  it('requires a bool expression', () => {
    expect(whenErrors('signals.amount')).toEqual(['rules[0].when: must be a bool expression, but its type is double']);
    expect(whenErrors('signals.amount + 1')).toEqual(['rules[0].when: must be a bool expression, but its type is double']);
    expect(whenErrors('signals.country')).toEqual(['rules[0].when: must be a bool expression, but its type is string']);
    expect(whenErrors('intent.parameters.flag')).toEqual(['rules[0].when: must be a bool expression, but its type is dyn']);
    expect(whenErrors('intent.parameters.flag == true')).toEqual([]);
  });

  it('reports syntax errors and unknown variables', () => {
    expect(whenErrors('signals.amount >')).toEqual(['rules[0].when: syntax error: Unexpected token: EOF (at character 17)']);
    expect(whenErrors('amount > 3')[0]).toMatch(/^rules\[0\]\.when: type error: Unknown variable: amount/);
  });

  it('reports one error per faulty rule, in rule order, each with its path', () => {
    const errors = whenErrors('signals.country > 3', 'true', 'signals.nope', 'signals.amount');
    expect(errors.map((e) => e.split(':')[0])).toEqual(['rules[0].when', 'rules[2].when', 'rules[3].when']);
  });

  it('types signals by their declaration: boolean -> bool, number -> double, string -> string', () => {
    const doc = (type: string, when: string): unknown =>
      withFields({ signalsSchema: { s: { type } }, rules: [rule(when)] });
    expect(errorsOf(doc('boolean', 'signals.s'))).toEqual([]);
    expect(errorsOf(doc('boolean', '!signals.s && signals.s == false'))).toEqual([]);
    expect(errorsOf(doc('boolean', 'signals.s > 1'))).toHaveLength(1);
    expect(errorsOf(doc('number', 'signals.s >= 0.5 && signals.s < 100'))).toEqual([]);
    expect(errorsOf(doc('number', 'signals.s.startsWith("a")'))).toHaveLength(1);
    expect(errorsOf(doc('string', 'signals.s.startsWith("a") && size(signals.s) < 10'))).toEqual([]);
    expect(errorsOf(doc('string', 'signals.s'))).toEqual(['rules[0].when: must be a bool expression, but its type is string']);
  });

  it('lets policy authors write plain numbers against number signals', () => {
    expect(
      whenErrors(
        'signals.amount > 10000',
        'signals.amount >= 10000.5',
        'signals.amount == 5',
        '5 != signals.amount',
        'signals.amount * 2 > 100',
        '100 - signals.amount < 1',
        'signals.amount / 4 <= 2',
        'signals.amount in [100, 200]',
        'signals.amount in [100, 200.5]',
        'intent.parameters.amount > 10 && intent.parameters.amount == 12',
      ),
    ).toEqual([]);
  });

  it('knows intent.action (string) and intent.parameters (map)', () => {
    expect(whenErrors('intent.action == "payments:transfer"', "'amount' in intent.parameters", 'intent.action > 3')).toEqual([
      'rules[2].when: type error: no such overload: string > int (at character 1)',
    ]);
    expect(whenErrors('intent.nope == 1')).toHaveLength(1);
  });

  it('only parses the whens when signalsSchema itself is invalid', () => {
    const doc = withFields({
      signalsSchema: { amount: { type: 'integer' } },
      rules: [rule('signals.amount > 3', { id: 'a' }), rule('signals.amount >', { id: 'b' })],
    });
    expect(errorsOf(doc)).toEqual([
      'signalsSchema.amount.type: must be one of boolean, number, string',
      'rules[1].when: syntax error: Unexpected token: EOF (at character 17)',
    ]);
  });
});

describe('policy refs', () => {
  it('isDotOnly is true for . and .. only', () => {
    expect(isDotOnly('.')).toBe(true);
    expect(isDotOnly('..')).toBe(true);
    for (const s of ['', '...', '.a', 'a.', '1.0']) expect(isDotOnly(s)).toBe(false);
  });
});
