import { readdirSync, readFileSync } from 'node:fs';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';

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
}

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description?: string };
  servers?: { url: string; description?: string }[];
  paths: Record<string, Record<string, OpenApiOperation>>;
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
  return out;
}

/**
 * Responses that come from the layers every route passes through (`createHttpApp`), not from its
 * handler, by the route's kind: every route refuses U+0000 in the URL (400), has a rate limit (429)
 * and may fail unexpectedly (500) or find no database connection in time (503 STORAGE_UNAVAILABLE);
 * a keyed one answers 401, 503 when its authentication cannot be audited, and, for a failing key
 * over the failed-authentication limit, 429; one that reads a body
 * (every POST) answers 400, 413 and 415 for what the body reader refuses. Each is added, as a
 * reference to the shared response in `00-base.yaml`, to every operation that does not describe
 * that status itself, so the document states what the app does without each fragment repeating it.
 * An operation whose errors are not the envelope names their schema in `x-error-schema` (spec 2.1:
 * `POST /policies/validate`); 401 and 500 are the envelope everywhere.
 */
const LAYER_RESPONSES: { applies: (method: string, op: Json) => boolean; status: string; response: string }[] = [
  { applies: () => true, status: '400', response: 'InputRefused' },
  { applies: (m) => m === 'post', status: '413', response: 'TooLarge' },
  { applies: (m) => m === 'post', status: '415', response: 'UnsupportedMediaType' },
  { applies: (_m, op) => !isPublic(op), status: '401', response: 'Unauthenticated' },
  { applies: (_m, op) => !isPublic(op), status: '429', response: 'AuthFailureLimited' },
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
