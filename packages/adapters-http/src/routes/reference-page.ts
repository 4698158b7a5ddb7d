import { marked } from 'marked';

export interface OpenApiOperation {
  summary?: string;
  description?: string;
  security?: unknown[];
  parameters?: (OpenApiParameter | { $ref: string })[];
  requestBody?: { content?: Record<string, { schema?: unknown; example?: unknown }> };
  responses?: Record<string, { description?: string; content?: Record<string, { example?: unknown }> }>;
  tags?: string[];
}

export interface OpenApiParameter {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
}

export interface OpenApiDocument {
  components?: { parameters?: Record<string, OpenApiParameter>; responses?: Record<string, { description?: string }> };
  openapi: string;
  info: { title: string; version: string; description?: string };
  paths: Record<string, Record<string, OpenApiOperation>>;
  security?: unknown[];
}

const esc = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const md = (s: string | undefined): string => (s ? marked.parse(s, { async: false }) : '');

/** A readable, script-free rendering of the OpenAPI document. */
export function renderReference(doc: OpenApiDocument): string {
  const ops: string[] = [];
  const byTag = new Map<string, string[]>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'delete', 'patch'].includes(method)) continue;
      const isPublic = Array.isArray(op.security) && op.security.length === 0;
      const params = (op.parameters ?? [])
        .map((p) => resolveRef(doc, p) as OpenApiParameter)
        .map((p) => `<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.in)}</td><td>${p.required ? 'yes' : 'no'}</td><td>${esc(p.description ?? '')}</td></tr>`)
        .join('');
      const responses = Object.entries(op.responses ?? {})
        .map(([status, r]) => `<tr><td>${esc(status)}</td><td>${md((resolveRef(doc, r) as { description?: string }).description)}</td></tr>`)
        .join('');
      const example = op.requestBody?.content?.['application/json']?.example;
      const html = `<div class="op" id="${esc(method + path)}"><div><span class="m ${method}">${method.toUpperCase()}</span><code>${esc(path)}</code>
<span class="auth ${isPublic ? 'none' : 'key'}">${isPublic ? 'public' : 'bearer key'}</span></div>
${op.summary ? `<p><strong>${esc(op.summary)}</strong></p>` : ''}${md(op.description)}
${params ? `<table><tr><th>parameter</th><th>in</th><th>required</th><th></th></tr>${params}</table>` : ''}
${example !== undefined ? `<p>Example request body:</p><pre><code>${esc(JSON.stringify(example, null, 2))}</code></pre>` : ''}
${responses ? `<table><tr><th>status</th><th>meaning</th></tr>${responses}</table>` : ''}</div>`;
      const tag = op.tags?.[0] ?? 'Other';
      byTag.set(tag, [...(byTag.get(tag) ?? []), html]);
    }
  }
  for (const [tag, list] of byTag) ops.push(`<h2>${esc(tag)}</h2>${list.join('\n')}`);
  return `<h1>${esc(doc.info.title)} <small>(OpenAPI ${esc(doc.openapi)}, document ${esc(doc.info.version)})</small></h1>
${md(doc.info.description)}${ops.join('\n')}`;
}

/** Follows a local `#/components/...` reference; anything else is returned as it is. */
function resolveRef(doc: OpenApiDocument, value: unknown): unknown {
  const ref = (value as { $ref?: unknown })?.$ref;
  if (typeof ref !== 'string' || !ref.startsWith('#/')) return value;
  let node: unknown = doc;
  for (const part of ref.slice(2).split('/')) node = (node as Record<string, unknown> | undefined)?.[part];
  return node ?? value;
}
