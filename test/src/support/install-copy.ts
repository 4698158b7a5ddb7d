import { cpSync, existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from './process.js';

/** The workspaces `ets serve` depends on (apps/server's production closure), by folder. */
const SERVER_WORKSPACES = ['packages/domain', 'packages/adapters-crypto', 'packages/adapters-persistence', 'packages/adapters-connectors', 'packages/adapters-http', 'packages/release-receiver', 'packages/loopback-network', 'packages/console'];

/**
 * A second install of the built server in `dir`, as a deployment would have it: the root
 * package.json, the server (package.json, bin, dist, build info, shipped policies) and its
 * workspaces (package.json, dist, assets) copied; node_modules a folder of its own in which
 * `@ets/*` link to the copies and every installed package except those in `without` links to this
 * repository's (Node resolves a linked package from its real folder, so theirs stay whole).
 * Start it with `spawnServer(env, timeout, cliOf(dir))`.
 */
export function copyInstall(dir: string, options: { without?: string[] } = {}): string {
  const without = new Set(options.without ?? []);
  const copy = (rel: string) => {
    if (existsSync(path.join(REPO_ROOT, rel))) cpSync(path.join(REPO_ROOT, rel), path.join(dir, rel), { recursive: true, filter: (src) => !/\.(d\.ts|map|tsbuildinfo)$/.test(src) });
  };
  copy('package.json');
  for (const rel of ['package.json', 'bin', 'dist', 'build-info.json', 'policies']) copy(path.join('apps/server', rel));
  for (const ws of SERVER_WORKSPACES) {
    for (const rel of ['package.json', 'dist', 'assets']) copy(path.join(ws, rel));
    // A workspace's own node_modules holds versions it needs that differ from the hoisted ones.
    if (existsSync(path.join(REPO_ROOT, ws, 'node_modules'))) symlinkSync(path.join(REPO_ROOT, ws, 'node_modules'), path.join(dir, ws, 'node_modules'));
  }
  mkdirSync(path.join(dir, 'node_modules', '@ets'), { recursive: true });
  for (const ws of [...SERVER_WORKSPACES, 'apps/server']) {
    symlinkSync(path.join('..', '..', ws), path.join(dir, 'node_modules', '@ets', path.basename(ws)));
  }
  for (const name of readdirSync(path.join(REPO_ROOT, 'node_modules'))) {
    if (name === '@ets' || name === '.bin' || without.has(name)) continue;
    symlinkSync(path.join(REPO_ROOT, 'node_modules', name), path.join(dir, 'node_modules', name));
  }
  return dir;
}

/** The CLI of an install made by `copyInstall`. */
export const cliOf = (dir: string): string => path.join(dir, 'apps', 'server', 'dist', 'cli.js');
