/**
 * Request samples for every operation of the served OpenAPI document (`x-codeSamples`, shown by the
 * API reference beside the operation): one with curl and one with the TypeScript client
 * `@ets/client`. They are made from the operation itself (method, path, parameters, security, the
 * request body's example, or a skeleton of its schema) when the document is built, so that they
 * cannot drift from the operation they show.
 */
export interface CodeSample {
  lang: 'Shell' | 'TypeScript';
  label: string;
  source: string;
}

type Json = Record<string, unknown>;
interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  example?: unknown;
  schema?: Json;
}

/** The profile's client constructor in `@ets/client`: profile A has its own `/execute`, `/verify` and `/health`. */
const CLIENT_FACTORY = { transaction: 'createClient', attestation: 'createAttestationClient', 'attestation-simple': 'createAttestationClient' } as const;

export function codeSamples(doc: Json, profile: keyof typeof CLIENT_FACTORY, method: string, path: string, op: Json): CodeSample[] {
  const params = ((op.parameters ?? []) as Json[]).map((p) => resolve(doc, p) as unknown as Parameter);
  const keyed = !(Array.isArray(op.security) && op.security.length === 0);
  const body = requestBodyOf(doc, op);
  const json = responseIsJson(doc, op);
  return [
    { lang: 'Shell', label: 'curl', source: curl(method, path, params, keyed, body) },
    { lang: 'TypeScript', label: '@ets/client', source: typescript(CLIENT_FACTORY[profile], method, path, params, keyed, body, json) },
  ];
}

/** `{businessTransactionId}` → `BUSINESS_TRANSACTION_ID`: a shell variable the reader sets. */
const shellName = (name: string): string => name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/[^A-Za-z0-9]+/g, '_').toUpperCase();

/** A parameter's documented example, as text; else undefined. */
const exampleOf = (p: Parameter): string | undefined => {
  const v = p.example ?? p.schema?.example ?? p.schema?.default ?? (Array.isArray(p.schema?.enum) ? p.schema.enum[0] : undefined);
  return v === undefined ? undefined : String(v);
};

/** Single-quoted for a POSIX shell. */
const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

function curl(method: string, path: string, params: Parameter[], keyed: boolean, body: unknown): string {
  let url = path.replace(/\{([^}]+)\}/g, (_m, name: string) => `$${shellName(name)}`);
  const query = params.filter((p) => p.in === 'query' && p.required).map((p) => `${p.name}=${exampleOf(p) ?? `$${shellName(p.name)}`}`);
  if (query.length > 0) url += `?${query.join('&')}`;
  const lines = [`curl${method === 'get' ? '' : ` -X ${method.toUpperCase()}`} "$ETS_URL${url}"`];
  if (keyed) lines.push(`-H "Authorization: Bearer $ETS_API_KEY"`);
  if (body !== undefined) lines.push(`-H 'Content-Type: application/json'`, `-d ${shellQuote(JSON.stringify(body))}`);
  return lines.join(' \\\n  ');
}

function typescript(factory: string, method: string, path: string, params: Parameter[], keyed: boolean, body: unknown, json: boolean): string {
  const literal = (p: Parameter): string => {
    const numeric = p.schema?.type === 'integer' || p.schema?.type === 'number';
    const v = p.example ?? p.schema?.example ?? p.schema?.default ?? (Array.isArray(p.schema?.enum) ? p.schema.enum[0] : undefined);
    if (numeric) return String(typeof v === 'number' ? v : typeof p.schema?.minimum === 'number' ? p.schema.minimum : 1);
    return JSON.stringify(v === undefined ? `<${p.name}>` : String(v));
  };
  const group = (where: string) => {
    const ps = params.filter((p) => p.in === where && (where === 'path' || p.required));
    return ps.length === 0 ? undefined : `${where}: { ${ps.map((p) => `${/^[A-Za-z_$][\w$]*$/.test(p.name) ? p.name : JSON.stringify(p.name)}: ${literal(p)}`).join(', ')} }`;
  };
  const options: string[] = [];
  const groups = [group('path'), group('query')].filter((g) => g !== undefined);
  if (groups.length > 0) options.push(`params: { ${groups.join(', ')} }`);
  if (body !== undefined) options.push(`body: ${JSON.stringify(body, null, 2).replace(/\n/g, '\n  ')}`);
  if (!json) options.push(`parseAs: 'text'`);
  const args = options.length === 0 ? '' : `, {\n  ${options.join(',\n  ')},\n}`;
  const client = keyed ? `${factory}({ baseUrl: process.env.ETS_URL!, apiKey: process.env.ETS_API_KEY })` : `${factory}({ baseUrl: process.env.ETS_URL! })`;
  return [
    `import { ${factory} } from '@ets/client';`,
    '',
    `const client = ${client};`,
    `const { data, error, response } = await client.${method.toUpperCase()}('${path}'${args});`,
  ].join('\n');
}

function resolve(doc: Json, node: unknown): Json {
  let n = node as Json;
  for (let i = 0; i < 10 && typeof n?.$ref === 'string'; i++) {
    n = (n.$ref as string)
      .replace(/^#\//, '')
      .split('/')
      .reduce<unknown>((at, key) => (at as Json | undefined)?.[key], doc) as Json;
  }
  return n ?? {};
}

function requestBodyOf(doc: Json, op: Json): unknown {
  const media = (resolve(doc, op.requestBody).content as Json | undefined)?.['application/json'] as Json | undefined;
  if (!media) return undefined;
  if (media.example !== undefined) return media.example;
  const first = Object.values((media.examples ?? {}) as Record<string, Json>)[0];
  if (first?.value !== undefined) return first.value;
  return skeleton(doc, media.schema, 0);
}

function responseIsJson(doc: Json, op: Json): boolean {
  const ok = Object.entries((op.responses ?? {}) as Json).find(([status]) => /^[23]/.test(status));
  if (!ok) return true;
  const content = resolve(doc, ok[1]).content as Json | undefined;
  return !content || 'application/json' in content;
}

/** A value of the schema's shape: its example, or its required members filled with typed placeholders. */
function skeleton(doc: Json, node: unknown, depth: number): unknown {
  const s = resolve(doc, node);
  if (s.example !== undefined) return s.example;
  if (Array.isArray(s.examples) && s.examples.length > 0) return s.examples[0];
  if (s.const !== undefined) return s.const;
  if (Array.isArray(s.enum)) return s.enum[0];
  if (depth > 6) return {};
  if (Array.isArray(s.allOf)) return Object.assign({}, ...s.allOf.map((part) => skeleton(doc, part, depth + 1)));
  const alternatives = (s.oneOf ?? s.anyOf) as unknown[] | undefined;
  if (Array.isArray(alternatives) && alternatives.length > 0) return skeleton(doc, alternatives[0], depth + 1);
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  if (type === 'object' || s.properties) {
    const properties = (s.properties ?? {}) as Record<string, unknown>;
    const required = (s.required ?? []) as string[];
    return Object.fromEntries(required.filter((name) => name in properties).map((name) => [name, skeleton(doc, properties[name], depth + 1)]));
  }
  if (type === 'array') return [skeleton(doc, s.items, depth + 1)];
  if (type === 'integer' || type === 'number') return typeof s.minimum === 'number' ? s.minimum : 1;
  if (type === 'boolean') return true;
  if (s.format === 'date-time') return '2026-01-01T12:00:00Z';
  if (s.format === 'uuid') return '00000000-0000-4000-8000-000000000000';
  return '…';
}
