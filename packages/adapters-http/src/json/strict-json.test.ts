import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { DuplicateKeyError, JsonSyntaxError, parseStrictJson } from './strict-json.js';

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
});
