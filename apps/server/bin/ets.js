#!/usr/bin/env node
// The `ets` bin is this committed launcher, not dist/cli.js: npm links bins before `prepare` builds
// dist/, and a bin whose file does not exist yet is not linked, after which `npx ets` would look
// for a package of that name in the registry. This file always exists, so `ets` is always ours.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const cli = new URL('../dist/cli.js', import.meta.url);
if (!existsSync(cli)) {
  process.stderr.write(
    `ets: the CLI is not built yet (${fileURLToPath(cli)} is missing).\n` +
      'Run `npm run build` in the repository root (`npm install` and `npm ci` run it too), then try again.\n',
  );
  process.exit(1);
}
await import(cli.href);
