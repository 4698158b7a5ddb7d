#!/usr/bin/env node
// Records the internal build identifier (spec 9.1) beside the server's compiled output.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';

let commit = 'nogit';
try {
  commit = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
} catch {
  // a source tarball without git history still builds
}
const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
writeFileSync(new URL('../apps/server/build-info.json', import.meta.url), JSON.stringify({ build: `${commit}.${stamp}` }) + '\n');
