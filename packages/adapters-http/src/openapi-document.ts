import { readdirSync, readFileSync } from 'node:fs';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { codeSamples, type CodeSample } from './openapi-code-samples.js';

/**
 * The OpenAPI document is kept as fragments under `assets/openapi/`, one per area of the service
 * (`00-base.yaml` holds `openapi`, `info`, `tags` and the shared components), so that each area's
 * routes and schemas live beside each other and can change without touching the others. They are
 * merged once at start. A fragment may name the profiles it describes (`x-profiles: [attestation]`);
 * without it a fragment belongs to every profile (CONTRACT "Profiles"). An operation may name its
 * own `x-profiles` too (a path whose shape depends on the profile, like `POST /execute`), and a
 * fragment may give its operations another `security` in some profile (`x-profile-security:
 * {attestation-simple: [...]}`), and an operation its own (which wins over its fragment's). Both
 * extensions are removed from the merged document.
 */
export type OpenApiProfile = 'transaction' | 'attestation' | 'attestation-simple';

export interface OpenApiResponse {
  $ref?: string;
  description?: string;
  headers?: Record<string, unknown>;
  content?: Record<string, { schema?: unknown; example?: unknown }>;
}

export interface OpenApiOperation {
  operationId?: string;
  summary?: string;
  description?: string;
  security?: unknown[];
  parameters?: unknown[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: unknown; example?: unknown }> };
  responses?: Record<string, OpenApiResponse>;
  tags?: string[];
  /** The schema of this operation's error bodies when they are not the envelope (`POST /policies/validate`). */
  'x-error-schema'?: string;
  /** Request samples (curl, `@ets/client`), made from the operation when the document is built. */
  'x-codeSamples'?: CodeSample[];
}

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description?: string; contact?: { name?: string; url?: string }; license?: { name: string; identifier?: string; url?: string } };
  servers?: { url: string; description?: string }[];
  paths: Record<string, Record<string, OpenApiOperation>>;
  /** Requests the service sends (OpenAPI 3.1): the notifications of new pending items. */
  webhooks?: Record<string, Record<string, OpenApiOperation>>;
  components?: Record<string, Record<string, unknown>>;
  security?: unknown[];
  tags?: { name: string; description?: string }[];
}

type Json = Record<string, unknown>;
type Merged = OpenApiDocument & { components: Record<string, Record<string, unknown>>; tags: { name: string }[] };

const FRAGMENTS_DIR = new URL('../assets/openapi/', import.meta.url);
export const HTTP_METHODS = ['get', 'post', 'put', 'delete', 'patch'] as const;
const METHODS = new Set<string>(HTTP_METHODS);

function readFragments(): { file: string; doc: Json }[] {
  return readdirSync(FRAGMENTS_DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((file) => ({ file, doc: parseYaml(readFileSync(new URL(file, FRAGMENTS_DIR), 'utf8'), { uniqueKeys: true }) as Json }));
}

/** Merges the fragments that describe `profile`. A path operation or component defined twice is an error. */
export function buildOpenApiDocument(profile: OpenApiProfile): OpenApiDocument {
  const fragments = readFragments();
  const base = fragments.find((f) => f.file === '00-base.yaml');
  if (!base) throw new Error('assets/openapi/00-base.yaml is missing');
  const out = structuredClone(base.doc) as unknown as Merged;
  out.paths = {};
  out.components ??= {};
  const tags = new Map((out.tags ?? []).map((t) => [t.name, t]));
  for (const { file, doc } of fragments) {
    if (file === '00-base.yaml') continue;
    if (!servesProfile(doc, profile)) continue;
    const security = (doc['x-profile-security'] as Record<string, unknown> | undefined)?.[profile];
    for (const [p, item] of Object.entries((doc.paths ?? {}) as Record<string, Json>)) {
      for (const [method, op] of Object.entries(item)) {
        if (METHODS.has(method) && !servesProfile(op as Json, profile)) continue;
        const target = (out.paths[p] ??= {});
        if (METHODS.has(method) && target[method]) throw new Error(`OpenAPI: ${method.toUpperCase()} ${p} is defined twice (${file})`);
        target[method] = (METHODS.has(method) ? withoutExtensions(op as Json, security, profile) : op) as never;
      }
    }
    for (const [name, item] of Object.entries((doc.webhooks ?? {}) as Record<string, Record<string, OpenApiOperation>>)) {
      const webhooks = (out.webhooks ??= {});
      if (name in webhooks) throw new Error(`OpenAPI: webhook ${name} is defined twice (${file})`);
      webhooks[name] = item;
    }
    for (const [section, entries] of Object.entries((doc.components ?? {}) as Record<string, Json>)) {
      const target = (out.components[section] ??= {});
      for (const [name, value] of Object.entries(entries)) {
        if (name in target) throw new Error(`OpenAPI: components.${section}.${name} is defined twice (${file})`);
        target[name] = value;
      }
    }
    for (const t of (doc.tags ?? []) as { name: string }[]) if (!tags.has(t.name)) tags.set(t.name, t);
  }
  out.tags = [...tags.values()];
  addLayerResponses(out);
  keepOnlyWhatIsUsed(out);
  for (const [p, item] of Object.entries(out.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (METHODS.has(method)) (op as Json)['x-codeSamples'] = codeSamples(out as unknown as Json, profile, method, p, op as Json);
    }
  }
  return out;
}

/**
 * Each profile's document holds only what its own operations use: the fragments share components
 * (one profile's request shape, another's key scheme) and tags, and a profile's document must not
 * show the components or sections of another.
 */
function keepOnlyWhatIsUsed(doc: Merged): void {
  const used = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (node === null || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string' && value.startsWith('#/components/') && !used.has(value)) {
        used.add(value);
        const [section, name] = value.slice('#/components/'.length).split('/');
        visit(doc.components[section!]?.[name!]);
      } else if (key === 'security' && Array.isArray(value)) {
        for (const requirement of value) for (const scheme of Object.keys(requirement as object)) used.add(`#/components/securitySchemes/${scheme}`);
      } else {
        visit(value);
      }
    }
  };
  visit(doc.paths);
  visit(doc.webhooks ?? {});
  visit({ security: doc.security });
  for (const [section, entries] of Object.entries(doc.components)) {
    for (const name of Object.keys(entries)) if (!used.has(`#/components/${section}/${name}`)) delete entries[name];
    if (Object.keys(entries).length === 0) delete doc.components[section];
  }
  const operations = [...Object.values(doc.paths), ...Object.values(doc.webhooks ?? {})];
  const tagged = new Set(operations.flatMap((item) => Object.values(item).flatMap((op) => (op as OpenApiOperation).tags ?? [])));
  doc.tags = doc.tags.filter((t) => tagged.has(t.name));
}

