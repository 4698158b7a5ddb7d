import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { DuplicateKeyError, JsonSyntaxError, parseStrictJson, UnrepresentableJsonError } from './strict-json.js';

describe('parseStrictJson', () => {
  /** What the parser refuses in valid JSON: numbers JSON does not carry exactly, and U+0000. */
  const refusable = (v: unknown): boolean =>
    typeof v === 'number'
      ? !(Math.abs(v) <= Number.MAX_SAFE_INTEGER)
      : typeof v === 'string'
        ? v.includes('\u0000')
        : v !== null && typeof v === 'object' && Object.entries(v).some(([k, x]) => k.includes('\u0000') || refusable(x));

  it('parses what JSON.parse parses when keys are unique, and refuses exactly the unsafe numbers and U+0000', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const text = JSON.stringify(v);
        if (refusable(JSON.parse(text))) expect(() => parseStrictJson(text)).toThrow(UnrepresentableJsonError);
        else expect(parseStrictJson(text)).toEqual(JSON.parse(text));
      }),
      { numRuns: 500 },
    );
  });

  it.each([
    ['2^53', '{"a":9007199254740992}', '$.a'],
    ['2^53 + 1 (which rounds to 2^53)', '{"a":9007199254740993}', '$.a'],
    ['-(2^53)', '[-9007199254740992]', '$[0]'],
    ['an exponent spelling of 2^53', '{"a":{"b":9.007199254740992e15}}', '$.a.b'],
    ['a fraction beyond 2^53', '{"a":9007199254740991.5}', '$.a'],
    ['1e300', '{"a":1e300}', '$.a'],
  ])('refuses %s: JSON does not carry it exactly', (_what, text, at) => {
    expect(() => parseStrictJson(text)).toThrow(new UnrepresentableJsonError(`the number at ${at} is beyond ±(2^53 − 1), which a JSON number does not carry exactly; send such a value as a string`));
  });

  it('accepts every integer up to ±(2^53 − 1), however it is spelled, and fractions', () => {
    expect(parseStrictJson('[9007199254740991,-9007199254740991,9.007199254740991e15,0.1,-0,1e-300]')).toEqual([9007199254740991, -9007199254740991, 9007199254740991, 0.1, -0, 1e-300]);
  });

  it.each([
    ['1.0', 1],
    ['1e2', 100],
    ['1E+2', 100],
    ['100', 100],
    ['0.1', 0.1],
    ['-0', -0],
    ['-0.0e-999', -0],
    ['0.000001', 0.000001],
    ['1.50e-7', 1.5e-7],
    ['12345678901234567e-10', 1234567.8901234567],
    ['0.5e1', 5],
    ['5e-324', 5e-324],
    ['9007199254740991', 9007199254740991],
    ['-9.007199254740991e15', -9007199254740991],
  ])('accepts %s: its value is that of the double it reads as', (token, value) => {
    expect(Object.is((parseStrictJson(`[${token}]`) as number[])[0], value)).toBe(true);
  });

  it.each([
    ['0.30000000000000000000000001', '0.3', '$.a'],
    ['1e-400', '0', '$.a'],
    ['-1e-400', '0', '$.a'],
    ['123456789.123456789', '123456789.12345679', '$.a'],
    ['0.1000000000000000055511151231257827', '0.1', '$.a'],
    ['4.9e-325', '0', '$.a'],
  ])('refuses %s: it would be stored and signed as %s', (token, carried, at) => {
    expect(() => parseStrictJson(`{"a":${token}}`)).toThrow(
      new UnrepresentableJsonError(`the number at ${at} is not one a JSON number carries exactly (it would be stored and signed as ${carried}); send such a value as a string`),
    );
  });

  it('names where the inexact number is', () => {
    expect(() => parseStrictJson('{"x":[1, {"y": 1e-400}]}')).toThrow(/the number at \$\.x\[1\]\.y is not one/);
  });

  it('accepts JSON.stringify of every double within ±(2^53 − 1), as that double', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true, min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }), (d) => {
        const text = JSON.stringify(d);
        // JSON.stringify writes -0 as 0.
        expect(parseStrictJson(text)).toBe(d === 0 ? 0 : d);
      }),
      { numRuns: 2000 },
    );
  });

  /** An independent reading of the rule: the token and the text of its double are one rational number (BigInt arithmetic). */
  const rational = (text: string): { m: bigint; e: number } => {
    const [mantissa, exp = '0'] = text.toLowerCase().split('e');
    const [whole, fraction = ''] = mantissa!.split('.');
    return { m: BigInt(whole! + fraction), e: Number(exp) - fraction.length };
  };
  const sameValue = (a: string, b: string): boolean => {
    const x = rational(a);
    const y = rational(b);
    const low = Math.min(x.e, y.e);
    return x.m * 10n ** BigInt(x.e - low) === y.m * 10n ** BigInt(y.e - low);
  };

  it('accepts a long number token exactly when its value is that of its double, within ±(2^53 − 1)', () => {
    const digits = (min: number, max: number) => fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: min, maxLength: max });
    const token = fc
      .tuple(
        fc.boolean(),
        digits(1, 30).map((w) => w.replace(/^0+(?=.)/, '')),
        fc.option(digits(1, 30), { nil: undefined }),
        fc.option(fc.oneof(fc.integer({ min: -30, max: 30 }), fc.integer({ min: -400, max: 400 })), { nil: undefined }),
      )
      .map(([negative, whole, fraction, exp]) => `${negative ? '-' : ''}${whole}${fraction === undefined ? '' : `.${fraction}`}${exp === undefined ? '' : `e${exp}`}`);
    fc.assert(
      fc.property(token, (t) => {
        const n = Number(t);
        const exact = Math.abs(n) <= Number.MAX_SAFE_INTEGER && sameValue(t, String(n));
        if (exact) expect(parseStrictJson(t)).toBe(n);
        else expect(() => parseStrictJson(t)).toThrow(UnrepresentableJsonError);
      }),
      { numRuns: 3000 },
    );
  });

  it.each([
    ['a value', '{"a":"x\\u0000y"}', 'the string at $.a holds U+0000'],
    ['a key', '{"a":{"k\\u0000":1}}', 'a key in $.a holds U+0000'],
    ['an array item', '{"a":["ok","\\u0000"]}', 'the string at $.a[1] holds U+0000'],
    ['the whole document', '"\\u0000"', 'the string at $ holds U+0000'],
  ])('refuses U+0000 in %s', (_what, text, message) => {
    expect(() => parseStrictJson(text)).toThrow(new UnrepresentableJsonError(message));
  });

  it.each([
    ['escaped, in a value', '{"a":"x\\ud800"}', 'the string at $.a holds an unpaired surrogate'],
    ['escaped, in a key', '{"\\udc00":1}', 'a key in $ holds an unpaired surrogate'],
    // A body reader's UTF-8 never yields one; a text from elsewhere may.
    ['raw, in a value', '{"a":["\ud800"]}', 'the string at $.a[0] holds an unpaired surrogate'],
    ['raw, in a key', '{"a":{"\udfff":1}}', 'a key in $.a holds an unpaired surrogate'],
  ])('refuses an unpaired surrogate %s', (_what, text, message) => {
    expect(() => parseStrictJson(text)).toThrow(new UnrepresentableJsonError(message));
  });

  it('does not take an escaped backslash followed by u0000 for U+0000', () => {
    expect(parseStrictJson('{"a":"\\\\u0000"}')).toEqual({ a: '\\u0000' });
  });

  it.each([
    ['{"a":1,"a":2}', 'a', '$'],
    ['{"x":{"b":true, "b" :false}}', 'b', '$.x'],
    ['[1,{"k":"v","k":"w"}]', 'k', '$[1]'],
    ['{"a":1,"\\u0061":2}', 'a', '$'],
    ['{"__proto__":1,"__proto__":2}', '__proto__', '$'],
  ])('refuses %s', (text, key, at) => {
    expect(() => parseStrictJson(text)).toThrow(DuplicateKeyError);
    try {
      parseStrictJson(text);
    } catch (e) {
      expect((e as DuplicateKeyError).key).toBe(key);
      expect((e as DuplicateKeyError).at).toBe(at);
    }
  });

  it('does not confuse keys inside strings with keys', () => {
    expect(parseStrictJson('{"a":"{\\"a\\":1,\\"a\\":2}","b":["a","a"]}')).toEqual({ a: '{"a":1,"a":2}', b: ['a', 'a'] });
  });

  it('keeps a __proto__ key as data', () => {
    const v = parseStrictJson('{"__proto__":{"admin":true}}') as Record<string, unknown>;
    expect(Object.prototype.hasOwnProperty.call(v, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it('reports malformed JSON as a syntax error', () => {
    expect(() => parseStrictJson('{"a":')).toThrow(JsonSyntaxError);
  });

  it.each([
    ['a number out of range', '{"a":1e400}'],
    ['an unpaired surrogate in a value', '{"a":"\\ud800"}'],
    ['an unpaired surrogate in a key', '{"\\udc00":1}'],
    ['nesting deeper than the limit', '['.repeat(65) + ']'.repeat(65)],
    ['very deep nesting', '{"a":'.repeat(100000) + '1' + '}'.repeat(100000)],
  ])('refuses %s as unrepresentable', (_what, text) => {
    expect(() => parseStrictJson(text)).toThrow(text.length > 1000 ? Error : UnrepresentableJsonError);
  });

  it('accepts nesting up to the limit and paired surrogates', () => {
    expect(() => parseStrictJson('['.repeat(64) + ']'.repeat(64))).not.toThrow();
    expect(parseStrictJson('"\\ud83d\\ude00"')).toBe('😀');
  });
});
