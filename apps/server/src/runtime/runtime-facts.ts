import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { EvaluatorContents, MeasuredPackage, RuntimeContents, RuntimeFacts } from '@ets/domain';
import { INSTALL_ROOT } from '../install-root.js';
import { FileDigests } from './file-digests.js';
import { MeasureError, productionClosure, resolvePackage, type InstalledPackage } from './production-closure.js';

export { INSTALL_ROOT } from '../install-root.js';

const SERVER_DIR = path.join('apps', 'server');
/** The digests `npm run build` records (scripts/measure-runtime.mjs), reused at start for unchanged files. */
export const DIGESTS_FILE = path.join(SERVER_DIR, 'runtime-digests.json');

/** Every deployment runs the built `dist`; the test suite runs the TypeScript sources (ts-jest), and then that is what runs. */
export const RUNNING_CODE: RuntimeContents['code'] = import.meta.url.endsWith('.ts') ? 'sources' : 'built';

const DOMAIN_PACKAGE = '@ets/domain';
/** The CEL library the policy engine evaluates with. */
const CEL_PACKAGE = '@marcbachmann/cel-js';

const posix = (p: string): string => p.split(path.sep).join('/');
/** path.join costs more than the rest of reusing a digest, ~15 000 times per start; `rel` is already normalised. */
const under = path.sep === '/' ? (dir: string, rel: string): string => `${dir}/${rel}` : path.join;
const byPath = (a: { path: string }, b: { path: string }): number => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

export interface MeasureOptions {
  runtimeVersion: string;
  /** The install root; this module's own by default. */
  root?: string;
  /** Which code of the workspaces is hashed; what this process runs by default. */
  code?: RuntimeContents['code'];
  /** `reuse` the recorded digests of unchanged files (default), `record` them afterwards too (the build), or hash every file (`none`). */
  digests?: 'reuse' | 'record' | 'none';
}

export interface MeasuredRuntime extends RuntimeFacts {
  stats: { packages: number; files: number; hashedFiles: number; ms: number };
}

/**
 * Measures the code this process runs (the operator guide, "What runtimeHash covers"):
 * - `runtimeContents`: the Node runtime's identity (version, V8, OpenSSL, platform, architecture)
 *   and every package of the server's production dependency closure (production-closure.ts), each
 *   with the hash of its files: of a workspace, its `package.json`, its `bin` files, its code
 *   (`dist`, without type declarations, source maps and compiled tests; `src` when the sources run)
 *   and its `assets`; of an installed dependency, every file but its nested `node_modules`.
 * - `evaluatorContents`: the policy engine's code (`@ets/domain`'s `policy` folder) and the closure
 *   of the CEL library it resolves.
 * Returns why not, instead, when the code cannot be measured (built code or a required dependency
 * missing, a file unreadable): the runtime is then "not configured".
 */
export function measureRuntime(options: MeasureOptions): MeasuredRuntime | { error: string } {
  const started = performance.now();
  const root = path.resolve(options.root ?? INSTALL_ROOT);
  const code = options.code ?? RUNNING_CODE;
  const digestsFile = path.join(root, DIGESTS_FILE);
  const mode = options.digests ?? 'reuse';
  try {
    const digests = mode === 'none' ? FileDigests.empty() : FileDigests.load(digestsFile);
    const measurer = new PackageMeasurer(root, code, digests);
    const closure = productionClosure(root, path.join(root, SERVER_DIR));
    const packages = closure.map((p) => measurer.measure(p)).sort(byPath);

    const domain = closure.find((p) => p.workspace && p.name === DOMAIN_PACKAGE);
    if (!domain) throw new MeasureError(`the policy engine (${DOMAIN_PACKAGE}) is not among the server's workspaces`);
    const cel = resolvePackage(domain.dir, CEL_PACKAGE);
    if (!cel) throw new MeasureError(`the production dependency ${CEL_PACKAGE} of ${DOMAIN_PACKAGE} is not installed`);
    const evaluatorContents: EvaluatorContents = {
      engine: measurer.folder(path.join(domain.dir, codeFolder(code), 'policy'), isCode(code)),
      packages: productionClosure(root, cel).map((p) => measurer.measure(p)).sort(byPath),
    };
    const runtimeContents: RuntimeContents = {
      node: { version: process.version, v8: process.versions.v8, openssl: process.versions.openssl ?? 'none', platform: process.platform, arch: process.arch },
      code,
      packages,
    };
    if (mode === 'record') digests.save(digestsFile);
    return {
      runtimeVersion: options.runtimeVersion,
      runtimeContents,
      evaluatorContents,
      platform: `node ${process.version}`,
      stats: { packages: packages.length, files: packages.reduce((n, p) => n + p.files, 0), hashedFiles: digests.hashed, ms: Math.round(performance.now() - started) },
    };
  } catch (e) {
    if (e instanceof MeasureError) return { error: e.message };
    return { error: `the running code could not be measured (${(e as NodeJS.ErrnoException).code ?? 'unreadable'})` };
  }
}

