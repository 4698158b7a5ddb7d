/**
 * Builds the approvers' console (`npm run build` runs it after the client's bundle): esbuild
 * bundles src/main.tsx (Preact, the browser build of @ets/client, jsdiff) and its style sheet into
 * dist/assets/ under content-hashed names, and writes dist/console.html naming them. The service
 * serves both at /console (packages/adapters-http, routes/console.ts): no inline script or style,
 * nothing from another host. Type checking is `tsc --build` (this package's tsconfig.json).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = (p) => fileURLToPath(new URL(`../${p}`, import.meta.url));

export async function bundle() {
  rmSync(root('dist/assets'), { recursive: true, force: true });
  mkdirSync(root('dist/assets'), { recursive: true });
  const result = await build({
    entryPoints: [root('src/main.tsx')],
    outdir: root('dist/assets'),
    entryNames: 'console-[hash]',
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    // No source maps: the page would ask for files the service does not serve.
    sourcemap: false,
    legalComments: 'none',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    metafile: true,
    logLevel: 'warning',
    absWorkingDir: root('.'),
  });
  const outputs = Object.keys(result.metafile.outputs).map((o) => path.basename(o));
  const script = outputs.find((o) => o.endsWith('.js'));
  const style = outputs.find((o) => o.endsWith('.css'));
  if (!script || !style) throw new Error(`console bundle: expected a script and a style sheet, got ${outputs.join(', ')}`);
  writeFileSync(
    root('dist/console.html'),
    `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Approvers' console · Execution Trust Service</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/assets/${style}">
<script type="module" src="/console/assets/${script}"></script>
</head>
<body>
<div id="app"><p class="boot">Loading the console…</p></div>
<noscript><p class="boot">The console needs JavaScript. Everything it does is also an API call: see <a href="/reference">the API reference</a>.</p></noscript>
</body>
</html>
`,
  );
  return { script, style, bytes: Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0) };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { script, style, bytes } = await bundle();
  process.stdout.write(`@ets/console: dist/assets/${script}, ${style} (${Math.round(bytes / 1024)} kB), dist/console.html\n`);
}
