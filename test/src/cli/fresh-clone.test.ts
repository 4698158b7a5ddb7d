import { afterAll, describe, expect, it } from '@jest/globals';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from '@ets/test-support';

/**
 * A newcomer's first hour, from a fresh clone, through the documents' own commands. First the
 * README's quick start: `git clone`, `cd`, `npm install`, `npx ets quickstart`, and the one command
 * it prints, pasted in a second terminal: five commands to an executed action whose record
 * verifies. Then the operator guide's walkthroughs, as one shell session in the order the guide
 * gives: the first key against `/callers/me`, two humans publishing a policy, the `/execute`
 * example, a transaction held for a human and approved with `ets overrides`, offline verification,
 * the transparency log, a sourced fact on one machine (with `ets local-network` and `ets source
 * serve`), the approvers' console as curl plays it, an agent through the MCP gateway (a stdio
 * upstream of the clone; a call held until a human approves it), and the signing-key providers (env, and pkcs11 with
 * a SoftHSM2 token of its own). Stopping servers by killing `npm start`, and nothing left in the
 * clone but ignored build output and data, and no process left running.
 *
 * The clone is `git clone` of this repository (its committed HEAD). Its node_modules is a copy of
 * this one without the `ets` bin link, so that `npm install` proves the link and the build of a
 * clone, without a second two-minute download and compile of better-sqlite3; CI's own `npm ci`
 * proves the install from the lockfile.
 */
const work = mkdtempSync(path.join(os.tmpdir(), 'ets-clone-'));
/** The folder the README's `git clone <repository URL> ets` makes. */
const clone = path.join(work, 'ets');
const tmp = path.join(work, 'tmp');
mkdirSync(tmp);
const GUIDE = 'packages/adapters-http/assets/guide';
const running: ChildProcess[] = [];
/** ETS_FRESH_CLONE_KEEP=1 keeps the clone and the commands' output (work/guide.out, written as they run), to look at a failure. */
const keep = process.env.ETS_FRESH_CLONE_KEEP === '1';
// rm -rf: the clone holds a node_modules of some 25 000 files, which fs.rmSync takes many times longer to remove.
afterAll(() => {
  for (const child of running) if (child.exitCode === null) child.kill('SIGKILL');
  if (keep) console.log(`ETS_FRESH_CLONE_KEEP: the clone and the output are in ${work}`);
  else if (spawnSync('rm', ['-rf', work]).status !== 0) rmSync(work, { recursive: true, force: true });
});

