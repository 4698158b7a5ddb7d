import { existsSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';

/** The code that runs cannot be measured: the runtime is then "not configured" (spec 4.2). */
export class MeasureError extends Error {}

export interface PackageJson {
  name?: unknown;
  version?: unknown;
  bin?: unknown;
  workspaces?: unknown;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

export interface InstalledPackage {
  /** Its real directory (symbolic links resolved, as Node loads it). */
  dir: string;
  name: string;
  version: string;
  json: PackageJson;
  /** One of the install root's workspaces: the service's own code, not an installed package. */
  workspace: boolean;
}

export function readPackageJson(dir: string): PackageJson {
  return JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as PackageJson;
}

/**
 * Where Node finds package `name` imported from a file of the package at `fromDir`: the first
 * `<ancestor>/node_modules/<name>` walking up from it, skipping ancestors that are themselves a
 * `node_modules` folder (the module paths of Node's resolver), symbolic links resolved. NODE_PATH
 * and the global folders are not looked at: a deployment does not load its packages from there.
 */
export function resolvePackage(fromDir: string, name: string): string | undefined {
  for (let dir = fromDir; ; dir = path.dirname(dir)) {
    if (path.basename(dir) !== 'node_modules') {
      const candidate = path.join(dir, 'node_modules', name);
      if (existsSync(path.join(candidate, 'package.json'))) return realpathSync.native(candidate);
    }
    if (path.dirname(dir) === dir) return undefined;
  }
}

/**
 * Every package the server at `serverDir` can load in production: its own package, then every
 * `dependencies`, `optionalDependencies` and `peerDependencies` entry of every package reached,
 * resolved as Node resolves it, each real directory once. Development dependencies are never
 * followed. A missing `dependencies` entry is a broken install (MeasureError); a missing optional
 * or peer dependency is not installed on purpose, and what is not installed cannot run.
 */
export function productionClosure(root: string, serverDir: string): InstalledPackage[] {
  const workspaces = workspaceDirs(root);
  const found = new Map<string, InstalledPackage>();
  const visit = (dir: string): InstalledPackage => {
    const known = found.get(dir);
    if (known) return known;
    const json = readPackageJson(dir);
    const name = typeof json.name === 'string' ? json.name : path.basename(dir);
    const pkg: InstalledPackage = { dir, name, version: typeof json.version === 'string' ? json.version : '', json, workspace: workspaces.has(dir) };
    found.set(dir, pkg);
    const optional = new Set([...Object.keys(json.optionalDependencies ?? {}), ...Object.keys(json.peerDependencies ?? {})]);
    const required = Object.keys(json.dependencies ?? {}).filter((d) => !(json.optionalDependencies && d in json.optionalDependencies));
    for (const dep of [...required, ...optional]) {
      const at = resolvePackage(dir, dep);
      if (at) visit(at);
      else if (!optional.has(dep)) throw new MeasureError(`the production dependency ${dep} of ${name} is not installed`);
    }
    return pkg;
  };
  visit(realpathSync.native(serverDir));
  return [...found.values()];
}

/** The real directories of the root package.json's `workspaces` (plain folder names, as this repository lists them). */
function workspaceDirs(root: string): Set<string> {
  if (!existsSync(path.join(root, 'package.json'))) throw new MeasureError(`the install root ${root} has no package.json`);
  const listed = readPackageJson(root).workspaces;
  const dirs = Array.isArray(listed) ? listed.filter((w): w is string => typeof w === 'string') : [];
  return new Set(dirs.map((w) => path.join(root, w)).filter((d) => existsSync(d)).map((d) => realpathSync.native(d)));
}
