/**
 * JSON Schema (draft-07, which ajv handles out of the box) of the policy document, and the
 * structural half of validation: every schema error becomes `<json path>: <message>`, for example
 * `rules[1].action: must be one of approve, reject`.
 *
 * What the schema cannot say is checked in code by `validatePolicyDocument` (validate.ts): rule ids
 * unique, `signalSources` / `boundSignals` keys declared in `signalsSchema`, every `when` type-checked.
 */
import { Ajv, type ErrorObject } from 'ajv';
import { POLICY_ACTIONS, RESERVED_RULE_IDS, SIGNAL_TYPES } from './document.js';
import { INTENT_VALUE_PATH_PATTERN, PATH_MAX_LENGTH, REQUEST_PATH_PATTERN } from '../shared/request-paths.js';
import { POLICY_NAME_PATTERN, POLICY_VERSION_MAX_LENGTH, SOURCE_NAME_PATTERN } from '../shared/names.js';

// Names people read (policy name, source name) come from the one module of such patterns.
export { POLICY_NAME_PATTERN, POLICY_VERSION_MAX_LENGTH, SOURCE_NAME_PATTERN };
/** Signal names are CEL field names (`signals.<name>`): identifier-like, starting with a letter. */
export const SIGNAL_NAME_PATTERN = '^[A-Za-z][A-Za-z0-9_]{0,63}$';
export const RULE_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$';
/** A bound signal's path: `intent.action` or `intent.parameters.<key>[.<key>…]`, the `intent.` prefix optional. */
export const INTENT_PATH_PATTERN = '^(intent\\.)?(action|parameters(\\.[A-Za-z0-9_-]+)+)$';
export const FACT_MAX_LENGTH = 256;

/**
 * Identifier-like names that still cannot be signal names: CEL reserved words (`signals.in` does
 * not parse) and the names of Object.prototype members (a signal called `constructor` or
 * `toString` would be confused with the built-in member when the signals object is read).
 */
export const RESERVED_SIGNAL_NAMES: readonly string[] = [
  'as', 'break', 'const', 'continue', 'else', 'false', 'for', 'function', 'if', 'import', 'in',
  'let', 'loop', 'namespace', 'null', 'package', 'return', 'true', 'var', 'void', 'while',
  'constructor', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable', 'toLocaleString',
  'toString', 'valueOf',
];

const signalName = {
  type: 'string',
  pattern: SIGNAL_NAME_PATTERN,
  not: { enum: RESERVED_SIGNAL_NAMES },
} as const;

