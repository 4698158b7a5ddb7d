/**
 * `prepack`: the package is packed from a built tree and builds nothing itself, so `npm pack` (or
 * `npm publish`) works in this folder alone. It only checks that every built file the package
 * publishes is there, and says how to build them when one is not.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = (p) => fileURLToPath(new URL(`../${p}`, import.meta.url));
const pkg = JSON.parse(readFileSync(root('package.json'), 'utf8'));
const missing = pkg.files.filter((f) => f.startsWith('dist/') && (!existsSync(root(f)) || statSync(root(f)).size === 0));
if (missing.length > 0) {
  process.stderr.write(
    `@ets/client: ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not built. Build first: 'npm run build' at the repository root ` +
      "(type-checks and bundles every package), or 'npx tsc --build && npm run bundle' in packages/client; then pack again.\n",
  );
  process.exit(1);
}
