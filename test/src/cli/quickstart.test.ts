import { afterAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { runCli, startCli, tempDirs, type StartedCli } from '@ets/test-support';

// Needs the built CLI (`npm run build`).
const tmp = tempDirs('ets-quickstart-');

type Quickstart = StartedCli<{ command: string; url: string }>;

/** Starts `ets quickstart` and resolves once it has printed the command to paste. */
const startQuickstart = (args: string[], env: Record<string, string>): Promise<Quickstart> =>
  startCli(['quickstart', ...args], { SVC_PORT: '0', ...env }, (out) => {
    const command = /^curl -s -X POST [\s\S]*? verify - --keys \S+$/m.exec(out)?.[0];
    const url = /^ {2}service {2}(http:\/\/\S+)/m.exec(out)?.[1];
    return command && url ? { command, url } : undefined;
  });

/** Runs the printed command in bash, in a folder outside the clone (a newcomer's second terminal). */
function paste(command: string): { status: number | null; stdout: string; stderr: string } {
  const home = tmp();
  const r = spawnSync('bash', ['-c', command], { cwd: home, env: { PATH: process.env.PATH, HOME: home }, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('ets quickstart', () => {
  const started: Quickstart[] = [];
  afterAll(async () => {
    for (const q of started) await q.stop();
  });

  it('starts a sandbox service of its own, approves the shipped policy by maker-checker, and prints one command that executes and verifies', async () => {
    const dir = path.join(tmp(), 'qs');
    // Settings of a deployment in the environment are not the quickstart's: it keeps to its folder.
    const elsewhere = tmp();
    const q = await startQuickstart(['--dir', dir], { SVC_DATA_DIR: elsewhere, SVC_SANDBOX: 'false', SVC_AUTH_DISABLED: 'true', CWD: tmp() });
    started.push(q);
    expect(q.output()).toMatch(/a SANDBOX service .* It is not a deployment\./);
    expect(q.output()).toContain(`in sandbox mode (SVC_SANDBOX=true)`);
    expect(q.output()).toMatch(/proposed by 'system' at start, and approved by\n'quickstart-approver', a USER with its own Ed25519 step-up key/);
    expect(q.output()).toContain('In a real\ndeployment the approver is a second human');
    expect(readdirSync(elsewhere)).toEqual([]);
    expect(statSync(path.join(dir, 'approver-step-up.pem')).mode & 0o777).toBe(0o600);
    expect(statSync(path.join(dir, 'keys.env')).mode & 0o777).toBe(0o600);

    // The newcomer's fifth command, pasted as printed: EXECUTED, and the record verifies offline.
    const first = paste(q.found.command);
    expect({ status: first.status, stderr: first.stderr }).toEqual({ status: 0, stderr: '' });
    expect(first.stdout).toMatch(/^kind: execution-trust-record \(the `trustRecord` of the response\)\nanswer: executionStatus EXECUTED, decision approve \(Within limits\)\n/);
    expect(first.stdout).toMatch(/^ {2}executionChain +ok/m);
    expect(first.stdout.trimEnd().endsWith('VALID: every check passed.')).toBe(true);
    // Again: a new transaction each time.
    const again = paste(q.found.command);
    expect(again.status).toBe(0);
    expect(again.stdout).toContain('answer: executionStatus EXECUTED');

    // What the service holds: the approval is a real one, by a caller other than the proposer, with a step-up signature.
    const keys = parseDotenv(readFileSync(path.join(dir, 'keys.env'), 'utf8'));
    const changes = (await (await fetch(`${q.found.url}/policies/pending-changes?status=APPROVED`, { headers: { authorization: `Bearer ${keys.QUICKSTART_APPROVER_KEY}` } })).json()) as { items: Record<string, unknown>[] };
    expect(changes.items).toEqual([expect.objectContaining({ policyName: 'payments-transfer', policyVersion: '1.0.0', proposer: 'system', decider: 'quickstart-approver' })]);
    // Sandbox mode: the demo approver's route exists.
    const sandbox = await fetch(`${q.found.url}/sandbox/approvals`, { method: 'POST', headers: { authorization: `Bearer ${keys.QUICKSTART_AGENT_KEY}`, 'content-type': 'application/json' }, body: '{}' });
    expect(sandbox.status).not.toBe(404);
    // The agent may only request sandbox:echo.
    const me = (await (await fetch(`${q.found.url}/callers/me`, { headers: { authorization: `Bearer ${keys.QUICKSTART_AGENT_KEY}` } })).json()) as Record<string, unknown>;
    expect(me).toMatchObject({ callerId: 'quickstart-agent', credentialHolderType: 'SERVICE', allowedCapabilities: ['sandbox:echo'] });

    expect(await q.stop()).toBe(0);
    expect(q.output()).toContain(`Stopped. Its folder stays for you to look at: ${dir}`);
    expect(existsSync(path.join(dir, 'data', 'ets.sqlite'))).toBe(true);
    expect(readFileSync(path.join(dir, 'server.log'), 'utf8')).toMatch(/"msg":"listening"/);
  }, 180_000);

  it('the pasted command reports an error answer as such (a second transaction with the same id is refused)', async () => {
    // Without --dir: a new folder in the temporary folder (here, one of the test's), named in what it printed.
    const temporary = tmp();
    const q = await startQuickstart([], { CWD: tmp(), TMPDIR: temporary });
    started.push(q);
    const fixed = q.found.command.replace(/"'"\$\(node -p 'crypto\.randomUUID\(\)'\)"'"/, `"${'7'.repeat(8)}-7777-4777-8777-${'7'.repeat(12)}"`);
    expect(paste(fixed).status).toBe(0);
    const repeated = paste(fixed);
    expect(repeated.status).toBe(1);
    expect(repeated.stderr).toMatch(/^ets: standard input holds an error answer of the service, not a signed record: \{"error":/);
    const folder = /^ {2}folder {3}(\S+):/m.exec(q.output())?.[1];
    expect(folder?.startsWith(path.join(temporary, 'ets-quickstart-'))).toBe(true);
    expect(existsSync(path.join(folder!, 'keys.env'))).toBe(true);
    expect(await q.stop()).toBe(0);
  }, 180_000);

  it('refuses a --dir that holds anything, and an argument it does not know (exit 2)', async () => {
    const dir = tmp();
    writeFileSync(path.join(dir, 'something'), 'x');
    const r = await runCli(['quickstart', '--dir', dir], { SVC_PORT: '0' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--dir .* is not empty/);
    expect(readdirSync(dir)).toEqual(['something']);
    const extra = await runCli(['quickstart', 'now'], { SVC_PORT: '0' });
    expect(extra.code).toBe(2);
    expect(extra.stderr).toContain("Unexpected argument 'now'");
  });
});
