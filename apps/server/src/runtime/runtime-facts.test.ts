import { afterEach, describe, expect, it } from '@jest/globals';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Sha256Hasher } from '@ets/adapters-crypto';
import { runtimeHashOf, type RuntimeContents } from '@ets/domain';
import { DIGESTS_FILE, filesHash, INSTALL_ROOT, measureRuntime, type MeasuredRuntime, type MeasureOptions } from './runtime-facts.js';

const hasher = new Sha256Hasher();
const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

/**
 * A small install laid out as npm lays out this repository: workspaces linked from
 * node_modules/@ets, a real installed package copied from this repository's node_modules
 * (content-type), a dependency with a nested version of its own dependency while another version
 * is hoisted, an optional and a peer dependency that are not installed, a dev-only package, and a
 * workspace the server does not depend on.
 */
function install(): { root: string; write(file: string, text: string): void } {
  const root = mkdtempSync(path.join(os.tmpdir(), 'ets-runtime-'));
  roots.push(root);
  const write = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  };
  const json = (file: string, value: object) => write(file, JSON.stringify(value));
  json('package.json', { workspaces: ['packages/domain', 'packages/tool', 'apps/server', 'test'], devDependencies: { 'dev-only': '^1.0.0' } });
  json('apps/server/package.json', { name: '@ets/server', version: '1.0.0', bin: { ets: 'bin/ets.js' }, dependencies: { '@ets/domain': '1.0.0', 'small-dep': '^1.0.0', 'content-type': '^1.0.0' } });
  write('apps/server/bin/ets.js', "await import('../dist/index.js');");
  write('apps/server/dist/index.js', 'console.log(1);');
  write('apps/server/dist/index.js.map', '{}');
  write('apps/server/dist/index.d.ts', 'export {};');
  write('apps/server/dist/index.test.js', 'test();');
  write('apps/server/src/index.ts', 'console.log(1);');
  write('apps/server/src/index.test.ts', 'test();');
  json('packages/domain/package.json', { name: '@ets/domain', version: '1.0.0', dependencies: { '@marcbachmann/cel-js': '^8.0.0' } });
  write('packages/domain/dist/index.js', 'export {};');
  write('packages/domain/dist/policy/evaluate.js', 'export const evaluate = () => true;');
  write('packages/domain/dist/policy/evaluate.test.js', 'test();');
  write('packages/domain/src/policy/evaluate.ts', 'export const evaluate = (): boolean => true;');
  json('packages/tool/package.json', { name: '@ets/tool', version: '1.0.0' });
  write('packages/tool/dist/index.js', 'export {};');
  json('test/package.json', { name: '@ets/test', version: '1.0.0' });
  for (const [name, dir] of [['domain', 'packages/domain'], ['tool', 'packages/tool'], ['server', 'apps/server']]) {
    mkdirSync(path.join(root, 'node_modules/@ets'), { recursive: true });
    symlinkSync(path.join('..', '..', dir), path.join(root, 'node_modules/@ets', name!));
  }
  json('node_modules/@marcbachmann/cel-js/package.json', { name: '@marcbachmann/cel-js', version: '8.0.0' });
  write('node_modules/@marcbachmann/cel-js/lib/index.js', 'export const cel = 1;');
  cpSync(path.join(INSTALL_ROOT, 'node_modules/content-type'), path.join(root, 'node_modules/content-type'), { recursive: true });
  json('node_modules/small-dep/package.json', {
    name: 'small-dep',
    version: '1.2.0',
    dependencies: { 'nested-dep': '^2.0.0' },
    optionalDependencies: { 'not-installed': '^1.0.0' },
    peerDependencies: { 'peer-not-installed': '^1.0.0' },
  });
  write('node_modules/small-dep/index.js', "module.exports = require('nested-dep');");
  write('node_modules/small-dep/README.md', '# small-dep');
  json('node_modules/small-dep/node_modules/nested-dep/package.json', { name: 'nested-dep', version: '2.0.0' });
  write('node_modules/small-dep/node_modules/nested-dep/index.js', 'module.exports = 2;');
  json('node_modules/nested-dep/package.json', { name: 'nested-dep', version: '1.0.0' });
  write('node_modules/nested-dep/index.js', 'module.exports = 1;');
  json('node_modules/dev-only/package.json', { name: 'dev-only', version: '1.0.0' });
  write('node_modules/dev-only/index.js', 'module.exports = 0;');
  return { root, write };
}

