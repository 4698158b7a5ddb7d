import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import type { PolicyDocument } from '@ets/domain';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  CLI,
  ed25519Key,
  businessCast,
  governed,
  publishPolicy,
  REPO_ROOT,
  runCli,
  startTestNetwork,
  STORAGE_TARGETS,
  startTestServer,
  tempDirs,
  type TestNetwork,
  type TestServer,
} from '@ets/test-support';

// Needs the built CLI (`npm run build`). `ets source serve` runs as its own process and is the
// business signal source of a real flow: asked over HTTPS through the test DNS server and CA, its
// signed answers become Trusted Signals that `ets verify` checks offline.

const { alice, bob, agent } = businessCast();
const HOST = 'erp.ref.test';
const tmp = tempDirs('ets-ref-source-');

interface RunningSource {
  child: ChildProcess;
  port: number;
  keyId: string;
  publicKeyPem: string;
  stop(): Promise<void>;
}

/** Starts `ets source serve` and reads its address and key from what it prints. */
function serveSource(args: string[]): Promise<RunningSource> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'source', 'serve', ...args], { env: { PATH: process.env.PATH }, cwd: REPO_ROOT });
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the source did not start in time:\n${out}`));
    }, 20_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const listening = /listening on https:\/\/[^:]+:(\d+)\//.exec(out);
      const key = /keyId: (\S+)\npublicKey[^\n]*\n(-----BEGIN PUBLIC KEY-----[\s\S]+?-----END PUBLIC KEY-----\n)/.exec(out);
      if (listening && key) {
        clearTimeout(timer);
        resolve({
          child,
          port: Number(listening[1]),
          keyId: key[1]!,
          publicKeyPem: key[2]!,
          stop: () =>
            new Promise((res) => {
              if (child.exitCode !== null) return res();
              child.once('exit', () => res());
              child.kill('SIGTERM');
            }),
        });
      }
    });
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the source exited with ${code}:\n${out}`));
    });
  });
}

