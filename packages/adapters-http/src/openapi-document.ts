import { readdirSync, readFileSync } from 'node:fs';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import type { OpenApiDocument } from './routes/reference-page.js';

/**
 * The OpenAPI document is kept as fragments under `assets/openapi/`, one per area of the service
 * (`00-base.yaml` holds `openapi`, `info`, `tags` and the shared components), so that each area's
 * routes and schemas live beside each other and can change without touching the others. They are
 * merged once at start. A fragment may name the profiles it describes (`x-profiles: [attestation]`);
 * without it a fragment belongs to every profile (CONTRACT "Profiles").
 */
export type OpenApiProfile = 'transaction' | 'attestation' | 'attestation-simple';

type Json = Record<string, unknown>;
type Merged = OpenApiDocument & { components: Record<string, Record<string, unknown>>; tags?: { name: string }[] };

const FRAGMENTS_DIR = new URL('../assets/openapi/', import.meta.url);
const METHODS = new Set(['get', 'post', 'put', 'delete', 'patch']);

function readFragments(): { file: string; doc: Json }[] {
  return readdirSync(FRAGMENTS_DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((file) => ({ file, doc: parseYaml(readFileSync(new URL(file, FRAGMENTS_DIR), 'utf8')) as Json }));
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
    const profiles = doc['x-profiles'] as string[] | undefined;
    if (profiles && !profiles.includes(profile)) continue;
    for (const [p, item] of Object.entries((doc.paths ?? {}) as Record<string, Json>)) {
      const target = (out.paths[p] ??= {});
      for (const [method, op] of Object.entries(item)) {
        if (METHODS.has(method) && target[method]) throw new Error(`OpenAPI: ${method.toUpperCase()} ${p} is defined twice (${file})`);
        target[method] = op as never;
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
  return out;
}

export function openApiYaml(doc: OpenApiDocument): string {
  return stringifyYaml(doc, { lineWidth: 0 });
}