const measure = (root: string, options: Partial<MeasureOptions> = {}): MeasuredRuntime => {
  const m = measureRuntime({ root, runtimeVersion: 'b1', code: 'built', ...options });
  if ('error' in m) throw new Error(m.error);
  return m;
};
const runtimeHash = (root: string, options: Partial<MeasureOptions> = {}) => runtimeHashOf(hasher, measure(root, options).runtimeContents);
const evaluatorHash = (root: string) => hasher.contentHash(measure(root).evaluatorContents);

/** Changes one byte of a file, keeping its size. */
function flipByte(file: string): void {
  const bytes = readFileSync(file);
  bytes[0] = bytes[0]! ^ 1;
  writeFileSync(file, bytes);
}

describe('runtime facts: runtimeHash covers the code that runs', () => {
  it('lists the Node runtime and every package of the production closure, each once, resolved as Node resolves it', () => {
    const { root } = install();
    const contents: RuntimeContents = measure(root).runtimeContents;
    expect(contents.node).toEqual({ version: process.version, v8: process.versions.v8, openssl: process.versions.openssl, platform: process.platform, arch: process.arch });
    expect(contents.code).toBe('built');
    expect(contents.packages.map((p) => [p.path, `${p.name}@${p.version}`, p.kind, p.files])).toEqual([
      ['apps/server', '@ets/server@1.0.0', 'workspace', 3], // package.json, bin/ets.js, dist/index.js
      ['node_modules/@marcbachmann/cel-js', '@marcbachmann/cel-js@8.0.0', 'dependency', 2],
      ['node_modules/content-type', `content-type@${JSON.parse(readFileSync(path.join(root, 'node_modules/content-type/package.json'), 'utf8')).version}`, 'dependency', 6],
      ['node_modules/small-dep', 'small-dep@1.2.0', 'dependency', 3],
      ['node_modules/small-dep/node_modules/nested-dep', 'nested-dep@2.0.0', 'dependency', 2],
      ['packages/domain', '@ets/domain@1.0.0', 'workspace', 3],
    ]);
    expect(measure(root).runtimeContents).toEqual(contents);
  });

  it('changes when one byte of any file of an installed production dependency changes, not for a dev-only package or one nothing in the closure resolves', () => {
    const { root } = install();
    const first = runtimeHash(root);
    const changes = ['node_modules/content-type/dist/index.js', 'node_modules/content-type/README.md', 'node_modules/small-dep/node_modules/nested-dep/index.js', 'node_modules/@marcbachmann/cel-js/lib/index.js'];
    let previous = first;
    for (const file of changes) {
      flipByte(path.join(root, file));
      const now = runtimeHash(root);
      expect({ file, changed: now !== previous }).toEqual({ file, changed: true });
      previous = now;
    }
    for (const file of ['node_modules/dev-only/index.js', 'node_modules/nested-dep/index.js', 'packages/tool/dist/index.js', 'test/package.json']) {
      flipByte(path.join(root, file));
      expect({ file, hash: runtimeHash(root) }).toEqual({ file, hash: previous });
    }
  });

  it('changes with a built file, the entry point or a workspace package.json; not with source maps, type declarations, compiled tests or sources', () => {
    const { root, write } = install();
    let previous = runtimeHash(root);
    for (const [file, text] of [['apps/server/dist/index.js', 'console.log(2);'], ['apps/server/dist/extra.js', ''], ['apps/server/bin/ets.js', '//'], ['packages/domain/package.json', '{"name":"@ets/domain","version":"1.0.1","dependencies":{"@marcbachmann/cel-js":"^8.0.0"}}']] as const) {
      write(file, text);
      const now = runtimeHash(root);
      expect({ file, changed: now !== previous }).toEqual({ file, changed: true });
      previous = now;
    }
    for (const file of ['apps/server/dist/index.js.map', 'apps/server/dist/index.d.ts', 'apps/server/dist/index.test.js', 'apps/server/src/index.ts']) {
      write(file, 'changed');
      expect({ file, hash: runtimeHash(root) }).toEqual({ file, hash: previous });
    }
  });

  it('hashes the TypeScript sources instead when they are what runs (ts-jest), and says so', () => {
    const { root, write } = install();
    const sources = measure(root, { code: 'sources' }).runtimeContents;
    expect(sources.code).toBe('sources');
    expect(runtimeHashOf(hasher, sources)).not.toBe(runtimeHash(root));
    write('apps/server/dist/index.js', 'console.log(2);');
    write('apps/server/src/index.test.ts', 'test(2);');
    expect(runtimeHash(root, { code: 'sources' })).toBe(runtimeHashOf(hasher, sources));
    write('apps/server/src/index.ts', 'console.log(2);');
    expect(runtimeHash(root, { code: 'sources' })).not.toBe(runtimeHashOf(hasher, sources));
  });

  it('evaluatorHash covers the policy engine and the CEL library; both are part of runtimeHash too', () => {
    const { root, write } = install();
    const first = measure(root);
    expect(first.evaluatorContents).toEqual({
      engine: { path: 'packages/domain/dist/policy', files: 1, hash: expect.stringMatching(/^[0-9a-f]{64}$/) },
      packages: [first.runtimeContents.packages.find((p) => p.name === '@marcbachmann/cel-js')],
    });
    write('packages/domain/dist/policy/evaluate.js', 'export const evaluate = () => false;');
    const engine = measure(root);
    expect(evaluatorHash(root)).not.toBe(hasher.contentHash(first.evaluatorContents));
    expect(runtimeHashOf(hasher, engine.runtimeContents)).not.toBe(runtimeHashOf(hasher, first.runtimeContents));
    write('node_modules/@marcbachmann/cel-js/lib/index.js', 'export const cel = 2;');
    expect(evaluatorHash(root)).not.toBe(hasher.contentHash(engine.evaluatorContents));
  });

  it('says why the code cannot be measured (the runtime is then not configured)', () => {
    const { root, write } = install();
    const error = (options: Partial<MeasureOptions> = {}) => measureRuntime({ root, runtimeVersion: 'b1', code: 'built', ...options });
    rmSync(path.join(root, 'node_modules/small-dep/node_modules/nested-dep'), { recursive: true });
    write('node_modules/nested-dep/index.js', 'module.exports = 1.5;');
    // Node now finds the hoisted version: that is what would run, so that is what is measured.
    expect(measure(root).runtimeContents.packages.map((p) => `${p.name}@${p.version}`)).toContain('nested-dep@1.0.0');
    rmSync(path.join(root, 'node_modules/nested-dep'), { recursive: true });
    expect(error()).toEqual({ error: 'the production dependency nested-dep of small-dep is not installed' });
    write('node_modules/nested-dep/package.json', '{"name":"nested-dep","version":"1.0.0"}');
    rmSync(path.join(root, 'packages/domain/dist'), { recursive: true });
    expect(error()).toEqual({ error: 'the built code of @ets/domain (packages/domain/dist) is missing (run npm run build)' });
    rmSync(path.join(root, 'apps/server/bin'), { recursive: true });
    expect(error()).toEqual({ error: 'the entry point bin/ets.js of @ets/server is missing' });
    expect(measureRuntime({ root: path.join(root, 'nowhere'), runtimeVersion: 'b1' })).toEqual({ error: `the install root ${path.join(root, 'nowhere')} has no package.json` });
  });
});

