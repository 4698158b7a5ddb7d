import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { PolicyDocument } from '@ets/domain';
import { apiKeysEnv, businessCast, holdingPolicy, holdTransfer, publishPolicy, runCli, sqliteTarget, startTestServer, type TestServer } from '@ets/test-support';

/**
 * `ets overrides list|show|approve|reject` against a started server (CONTRACT "Held transactions"):
 * the API key comes from ETS_API_KEY (never argv), the service from --url or ETS_URL; an approval
 * releases the held transaction and prints what `ets verify -` verifies; the service's refusals
 * are printed with their status and code, exit 1. Needs the built CLI (`npm run build`).
 */
const { alice, bob, agent } = businessCast();
const dir = mkdtempSync(path.join(os.tmpdir(), 'ets-overrides-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string): string => {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
};
const bobPem = file('bob.pem', bob.stepUpPrivateKeyPem!);
const alicePem = file('alice.pem', alice.stepUpPrivateKeyPem!);

const POLICY = holdingPolicy('held-cli') as PolicyDocument;

/** A loopback port nothing listens on (one that was free a moment ago). */
const closedPort = (): Promise<number> =>
  new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });

describe('ets overrides', () => {
  let server: TestServer;
  const as = (key: { raw: string }) => ({ ETS_URL: server.url, ETS_API_KEY: key.raw, SVC_DATA_DIR: dir });
  const hold = (amount: number): Promise<string> => holdTransfer(server.url, agent, POLICY.name, amount);

  beforeAll(async () => {
    server = await startTestServer(sqliteTarget, { ...apiKeysEnv(alice, bob, agent), SVC_SANDBOX: 'true' });
    await publishPolicy(server.dataSource, POLICY);
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it('lists the pending ones, shows one, approves it: released, and the printed answer verifies offline', async () => {
    const id = await hold(5000);
    const listed = await runCli(['overrides', 'list', '--status', 'PENDING'], as(bob));
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    expect(listed.stdout).toMatch(/^ID\s+STATUS\s+ACTION\s+CALLER\s+HELD AT\s+UNTIL \/ BY\s+WHY\n/);
    expect(listed.stdout).toMatch(new RegExp(`${id}\\s+PENDING\\s+sandbox:echo\\s+agent-7\\s+\\S+\\s+expires \\S+\\s+Large transfer needs a second look`));

    const shown = await runCli(['overrides', 'show', id], as(bob));
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ businessTransactionId: id, status: 'PENDING', scope: { field: 'value', value: 5000 } });

    const approved = await runCli(['overrides', 'approve', id, '--key', bobPem], as(bob));
    expect(approved.code).toBe(0);
    expect(approved.stderr).toBe(`Approved ${id} as bob: EXECUTED; the answer on stdout carries its signed Trust Record (ets verify -).\n`);
    const answer = JSON.parse(approved.stdout) as { executionStatus: string; trustRecord: { businessTransactionId: string } };
    expect(answer).toMatchObject({ executionStatus: 'EXECUTED', trustRecord: { businessTransactionId: id } });
    const verified = await runCli(['verify', '-', '--keys', `${server.url}/.well-known/jwks.json`], {}, approved.stdout);
    expect(verified.code).toBe(0);

    const again = await runCli(['overrides', 'list', '--status', 'APPROVED', '--json'], as(alice));
    expect((JSON.parse(again.stdout) as { items: { businessTransactionId: string; decidedBy: string }[] }).items).toEqual(expect.arrayContaining([expect.objectContaining({ businessTransactionId: id, decidedBy: 'bob' })]));
    const twice = await runCli(['overrides', 'approve', id, '--key', alicePem], as(alice));
    expect(twice).toMatchObject({ code: 1, stdout: '' });
    expect(twice.stderr).toContain(`ets: ${id} is APPROVED (decided by bob): only a PENDING transaction can be approved.`);
  });

  it('rejects one with a reason; the service refuses the requester and a foreign key file with its status and code', async () => {
    const id = await hold(7000);
    const self = await runCli(['overrides', 'approve', id, '--key', bobPem], as(agent));
    expect(self.code).toBe(1);
    expect(self.stderr).toMatch(/^ets: the service refused POST \/overrides\/\S+\/approve: 403 NON_HUMAN_CALLER_DENIED: .+\n$/);
    const foreign = await runCli(['overrides', 'approve', id, '--key', bobPem], as(alice));
    expect(foreign.code).toBe(1);
    expect(foreign.stderr).toMatch(/the service refused POST \/overrides\/\S+\/approve: 403 APPROVAL_INVALID: /);

    const rejected = await runCli(['overrides', 'reject', id, '--key', alicePem, '--reason', 'Not this payee'], as(alice));
    expect(rejected.code).toBe(0);
    expect(JSON.parse(rejected.stdout)).toMatchObject({ businessTransactionId: id, status: 'REJECTED', reason: 'Not this payee', decidedBy: 'alice' });
    expect(rejected.stderr).toContain(`Rejected ${id} as alice: REJECTED; its signed Refusal Record is at /refusal/${id}.`);
    const none = await runCli(['overrides', 'list', '--status', 'pending'], as(agent));
    expect(none).toMatchObject({ code: 0, stdout: 'No held transactions PENDING.\n' });
  });

  it('takes the key only from ETS_API_KEY, says so, and explains usage and unreachable services', async () => {
    const help = await runCli(['overrides', 'approve', '--help'], {});
    expect(help.stdout).toContain('ETS_API_KEY, never from an argument: arguments show in `ps`');
    const noKey = await runCli(['overrides', 'list'], { ETS_URL: server.url });
    expect(noKey).toMatchObject({ code: 2 });
    expect(noKey.stderr).toContain('ETS_API_KEY is not set');
    const keyArg = await runCli(['overrides', 'list', '--api-key', bob.raw], as(bob));
    expect(keyArg.code).toBe(2);
    const noReason = await runCli(['overrides', 'reject', 'x', '--key', alicePem], as(alice));
    expect(noReason).toMatchObject({ code: 2 });
    expect(noReason.stderr).toContain('--reason TEXT is required');
    const badStatus = await runCli(['overrides', 'list', '--status', 'MAYBE'], as(bob));
    expect(badStatus.stderr).toContain('--status must be one of PENDING, APPROVED, REJECTED, EXPIRED.');
    const missing = await runCli(['overrides', 'show', '00000000-0000-4000-8000-000000000000'], as(bob));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/the service refused GET \/overrides\/\S+: 404: Held transaction not found\./);
    const port = await closedPort();
    const away = await runCli(['overrides', 'list', '--url', `http://127.0.0.1:${port}`], as(bob));
    expect(away.code).toBe(1);
    expect(away.stderr).toContain(`no answer from the service at http://127.0.0.1:${port} (ECONNREFUSED)`);
  });
});
