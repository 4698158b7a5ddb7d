import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TOP_NAV } from './top-nav.js';

/**
 * The interactive API reference: Swagger UI from the `swagger-ui-dist` package, served by the
 * service itself from `/reference/assets/` so that it works air-gapped, started by a script file
 * of ours (no inline script) on `/openapi.yaml`.
 */
const distDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const ownDir = fileURLToPath(new URL('../../assets/reference/', import.meta.url));

export interface ReferenceAsset {
  type: 'text/javascript' | 'text/css';
  body: string;
}

/** A source-map comment would make a browser's developer tools ask for a file we do not serve. */
const withoutSourceMap = (text: string): string => text.replace(/\n?\/[*/]# sourceMappingURL=\S+(?: \*\/)?\s*$/, '\n');

export function loadReferenceAssets(): Map<string, ReferenceAsset> {
  const read = (dir: string, file: string) => withoutSourceMap(readFileSync(path.join(dir, file), 'utf8'));
  return new Map<string, ReferenceAsset>([
    ['swagger-ui-bundle.js', { type: 'text/javascript', body: read(distDir, 'swagger-ui-bundle.js') }],
    ['swagger-ui.css', { type: 'text/css', body: read(distDir, 'swagger-ui.css') }],
    ['reference.js', { type: 'text/javascript', body: read(ownDir, 'reference.js') }],
    ['reference.css', { type: 'text/css', body: read(ownDir, 'reference.css') }],
  ]);
}

export const REFERENCE_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Execution Trust Service: API reference</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="/reference/assets/swagger-ui.css"><link rel="stylesheet" href="/reference/assets/reference.css">
</head><body>
${TOP_NAV}
<div id="swagger-ui"></div>
<noscript><p style="padding:0 32px">The interactive reference needs JavaScript. The document itself is <a href="/openapi.yaml">/openapi.yaml</a>.</p></noscript>
<script src="/reference/assets/swagger-ui-bundle.js"></script>
<script src="/reference/assets/reference.js"></script>
</body></html>`;