describe('runtime facts: a package hash is H(C({files}))', () => {
  it('as the service canonicalizes it, for any file names (RFC 8785 orders keys by UTF-16 code units)', () => {
    const files = { 'b.js': '1'.repeat(64), 'B.js': '2'.repeat(64), 'lib/é "x"\\.js': '3'.repeat(64), 'ｚ.js': '4'.repeat(64), '😀.js': '5'.repeat(64), '': '6'.repeat(64) };
    expect(filesHash(files)).toBe(hasher.contentHash({ files }));
    expect(filesHash({})).toBe(hasher.contentHash({ files: {} }));
  });
});

describe('runtime facts: digests recorded by the build', () => {
  const digestsOf = (root: string) => JSON.parse(readFileSync(path.join(root, DIGESTS_FILE), 'utf8')) as { files: Record<string, unknown> };

  it('are reused for unchanged files and give the same hash as reading every file', () => {
    const { root } = install();
    const recorded = measure(root, { digests: 'record' });
    expect(recorded.stats.hashedFiles).toBe(recorded.stats.files);
    expect(Object.keys(digestsOf(root).files)).toContain('node_modules/small-dep/node_modules/nested-dep/index.js');
    const reused = measure(root);
    expect(reused.stats.hashedFiles).toBe(0);
    expect(reused.runtimeContents).toEqual(measure(root, { digests: 'none' }).runtimeContents);
    expect(reused.runtimeContents).toEqual(recorded.runtimeContents);
  });

  it('do not hide a change that keeps the size and sets the mtime back (ctime moves); a digest of another ctime or an unreadable digests file is not used', async () => {
    const { root, write } = install();
    const file = path.join(root, 'node_modules/small-dep/index.js');
    const mtime = 1_700_000_000; // whole seconds, so that setting it back is exact
    utimesSync(file, mtime, mtime);
    const recorded = measure(root, { digests: 'record' });
    const before = statSync(file);
    // ctime has the kernel clock's granularity: let it move on before the change.
    await new Promise((r) => setTimeout(r, 50));
    flipByte(file);
    utimesSync(file, mtime, mtime);
    expect([statSync(file).size, statSync(file).mtimeMs]).toEqual([before.size, before.mtimeMs]);
    const after = measure(root);
    expect(after.stats.hashedFiles).toBe(1);
    expect(runtimeHashOf(hasher, after.runtimeContents)).not.toBe(runtimeHashOf(hasher, recorded.runtimeContents));

    const digests = digestsOf(root);
    const now = statSync(file);
    digests.files['node_modules/small-dep/index.js'] = `${now.size}:${now.mtimeMs}:${now.ctimeMs + 1}:${'f'.repeat(64)}`;
    write(DIGESTS_FILE, JSON.stringify(digests));
    expect(runtimeHashOf(hasher, measure(root).runtimeContents)).toBe(runtimeHashOf(hasher, after.runtimeContents));
    appendFileSync(path.join(root, DIGESTS_FILE), '{');
    expect(runtimeHashOf(hasher, measure(root).runtimeContents)).toBe(runtimeHashOf(hasher, after.runtimeContents));
  });
});

describe('runtime facts of this install', () => {
  it('cover the server, its dependencies (express, typeorm, pg, better-sqlite3, pkcs11js, jose, @noble/*) and ets.js, not dev tools or the client', () => {
    const m = measure(INSTALL_ROOT, { code: 'built' });
    const names = new Set(m.runtimeContents.packages.map((p) => p.name));
    for (const name of ['@ets/server', '@ets/domain', '@ets/adapters-http', 'express', 'typeorm', 'pg', 'better-sqlite3', 'pkcs11js', 'jose', '@noble/curves', '@noble/hashes', '@marcbachmann/cel-js']) {
      expect({ name, covered: names.has(name) }).toEqual({ name, covered: true });
    }
    for (const name of ['jest', 'typescript', 'ts-jest', 'supertest', '@ets/client', '@ets/test']) {
      expect({ name, covered: names.has(name) }).toEqual({ name, covered: false });
    }
    expect(new Set(m.runtimeContents.packages.map((p) => p.path)).size).toBe(m.runtimeContents.packages.length);
    expect(m.runtimeContents.packages.find((p) => p.name === '@ets/server')).toMatchObject({ path: 'apps/server', kind: 'workspace' });
  });
});
