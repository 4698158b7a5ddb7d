/**
 * JSON parsing that refuses a document with a duplicate key in any object. JSON.parse silently
 * keeps the last duplicate, so `{"a":1,"a":2}` and `{"a":2}` would be different bytes that hash and
 * sign as the same object; a trust service must refuse the ambiguity instead (issue 3, item 5).
 * For the same reason it refuses a number whose written value is not the value of the double it
 * parses to (see `assertExactNumber`).
 *
 * The scan runs over the raw text after JSON.parse has accepted it. Keys are compared after
 * unescaping, so `"a"` and `"\u0061"` are the same key.
 */
export class JsonSyntaxError extends Error {
  override readonly name = 'JsonSyntaxError';
}

export class DuplicateKeyError extends Error {
  override readonly name = 'DuplicateKeyError';
  constructor(readonly key: string, readonly at: string) {
    super(`Duplicate key ${JSON.stringify(key)} in object at ${at}.`);
  }
}

/**
 * Data that is valid JSON but that the service refuses up front (400): what cannot be
 * canonicalised, hashed or signed (RFC 8785) as it was sent, and what no store can hold.
 */
export class UnrepresentableJsonError extends Error {
  override readonly name = 'UnrepresentableJsonError';
}

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);

/** Deeper documents are refused: nothing legitimate nests this far, and recursion must stay bounded. */
export const MAX_JSON_DEPTH = 64;

export function parseStrictJson(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new JsonSyntaxError((e as Error).message);
  }
  scan(text);
  return value;
}

/**
 * Every string and key well-formed UTF-16 and free of U+0000, which PostgreSQL text cannot hold
 * and no id, name or reason needs. (Numbers are checked on their text, by the scan.)
 */
function assertText(s: string, what: string): void {
  if (!s.isWellFormed()) throw new UnrepresentableJsonError(`${what} holds an unpaired surrogate`);
  if (s.includes('\u0000')) throw new UnrepresentableJsonError(`${what} holds U+0000`);
}

/**
 * One pass over the text: no duplicate key, no nesting beyond MAX_JSON_DEPTH, every number exact,
 * every string and key representable (assertText). Assumes `text` is valid JSON (JSON.parse
 * accepted it), so an unescaped string holds no U+0000 (JSON refuses raw control characters); it
 * holds an unpaired surrogate only if the text does, and only escaped strings need decoding.
 */
function scan(text: string): void {
  const checkUnescaped = !text.isWellFormed();
  let i = 0;
  let depth = 0;
  const enter = (at: string): void => {
    if (++depth > MAX_JSON_DEPTH) throw new UnrepresentableJsonError(`nesting deeper than ${MAX_JSON_DEPTH} levels at ${at}`);
  };
  const n = text.length;
  const skipWs = (): void => {
    while (i < n && WS.has(text.charCodeAt(i))) i++;
  };
  const readString = (what: () => string): string => {
    const start = i; // at the opening quote
    i++;
    let escaped = false;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x5c) {
        escaped = true;
        i += 2;
        continue;
      }
      if (c === 0x22) break;
      i++;
    }
    i++; // closing quote
    const raw = text.slice(start, i);
    const decoded = escaped ? (JSON.parse(raw) as string) : raw.slice(1, -1);
    if (escaped || checkUnescaped) assertText(decoded, what());
    return decoded;
  };
  const skipScalar = (): void => {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x2c || c === 0x7d || c === 0x5d || WS.has(c)) return;
      i++;
    }
  };
  const value = (at: string): void => {
    skipWs();
    const c = text.charCodeAt(i);
    if (c === 0x7b) return object(at);
    if (c === 0x5b) return array(at);
    if (c === 0x22) {
      readString(() => `the string at ${at}`);
      return;
    }
    const start = i;
    skipScalar();
    // A number starts with `-` or a digit (true, false and null with a letter).
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) assertExactNumber(text.slice(start, i), at);
  };
  const object = (at: string): void => {
    i++; // {
    enter(at);
    const seen = new Set<string>();
    skipWs();
    if (text.charCodeAt(i) === 0x7d) {
      i++;
      depth--;
      return;
    }
    for (;;) {
      skipWs();
      const key = readString(() => `a key in ${at}`);
      if (seen.has(key)) throw new DuplicateKeyError(key, at);
      seen.add(key);
      skipWs();
      i++; // :
      value(`${at}.${key}`);
      skipWs();
      const c = text.charCodeAt(i++);
      if (c === 0x7d) {
        depth--;
        return;
      }
    }
  };
  const array = (at: string): void => {
    i++; // [
    enter(at);
    skipWs();
    if (text.charCodeAt(i) === 0x5d) {
      i++;
      depth--;
      return;
    }
    for (let k = 0; ; k++) {
      value(`${at}[${k}]`);
      skipWs();
      const c = text.charCodeAt(i++);
      if (c === 0x5d) {
        depth--;
        return;
      }
    }
  };
  value('$');
}

/** Up to 15 digits without fraction or exponent: always a safe integer, held exactly (the common case). */
const SHORT_INTEGER = /^-?\d{1,15}$/;

/**
 * A number token (valid JSON) whose value is the value of the double it parses to, as RFC 8785
 * writes that double back (the shortest text that reads as it, `String(n)`), and within
 * ±(2^53 − 1). Otherwise the signed record would hold another value than the one sent:
 * `9007199254740993` becomes 9007199254740992 (beyond 2^53 neighbouring integers share one double),
 * `1e-400` becomes 0, `0.30000000000000000000000001` becomes 0.3. `1.0`, `1e2`, `0.1` and `-0` are
 * the values of their doubles: accepted. Such values must be sent as strings.
 */
function assertExactNumber(token: string, at: string): void {
  if (SHORT_INTEGER.test(token)) return;
  const n = Number(token);
  if (!(Math.abs(n) <= Number.MAX_SAFE_INTEGER)) {
    throw new UnrepresentableJsonError(`the number at ${at} is beyond ±(2^53 − 1), which a JSON number does not carry exactly; send such a value as a string`);
  }
  const carried = String(n);
  if (decimalValue(token) !== decimalValue(carried)) {
    throw new UnrepresentableJsonError(`the number at ${at} is not one a JSON number carries exactly (it would be stored and signed as ${carried}); send such a value as a string`);
  }
}

/**
 * The decimal value of a number's text (JSON grammar, or `String(n)` with its `e+`) in one form,
 * so that two texts of one value compare equal: `0` for zero of either sign, else
 * `<sign><digits>e<point>` for the value 0.<digits> × 10^<point>, the digits without leading or
 * trailing zeros.
 */
function decimalValue(text: string): string {
  const negative = text.charCodeAt(0) === 0x2d;
  const e = text.search(/[eE]/);
  const mantissa = text.slice(negative ? 1 : 0, e < 0 ? text.length : e);
  const exponent = e < 0 ? 0 : Number(text.slice(e + 1));
  const dot = mantissa.indexOf('.');
  const whole = dot < 0 ? mantissa : mantissa.slice(0, dot);
  let digits = dot < 0 ? mantissa : whole + mantissa.slice(dot + 1);
  let point = whole.length + exponent;
  let lead = 0;
  while (lead < digits.length && digits.charCodeAt(lead) === 0x30) lead++;
  let end = digits.length;
  while (end > lead && digits.charCodeAt(end - 1) === 0x30) end--;
  if (lead === end) return '0';
  digits = digits.slice(lead, end);
  point -= lead;
  return `${negative ? '-' : ''}${digits}e${point}`;
}
