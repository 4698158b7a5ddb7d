#!/usr/bin/env node
// Copies the API reference's browser bundle (Scalar's self-contained standalone.js, MIT licence)
// from the @scalar/api-reference package into dist/reference/, from where the service serves it at
// /reference/assets/ (routes/reference-page.ts). Run by `npm run build`.
//
// The package is a devDependency and only this one file of it is shipped: as a dependency its ~270
// packages would be installed in production and measured into the attestation profile's runtimeHash,
// although none of them runs on the server.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
// The package exports no subpath for its browser bundle: found from its main entry, up to its root.
let pkgDir = path.dirname(createRequire(path.join(here, '..', 'package.json')).resolve('@scalar/api-reference'));
while (!existsSync(path.join(pkgDir, 'package.json')) || JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).name !== '@scalar/api-reference') {
  if (path.dirname(pkgDir) === pkgDir) throw new Error('copy-reference-bundle: the @scalar/api-reference package is not installed (npm install)');
  pkgDir = path.dirname(pkgDir);
}
const out = path.join(here, '..', 'dist', 'reference');
mkdirSync(out, { recursive: true });
// A source-map comment would make a browser's developer tools ask for a file that is not served.
const bundle = readFileSync(path.join(pkgDir, 'dist', 'browser', 'standalone.js'), 'utf8').replace(/\n?\/[*/][#@] sourceMappingURL=\S+(?: \*\/)?\s*$/, '\n');
writeFileSync(path.join(out, 'scalar-api-reference.js'), bundle);
const { version } = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
process.stdout.write(`copy-reference-bundle: @scalar/api-reference ${version} → ${path.relative(process.cwd(), out)}\n`);
