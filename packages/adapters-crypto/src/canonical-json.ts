/**
 * RFC 8785 JSON Canonicalization Scheme (JCS).
 *
 * Written here instead of using the `canonicalize` package because that package emits the text
 * `undefined` for function-valued members and array elements (invalid JSON that would then be
 * hashed and signed), has no cycle check, and accepts lone surrogates, which RFC 8785 3.2.2.2
 * requires to be rejected. For every input it handles correctly the output is identical (a
 * test checks this), so signatures made before the switch still verify (spec 9.6).
 *
 * Member names are taken with `Object.keys` and values read as own properties, so a key named
 * `__proto__` that JSON.parse created as an own data property is serialized like any other key
 * and its content is covered by hashes and signatures (spec 2.9).
 */

/** Thrown when a value has no RFC 8785 form (non-finite number, BigInt, cycle, lone surrogate). */
export class CanonicalJsonError extends TypeError {
  constructor(message: string) {
    super(message);
    this.name = 'CanonicalJsonError';
  }
}

// With the `u` flag a well-formed surrogate pair is one code point, so this only matches lone
// surrogates.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * The members of a plain object's canonical text, in canonical order, each `"name":value`: the
 * text is `{` + members joined by `,` + `}`. A signer that adds its signature members to an object
 * it has just canonicalised inserts them here instead of canonicalising the whole object again.
 */
export function canonicalMembers(record: Record<string, unknown>): { names: string[]; members: string[] } {
  const ancestors = new Set<object>([record]);
  const names: string[] = [];
  const members: string[] = [];
  for (const name of Object.keys(record).sort()) {
    const member = serialize(record[name], name, ancestors);
    if (member === undefined) continue;
    names.push(name);
    members.push(`${serializeString(name)}:${member}`);
  }
  return { names, members };
}

/** RFC 8785 canonical JSON text of `value`. */
export function canonicalize(value: unknown): string {
  const text = serialize(value, '', new Set<object>());
  if (text === undefined) {
    throw new CanonicalJsonError(`a value of type ${typeof value} has no JSON representation`);
  }
  return text;
}

/** Returns undefined for values JSON.stringify would omit (undefined, functions, symbols). */
function serialize(input: unknown, key: string, ancestors: Set<object>): string | undefined {
  let value = input;
  // Same order as JSON.stringify: toJSON first (Date), then unwrap boxed primitives.
  if (value !== null && (typeof value === 'object' || typeof value === 'bigint')) {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') value = toJSON.call(value, key);
  }
  if (value instanceof Number || value instanceof String || value instanceof Boolean) {
    value = value.valueOf();
  }

  switch (typeof value) {
    case 'string':
      return serializeString(value);
    case 'number':
      if (!Number.isFinite(value)) {
        throw new CanonicalJsonError(`${String(value)} is not allowed in canonical JSON`);
      }
      // ECMAScript Number::toString is exactly the RFC 8785 number format (3.2.2.3); -0 -> "0".
      return String(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      throw new CanonicalJsonError('BigInt values are not allowed in canonical JSON');
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null) return 'null';

  const object = value as object;
  if (ancestors.has(object)) throw new CanonicalJsonError('cyclic structure cannot be canonicalized');
  ancestors.add(object);
  try {
    if (Array.isArray(object)) {
      const parts: string[] = new Array(object.length);
      for (let i = 0; i < object.length; i++) {
        parts[i] = serialize(object[i], String(i), ancestors) ?? 'null';
      }
      return `[${parts.join(',')}]`;
    }
    const record = object as Record<string, unknown>;
    // Array.prototype.sort without a comparator compares UTF-16 code units, as RFC 8785 3.2.3
    // requires.
    const names = Object.keys(record).sort();
    const parts: string[] = [];
    for (const name of names) {
      const member = serialize(record[name], name, ancestors);
      if (member !== undefined) parts.push(`${serializeString(name)}:${member}`);
    }
    return `{${parts.join(',')}}`;
  } finally {
    ancestors.delete(object);
  }
}

// Any surrogate code unit at all: most strings have none, and this test is much cheaper than the
// code-point-aware one that tells lone surrogates from pairs.
const ANY_SURROGATE = /[\uD800-\uDFFF]/;

function serializeString(text: string): string {
  if (ANY_SURROGATE.test(text) && LONE_SURROGATE.test(text)) {
    throw new CanonicalJsonError('strings with lone surrogates are not allowed in canonical JSON');
  }
  // JSON.stringify escapes exactly what RFC 8785 3.2.2.2 asks for: \b \t \n \f \r \" \\ as
  // two-character escapes, other controls as lower-case \u00xx, everything else literal.
  return JSON.stringify(text);
}
