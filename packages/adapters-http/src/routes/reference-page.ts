import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TOP_NAV } from './top-nav.js';

/**
 * The API reference: Scalar's API reference (the standalone browser bundle of
 * `@scalar/api-reference`, copied into dist/reference/ by `npm run build`), served by the service
 * itself from `/reference/assets/` so that it works air-gapped, and started by a script file of
 * ours (no inline script, loaded before the bundle: see reference.js) on `/openapi.yaml`. It gives a sidebar, search, and each operation's
 * request samples (`x-codeSamples`: curl and `@ets/client`).
 */
// From the package root, so that the compiled module (dist/routes) and its source (src/routes, under
// the tests) find the same copy.
const bundleDir = fileURLToPath(new URL('../../dist/reference/', import.meta.url));
const ownDir = fileURLToPath(new URL('../../assets/reference/', import.meta.url));

export interface ReferenceAsset {
  type: 'text/javascript' | 'text/css';
  body: string;
}

export function loadReferenceAssets(): Map<string, ReferenceAsset> {
  const read = (dir: string, file: string) => {
    try {
      return readFileSync(path.join(dir, file), 'utf8');
    } catch (e) {
      throw new Error(`The API reference's ${file} is missing in ${dir}: run npm run build (${(e as Error).message})`);
    }
  };
  return new Map<string, ReferenceAsset>([
    ['scalar-api-reference.js', { type: 'text/javascript', body: read(bundleDir, 'scalar-api-reference.js') }],
    ['reference.js', { type: 'text/javascript', body: read(ownDir, 'reference.js') }],
    ['reference.css', { type: 'text/css', body: read(ownDir, 'reference.css') }],
  ]);
}

export const REFERENCE_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Execution Trust Service: API reference</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="/reference/assets/reference.css">
</head><body>
${TOP_NAV}
<div id="reference"></div>
<noscript><p style="padding:0 32px">The interactive reference needs JavaScript. The document itself is <a href="/openapi.yaml">/openapi.yaml</a>.</p></noscript>
<script src="/reference/assets/reference.js"></script>
<script src="/reference/assets/scalar-api-reference.js"></script>
</body></html>`;
