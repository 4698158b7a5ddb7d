/**
 * Builds what `@ets/client` publishes, after `tsc --build` (the root `npm run build` runs it):
 * - dist/node.js: the Node build, ESM; its npm dependencies stay imports, and what it takes from
 *   this repository's packages (offline verifier, transparency, release verification) is bundled in,
 *   so the package installs alone.
 * - dist/browser.js: the browser build, one self-contained ESM file (npm dependencies included), so a
 *   page can load it with `<script type="module">` and a bundler can take it as it is. Bundled for
 *   the browser platform, which fails on any Node built-in module.
 * - dist/index.d.ts: the types of both, with the types taken from this repository's packages inlined.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { generateDtsBundle } from 'dts-bundle-generator';

const root = (p) => fileURLToPath(new URL(`../${p}`, import.meta.url));
const pkg = JSON.parse(readFileSync(root('package.json'), 'utf8'));
const dependencies = Object.keys(pkg.dependencies ?? {});

const common = { bundle: true, format: 'esm', sourcemap: true, legalComments: 'none', logLevel: 'warning', absWorkingDir: root('.') };

export async function bundle() {
  const node = await build({
    ...common,
    entryPoints: [root('src/node.ts')],
    outfile: root('dist/node.js'),
    platform: 'node',
    target: 'node20',
    // `@noble/curves` also matches `@noble/curves/ed25519.js`.
    external: dependencies.flatMap((d) => [d, `${d}/*`]),
    metafile: true,
  });
  const browser = await build({
    ...common,
    entryPoints: [root('src/index.ts')],
    outfile: root('dist/browser.js'),
    platform: 'browser',
    target: 'es2022',
    metafile: true,
  });
  const [types] = generateDtsBundle([{ filePath: root('src/index.ts'), libraries: { inlinedLibraries: ['@ets/adapters-crypto', '@ets/release-receiver', '@ets/domain'] }, output: { noBanner: true } }], {
    preferredConfigPath: root('tsconfig.json'),
  });
  writeFileSync(root('dist/index.d.ts'), types);
  return { node: node.metafile, browser: browser.metafile };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { node, browser } = await bundle();
  const size = (m) => Object.values(m.outputs).filter((o) => o.entryPoint).reduce((n, o) => n + o.bytes, 0);
  process.stdout.write(`@ets/client ${pkg.version}: dist/node.js ${Math.round(size(node) / 1024)} kB, dist/browser.js ${Math.round(size(browser) / 1024)} kB, dist/index.d.ts\n`);
}
