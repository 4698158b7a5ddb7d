import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import dgram from 'node:dgram';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { parse as parseDotenv } from 'dotenv';
import os from 'node:os';
import path from 'node:path';
import { apiKeysEnv, makeKey, REPO_ROOT, runCli, spawnServer, type SpawnedServer } from '@ets/test-support';

// Needs the built CLI (`npm run build`).
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ets-demo-data-'));
const demoDir = path.join(mkdtempSync(path.join(os.tmpdir(), 'ets-demo-')), 'demo');
afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(path.dirname(demoDir), { recursive: true, force: true });
});
const env = { SVC_DATA_DIR: dataDir };

/** A port free now (TCP, or UDP for the resolver), for `--setup` to be given. */
const freePort = (udp = false): Promise<number> =>
  new Promise((resolve) => {
    if (udp) {
      const socket = dgram.createSocket('udp4');
      socket.bind(0, '127.0.0.1', () => {
        const { port } = socket.address();
        socket.close(() => resolve(port));
      });
      return;
    }
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
const ports = { dns: 0, receiver: 0, source: 0 };

const STEP_TITLES = [
  '0. The server is up and knows the demo callers',
  '1. Alice proposes a new version of the demo policy',
  '2. Bob approves it with his step-up signature (Alice may not approve her own change)',
  '3. The new version is in effect',
  '4. The agent executes an approved sandbox action',
  '5. The agent is refused; the signed Refusal Record verifies publicly',
  '6. Alice registers an external connector for demopay:transfer; Bob approves it',
  '7. The agent executes demopay:transfer: a signed release to the example receiver over HTTPS',
  '8. Alice registers a business signal source and a policy that relies on it; Bob approves both',
  '9. The agent pays an invoice whose amount the source vouches for; another amount is refused',
  '10. An agent calls a tool through the MCP gateway: approved, refused, and held until Bob approves it',
  '11. The service verifies the Execution Trust Record',
  '12. The service issues a signed Receipt',
  '13. Anyone verifies the records offline, with only the public keys',
];

describe('ets demo', () => {
  let server: SpawnedServer | undefined;
  afterAll(async () => {
    await server?.stop();
  });

  it('--setup DIR (server stopped) adds the three demo callers to the key file and writes the step-up keys and demo.env, with the ports chosen', async () => {
    Object.assign(ports, { dns: await freePort(true), receiver: await freePort(), source: await freePort() });
    const r = await runCli(['demo', '--setup', demoDir, '--dns-port', String(ports.dns), '--receiver-port', String(ports.receiver), '--source-port', String(ports.source)], env);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(r.stdout).toContain(`npx ets demo --from ${demoDir}`);
    expect(r.stdout).toContain(`env $(cat ${path.join(demoDir, 'server.env')}) npm start`);
    const serverEnv = parseDotenv(readFileSync(path.join(demoDir, 'server.env'), 'utf8'));
    expect(serverEnv).toEqual({
      SVC_SANDBOX: 'true',
      SVC_DNS_SERVERS: `127.0.0.1:${ports.dns}`,
      SVC_EGRESS_ALLOW_CIDRS: '127.0.0.0/8',
      NODE_EXTRA_CA_CERTS: path.join(demoDir, 'ca.pem'),
      SVC_MCP_STDIO_SERVERS: path.join(demoDir, 'mcp-servers.json'),
    });
    // The demo's upstream MCP server: this install's, run by this Node.
    expect(JSON.parse(readFileSync(path.join(demoDir, 'mcp-servers.json'), 'utf8'))).toEqual({
      'demo-bank': { command: process.execPath, args: [path.join(REPO_ROOT, 'apps/server/dist/cli/demo-mcp-upstream.js')] },
    });
    expect(readFileSync(path.join(demoDir, 'ca.pem'), 'utf8')).toMatch(/^-----BEGIN CERTIFICATE-----/);
    for (const f of ['receiver.ets-demo.test-key.pem', 'erp.ets-demo.test-key.pem', 'source-signing-key.pem']) expect(statSync(path.join(demoDir, f)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(path.join(demoDir, 'facts.json'), 'utf8'))).toEqual({ 'invoice.amount': { 'demo-inv-1': 420 } });

    const keys = (JSON.parse(readFileSync(path.join(dataDir, 'api-keys.json'), 'utf8')) as { keys: Record<string, unknown>[] }).keys;
    expect(keys.map((k) => [k.callerId, k.credentialHolderType, Boolean(k.stepUpPublicKey)])).toEqual([
      ['demo-alice', 'USER', true],
      ['demo-bob', 'USER', true],
      ['demo-agent', 'SERVICE', false],
    ]);
    const envText = readFileSync(path.join(demoDir, 'demo.env'), 'utf8');
    for (const name of ['ETS_DEMO_ALICE_KEY', 'ETS_DEMO_BOB_KEY', 'ETS_DEMO_AGENT_KEY']) expect(envText).toMatch(new RegExp(`^${name}=pk_local_[A-Za-z0-9_-]{43}$`, 'm'));
    expect(envText).toMatch(/^ETS_DEMO_ALICE_STEP_UP=alice-step-up\.pem$/m);
    expect(envText).toContain(`\nETS_DEMO_RECEIVER_PORT=${ports.receiver}\n`);
    expect(envText).toContain(`\nETS_DEMO_SOURCE_PORT=${ports.source}\n`);
    for (const f of ['demo.env', 'alice-step-up.pem', 'bob-step-up.pem']) expect(statSync(path.join(demoDir, f)).mode & 0o777).toBe(0o600);
    expect(readFileSync(path.join(demoDir, 'bob-step-up.pem'), 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    // Only hashes in the key file.
    const raw = /ETS_DEMO_AGENT_KEY=(\S+)/.exec(envText)![1]!;
    expect(readFileSync(path.join(dataDir, 'api-keys.json'), 'utf8')).not.toContain(raw);
  });

  it('--setup refuses a folder that is already set up, and SVC_API_KEYS', async () => {
    const again = await runCli(['demo', '--setup', demoDir], env);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/demo\.env exists/);
    const other = path.join(path.dirname(demoDir), 'other');
    const inline = await runCli(['demo', '--setup', other], { ...env, ...apiKeysEnv(makeKey('x')) });
    expect(inline.code).toBe(2);
    expect(inline.stderr).toMatch(/SVC_API_KEYS is set/);
    expect(existsSync(path.join(other, 'demo.env'))).toBe(false);
  });

  describe('against a running server in sandbox mode', () => {
    beforeAll(async () => {
      // As the README starts it: with the settings `--setup` wrote (NODE_EXTRA_CA_CERTS read by Node at start).
      server = await spawnServer({ ...env, ...parseDotenv(readFileSync(path.join(demoDir, 'server.env'), 'utf8')) });
    });

    it('--from DIR walks every step and exits 0; a second run proposes the next version', async () => {
      for (const run of [1, 2]) {
        const r = await runCli(['demo', '--from', demoDir, '--url', server!.url], env);
        expect({ run, code: r.code, stderr: r.stderr }).toEqual({ run, code: 0, stderr: '' });
        const lines = r.stdout.split('\n');
        for (const title of STEP_TITLES) expect(lines).toContain(title);
        expect(r.stdout).toMatch(/→ POST \/policies\/demo-payments\/[^/]+\/pending-changes \{"proposedContent":/);
        expect(r.stdout).toContain('← 403 {"error"');
        expect(r.stdout).toMatch(/SELF_APPROVAL_DENIED/);
        expect(r.stdout).toMatch(/→ POST \/execute \{"businessTransactionId":/);
        expect(r.stdout).toMatch(/✓ refused: Execution rejected: Country is sanctioned/);
        // The ports chosen at setup.
        expect(r.stdout).toContain(`✓ demopay:transfer is registered`);
        expect(r.stdout).toMatch(new RegExp(`✓ demopay:transfer is registered \\(registrationId [0-9a-f-]{36}\\) to https://receiver\\.ets-demo\\.test:${ports.receiver}/release`));
        expect(r.stdout).toMatch(new RegExp(`the receiver verified: kid ed25519-\\S+, aud https://receiver\\.ets-demo\\.test:${ports.receiver}/release, expires 5s after issue`));
        expect(r.stdout).toContain(`the demo's resolver 127.0.0.1:${ports.dns} answers receiver.ets-demo.test`);
        // The sourced signal: the source's answer decides, is bound to the amount paid, and verifies offline.
        expect(r.stdout).toContain(`✓ the source demo-erp is registered at https://erp.ets-demo.test:${ports.source}/facts with its Ed25519 public key`);
        expect(r.stdout).toMatch(/✓ EXECUTED; the record holds the Trusted Signal invoiceAmount = 420 from demo-erp, its proof verified/);
        expect(r.stdout).toMatch(/✓ 4200 for the same invoice is refused: bound-signal-mismatch/);
        expect(r.stdout).toMatch(/Trust Record with a sourced signal: VALID \(sourceProofs: 1 signed by their source\)/);
        expect(r.stdout).toMatch(/✓ EXECUTED by the receiver over HTTPS; result \{"received":\{"amount":420,"currency":"EUR","reference":"demo-invoice-3"\}/);
        // The MCP gateway: the SDK's client as the agent; approved, refused, held until Bob approves with `ets overrides approve`'s code.
        expect(r.stdout).toContain('✓ tools/list offers the agent demo-bank__transfer');
        expect(r.stdout).toMatch(/→ tools\/call demo-bank__transfer \{"amount":250,"payee":"Acme Supplies"\}  \(as demo-agent\)\n\s+← transferred 250 EUR to Acme Supplies  _meta \{"ets\/trustRecord"/);
        expect(r.stdout).toMatch(/← isError: Execution rejected: Transfers above 10000 are not for agents/);
        expect(r.stdout).toMatch(/\(the agent's call waits; its progress says: held for a human approval, business transaction [0-9a-f-]{36}\)/);
        expect(r.stdout).toMatch(/✓ Bob sees it held \(what `ets overrides list` prints\): mcp-demo-bank:transfer, \{"amount":5000,"payee":"Acme Supplies"\}, "Transfers above 1000 need a human"/);
        expect(r.stdout).toMatch(/→ ets overrides approve [0-9a-f-]{36} --key bob-step-up\.pem[^\n]*\n\s+← EXECUTED\n\s+← transferred 5000 EUR to Acme Supplies/);
        expect(r.stdout).toContain("✓ approved by Bob: released once, and the agent's waiting call returned the upstream's result");
        if (run === 2) expect(r.stdout.match(/✓ the registration of an earlier run is revoked/g)).toHaveLength(3);
        expect(server!.output()).toMatch(/"setting":"SVC_EGRESS_ALLOW_CIDRS".*"msg":"outbound calls may reach these non-public address ranges/);
        expect(r.stdout).toMatch(/✓ VERIFIED/);
        expect(r.stdout).toMatch(/Execution Trust Record: VALID/);
        expect(r.stdout).toMatch(/executionChain: ok/);
        expect(r.stdout).not.toContain('✗');
        expect(r.stdout.trimEnd().endsWith('Every step went as expected.')).toBe(true);
        if (run === 2) expect(r.stdout).toMatch(/to replace 1\.0\.\d+/);
      }
    });

    it('a step that does not go as expected prints what was expected and what came back, and exits 1', async () => {
      const r = await runCli(['demo', '--from', demoDir, '--url', server!.url, '--agent-key', 'pk_local_not-a-key'], env);
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(/✗ expected: 200 for the agent key\n\s+got: +401 .*restart the server/);
      expect(r.stderr).toMatch(/demo failed at step 0/);
      expect(r.stdout).not.toContain('1. Alice proposes');
    });
  });

  it('usage errors exit 2: missing credentials, an unreadable demo folder', async () => {
    const none = await runCli(['demo', '--url', 'http://127.0.0.1:9'], env);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/missing --alice-key, --alice-step-up, --bob-key, --bob-step-up, --agent-key/);
    const noDir = await runCli(['demo', '--from', path.join(demoDir, 'nope')], env);
    expect(noDir.code).toBe(2);
    expect(noDir.stderr).toMatch(/cannot read .*demo\.env: ENOENT/);
  });

  it('a server that does not answer fails step 0 with exit 1', async () => {
    await server?.stop();
    const r = await runCli(['demo', '--from', demoDir, '--url', server!.url], env);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/got: +no answer \(ECONNREFUSED\): is the server running\?/);
  });
});
