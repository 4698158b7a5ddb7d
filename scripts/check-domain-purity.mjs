#!/usr/bin/env node
// packages/domain must stay pure: no framework, no ORM, no crypto, no I/O. `tsc --build` project
// references already stop it importing an adapter; this check stops it importing infrastructure
// modules directly. It fails `npm test`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', 'packages', 'domain', 'src');
const FORBIDDEN = [
  'express', 'express-rate-limit', 'typeorm', 'pg', 'better-sqlite3', 'jose', 'inversify', 'reflect-metadata',
  'class-validator', 'class-transformer', 'pino', 'dotenv', 'canonicalize', '@noble/post-quantum', '@noble/hashes', 'pkcs11js',
  'crypto', 'fs', 'fs/promises', 'path', 'http', 'https', 'http2', 'net', 'tls', 'dns', 'dgram', 'child_process',
  'cluster', 'os', 'worker_threads', 'process', 'readline', 'stream', 'zlib', 'v8', 'vm',
  '@ets/adapters-http', '@ets/adapters-persistence', '@ets/adapters-crypto', '@ets/adapters-connectors', '@ets/server',
];
const IMPORT = /(?:^|[^.\w])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|[^.\w])import\s*\(\s*['"]([^'"]+)['"]\s*\)|(?:^|[^.\w])import\s*['"]([^'"]+)['"]|require\s*\(\s*['"]([^'"]+)['"]\s*\)/gm;

const isForbidden = (spec) => {
  const bare = spec.replace(/^node:/, '');
  if (spec.startsWith('node:')) return true;
  return FORBIDDEN.some((f) => bare === f || bare.startsWith(`${f}/`));
};

const walk = (dir) => readdirSync(dir).flatMap((name) => {
  const p = path.join(dir, name);
  return statSync(p).isDirectory() ? walk(p) : /\.(ts|mts|js|mjs)$/.test(name) ? [p] : [];
});

export function findViolations(files = walk(root)) {
  const found = [];
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3] ?? m[4];
      if (spec && isForbidden(spec)) found.push(`${path.relative(process.cwd(), file)} imports '${spec}'`);
    }
  }
  return found;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const violations = findViolations();
  if (violations.length > 0) {
    console.error('packages/domain must not import infrastructure:\n  ' + violations.join('\n  '));
    process.exit(1);
  }
  console.log('domain purity: ok (packages/domain imports no framework, ORM, crypto or I/O module)');
}
