import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { DuplicateKeyError, JsonSyntaxError, parseStrictJson, UnrepresentableJsonError } from './strict-json.js';

describe('parseStrictJson', () => {
  it('parses what JSON.parse parses when keys are unique', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const text = JSON.stringify(v);
        expect(parseStrictJson(text)).toEqual(JSON.parse(text));
      }),
      { numRuns: 500 },
    );
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