/**
 * Responses that come from the layers every route passes through (`createHttpApp`), not from its
 * handler, by the route's kind: every route refuses U+0000 in the URL (400), has a rate limit (429)
 * and may fail unexpectedly (500) or find no database connection in time (503 STORAGE_UNAVAILABLE);
 * a keyed one answers 401, 503 when its authentication cannot be audited, for a failing key
 * over the failed-authentication limit 429, and, a write made with the console's session cookie
 * without its CSRF token, 403; one that reads a body
 * (every method but GET: the app reads the body of a DELETE too) answers 400, 413 and 415 for what the body reader refuses. Each is added, as a
 * reference to the shared response in `00-base.yaml`, to every operation that does not describe
 * that status itself, so the document states what the app does without each fragment repeating it.
 * An operation whose errors are not the envelope names their schema in `x-error-schema` (spec 2.1:
 * `POST /policies/validate`); 401 and 500 are the envelope everywhere.
 */
const LAYER_RESPONSES: { applies: (method: string, op: Json) => boolean; status: string; response: string }[] = [
  { applies: () => true, status: '400', response: 'InputRefused' },
  { applies: (m) => m !== 'get', status: '413', response: 'TooLarge' },
  { applies: (m) => m !== 'get', status: '415', response: 'UnsupportedMediaType' },
  { applies: (_m, op) => !isPublic(op), status: '401', response: 'Unauthenticated' },
  { applies: (_m, op) => !isPublic(op), status: '429', response: 'AuthFailureLimited' },
  { applies: (m, op) => !isPublic(op) && m !== 'get', status: '403', response: 'CsrfRefused' },
  { applies: (_m, op) => isPublic(op), status: '429', response: 'RateLimited' },
  { applies: (_m, op) => !isPublic(op), status: '503', response: 'Unavailable' },
  { applies: (_m, op) => isPublic(op), status: '503', response: 'StorageUnavailable' },
  { applies: () => true, status: '500', response: 'InternalError' },
];
const ALWAYS_ENVELOPE = new Set(['401', '500']);

const isPublic = (op: Json): boolean => Array.isArray(op.security) && op.security.length === 0;

function addLayerResponses(doc: Merged): void {
  for (const item of Object.values(doc.paths) as Record<string, Json>[]) {
    for (const [method, op] of Object.entries(item)) {
      if (!METHODS.has(method)) continue;
      const responses = (op.responses ??= {}) as Json;
      const errorSchema = op['x-error-schema'] as string | undefined;
      for (const l of LAYER_RESPONSES) {
        if (!l.applies(method, op) || l.status in responses) continue;
        responses[l.status] =
          errorSchema && !ALWAYS_ENVELOPE.has(l.status)
            ? { description: `As \`#/components/responses/${l.response}\`, rendered as this operation's error body.`, content: { 'application/json': { schema: { $ref: errorSchema } } } }
            : { $ref: `#/components/responses/${l.response}` };
      }
      op.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
    }
  }
}

const servesProfile = (node: Json, profile: OpenApiProfile): boolean => {
  const profiles = node['x-profiles'] as string[] | undefined;
  return !profiles || profiles.includes(profile);
};

/** The operation as published: without its extensions, with the profile's security unless it is public. */
function withoutExtensions(op: Json, fragmentSecurity: unknown, profile: OpenApiProfile): Json {
  const { 'x-profiles': _profiles, 'x-profile-security': own, ...rest } = op;
  const security = (own as Record<string, unknown> | undefined)?.[profile] ?? fragmentSecurity;
  return security !== undefined && !isPublic(rest) ? { ...rest, security } : rest;
}

export function openApiYaml(doc: OpenApiDocument): string {
  return stringifyYaml(doc, { lineWidth: 0 });
}
