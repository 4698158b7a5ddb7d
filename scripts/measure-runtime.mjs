#!/usr/bin/env node
// Hashes the code the server runs, as it does at start, and records every file's digest with its
// size, mtime and ctime (apps/server/runtime-digests.json): a start then only reads the files that
// changed since. Run by `npm run build`; run it again after changing node_modules without a build.
import { DIGESTS_FILE, measureRuntime } from '../apps/server/dist/runtime/runtime-facts.js';

const measured = measureRuntime({ runtimeVersion: 'build', code: 'built', digests: 'record' });
if ('error' in measured) {
  process.stderr.write(`measure-runtime: ${measured.error}\n`);
  process.exit(1);
}
const { packages, files, ms } = measured.stats;
process.stdout.write(`measure-runtime: ${packages} packages, ${files} files, ${ms} ms; digests in ${DIGESTS_FILE}\n`);