/** The shell blocks of a Markdown section: its heading (any level) up to the next heading of the same level or higher. */
function shellBlocks(file: string, title: string): string[] {
  const text = readFileSync(path.join(clone, file), 'utf8');
  const heading = new RegExp(`^(#{2,4}) ${title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'm').exec(text);
  if (!heading) throw new Error(`${file} has no section '${title}'`);
  const rest = text.slice(heading.index + heading[0].length);
  const next = new RegExp(`^#{2,${heading[1]!.length}} `, 'm').exec(rest.replace(/^```[\s\S]*?^```/gm, (m) => m.replace(/#/g, ' ')));
  const section = next ? rest.slice(0, next.index) : rest;
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** The lines of a shell block that are commands (neither blank nor comments), without their trailing comments. */
const commandsOf = (block: string): string[] =>
  block
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.trim().startsWith('#'))
    .map((l) => l.replace(/\s+# .*$/, ''));

// npx must never fetch a package: with this, a missing local `ets` fails instead of installing one.
const ENV = { ...process.env, npm_config_yes: 'false', TMPDIR: tmp };

function run(command: string, args: string[], cwd = clone): { status: number | null; out: string } {
  const r = spawnSync(command, args, { cwd, env: ENV, encoding: 'utf8', timeout: 240_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

/** Processes still running from the clone (servers, resolvers, sources): there must be none at the end. */
const leftovers = () => (spawnSync('pgrep', ['-af', `${clone}/`], { encoding: 'utf8' }).stdout ?? '').split('\n').filter((l) => l && !l.includes('pgrep'));

describe('a fresh clone, following the README and the guide', () => {
  it("the README's quick start: five commands to an executed action whose record verifies", async () => {
    const readme = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
    const quickstart = readme.slice(readme.indexOf('\n## Quick start'), readme.indexOf('\n## ', readme.indexOf('\n## Quick start') + 1));
    const [block] = [...quickstart.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
    const commands = commandsOf(block!);
    // Four here, and the one `ets quickstart` prints: five.
    expect(commands).toEqual(['git clone <repository URL> ets', 'cd ets', 'npm install', 'npx ets quickstart']);
    expect(quickstart).toMatch(/The fifth is the command `ets quickstart` printed/);

    // 1. As written, this repository being the repository URL.
    const cloned = spawnSync('bash', ['-c', block!.split('\n').find((l) => l.startsWith('git clone'))!.replace('<repository URL>', REPO_ROOT)], { cwd: work, env: ENV, encoding: 'utf8' });
    expect({ status: cloned.status, err: cloned.stderr }).toMatchObject({ status: 0 });
    cpSync(path.join(REPO_ROOT, 'node_modules'), path.join(clone, 'node_modules'), {
      recursive: true,
      verbatimSymlinks: true,
      filter: (src) => src !== path.join(REPO_ROOT, 'node_modules', '.bin', 'ets') && !src.includes(`${path.sep}.cache${path.sep}`),
    });
    expect(existsSync(path.join(clone, 'node_modules/.bin/ets'))).toBe(false);

    // 2 to 4, as written (the install offline-first: its packages are all in the copied node_modules).
    // `ets quickstart` serves until stopped: the test reads what it prints, as the newcomer does.
    const rest = block!.split('\n').slice(block!.split('\n').findIndex((l) => l.startsWith('cd ets'))).join('\n');
    const lines = rest.split('\n');
    const last = lines.findIndex((l) => l.startsWith('npx ets quickstart'));
    const script = `set -e\n${lines.slice(0, last).join('\n')}\nexec ${lines[last]}\n`;
    const child = spawn('bash', ['-c', script], { cwd: work, env: { ...ENV, SVC_PORT: '0', npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false' } });
    running.push(child);
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const printed = await new Promise<string>((resolve, reject) => {
      const timer = setInterval(() => {
        const command = /^curl -s -X POST [\s\S]*? verify - --keys \S+$/m.exec(out)?.[0];
        if (command) {
          clearInterval(timer);
          resolve(command);
        } else if (child.exitCode !== null) {
          clearInterval(timer);
          reject(new Error(`the quick start ended (${child.exitCode}) without printing its command:\n${out}`));
        }
      }, 200);
    });
    expect(existsSync(path.join(clone, 'node_modules/.bin/ets'))).toBe(true);
    expect(out).toContain('a SANDBOX service for trying the service on this machine. It is not a deployment.');

    // What the README shows of the printed command and of its answer is what they are.
    const example = [...quickstart.matchAll(/```text\n([\s\S]*?)```/g)].map((m) => m[1]!);
    const address = printed.match(/http:\/\/127\.0\.0\.1:\d+/)![0];
    const shown = (text: string) => text.replaceAll(address, 'http://127.0.0.1:8080').split('\n');
    expect(shown(printed)[0]).toBe(example[0]!.split('\n')[0]);
    expect(shown(printed)[3]!.replace(`node ${clone}/`, 'node /home/you/ets/')).toBe(example[0]!.split('\n')[3]);

    // 5. In a second terminal: any folder, a shell of its own.
    const home = mkdtempSync(path.join(tmp, 'terminal-'));
    const fifth = spawnSync('bash', ['-c', printed], { cwd: home, env: { PATH: process.env.PATH, HOME: home }, encoding: 'utf8', timeout: 120_000 });
    expect({ status: fifth.status, stderr: fifth.stderr }).toEqual({ status: 0, stderr: '' });
    expect(fifth.stdout).toContain('answer: executionStatus EXECUTED, decision approve (Within limits)');
    expect(fifth.stdout.trimEnd().endsWith('VALID: every check passed.')).toBe(true);
    const answer = example[1]!.split('\n');
    expect(shown(fifth.stdout).slice(0, 3)).toEqual(answer.slice(0, 3));

    // Ctrl-C in the first terminal (here SIGTERM to npx): the service stops, and stops with it.
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    for (let i = 0; i < 100 && leftovers().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(leftovers()).toEqual([]);

    // The CLI as the guide says it: npx_config_yes=false refuses any download, so `ets` must be the clone's own.
    const help = run('npx', ['ets', '--help']);
    expect(help.status).toBe(0);
    expect(help.out).toContain('Usage: ets <command>');
    expect(run('npm', ['run', '--silent', 'ets', '--', 'keys', 'add', '--help']).out).toMatch(/^Usage: ets keys add/);
  }, 600_000);

  it("the guide's walkthroughs, as one session (first key, governance, /execute, a held transaction, offline verification, transparency log, a sourced fact, the console, the MCP gateway, signing keys), leaving no stray file or process", async () => {
    expect(existsSync(path.join(clone, 'node_modules/.bin/ets'))).toBe(true);
    const [session] = shellBlocks(`${GUIDE}/020-running.md`, 'First start and the first key').filter((b) => /^KEY=pk_local_…/m.test(b));
    const [walkthrough] = shellBlocks(`${GUIDE}/050-policies-and-approvals.md`, 'Walkthrough: two humans publish a policy');
    const [execute] = shellBlocks(`${GUIDE}/060-executions-and-reconciliation.md`, 'Walkthrough: execute an action');
    const offline = shellBlocks(`${GUIDE}/070-verifying-records.md`, 'Walkthrough: verify a record offline');
    const transparency = shellBlocks(`${GUIDE}/075-transparency-log.md`, 'Walkthrough: proofs and monitoring');
    const sourced = shellBlocks(`${GUIDE}/067-business-validation.md`, 'Walkthrough: a sourced fact on one machine');
    const signing = shellBlocks(`${GUIDE}/040-signing-keys.md`, 'Walkthrough: signing keys from the environment and from a module');
    const held = shellBlocks(`${GUIDE}/060-executions-and-reconciliation.md`, 'Walkthrough: a transaction held for a human');
    const consoleSession = shellBlocks(`${GUIDE}/055-approving-in-the-console.md`, 'Approving in the console');
    const mcp = shellBlocks(`${GUIDE}/068-mcp-gateway.md`, 'Walkthrough: an agent through the gateway on one machine');
    expect(session).toBeDefined();
    expect(offline).toHaveLength(1);
    expect(transparency).toHaveLength(2);
    expect(sourced).toHaveLength(1);
    expect(signing).toHaveLength(1);
    expect(held).toHaveLength(1);
    expect(consoleSession).toHaveLength(1);
    expect(mcp).toHaveLength(1);
    const keyLine = /^KEY=pk_local_….*$/m;
    const address = /^B=http:\/\/127\.0\.0\.1:8080\b.*$/gm;
    // A start of the server as the walkthroughs write it, with whatever settings go before it.
    const startLine = /^(.*npm start > "\$W\/server\.log" 2>&1 & SERVER=\$!).*$/gm;
    expect(session).toMatch(address);
    expect(walkthrough).toMatch(startLine);
    expect(walkthrough).toMatch(address);
    expect(sourced[0]).toMatch(/^env \$\(cat "\$W\/net\/server\.env"\) npm start > /m);
    // The console's walkthrough and the MCP one start servers of their own (the MCP one with its stdio servers).
    expect(consoleSession[0]).toMatch(startLine);
    expect(consoleSession[0]).toMatch(address);
    expect(mcp[0]).toMatch(/^SVC_MCP_STDIO_SERVERS="\$W\/mcp-servers\.json" npm start > /m);
    // Bob's API key reaches `ets overrides` through the environment, never as an argument.
    expect(`${held[0]}${mcp[0]}`).not.toMatch(/ets overrides[^\n]*(pk_local_|\$BOB|\$KEY)/);
    // The pkcs11 walkthrough makes its own token folder and PIN file, and lists with the server's settings.
    expect(signing[0]).toMatch(/^export SOFTHSM2_CONF="\$W\/softhsm\/softhsm2\.conf"$/m);
    expect(signing[0]).toMatch(/> "\$W\/pin"\)/);
    const started = (block: string) => block.replace(startLine, 'SVC_PORT=0 $1; read_address "$W/server.log"').replace(address, '');

    // The guide's commands, as written, with these changes: the server listens on a free port
    // (SVC_PORT=0), so each start is followed by reading its address from the log into B, and the
    // first key is read from what the first start printed. Any command that fails is reported
    // (the ERR trap), and the commands' files go to temporary folders inside the test's own.
    const script = `set -uo pipefail
set -E
trap 'echo "FAILED (exit $?) at line $LINENO: $BASH_COMMAND"' ERR
log=$(mktemp -d)
# A restart writes the same log: the shell truncates it in the background job, maybe after this
# starts reading, so the previous server's "listening" line does not count.
read_address() {
  local previous=\${SERVER_PID:-} listening=''
  for _ in $(seq 1 600); do
    listening=$(grep -o '"url":"[^"]*","pid":[0-9]*' "$1" 2>/dev/null | tail -1 || true)
    [ -n "$listening" ] && [ "\${listening##*:}" != "$previous" ] && break
    sleep 0.1
  done
  B=$(echo "$listening" | cut -d'"' -f4)
  SERVER_PID=\${listening##*:}
}
stop_server() {
  kill $SERVER; wait $SERVER || true
  for _ in $(seq 1 100); do kill -0 $SERVER_PID 2>/dev/null || break; sleep 0.1; done
  if kill -0 $SERVER_PID 2>/dev/null; then echo "SERVER STILL RUNNING"; kill -9 $SERVER_PID; else echo "SERVER STOPPED"; fi
}

echo "== first key"
SVC_PORT=0 npm start > "$log/out" 2> "$log/err" & SERVER=$!
read_address "$log/out"
${session!.replace(keyLine, `KEY=$(grep -o 'pk_local_[A-Za-z0-9_-]*' "$log/err" | head -1)`).replace(address, '')}
echo
stop_server

echo "== walkthrough"
${started(walkthrough!)}
echo "== execute"
${execute}
echo "== held transaction"
${held[0]}
echo "== offline verification"
${offline.join('\n')}
echo "== transparency log"
${transparency.join('\n')}
echo "== sourced fact"
${started(sourced[0]!)}
stop_server
echo "== console"
${started(consoleSession[0]!)}
echo "== mcp"
${started(mcp[0]!)}
stop_server
echo "== signing keys"
${started(signing[0]!)}
for _ in $(seq 1 100); do kill -0 $SERVER_PID 2>/dev/null || break; sleep 0.1; done
if kill -0 $SERVER_PID 2>/dev/null; then echo "SERVER STILL RUNNING"; else echo "SERVER STOPPED"; fi
echo "== end"
`;
    writeFileSync(path.join(work, 'guide.sh'), script);
    const { status, out } = await new Promise<{ status: number | null; out: string }>((resolve) => {
      const child = spawn('bash', [path.join(work, 'guide.sh')], { cwd: clone, env: { ...ENV, SVC_LOG_LEVEL: 'info' }, detached: true });
      running.push(child);
      // A command that waits for ever (a server that never answers) ends the session with its output, not the test's timeout.
      const stuck = setTimeout(() => {
        appendFileSync(path.join(work, 'guide.out'), '\nSTOPPED: the session ran for 12 minutes\n');
        out += '\nSTOPPED: the session ran for 12 minutes\n';
        process.kill(-child.pid!, 'SIGKILL');
      }, 720_000);
      child.on('close', () => clearTimeout(stuck));
      let out = '';
      const collect = (d: Buffer) => {
        out += d.toString();
        appendFileSync(path.join(work, 'guide.out'), d);
      };
      child.stdout.on('data', collect);
      child.stderr.on('data', collect);
      child.on('close', (code) => resolve({ status: code, out }));
    });
    const context = `\n--- output of the guide's commands ---\n${out}`;
    const shows = (pattern: RegExp, times = 1) => expect(`${(out.match(new RegExp(pattern.source, `${pattern.flags}g`)) ?? []).length} × ${pattern}${context}`).toMatch(new RegExp(`^${times} ×`));
    expect({ status, context }).toMatchObject({ status: 0 });
    expect(`${out.includes('FAILED (exit')}${context}`).toMatch(/^false/);
    shows(/\{"status":"UP"\}/);
    shows(/\{"callerId":"operator","credentialHolderType":"USER"/);
    // Bob approved the shipped policy and Alice's 1.1.0; 1.1.0 is in effect.
    shows(/"version":"1\.1\.0"[^\n]*"approvedBy":"bob"/);
    // The /execute example ran with the first key.
    shows(/"executionStatus": "EXECUTED"/);
    // Offline verification of its Trust Record, its Receipt and the record with its inclusion proof,
    // and of the record that holds the source's signed answer.
    shows(/^"VERIFIED"$/m);
    shows(/^kind: /m, 5);
    shows(/^VALID: every check passed\.$/m, 5);
    shows(/^ {2}transparency +ok/m);
    shows(/^ {2}inclusion +ok/m);
    shows(/^first run: .*log-state\.json holds no checkpoint yet/m);
    // A sourced fact: the source and the policy approved, the fact in the record with a verified proof, another amount refused.
    shows(/^"APPROVED"$/m, 2);
    shows(/^\{"executionStatus":"EXECUTED","signal":\{"source":"erp","value":120,"sourceProofVerified":true\}\}$/m);
    shows(/^ {2}sourceProofs +ok \(1 signed by their source\)$/m);
    shows(/^\{"code":"POLICY_DENIED","error":"[^"]+"\}$/m);
    // Signing keys: a key from the environment in the JWKS; the module's key listed as the module's.
    shows(/^ed25519-[A-Za-z0-9_-]+$/m);
    shows(/^provider: pkcs11 \(token "ets" of \S+libsofthsm2\.so\), SVC_SIGNING_PROVIDER=pkcs11$/m);
    shows(/^ed25519-\S+ {2}Ed25519 {2}active {2}\S+ {2}pkcs11$/m);
    // A held transaction: 202, listed PENDING by Bob with `ets overrides list`, approved with `ets overrides approve`, its record verified (above).
    shows(/^\{"executionStatus":"PENDING_OVERRIDE","rule":"large"\}$/m);
    shows(/^ID +STATUS +ACTION +CALLER +HELD AT +UNTIL \/ BY +WHY$/m);
    shows(/^[0-9a-f-]{36} +PENDING +sandbox:echo +operator +\S+ +expires \S+ +Large transfer needs a second look$/m);
    shows(/^\{"status":"PENDING","parameters":\{"amount":12000,"currency":"EUR"\},"scope":\{"field":"resourceId","resourceId":"[0-9a-f-]{36}"\}\}$/m);
    shows(/^Approved [0-9a-f-]{36} as bob: EXECUTED; the answer on stdout carries its signed Trust Record/m, 2);
    shows(/^\{"executionStatus":"EXECUTED","approvedBy":"bob"\}$/m);
    shows(/^answer: executionStatus EXECUTED, decision approve \(Large transfer needs a second look\)$/m);
    // The console: its page and CSP, a session cookie as carol, a CSRF-guarded sign-out.
    shows(/^200 text\/html; charset=utf-8$/m);
    shows(/^content-security-policy: default-src 'none'; script-src 'self'/im);
    shows(/^\{"callerId":"carol","expiresAt":"[^"]+"\}$/m);
    shows(/^\{"callerId":"carol","credentialHolderType":"USER"\}$/m);
    shows(/^204\n401$/m);
    shows(/^Open http:\/\/127\.0\.0\.1:\d+\/console and sign in with the key in \S+carol\.key$/m);
    // MCP: the policy and the stdio server approved; the agent's calls approved, refused, held until Bob approved.
    shows(/^APPROVED$/m, 2);
    shows(/^bank__transfer$/m);
    shows(/^\{"isError":false,"text":"transferred 250 EUR to Acme"\}$/m);
    shows(/^\{"isError":true,"text":"Execution rejected: Not for agents"\}$/m);
    shows(/^EXECUTED$/m);
    shows(/^\{"isError":false,"text":"transferred 5000 EUR to Acme"\}$/m);
    shows(/SERVER STOPPED/, 4);
    expect(out).not.toContain('SERVER STILL RUNNING');
    expect(out).toContain('== end');
    // Nothing runs on: servers, the resolver and the source stop when what started them goes.
    for (let i = 0; i < 100 && leftovers().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(leftovers()).toEqual([]);
    // Every file the commands wrote is in their temporary folder: the clone has nothing but what
    // the install and the server make, all of it ignored.
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
  }, 900_000);
});
