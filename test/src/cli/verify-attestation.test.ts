import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { apiKeysEnv, bearer, jwksOf, makeKey, publishPolicy, runCli, sqliteTarget, startTestServer, type TestServer } from '@ets/test-support';

// Needs the built CLI. An attestation (and an override resolution) served by profile A verify
// offline with `ets verify` and a saved JWKS; any change to them does not.
const agent = makeKey('agent-7', { holder: 'SERVICE' });
const ann = makeKey('ann', { holder: 'USER' });
type Json = Record<string, unknown>;

describe('ets verify on profile A records', () => {
  let server: TestServer;
  const out = mkdtempSync(path.join(os.tmpdir(), 'ets-verify-att-'));
  const save = (name: string, value: unknown) => {
    const file = path.join(out, name);
    writeFileSync(file, JSON.stringify(value, null, 2));
    return file;
  };
  let jwksFile: string;
  let executeResponse: Json;
  let overrideResponse: Json;

  beforeAll(async () => {
    server = await startTestServer(sqliteTarget, { ...apiKeysEnv(agent, ann), SVC_PROFILE: 'attestation' });
    await publishPolicy(server.dataSource);
    const post = (p: string, body: object) => request(server.url).post(p).set('authorization', bearer(agent)).send(body);
    executeResponse = (await post('/execute', { executionId: 'cli-1', policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: 120, country: 'FR' } })).body;
    const pending = (await post('/execute', { executionId: 'cli-2', policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: 20000 } })).body.attestation as Json;
    overrideResponse = (await request(server.url).post('/override').set('authorization', bearer(ann)).send({ executionId: pending.executionId, approved: true, approvedBy: 'ann', approverRole: 'risk', reason: 'ok' })).body;
    jwksFile = save('jwks.json', await jwksOf(server.url));
  });
  afterAll(async () => {
    await server.destroy();
    rmSync(out, { recursive: true, force: true });
  });

  it('verifies the answer of POST /execute (its attestation) and of POST /override (its resolution)', async () => {
    const att = await runCli(['verify', save('execute.json', executeResponse), '--keys', jwksFile], {});
    expect({ code: att.code, stderr: att.stderr }).toEqual({ code: 0, stderr: '' });
    expect(att.stdout).toMatch(/^kind: attestation \(the `attestation` of the response\)/);
    expect(att.stdout).toMatch(/signature\s+ok \(Ed25519, key ed25519-/);
    expect(att.stdout).toMatch(/identity\s+ok/);
    expect(att.stdout).toMatch(/manifestSignature\s+ok/);
    expect(att.stdout).toContain('VALID: every check passed.');
    const res = await runCli(['verify', save('override.json', overrideResponse), '--keys', jwksFile], {});
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^kind: override-resolution \(the `resolution` of the response\)/);
  });

  it('fails (exit 1) when any field of the attestation changed', async () => {
    const a = executeResponse.attestation as Json;
    for (const [field, value] of Object.entries({ policyVersion: '2.0.0', runtimeHash: '0'.repeat(64), decision: { ...(a.decision as Json), action: 'reject' }, issuedAt: '2020-01-01T00:00:00.000Z' })) {
      const res = await runCli(['verify', save(`tampered-${field}.json`, { ...a, [field]: value }), '--keys', jwksFile], {});
      expect({ field, code: res.code, failed: /NOT VALID/.test(res.stdout) }).toEqual({ field, code: 1, failed: true });
      expect(res.stderr).toMatch(/does NOT verify \(failed: signature/);
    }
  });

  describe('the answer of attestation-simple (it names no key: every Ed25519 key of the JWKS is tried)', () => {
    let simple: TestServer;
    let answer: Json;
    let simpleJwksFile: string;

    beforeAll(async () => {
      // Hybrid: the JWKS holds an ML-DSA-65 key beside the Ed25519 one, and the Ed25519 one is not the first.
      simple = await startTestServer(sqliteTarget, { ...apiKeysEnv(agent), SVC_PROFILE: 'attestation-simple', SVC_SIGNING_MODE: 'hybrid' });
      await publishPolicy(simple.dataSource);
      answer = (await request(simple.url).post('/execute').send({ policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: 20000 } })).body;
      expect(answer).toMatchObject({ status: 'ok', execution_state: 'pending_override', requires_override: true });
      const jwks = await jwksOf(simple.url);
      simpleJwksFile = save('simple-jwks.json', { keys: [...jwks.keys.filter((k) => k.kty !== 'OKP'), ...jwks.keys.filter((k) => k.kty === 'OKP')] });
    });
    afterAll(async () => {
      await simple?.destroy();
    });

    it('verifies it as served, and as the statement POST /verify takes', async () => {
      const res = await runCli(['verify', save('simple.json', answer), '--keys', simpleJwksFile], {});
      expect({ code: res.code, stderr: res.stderr }).toEqual({ code: 0, stderr: '' });
      expect(res.stdout).toMatch(/^kind: attestation-simple\n/);
      expect(res.stdout).toMatch(/signature\s+ok \(Ed25519, key ed25519-/);
      expect(res.stdout).toMatch(/fields\s+ok/);
      expect(res.stdout).toMatch(/consistency\s+ok/);
      expect(res.stdout).toContain('VALID: every check passed.');
      const { status: _s, requires_override: _r, ...statement } = answer;
      expect((await runCli(['verify', save('simple-statement.json', statement), '--keys', simpleJwksFile], {})).code).toBe(0);
    });

    it('fails (exit 1) when a signed field changed, when an unsigned one contradicts it, and with another key set', async () => {
      const decision = answer.decision as Json;
      for (const [field, value, failed] of [
        ['execution_state', 'completed', 'signature'],
        ['decision', { ...decision, reason: 'other' }, 'signature'],
        ['runtimeHash', 'f'.repeat(64), 'signature'],
        ['executionId', '0'.repeat(64), 'signature'],
        ['requires_override', false, 'consistency'],
      ] as const) {
        const res = await runCli(['verify', save(`simple-tampered-${field}.json`, { ...answer, [field]: value }), '--keys', simpleJwksFile], {});
        expect({ field, code: res.code, kind: /^kind: attestation-simple/.test(res.stdout), failed: /NOT VALID/.test(res.stdout) }).toEqual({ field, code: 1, kind: true, failed: true });
        expect(res.stderr).toContain(`does NOT verify (failed: ${failed}`);
      }
      // The profile-A server's keys are not this one's.
      const foreign = await runCli(['verify', save('simple-foreign.json', answer), '--keys', jwksFile], {});
      expect(foreign.code).toBe(1);
      expect(foreign.stdout).toMatch(/signature\s+FAILED: signature: does not verify .* with any of the 1 Ed25519 keys of the key set/);
    });
  });
});