describe('ets source serve: the reference business signal source', () => {
  let network: TestNetwork;
  let source: RunningSource;
  let dir: string;
  let factsFile: string;
  const facts = (amount: number) => writeFileSync(factsFile, JSON.stringify({ 'invoice.amount': { 'inv-42': amount, 'inv-43': { value: 99, validForSeconds: 1 } } }));

  beforeAll(async () => {
    network = await startTestNetwork();
    dir = tmp();
    factsFile = path.join(dir, 'facts.json');
    facts(120);
    const signing = ed25519Key();
    const tls = await network.ca.issue([HOST]);
    const files = { key: path.join(dir, 'source.pem'), cert: path.join(dir, 'cert.pem'), certKey: path.join(dir, 'cert-key.pem') };
    writeFileSync(files.key, signing.privateKeyPem);
    writeFileSync(files.cert, tls.cert);
    writeFileSync(files.certKey, tls.key);
    const address = network.address();
    source = await serveSource(['--facts', factsFile, '--key', files.key, '--cert', files.cert, '--cert-key', files.certKey, '--host', address, '--port', '0']);
    expect(source.keyId).toBe(signing.keyId);
    network.dns.set(HOST, { A: [address] });
  });
  afterAll(async () => {
    await source?.stop();
    await network?.close();
  });

  it('refuses to start without what it needs, naming it', async () => {
    const noFacts = await runCli(['source', 'serve', '--cert', 'x', '--cert-key', 'y'], {});
    expect(noFacts.code).toBe(2);
    expect(noFacts.stderr).toContain('--facts is required');
    const noTls = await runCli(['source', 'serve', '--facts', factsFile], {});
    expect(noTls.code).toBe(2);
    expect(noTls.stderr).toContain('--cert and --cert-key are required');
    expect((await runCli(['source', 'serve', '--help'], {})).stdout).toContain('--facts FILE');
  });

  describe.each(STORAGE_TARGETS)('as the source of a real flow on $name', (factory) => {
    let server: TestServer;
    let jwksFile: string;

    beforeAll(async () => {
      server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, agent), ...network.env, SVC_SANDBOX: 'true' });
      await governed(server.url, '/business-signal-sources', alice, bob, { kind: 'register', name: 'erp', endpoint: `https://${HOST}:${source.port}/facts`, publicKey: source.publicKeyPem });
      const policy: PolicyDocument = {
        name: 'ref-invoices',
        policyVersion: '1.0.0',
        signalsSchema: { invoiceAmount: { type: 'number' } },
        signalSources: { invoiceAmount: { source: 'erp', fact: 'invoice.amount', subject: 'intent.parameters.invoiceId' } },
        rules: [{ id: 'ok', when: 'signals.invoiceAmount <= 5000', action: 'approve', reason: 'Within limits' }],
        default: { action: 'reject', reason: 'Invoice too large' },
      };
      await publishPolicy(server.dataSource, policy);
      jwksFile = path.join(dir, `jwks-${factory.name}.json`);
      writeFileSync(jwksFile, JSON.stringify((await request(server.url).get('/.well-known/jwks.json')).body));
    });
    afterAll(async () => {
      await server?.destroy();
    });

    const execute = async (invoiceId: string, pauseMs = 0) => {
      const tx = businessTransaction({
        intent: { action: 'sandbox:echo', parameters: { invoiceId, ...(pauseMs ? { sandboxPauseBeforeReleaseMs: pauseMs } : {}) } },
        policy: { name: 'ref-invoices', version: '1.0.0' },
        signals: {},
      });
      return Object.assign(await request(server.url).post('/execute').set('authorization', bearer(agent)).send(tx), { id: tx.businessTransactionId as string });
    };

    it('answers from its facts file and signs: a Trusted Signal that ets verify checks offline, and a tampered one fails', async () => {
      facts(120);
      const res = await execute('inv-42');
      expect(res.status).toBe(200);
      const record = res.body.trustRecord;
      expect(record.assessment.businessValidation.sourcedSignals).toEqual([
        expect.objectContaining({ source: 'erp', fact: 'invoice.amount', subject: 'inv-42', value: 120, sourceKeyId: source.keyId, sourceProofVerified: true }),
      ]);
      const file = path.join(dir, `record-${factory.name}.json`);
      writeFileSync(file, JSON.stringify(record));
      const ok = await runCli(['verify', file, '--keys', jwksFile], {});
      expect(ok.code).toBe(0);
      expect(ok.stdout).toMatch(/sourceProofs\s+ok \(1 signed by their source\)/);

      // A changed value breaks the source's proof (and the record's signature): each check says so.
      const tampered = structuredClone(record);
      tampered.assessment.businessValidation.sourcedSignals[0].value = 12;
      writeFileSync(file, JSON.stringify(tampered));
      const bad = await runCli(['verify', file, '--keys', jwksFile], {});
      expect(bad.code).toBe(1);
      expect(bad.stdout).toMatch(/sourceProofs\s+FAILED: .*sourcedSignals\[0\] \(invoiceAmount\): the source's proof does not verify/);
      expect(bad.stdout).toMatch(/signature\s+FAILED/);
    });

    it('decides on its value: a changed facts file is asked again at release, and nothing is released', async () => {
      facts(120);
      const pending = execute('inv-42', 1500);
      await new Promise((r) => setTimeout(r, 500));
      facts(9000);
      const res = await pending;
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ code: 'AUTHORIZATION_NO_LONGER_VALID', executionStatus: 'NOT_EXECUTED' });
      expect((await execute('inv-42')).status).toBe(403); // 9000 now: refused by the policy
      facts(120);
    });

    it('a validity from the facts file: a fact valid 1 second has passed at release', async () => {
      const res = await execute('inv-43', 1500);
      expect(res.status).toBe(409);
      expect(res.body.error).toContain('held only until');
    });

    it('an unknown subject is a 404 of the source: SOURCE_UNAVAILABLE', async () => {
      const res = await execute('inv-404');
      expect(res.status).toBe(403);
      const refusal = (await request(server.url).get(`/refusal/${res.id}`).set('authorization', bearer(alice))).body;
      expect(refusal).toMatchObject({ matchedRuleId: 'SOURCE_UNAVAILABLE', reason: expect.stringContaining('answered 404') });
    });
  });
});