const codeFolder = (code: RuntimeContents['code']): string => (code === 'built' ? 'dist' : 'src');

/** The files of a workspace's code folder that can run: no type declarations, source maps or tests. */
const isCode =
  (code: RuntimeContents['code']) =>
  (name: string): boolean =>
    code === 'built' ? !/\.(d\.ts|d\.ts\.map|js\.map|tsbuildinfo)$|\.test\.js$/.test(name) : !/\.test\.ts$/.test(name);
const everyFile = (): boolean => true;

/** Hashes packages (each real directory once) and folders. */
class PackageMeasurer {
  readonly #measured = new Map<string, MeasuredPackage>();

  constructor(
    private readonly root: string,
    private readonly code: RuntimeContents['code'],
    private readonly digests: FileDigests,
  ) {}

  measure(p: InstalledPackage): MeasuredPackage {
    const known = this.#measured.get(p.dir);
    if (known) return known;
    const files: Record<string, string> = {};
    const key = posix(path.relative(this.root, p.dir));
    if (p.workspace) {
      this.add(p.dir, key, 'package.json', files);
      for (const bin of binFiles(p)) {
        if (!existsSync(path.join(p.dir, bin))) throw new MeasureError(`the entry point ${bin} of ${p.name} is missing`);
        this.add(p.dir, key, bin, files);
      }
      const codeDir = path.join(p.dir, codeFolder(this.code));
      if (!existsSync(codeDir)) {
        const where = `${p.name} (${posix(path.relative(this.root, codeDir))})`;
        throw new MeasureError(this.code === 'built' ? `the built code of ${where} is missing (run npm run build)` : `the sources of ${where} are missing`);
      }
      this.walk(p.dir, key, codeFolder(this.code), isCode(this.code), files);
      if (existsSync(path.join(p.dir, 'assets'))) this.walk(p.dir, key, 'assets', everyFile, files);
    } else {
      this.walk(p.dir, key, '', everyFile, files);
    }
    const measured: MeasuredPackage = {
      name: p.name,
      version: p.version,
      path: key,
      kind: p.workspace ? 'workspace' : 'dependency',
      files: Object.keys(files).length,
      hash: filesHash(files),
    };
    this.#measured.set(p.dir, measured);
    return measured;
  }

  /** A folder measured like a package: its path, file count and H(C({files})). */
  folder(dir: string, include: (name: string) => boolean): { path: string; files: number; hash: string } {
    if (!existsSync(dir)) throw new MeasureError(`the policy engine's code (${posix(path.relative(this.root, dir))}) is missing`);
    const files: Record<string, string> = {};
    const key = posix(path.relative(this.root, dir));
    this.walk(dir, key, '', include, files);
    return { path: key, files: Object.keys(files).length, hash: filesHash(files) };
  }

  /**
   * Every file under `base/sub` that `include` accepts, by its path from `base` (`/`-separated);
   * `key` is `base` from the install root. Nested `node_modules` are other packages.
   */
  private walk(base: string, key: string, sub: string, include: (name: string) => boolean, into: Record<string, string>): void {
    for (const entry of readdirSync(sub ? under(base, sub) : base, { withFileTypes: true })) {
      const rel = sub ? `${sub}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules') this.walk(base, key, rel, include, into);
      } else if (entry.isSymbolicLink()) {
        if (include(entry.name)) into[rel] = this.digests.symlink(under(base, rel));
      } else if (entry.isFile() && include(entry.name)) {
        this.add(base, key, rel, into);
      }
    }
  }

  private add(base: string, key: string, rel: string, into: Record<string, string>): void {
    into[rel] = this.digests.file(under(base, rel), `${key}/${rel}`);
  }
}

/**
 * H(C({files})) of a map of paths to hex digests. RFC 8785 for an object of strings is its keys
 * sorted by UTF-16 code units (the default sort) and each string as JSON.stringify writes it; done
 * here rather than with the service's canonicalizer so that the measuring worker loads no more
 * than this (runtime-facts.test.ts compares the two).
 */
export function filesHash(files: Record<string, string>): string {
  const hash = createHash('sha256').update('{"files":{');
  Object.keys(files)
    .sort()
    .forEach((name, i) => hash.update(`${i === 0 ? '' : ','}${JSON.stringify(name)}:${JSON.stringify(files[name])}`));
  return hash.update('}}').digest('hex');
}

/** The files a package's `bin` names (a path, or an object of paths), relative to its folder. */
function binFiles(p: InstalledPackage): string[] {
  const bin = p.json.bin;
  const listed = typeof bin === 'string' ? [bin] : typeof bin === 'object' && bin !== null ? Object.values(bin) : [];
  return [...new Set(listed.filter((b): b is string => typeof b === 'string').map((b) => path.posix.normalize(b)))].sort();
}