/** The JSON Schema of a policy document. `validatePolicyDocument` validates with exactly this. */
export const POLICY_DOCUMENT_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  $id: 'urn:ets:schema:policy-document',
  title: 'Policy document',
  type: 'object',
  additionalProperties: false,
  required: ['name', 'policyVersion', 'signalsSchema', 'rules'],
  properties: {
    name: { type: 'string', pattern: POLICY_NAME_PATTERN },
    policyVersion: {
      type: 'string',
      minLength: 1,
      maxLength: POLICY_VERSION_MAX_LENGTH,
      pattern: '^[^/]*$',
      not: { enum: ['.', '..'] },
    },
    description: { type: 'string', maxLength: 4096 },
    signalsSchema: {
      type: 'object',
      maxProperties: 256,
      propertyNames: signalName,
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['type'],
        properties: { type: { enum: [...SIGNAL_TYPES] } },
      },
    },
    rules: { type: 'array', maxItems: 1000, items: { $ref: '#/definitions/rule' } },
    default: { $ref: '#/definitions/outcome' },
    requireAuthorityGrant: { type: 'boolean' },
    signalSources: {
      type: 'object',
      maxProperties: 64,
      propertyNames: signalName,
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['source', 'fact', 'subject'],
        properties: {
          source: { type: 'string', pattern: SOURCE_NAME_PATTERN },
          fact: { type: 'string', minLength: 1, maxLength: FACT_MAX_LENGTH },
          subject: { type: 'string', maxLength: PATH_MAX_LENGTH, pattern: REQUEST_PATH_PATTERN },
        },
      },
    },
    boundSignals: {
      type: 'object',
      propertyNames: signalName,
      additionalProperties: { type: 'string', maxLength: PATH_MAX_LENGTH, pattern: INTENT_PATH_PATTERN },
    },
    approvalScope: {
      type: 'object',
      minProperties: 1,
      maxProperties: 1,
      additionalProperties: false,
      properties: {
        value: { type: 'string', maxLength: PATH_MAX_LENGTH, pattern: INTENT_VALUE_PATH_PATTERN },
        resourceId: { type: 'string', maxLength: PATH_MAX_LENGTH, pattern: INTENT_VALUE_PATH_PATTERN },
      },
    },
  },
  definitions: {
    outcome: {
      type: 'object',
      additionalProperties: false,
      required: ['action', 'reason'],
      properties: {
        action: { enum: [...POLICY_ACTIONS] },
        reason: { type: 'string', minLength: 1, maxLength: 1024 },
        requires_override: { type: 'boolean' },
      },
    },
    rule: {
      type: 'object',
      additionalProperties: false,
      required: ['id', 'when', 'action', 'reason'],
      properties: {
        id: { type: 'string', pattern: RULE_ID_PATTERN, not: { enum: [...RESERVED_RULE_IDS] } },
        when: { type: 'string', minLength: 1, maxLength: 4096 },
        action: { enum: [...POLICY_ACTIONS] },
        reason: { type: 'string', minLength: 1, maxLength: 1024 },
        requires_override: { type: 'boolean' },
      },
    },
  },
} as const;

const PATTERN_MESSAGES: Record<string, string> = {
  [POLICY_NAME_PATTERN]: 'must be 1 to 128 lowercase letters, digits or hyphens, starting with a letter or digit',
  '^[^/]*$': "must not contain '/'",
  [SIGNAL_NAME_PATTERN]:
    'is not a valid signal name (1 to 64 letters, digits or underscores, starting with a letter)',
  [RULE_ID_PATTERN]:
    "must be 1 to 128 letters, digits or '_', '.', ':', '-', starting with a letter or digit",
  [INTENT_PATH_PATTERN]: "must be an intent path: 'intent.action' or 'intent.parameters.<key>' (e.g. intent.parameters.amount; the 'intent.' prefix may be left out)",
  [INTENT_VALUE_PATH_PATTERN]: "must be an intent path: 'intent.action' or 'intent.parameters.<key>' (e.g. intent.parameters.amount)",
  [REQUEST_PATH_PATTERN]:
    "must be a path into the request: 'businessTransactionId' or a key under intent, metadata, authority or authorization (e.g. intent.parameters.invoiceId)",
  [SOURCE_NAME_PATTERN]: 'must be the name of a business signal source: 1 to 64 lowercase letters, digits or hyphens, starting with a letter or digit',
};

// One compiled validator for the process. ajv generates code once; validation itself is pure.
// `logger: false`: the domain writes nothing anywhere.
let compiled: ReturnType<Ajv['compile']> | undefined;
const validator = (): ReturnType<Ajv['compile']> => {
  if (!compiled) {
    const ajv = new Ajv({ allErrors: true, strict: true, verbose: true, logger: false });
    compiled = ajv.compile(POLICY_DOCUMENT_SCHEMA);
  }
  return compiled;
};

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * Turns a JSON pointer into the path notation of the error messages: `rules[1].action`,
 * `signalsSchema.amount.type`, `signalsSchema["odd key"]`. The document is walked alongside, so a
 * numeric key of an object (`signalsSchema["0"]`) is not mistaken for an array index. `$` is the
 * document itself.
 */
