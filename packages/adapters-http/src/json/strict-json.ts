/**
 * JSON parsing that refuses a document with a duplicate key in any object. JSON.parse silently
 * keeps the last duplicate, so `{"a":1,"a":2}` and `{"a":2}` would be different bytes that hash and
 * sign as the same object; a trust service must refuse the ambiguity instead (issue 3, item 5).
 *
 * The scan runs over the raw text before JSON.parse does the real work. Keys are compared after
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

/** Data that is valid JSON but cannot be canonicalised, hashed or signed (RFC 8785): refused up front. */
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
  assertNoDuplicateKeys(text);
  assertRepresentable(value);
  return value;
}

/** Every number finite (1e400 parses as Infinity) and every string and key well-formed UTF-16. */
function assertRepresentable(value: unknown): void {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new UnrepresentableJsonError('a number is out of range');
  } else if (typeof value === 'string') {
    if (!value.isWellFormed()) throw new UnrepresentableJsonError('a string holds an unpaired surrogate');
  } else if (Array.isArray(value)) {
    for (const v of value) assertRepresentable(v);
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (!k.isWellFormed()) throw new UnrepresentableJsonError('a key holds an unpaired surrogate');
      assertRepresentable(v);
    }
  }
}

/** Assumes `text` is valid JSON (JSON.parse accepted it). */
function assertNoDuplicateKeys(text: string): void {
  let i = 0;
  let depth = 0;
  const enter = (at: string): void => {
    if (++depth > MAX_JSON_DEPTH) throw new UnrepresentableJsonError(`nesting deeper than ${MAX_JSON_DEPTH} levels at ${at}`);
  };
  const n = text.length;
  const skipWs = (): void => {
    while (i < n && WS.has(text.charCodeAt(i))) i++;
  };
  const readString = (): string => {
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
    return escaped ? (JSON.parse(raw) as string) : raw.slice(1, -1);
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
      readString();
      return;
    }
    skipScalar();
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
      const key = readString();
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
