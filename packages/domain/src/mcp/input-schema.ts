/**
 * A tool's `inputSchema` (JSON Schema; 2020-12 when it names no `$schema`, as MCP says) compiled
 * once and used to check a call's arguments before anything is decided or signed. The schemas come
 * from upstream servers, so they are data to be checked too: one that does not compile (not a
 * valid schema, an unknown dialect, a `$ref` that does not resolve locally) means the tool is not
 * offered. Nothing is ever fetched: a `$ref` outside the schema does not resolve.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

type AnyAjv = Ajv | Ajv2019 | Ajv2020;
const addFormats = addFormatsModule as unknown as (ajv: AnyAjv) => void;

/** Longest schema accepted (its JSON text, in characters): a bound on what an upstream makes the gateway compile. */
export const INPUT_SCHEMA_MAX_LENGTH = 64 * 1024;
/** At most this many error messages are told to the caller. */
const ERRORS_SHOWN = 5;
/** Compiled schemas kept; the oldest is dropped (from ajv's own cache too) past this. */
const CACHE_MAX = 2000;

const DIALECTS: Record<string, 'draft-07' | '2019-09' | '2020-12'> = {
  'http://json-schema.org/draft-07/schema': 'draft-07',
  'https://json-schema.org/draft/2019-09/schema': '2019-09',
  'https://json-schema.org/draft/2020-12/schema': '2020-12',
};

const dialectOf = (schema: Record<string, unknown>): 'draft-07' | '2019-09' | '2020-12' | undefined => {
  const named = schema.$schema;
  if (named === undefined) return '2020-12';
  return typeof named === 'string' ? DIALECTS[named.replace(/#$/, '')] : undefined;
};

type Compiled = { ok: true; validate: ValidateFunction; ajv: AnyAjv; schema: object } | { ok: false; problem: string };

export class InputSchemas {
  private readonly ajv: Record<'draft-07' | '2019-09' | '2020-12', AnyAjv>;
  private readonly cache = new Map<string, Compiled>();

  constructor() {
    // strict: false: upstream schemas carry annotations ajv does not know (`examples`, vendor
    // keywords); addUsedSchema: false: two tools may give their schemas the same `$id`.
    const options = { strict: false, allErrors: true, addUsedSchema: false, logger: false as const };
    this.ajv = { 'draft-07': new Ajv(options), '2019-09': new Ajv2019(options), '2020-12': new Ajv2020(options) };
    for (const a of Object.values(this.ajv)) addFormats(a);
  }

  /** Why the schema cannot be a tool's input schema; undefined when it can. */
  problem(schema: unknown): string | undefined {
    const c = this.compiled(schema);
    return c.ok ? undefined : c.problem;
  }

  /** The reasons `value` breaks the schema (at most five), or undefined when it keeps it. */
  check(schema: unknown, value: unknown): string[] | undefined {
    const c = this.compiled(schema);
    if (!c.ok) return [`the tool's input schema cannot be used (${c.problem})`];
    if (c.validate(value)) return undefined;
    return (c.validate.errors ?? []).slice(0, ERRORS_SHOWN).map((e) => `${e.instancePath === '' ? 'arguments' : `arguments${e.instancePath}`} ${e.message ?? 'is not valid'}`);
  }

  private compiled(schema: unknown): Compiled {
    let text: string;
    try {
      text = JSON.stringify(schema);
    } catch {
      return { ok: false, problem: 'it is not JSON' };
    }
    const hit = this.cache.get(text);
    if (hit) return hit;
    const compiled = this.compile(schema, text);
    this.cache.set(text, compiled);
    if (this.cache.size > CACHE_MAX) {
      const [oldestKey, oldest] = this.cache.entries().next().value!;
      this.cache.delete(oldestKey);
      if (oldest.ok) oldest.ajv.removeSchema(oldest.schema);
    }
    return compiled;
  }

  private compile(schema: unknown, text: string): Compiled {
    if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return { ok: false, problem: 'it is not a JSON object' };
    if (text.length > INPUT_SCHEMA_MAX_LENGTH) return { ok: false, problem: `it is longer than ${INPUT_SCHEMA_MAX_LENGTH} characters` };
    const s = schema as Record<string, unknown>;
    // MCP: the arguments of a call are an object.
    if (s.type !== 'object') return { ok: false, problem: 'its type is not "object"' };
    const dialect = dialectOf(s);
    if (!dialect) return { ok: false, problem: `its $schema names a dialect the gateway does not check (${String(s.$schema).slice(0, 100)})` };
    const ajv = this.ajv[dialect];
    // A copy: ajv keys its own cache by the object, and the caller's object may change.
    const copy = structuredClone(s);
    try {
      return { ok: true, validate: ajv.compile(copy), ajv, schema: copy };
    } catch (e) {
      return { ok: false, problem: `it is not a valid JSON Schema: ${(e as Error).message.slice(0, 300)}` };
    }
  }
}