export function formatJsonPath(segments: readonly string[], root: unknown): string {
  let path = '';
  let node: unknown = root;
  for (const seg of segments) {
    if (Array.isArray(node)) path += `[${seg}]`;
    else if (IDENTIFIER.test(seg)) path += path === '' ? seg : `.${seg}`;
    else path += `[${JSON.stringify(seg)}]`;
    node =
      node !== null && typeof node === 'object' && Object.prototype.hasOwnProperty.call(node, seg)
        ? (node as Record<string, unknown>)[seg]
        : undefined;
  }
  return path === '' ? '$' : path;
}

const pointerSegments = (pointer: string): string[] =>
  pointer === '' ? [] : pointer.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));

const article = (type: string): string => (/^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`);
const quoteList = (values: readonly unknown[]): string => {
  const quoted = values.map((v) => `'${String(v)}'`);
  return quoted.length <= 2 ? quoted.join(' or ') : `any of ${quoted.join(', ')}`;
};

function describe(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'type':
      return `must be ${String(p.type).split(',').map(article).join(' or ')}`;
    case 'required':
      return 'is required';
    case 'additionalProperties':
      return 'is not an allowed property';
    case 'enum':
      return `must be one of ${(p.allowedValues as unknown[]).map(String).join(', ')}`;
    case 'not': {
      const forbidden = (e.schema as { enum?: unknown[] } | undefined)?.enum;
      return forbidden ? `must not be ${quoteList(forbidden)}` : 'is not allowed';
    }
    case 'pattern':
      return PATTERN_MESSAGES[String(p.pattern)] ?? `must match the pattern ${String(p.pattern)}`;
    case 'minLength':
      return p.limit === 1 ? 'must not be empty' : `must be at least ${String(p.limit)} characters`;
    case 'maxLength':
      return `must be at most ${String(p.limit)} characters`;
    case 'maxItems':
      return `must have at most ${String(p.limit)} items`;
    case 'maxProperties':
      return p.limit === 1 ? 'must have exactly one entry' : `must have at most ${String(p.limit)} entries`;
    case 'minProperties':
      return p.limit === 1 ? 'must have exactly one entry' : `must have at least ${String(p.limit)} entries`;
    default:
      return e.message ?? 'is invalid';
  }
}

/** One schema error: the path (segments and formatted) and the full `<path>: <message>` line. */
export interface SchemaIssue {
  segments: string[];
  path: string;
  text: string;
}

/**
 * Validates `doc` against POLICY_DOCUMENT_SCHEMA only. A missing or unknown property is reported at
 * its own path (`rules[0].reason: is required`), an invalid key of a signal map at the key
 * (`signalsSchema["bad name"]: is not a valid signal name …`).
 */
export function schemaIssues(doc: unknown): SchemaIssue[] {
  const validate = validator();
  if (validate(doc)) return [];
  const out: SchemaIssue[] = [];
  for (const e of validate.errors ?? []) {
    // propertyNames reports each bad key twice: once per failing sub-keyword (kept, it says why)
    // and once as a summary without detail (dropped).
    if (e.keyword === 'propertyNames') continue;
    const segments = pointerSegments(e.instancePath);
    const p = e.params as Record<string, unknown>;
    if (e.keyword === 'required') segments.push(String(p.missingProperty));
    if (e.keyword === 'additionalProperties') segments.push(String(p.additionalProperty));
    if (typeof e.propertyName === 'string') segments.push(e.propertyName);
    let message = describe(e);
    if (typeof e.propertyName === 'string' && e.keyword === 'not') message = 'is a reserved name';
    const path = formatJsonPath(segments, doc);
    const text = `${path}: ${message}`;
    if (!out.some((i) => i.text === text)) out.push({ segments, path, text });
  }
  return out;
}

/** The schema errors of `doc`, each `<json path>: <message>`; empty when the structure is valid. */
export const schemaErrors = (doc: unknown): string[] => schemaIssues(doc).map((i) => i.text);
