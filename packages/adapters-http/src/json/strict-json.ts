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

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);

export function parseStrictJson(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new JsonSyntaxError((e as Error).message);
  }
  assertNoDuplicateKeys(text);
  return value;
}

/** Assumes `text` is valid JSON (JSON.parse accepted it). */
function assertNoDuplicateKeys(text: string): void {
  // Fast path: a document without objects cannot have duplicate keys.
  if (!text.includes('{')) return;
  let i = 0;
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
    const seen = new Set<string>();
    skipWs();
    if (text.charCodeAt(i) === 0x7d) {
      i++;
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
      if (c === 0x7d) return;
    }
  };
  const array = (at: string): void => {
    i++; // [
    skipWs();
    if (text.charCodeAt(i) === 0x5d) {
      i++;
      return;
    }
    for (let k = 0; ; k++) {
      value(`${at}[${k}]`);
      skipWs();
      const c = text.charCodeAt(i++);
      if (c === 0x5d) return;
    }
  };
  value('$');
}
