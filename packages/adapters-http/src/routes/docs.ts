import { readdirSync, readFileSync } from 'node:fs';
import { DomainError } from '@ets/domain';
import type { Response } from 'express';
import type { RouteModule } from '../route-table.js';
import { renderGuide } from './guide-page.js';
import { loadReferenceAssets, REFERENCE_PAGE } from './reference-page.js';
import { TOP_NAV } from './top-nav.js';
import { buildOpenApiDocument, openApiYaml, type OpenApiDocument, type OpenApiProfile } from '../openapi-document.js';

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
 * Nothing a page needs comes from another host, so the documentation works air-gapped; the CSP
 * makes that a rule the browser enforces. The guide and the forms need no script at all; the API
 * reference runs the bundled Scalar reference from this service only (`'self'`, no inline script, no eval).
 */
export const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
export const REFERENCE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

export const PAGE_STYLE = `
body{font:16px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1b1f24;background:#fafbfc}
main{max-width:960px;margin:0 auto;padding:24px 32px 64px}
nav.top{background:#14213d;color:#fff;padding:10px 32px}nav.top a{color:#fff;margin-right:20px;text-decoration:none;font-weight:600}
h1,h2,h3{line-height:1.25}h2{border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:36px}
code,pre{font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef1f4;border-radius:4px}
code{padding:1px 4px}pre{padding:12px;overflow:auto}pre code{padding:0;background:none}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
h1 .anchor,h2 .anchor,h3 .anchor,h4 .anchor{visibility:hidden;text-decoration:none;color:#8c959f;font-weight:400}
h1:hover .anchor,h2:hover .anchor,h3:hover .anchor,h4:hover .anchor{visibility:visible}
nav.toc{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:4px 20px 12px;margin:20px 0}
nav.toc h2{border:0;margin-top:12px;font-size:1.1em}nav.toc ol{margin:4px 0;padding-left:22px}nav.toc a{text-decoration:none}
form.lead{display:flex;gap:8px;flex-wrap:wrap;margin:16px 0}form.lead input{font:inherit;padding:6px 10px;min-width:280px}
form.lead button{font:inherit;padding:6px 14px;cursor:pointer}.error{color:#b3261e;font-weight:600}
`;

export function htmlPage(title: string, bodyHtml: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title><link rel="icon" href="data:,"><style>${PAGE_STYLE}</style></head>
<body>${TOP_NAV}
<main>${bodyHtml}</main></body></html>`;
}

export const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

export function sendPage(res: Response, html: string, status = 200): void {
  res.setHeader('Content-Security-Policy', PAGE_CSP);
  res.status(status).type('html').send(html);
}

const ASSET_CACHE = 'public, max-age=86400';

export const docsRoutes = (options: { profile?: OpenApiProfile } = {}): RouteModule => {
  const document = options.profile && options.profile !== 'transaction' ? buildOpenApiDocument(options.profile) : OPENAPI;
  const yaml = openApiYaml(document);
  const guide = htmlPage('Execution Trust Service: operator guide', renderGuide(OPERATOR_GUIDE_MARKDOWN));
  const assets = loadReferenceAssets();
  return (t) => {
    t.get('/openapi.yaml', { auth: 'none', limiter: 'public' }, (_req, res) => {
      res.type('application/yaml').send(yaml);
    });
    t.get('/documentation', { auth: 'none', limiter: 'public' }, (_req, res) => sendPage(res, guide));
    t.get('/reference', { auth: 'none', limiter: 'public' }, (_req, res) => {
      res.setHeader('Content-Security-Policy', REFERENCE_CSP);
      res.type('html').send(REFERENCE_PAGE);
    });
    t.get('/reference/assets/:file', { auth: 'none', limiter: 'public' }, (req, res) => {
      const asset = assets.get(String(req.params.file));
      if (!asset) throw new DomainError('not_found', 'No such file.');
      res.setHeader('Cache-Control', ASSET_CACHE);
      res.type(asset.type).send(asset.body);
    });
  };
};
