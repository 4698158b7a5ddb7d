import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { KeyRing, KeyRingSigner } from '@ets/adapters-crypto';
import { REPO_ROOT } from '@ets/test-support';

/**
 * @ets/client as it is published (what `npm run build` leaves in packages/client/dist): it
 * installs alone from its tarball, with its own dependencies and none of this repository's
 * packages, and works in Node from there; its types stand alone; the browser build imports nothing.
 */
const run = promisify(execFile);
const CLIENT = path.join(REPO_ROOT, 'packages', 'client');
const pkg = JSON.parse(readFileSync(path.join(CLIENT, 'package.json'), 'utf8')) as { name: string; version: string; dependencies: Record<string, string> };
const dependencies = Object.keys(pkg.dependencies);
const dist = (file: string) => readFileSync(path.join(CLIENT, 'dist', file), 'utf8');
/** The module specifiers a built file imports (static and dynamic, `import` and `export … from`). */
const importsOf = (code: string): string[] => [...code.matchAll(/(?:^|[;\s])(?:import|export)\s*(?:[\w*${}\s,]+from\s*)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/g)].map((m) => (m[1] ?? m[2])!);
const isDeclared = (specifier: string) => dependencies.some((d) => specifier === d || specifier.startsWith(`${d}/`));

describe('@ets/client as published', () => {
  it('the Node build imports only its declared dependencies and Node built-ins; the browser build imports nothing', () => {
    const nodeImports = importsOf(dist('node.js'));
    expect(nodeImports.length).toBeGreaterThan(0);
    expect(nodeImports.filter((s) => !s.startsWith('node:') && !isDeclared(s))).toEqual([]);
    const browser = dist('browser.js');
    expect(importsOf(browser)).toEqual([]);
    expect(browser).not.toMatch(/["']node:/);
    expect(browser).not.toMatch(/\brequire\(/);
  });

  it('its types import only its declared dependencies', () => {
    const types = dist('index.d.ts');
    expect(importsOf(types).filter((s) => !isDeclared(s))).toEqual([]);
    for (const name of ['createClient', 'signStepUp', 'signApproval', 'verifyRecord', 'verifyLogInclusion', 'ReleaseVerifier', 'paths', 'Schemas']) expect(types).toMatch(new RegExp(`\\b${name}\\b`));
  });

  it('packs from a built tree only: prepack builds nothing, and names the build when dist/ is missing', async () => {
    const bare = mkdtempSync(path.join(os.tmpdir(), 'ets-client-unbuilt-'));
    try {
      mkdirSync(path.join(bare, 'scripts'));
      writeFileSync(path.join(bare, 'package.json'), readFileSync(path.join(CLIENT, 'package.json')));
      writeFileSync(path.join(bare, 'scripts', 'check-dist.mjs'), readFileSync(path.join(CLIENT, 'scripts', 'check-dist.mjs')));
      const refused = await run('npm', ['pack', '--dry-run'], { cwd: bare }).then(
        () => undefined,
        (e: { code: number; stderr: string }) => e,
      );
      expect(refused?.code).not.toBe(0);
      expect(refused?.stderr).toContain("@ets/client: dist/index.d.ts, dist/node.js, dist/node.js.map, dist/browser.js, dist/browser.js.map are not built. Build first: 'npm run build' at the repository root");
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
  });

  it("its README's install commands work from a clone of the repository, before it is published", async () => {
    const readme = readFileSync(path.join(CLIENT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('\n## Install\n'), readme.indexOf('\n## ', readme.indexOf('\n## Install\n') + 1));
    const commands = (/```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '').split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'));
    expect(commands.map((c) => c.replace(/\s+#.*$/, ''))).toEqual([`npm pack -w ${pkg.name} --pack-destination /tmp`, `npm install /tmp/ets-client-${pkg.version}.tgz`]);
    // As written, but into a folder of this test's instead of /tmp itself.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ets-client-readme-'));
    try {
      const app = path.join(dir, 'app');
      mkdirSync(app);
      const shell = (command: string, cwd: string) =>
        run('bash', ['-c', command.replace(/\/tmp\b/g, dir)], { cwd, timeout: 150_000, env: { ...process.env, npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false' } });
      await shell(commands[0]!, REPO_ROOT);
      await shell(commands[1]!, app);
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', "const m = await import('@ets/client'); console.log(typeof m.createClient, typeof m.verifyRecord)"], { cwd: app });
      expect(stdout.trim()).toBe('function function');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);

  describe('installed alone from its tarball', () => {
    let dir: string;
    let app: string;

    beforeAll(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'ets-client-pkg-'));
      app = path.join(dir, 'app');
      // As an author packs it, in its folder alone: prepack checks the built files and builds nothing.
      const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: CLIENT });
      const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
      expect(packed!.files.map((f) => f.path).sort()).toEqual(['CHANGELOG.md', 'README.md', 'dist/browser.js', 'dist/browser.js.map', 'dist/index.d.ts', 'dist/node.js', 'dist/node.js.map', 'package.json']);
      mkdirSync(app);
      writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
      await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', path.join(dir, packed!.filename)], { cwd: app, timeout: 150_000 });
    }, 180_000);
    afterAll(() => {
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('brings its own dependencies and none of this repository\'s packages', () => {
      expect(readdirSync(path.join(app, 'node_modules', '@ets'))).toEqual(['client']);
      for (const d of dependencies) expect(readdirSync(path.join(app, 'node_modules', ...d.split('/'))).length).toBeGreaterThan(0);
    });

    it('runs in Node: verifies a signed record offline, signs a step-up envelope, builds a typed client', async () => {
      const keysDir = mkdtempSync(path.join(dir, 'keys-'));
      const ring = await KeyRing.open({ dataDir: keysDir, mode: 'hybrid' });
      const record = await new KeyRingSigner(ring).sign({ kind: 'governance', eventId: 'e-1', callerId: 'bob', action: 'approve', subjectType: 'policy', subjectId: 'c-1', summary: 'x', occurredAt: '2026-01-01T00:00:00.000Z' });
      writeFileSync(path.join(app, 'input.json'), JSON.stringify({ record, jwks: ring.jwks() }));
      writeFileSync(
        path.join(app, 'main.mjs'),
        `import { readFileSync } from 'node:fs';
import { generateEd25519KeyPair } from '@ets/client';
import * as ets from '@ets/client';
const { record, jwks } = JSON.parse(readFileSync('input.json', 'utf8'));
const good = ets.verifyRecord(record, jwks);
const bad = ets.verifyRecord({ ...record, summary: 'y' }, jwks);
const envelope = await ets.signStepUp({ key: generateEd25519KeyPair().privateKeyPem, changeId: 'c-1', action: 'approve' });
const client = ets.createClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k' });
console.log(JSON.stringify({ good: good.valid, kind: good.kind, checks: good.checks.map((c) => c.name), bad: bad.valid, envelope: Object.keys(envelope), client: typeof client.POST }));
`,
      );
      const { stdout } = await run(process.execPath, ['main.mjs'], { cwd: app });
      expect(JSON.parse(stdout)).toEqual({ good: true, kind: 'audit-event', checks: ['signature', 'pqSignature', 'fields'], bad: false, envelope: ['payload', 'signature'], client: 'function' });
    });

    it('type-checks a consumer against its published types alone', () => {
      const consumer = path.join(app, 'consumer.ts');
      writeFileSync(
        consumer,
        `import { createClient, signStepUp, verifyRecord, ReleaseVerifier, type Schemas, type RecordReport } from '@ets/client';
const client = createClient({ baseUrl: 'https://ets.example', apiKey: 'pk_local_x' });
export async function run(tx: Schemas['BusinessTransaction']): Promise<RecordReport | undefined> {
  const { data, error } = await client.POST('/execute', { body: tx });
  if (error) return undefined;
  const envelope = await signStepUp({ key: new Uint8Array(32), changeId: 'c', action: 'approve' });
  await client.POST('/policies/pending-changes/{id}/approve', { params: { path: { id: 'c' } }, body: envelope });
  new ReleaseVerifier({ jwks: 'https://ets.example/.well-known/jwks.json', audience: 'https://me.example/release' });
  return verifyRecord(data.trustRecord, { keys: [] });
}
`,
      );
      const program = ts.createProgram([consumer], {
        strict: true,
        noEmit: true,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        target: ts.ScriptTarget.ES2022,
        lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
        types: [],
        skipLibCheck: false,
      });
      const problems = ts.getPreEmitDiagnostics(program).map((d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
      expect(problems).toEqual([]);
    });
  });
});
