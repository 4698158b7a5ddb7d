import { afterAll, describe, expect, it } from '@jest/globals';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from '@ets/test-support';

/**
 * A newcomer's first hour, from a fresh clone, through the README's own commands: one install,
 * `npx ets --help`, `npm start`, the README's shell session from the quick start (the key the first
 * start prints against `/callers/me`) through the governance walkthrough, the `/execute` example,
 * offline verification and the transparency log, exactly as the README has them; stopping the
 * server by killing `npm start`; and nothing left in the clone but ignored build output and data.
 *
 * The clone is `git clone` of this repository (its committed HEAD). Its node_modules is a copy of
 * this one without the `ets` bin link, so that the test's `npm install` proves the link and the
 * build of a clone, without a second two-minute download and compile of better-sqlite3; CI's own
 * `npm ci` proves the install from the lockfile.
 */
const work = mkdtempSync(path.join(os.tmpdir(), 'ets-clone-'));
const clone = path.join(work, 'clone');
// rm -rf: the clone holds a node_modules of some 25 000 files, which fs.rmSync takes many times longer to remove.
afterAll(() => {
  if (spawnSync('rm', ['-rf', work]).status !== 0) rmSync(work, { recursive: true, force: true });
});

/** The shell blocks of a README section: the `## title` up to the next `## `. */
function shellBlocks(readme: string, title: string): string[] {
  const start = readme.indexOf(`\n## ${title}\n`);
  if (start === -1) throw new Error(`README has no section '${title}'`);
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

// npx must never fetch a package: with this, a missing local `ets` fails instead of installing one.
const ENV = { ...process.env, npm_config_yes: 'false' };

function run(command: string, args: string[], cwd = clone): { status: number | null; out: string } {
  const r = spawnSync(command, args, { cwd, env: ENV, encoding: 'utf8', timeout: 240_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('a fresh clone, following the README', () => {
  it('installs once, runs npx ets, and runs the README session (quick start, walkthrough, /execute, offline verification, transparency log) leaving no stray file', async () => {
    expect(run('git', ['clone', '--quiet', REPO_ROOT, clone], work).status).toBe(0);
    cpSync(path.join(REPO_ROOT, 'node_modules'), path.join(clone, 'node_modules'), {
      recursive: true,
      verbatimSymlinks: true,
      filter: (src) => src !== path.join(REPO_ROOT, 'node_modules', '.bin', 'ets') && !src.includes(`${path.sep}.cache${path.sep}`),
    });
    expect(existsSync(path.join(clone, 'node_modules/.bin/ets'))).toBe(false);

    const install = run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund']);
    expect(install).toMatchObject({ status: 0 });
    expect(existsSync(path.join(clone, 'node_modules/.bin/ets'))).toBe(true);

    // As the README says it; npm_config_yes=false refuses any download: `ets` must be the clone's own.
    const help = run('npx', ['ets', '--help']);
    expect(help.status).toBe(0);
    expect(help.out).toContain('Usage: ets <command>');
    expect(run('npm', ['run', '--silent', 'ets', '--', 'keys', 'add', '--help']).out).toMatch(/^Usage: ets keys add/);

    const readme = readFileSync(path.join(clone, 'README.md'), 'utf8');
    // The README's shell session, section after section, as it stands in the README.
    const session = shellBlocks(readme, 'Quick start').find((b) => /^KEY=pk_local_…/m.test(b));
    const [walkthrough] = shellBlocks(readme, 'Policies and governance');
    const [execute] = shellBlocks(readme, 'Executing actions');
    const offline = shellBlocks(readme, 'Offline verification');
    const transparency = shellBlocks(readme, 'Transparency log');
    expect(session).toBeDefined();
    expect(offline).toHaveLength(1);
    expect(transparency).toHaveLength(2);
    const keyLine = /^KEY=pk_local_….*$/m;
    const address = /^B=http:\/\/127\.0\.0\.1:8080\b.*$/gm;
    const startLine = /^(npm start > "\$W\/server\.log" 2>&1 & SERVER=\$!).*$/m;
    expect(session).toMatch(address);
    expect(walkthrough).toMatch(startLine);
    expect(walkthrough).toMatch(address);

    // The README's commands, as written, with these changes: the server listens on a free port
    // (SVC_PORT=0), so each start is followed by reading its address from the log into B, and the
    // first key is read from what the first start printed. Any command that fails is reported
    // (the ERR trap), and the README's files go to temporary folders inside the test's own.
    const tmp = path.join(work, 'tmp');
    mkdirSync(tmp);
    const script = `set -uo pipefail
set -E
trap 'echo "FAILED (exit $?) at line $LINENO: $BASH_COMMAND"' ERR
log=$(mktemp -d)
read_address() {
  for _ in $(seq 1 600); do grep -q '"msg":"listening"' "$1" 2>/dev/null && break; sleep 0.1; done
  B=$(grep -o '"url":"[^"]*","pid":[0-9]*' "$1" | tail -1 | cut -d'"' -f4)
  SERVER_PID=$(grep -o '"pid":[0-9]*' "$1" | tail -1 | cut -d: -f2)
}
stop_server() {
  kill $SERVER; wait $SERVER || true
  for _ in $(seq 1 100); do kill -0 $SERVER_PID 2>/dev/null || break; sleep 0.1; done
  if kill -0 $SERVER_PID 2>/dev/null; then echo "SERVER STILL RUNNING"; kill -9 $SERVER_PID; else echo "SERVER STOPPED"; fi
}

echo "== quick start"
SVC_PORT=0 npm start > "$log/out" 2> "$log/err" & SERVER=$!
read_address "$log/out"
${session!.replace(keyLine, `KEY=$(grep -o 'pk_local_[A-Za-z0-9_-]*' "$log/err" | head -1)`).replace(address, '')}
echo
stop_server

echo "== walkthrough"
${walkthrough!.replace(startLine, 'SVC_PORT=0 $1; read_address "$W/server.log"').replace(address, '')}
echo "== execute"
${execute}
echo "== offline verification"
${offline.join('\n')}
echo "== transparency log"
${transparency.join('\n')}
stop_server
echo "== end"
`;
    writeFileSync(path.join(work, 'readme.sh'), script);
    const { status, out } = await new Promise<{ status: number | null; out: string }>((resolve) => {
      const child = spawn('bash', [path.join(work, 'readme.sh')], { cwd: clone, env: { ...ENV, SVC_LOG_LEVEL: 'info', TMPDIR: tmp } });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
      child.on('close', (code) => resolve({ status: code, out }));
    });
    const context = `\n--- output of the README's commands ---\n${out}`;
    const shows = (pattern: RegExp, times = 1) => expect(`${(out.match(new RegExp(pattern.source, `${pattern.flags}g`)) ?? []).length} × ${pattern}${context}`).toMatch(new RegExp(`^${times} ×`));
    expect({ status, context }).toMatchObject({ status: 0 });
    expect(`${out.includes('FAILED (exit')}${context}`).toMatch(/^false/);
    shows(/\{"status":"UP"\}/);
    shows(/\{"callerId":"operator","credentialHolderType":"USER"/);
    // Bob approved the shipped policy and Alice's 1.1.0; 1.1.0 is in effect.
    shows(/"version":"1\.1\.0"[^\n]*"approvedBy":"bob"/);
    // The /execute example ran with the first key.
    shows(/"executionStatus": "EXECUTED"/);
    // Offline verification of its Trust Record, its Receipt and the record with its inclusion proof.
    shows(/^"VERIFIED"$/m);
    shows(/^kind: /m, 3);
    shows(/^VALID: every check passed\.$/m, 3);
    shows(/^ {2}transparency +ok/m);
    shows(/^ {2}inclusion +ok/m);
    shows(/^first run: .*log-state\.json holds no checkpoint yet/m);
    shows(/SERVER STOPPED/, 2);
    expect(out).not.toContain('SERVER STILL RUNNING');
    expect(out).toContain('== end');
    // Every file the README's commands wrote is in their temporary folder: the clone has nothing
    // but what the install and the server make, all of it ignored.
    const pkg = '((apps|packages)\\/[a-z-]+\\/|test\\/)?';
    const allowed = [
      new RegExp(`^!! ${pkg}node_modules\\/$`), // the install
      new RegExp(`^!! ${pkg}dist\\/$`), // the build
      new RegExp(`^!! ${pkg}tsconfig\\.tsbuildinfo$`),
      /^!! apps\/server\/build-info\.json$/,
      /^!! apps\/server\/runtime-digests\.json$/, // the build's digests of the code runtimeHash covers
      /^!! data\/$/, // the server's data dir (SVC_DATA_DIR=./data)
    ];
    const left = run('git', ['status', '--porcelain', '--ignored']).out.split('\n').filter(Boolean);
    expect(left.filter((line) => !allowed.some((a) => a.test(line)))).toEqual([]);
    expect(left).toEqual(expect.arrayContaining(['!! node_modules/', '!! data/']));
  }, 420_000);
});
