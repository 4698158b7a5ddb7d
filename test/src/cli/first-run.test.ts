import { afterAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { REPO_ROOT, runCli, spawnServer, tempDirs } from '@ets/test-support';
import { COMMANDS } from '../../../apps/server/src/cli/commands.js';
import { HELP } from '../../../apps/server/src/cli/usage.js';

const tmp = tempDirs('ets-first-run-');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 30_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** Every file under `dir` with its size, mode, mtime and SHA-256. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const file = path.join(dir, name);
    const st = statSync(file);
    out[name] = st.isFile() ? `${st.size} ${st.mode} ${st.mtimeMs} ${createHash('sha256').update(readFileSync(file)).digest('hex')}` : `dir ${st.mode}`;
  }
  return out;
}

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
const canListen = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = createServer()
      .once('error', () => resolve(false))
      .listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });

/** Runs `fn` over `items`, at most `size` at a time (each is a node process: two cores are shared). */
async function inBatches<T>(items: T[], size: number, fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}

/** runCli, failing instead of hanging if the command does not end (a help that started a server). */
async function runCliBounded(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`ets ${args.join(' ')} did not end within 30 s`)), 30_000)));
  try {
    return await Promise.race([runCli(args, env), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe('ets --help and --version', () => {
  // The CLI's own table: every command and every subcommand it knows has an entry in HELP.
  const commands = Object.keys(HELP);

  it('knows a command exactly when it has a help entry, and the other way round', () => {
    expect(Object.keys(COMMANDS).sort()).toEqual(commands.filter((c) => !c.includes(' ')).sort());
    for (const c of ['export', 'backup', 'source', 'source serve', 'keys add', 'log monitor']) expect(commands).toContain(c);
  });

  it('`ets <command> [<subcommand>] --help` (and -h) prints its usage, exits 0 and has no side effect, for every command of the table', async () => {
    // A data dir with a key file, and one that does not exist; a working directory of its own
    // (where `./data` and a .env would be); a port nothing may listen on afterwards.
    const existing = path.join(tmp(), 'data');
    const missing = path.join(tmp(), 'absent');
    const cwd = tmp();
    const port = await freePort();
    const issued = await runCli(['keys', 'add', '--caller-id', 'alice', '--holder', 'USER', '--capabilities', '*'], { SVC_DATA_DIR: existing });
    expect(issued.code).toBe(0);
    const before = snapshot(existing);
    // `--help` against the data dir with a key file, `-h` against the missing one; a few at a time.
    const runs = commands.flatMap((command) => [{ command, flag: '--help', dataDir: existing }, { command, flag: '-h', dataDir: missing }]);
    await inBatches(runs, 4, async ({ command, flag, dataDir }) => {
      const r = await runCliBounded([...command.split(' '), flag], { SVC_DATA_DIR: dataDir, SVC_PORT: String(port), SVC_LOG_LEVEL: 'info', CWD: cwd });
      expect({ command, flag, code: r.code, stderr: r.stderr }).toEqual({ command, flag, code: 0, stderr: '' });
      expect(r.stdout.startsWith(`Usage: ets ${command}`)).toBe(true);
      expect(r.stdout).not.toMatch(/"msg":"listening"|pk_local_/);
    });
    // Nothing was started, issued or written.
    expect(existsSync(missing)).toBe(false);
    expect(readdirSync(cwd)).toEqual([]);
    expect(snapshot(existing)).toEqual(before);
    expect(await canListen(port)).toBe(true);
  }, 300_000); // some 60 CLI runs, four at a time, on a shared machine

  it('an unknown command or subcommand is a usage error (exit 2, one line naming it), with or without --help', async () => {
    const withSubcommands = Object.keys(COMMANDS).filter((c) => commands.some((k) => k.startsWith(`${c} `)));
    expect(withSubcommands).toEqual(expect.arrayContaining(['keys', 'signing-keys', 'step-up', 'policy', 'log', 'source']));
    const cases: [string[], RegExp][] = [
      [['frob'], /^ets: Unknown command 'frob'\. Run 'ets --help'/],
      [['frob', '--help'], /^ets: Unknown command 'frob'\. Run 'ets --help'/],
      [['help', 'frob'], /^ets: Unknown command 'frob'\. Run 'ets --help'/],
      [['--frob'], /^ets: Unknown option '--frob'\. Run 'ets --help'/],
      ...withSubcommands.flatMap((c): [string[], RegExp][] => [
        [[c, 'frob'], new RegExp(`^ets: Unknown subcommand 'frob' of 'ets ${c}' \\(.+\\)\\. Run 'ets ${c} --help'\\.$`)],
        [[c, 'frob', '--help'], new RegExp(`^ets: Unknown subcommand 'frob' of 'ets ${c}'`)],
        [[c, 'frob', '-h'], new RegExp(`^ets: Unknown subcommand 'frob' of 'ets ${c}'`)],
      ]),
    ];
    const dataDir = path.join(tmp(), 'data');
    await inBatches(cases, 4, async ([args, message]) => {
      const r = await runCliBounded(args, { SVC_DATA_DIR: dataDir });
      expect({ args, code: r.code, stdout: r.stdout }).toEqual({ args, code: 2, stdout: '' });
      expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(r.stderr.trimEnd()).toMatch(message);
    });
    expect(existsSync(dataDir)).toBe(false);
  });

  it('lists every command in `ets --help`, `ets help` and `ets`, and answers `ets help keys add`', async () => {
    for (const args of [['--help'], ['-h'], ['help'], []]) {
      const r = await runCli(args, {});
      expect(r.code).toBe(0);
      // Every command of the table, itself or through each of its subcommands.
      for (const c of Object.keys(COMMANDS)) expect(`${c}: ${r.stdout.includes(`\n  ${c} `)}`).toBe(`${c}: true`);
      for (const c of ['serve', 'keys add', 'keys remove', 'keys list', 'signing-keys', 'step-up sign', 'policy validate', 'verify', 'export', 'backup', 'log monitor', 'source serve', 'demo']) expect(r.stdout).toContain(`\n  ${c} `);
      expect(r.stdout).toContain('ets --version (-V)');
      // Outside the clone `npx ets` is another package: the help says what works from anywhere.
      expect(r.stdout).toContain(`'npm --prefix ${REPO_ROOT} run --silent ets -- <command>'`);
      expect(r.stdout).toContain(`'node ${REPO_ROOT}/apps/server/bin/ets.js <command>'`);
    }
    expect((await runCli(['help', 'keys', 'add'], {})).stdout).toMatch(/^Usage: ets keys add --caller-id ID/);
  });

  it('prints the build identifier with --version', async () => {
    for (const flag of ['--version', '-V', '-v', 'version']) {
      const r = await runCli([flag], { SVC_BUILD_ID: 'abc123.20260101T000000Z' });
      expect(r.code).toBe(0);
      expect(r.stdout).toBe('ets build abc123.20260101T000000Z\n');
    }
  });

  it('the committed launcher says what to run when the CLI is not built', async () => {
    const dir = tmp();
    mkdirSync(path.join(dir, 'bin'));
    copyFileSync(path.join(REPO_ROOT, 'apps/server/bin/ets.js'), path.join(dir, 'bin/ets.js'));
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [path.join(dir, 'bin/ets.js'), '--help'], { cwd: dir });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/not built yet/);
    expect(r.stderr).toMatch(/npm run build/);
  });
});

describe('a first start that cannot listen', () => {
  let blocker: Server;
  afterAll(() => {
    blocker?.close();
  });

  it.each([
    ['the port is in use', async () => ({ SVC_HOST: '127.0.0.1', SVC_PORT: String(await occupiedPort()) }), /already in use/],
    ['the host is not an address of this machine', async () => ({ SVC_HOST: '192.0.2.1', SVC_PORT: '0' }), /not an address of this machine/],
  ])('issues no key when %s, says why, and the next start issues and prints one', async (_what, env, message) => {
    const dataDir = tmp();
    const failed = await runCli(['serve'], { SVC_DATA_DIR: dataDir, ...(await env()) });
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(message);
    expect(failed.stderr).toMatch(/SVC_HOST and SVC_PORT/);
    expect(failed.stdout + failed.stderr).not.toMatch(/pk_local_/);
    expect(existsSync(path.join(dataDir, 'api-keys.json'))).toBe(false);

    const server = await spawnServer({ SVC_DATA_DIR: dataDir });
    try {
      const key = /(pk_local_[A-Za-z0-9_-]{20,})/.exec(server.output())?.[1];
      expect(key).toBeDefined();
      // More keys: `npx ets` in the clone, and what works from any other folder (npx there is another package).
      expect(server.output()).toContain("'npx ets keys add --caller-id ID' in the clone's root");
      expect(server.output()).toContain(`from any other folder: npm --prefix ${REPO_ROOT} run --silent ets -- keys add --caller-id ID`);
      const me = await fetch(`${server.url}/callers/me`, { headers: { authorization: `Bearer ${key}` } });
      expect(me.status).toBe(200);
      expect(JSON.parse(readFileSync(path.join(dataDir, 'api-keys.json'), 'utf8')).keys).toHaveLength(1);
    } finally {
      await server.stop();
    }
  });

  function occupiedPort(): Promise<number> {
    return new Promise((resolve) => {
      blocker = createServer().listen(0, '127.0.0.1', () => resolve((blocker.address() as { port: number }).port));
    });
  }
});

describe('npm start', () => {
  /**
   * As an operator's script does it: `npm start &`, then `kill $!` (or a harder kill). npm runs
   * the script through a shell; the server must go down with npm either way.
   */
  it.each([['SIGTERM'], ['SIGKILL']])('stops the server when npm is sent %s', async (signal) => {
    const dataDir = tmp();
    const log = path.join(dataDir, 'out.log');
    const shell = spawn('bash', ['-c', `npm start > '${log}' 2>&1 & echo $!; wait`], {
      cwd: REPO_ROOT,
      env: { ...process.env, SVC_PORT: '0', SVC_HOST: '127.0.0.1', SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: 'info' },
    });
    let npmPid = 0;
    shell.stdout.on('data', (d) => (npmPid ||= Number(String(d).trim())));
    const exited = new Promise((r) => shell.once('exit', r));
    let serverPid = 0;
    try {
      const listening = await waitFor('the listening log line', () => {
        const text = existsSync(log) ? readFileSync(log, 'utf8') : '';
        return /"url":"(http:[^"]+)","pid":(\d+)[^\n]*"msg":"listening"/.exec(text) ?? undefined;
      });
      serverPid = Number(listening[2]);
      expect(npmPid).toBeGreaterThan(0);
      expect((await fetch(`${listening[1]}/health`)).status).toBe(200);

      process.kill(npmPid, signal as NodeJS.Signals);
      await waitFor('the server to stop', () => (alive(serverPid) ? undefined : true), 20_000);
      expect(readFileSync(log, 'utf8')).toMatch(/"msg":"stopped"/);
    } finally {
      if (serverPid && alive(serverPid)) process.kill(serverPid, 'SIGKILL');
      if (npmPid && alive(npmPid)) process.kill(npmPid, 'SIGKILL');
      await exited;
    }
  });
});
