import { readdirSync, readFileSync } from 'node:fs';
import { marked } from 'marked';
import type { Response } from 'express';
import type { RouteModule } from '../route-table.js';
import { renderReference, type OpenApiDocument } from './reference-page.js';
import { buildOpenApiDocument, openApiYaml, type OpenApiProfile } from '../openapi-document.js';

const GUIDE_DIR = new URL('../../assets/guide/', import.meta.url);

/**
 * The operator guide is kept as one Markdown file per section under `assets/guide/`, joined in the
 * order of their names (`000-intro.md`, `010-…`), so each area documents itself in its own file.
 */
const readGuide = (): string =>
  readdirSync(GUIDE_DIR)
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => readFileSync(new URL(f, GUIDE_DIR), 'utf8'))
    .join('\n');

/** Built once at start; the documents do not change while the process runs. The default profile's document. */
export const OPENAPI: OpenApiDocument = buildOpenApiDocument('transaction');
export const OPERATOR_GUIDE_MARKDOWN = readGuide();

/**
 * Everything a page needs is inline: no script, font or style comes from another host, so the
 * documentation works air-gapped. The CSP makes that a rule the browser enforces.
 */
export const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

export const PAGE_STYLE = `
body{font:16px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1b1f24;background:#fafbfc}
main{max-width:960px;margin:0 auto;padding:24px 32px 64px}
nav.top{background:#14213d;color:#fff;padding:10px 32px}nav.top a{color:#fff;margin-right:20px;text-decoration:none;font-weight:600}
h1,h2,h3{line-height:1.25}h2{border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:36px}
code,pre{font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef1f4;border-radius:4px}
code{padding:1px 4px}pre{padding:12px;overflow:auto}pre code{padding:0;background:none}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
.op{border:1px solid #d0d7de;border-radius:6px;margin:14px 0;padding:10px 14px;background:#fff}
.m{display:inline-block;min-width:56px;font-weight:700;font-family:ui-monospace,monospace}
.m.get{color:#0a6e31}.m.post{color:#9a4b00}.auth{font-size:12px;border-radius:10px;padding:1px 8px;margin-left:8px;background:#eef1f4}
.auth.key{background:#fff1c2}
`;

export function htmlPage(title: string, bodyHtml: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title><style>${PAGE_STYLE}</style></head>
<body><nav class="top"><a href="/documentation">Operator guide</a><a href="/reference">API reference</a><a href="/openapi.yaml">openapi.yaml</a></nav>
<main>${bodyHtml}</main></body></html>`;
}

export const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

export function sendPage(res: Response, html: string): void {
  res.setHeader('Content-Security-Policy', PAGE_CSP);
  res.type('html').send(html);
}

export const docsRoutes = (options: { profile?: OpenApiProfile } = {}): RouteModule => {
  const document = options.profile && options.profile !== 'transaction' ? buildOpenApiDocument(options.profile) : OPENAPI;
  const yaml = openApiYaml(document);
  const guide = htmlPage('Execution Trust Service: operator guide', marked.parse(OPERATOR_GUIDE_MARKDOWN, { async: false }));
  const reference = htmlPage('Execution Trust Service: API reference', renderReference(document));
  return (t) => {
    t.get('/openapi.yaml', { auth: 'none', limiter: 'public' }, (_req, res) => {
      res.type('application/yaml').send(yaml);
    });
    t.get('/documentation', { auth: 'none', limiter: 'public' }, (_req, res) => sendPage(res, guide));
    t.get('/reference', { auth: 'none', limiter: 'public' }, (_req, res) => sendPage(res, reference));
  };
};
