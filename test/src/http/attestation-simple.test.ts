import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import request from 'supertest';
import { parse as parseYaml } from 'yaml';
import { buildOpenApiDocument } from '@ets/adapters-http';
import { verifyOffline } from '@ets/adapters-crypto';
import {
  apiKeysEnv,
  attestationTableCounts,
  bearer,
  contentHash,
  expectRoutesDocumented,
  jwksOf,
  makeKey,
  publishPolicy,
  settle,
  STORAGE_TARGETS,
  startTestServer,
  STRICT_POLICY,
  type TestServer,
} from '@ets/test-support';

const SIMPLE_KEY = 'svc-simple-key-0123456789';
const operator = makeKey('operator', { holder: 'USER' });
type Json = Record<string, unknown>;
const execBody = (signals: Json) => ({ policyId: 'attest-strict', policyVersion: '1.0.0', signals });

describe.each(STORAGE_TARGETS)('profile A, simple variant (SVC_PROFILE=attestation-simple) on $name', (factory) => {
  describe('with SVC_API_KEY set', () => {
    let server: TestServer;
    let jwks: { keys: Json[] };
    const post = (path: string, body: unknown, key: string = SIMPLE_KEY) => request(server.url).post(path).set('authorization', bearer(key)).send(body as object);
    const get = (path: string) => request(server.url).get(path).set('authorization', bearer(SIMPLE_KEY));

    beforeAll(async () => {
      server = await startTestServer(factory, { ...apiKeysEnv(operator), SVC_PROFILE: 'attestation-simple', SVC_API_KEY: SIMPLE_KEY, RATE_LIMIT_AUTH_FAILURE_PER_MINUTE: '1000' });
      await publishPolicy(server.dataSource, STRICT_POLICY);
      jwks = await jwksOf(server.url);
    });
    afterAll(async () => {
      await server.destroy();
    });

    it('describes exactly the mounted routes in the profile\'s OpenAPI document', async () => {
      expectRoutesDocumented(server.httpApp, 'attestation-simple', expect);
      const yaml = (await request(server.url).get('/openapi.yaml')).text;
      expect(yaml).toContain('operationId: executeAttestationSimple');
      // The profile's own document: its routes and shapes, nothing of another profile.
      expect(parseYaml(yaml)).toEqual(JSON.parse(JSON.stringify(buildOpenApiDocument('attestation-simple'))));
      expect(yaml).toContain('simpleApiKey');
    });

    it('needs Bearer SVC_API_KEY on every profile-A route: anything else is the same 401; other keys do not open them', async () => {
      for (const [method, path] of [['post', '/execute'], ['post', '/verify'], ['post', '/evaluate'], ['post', '/simulate'], ['post', '/confirm-execution'], ['get', '/runtime/manifest'], ['get', '/audit/stats']] as const) {
        for (const auth of [undefined, 'Bearer wrong', bearer(operator), `Bearer ${SIMPLE_KEY}x`, `Basic ${SIMPLE_KEY}`]) {
          const req = request(server.url)[method](path);
          const res = await (auth ? req.set('authorization', auth) : req).send({});
          expect({ path, auth, status: res.status, body: res.body }).toEqual({ path, auth, status: 401, body: { error: 'authentication required' } });
        }
      }
      // A human decides an override with their own USER key of the key directory; the simple key,
      // whose holder is the requester, does not open /override.
      expect((await request(server.url).post('/override').set('authorization', bearer(SIMPLE_KEY)).send({})).status).toBe(401);
      expect((await request(server.url).post('/override').set('authorization', bearer(operator)).send({})).status).toBe(400);
      // The shared routes keep the key directory; the simple key does not open them.
      expect((await request(server.url).get('/callers/me').set('authorization', bearer(operator))).status).toBe(200);
      expect((await request(server.url).get('/callers/me').set('authorization', bearer(SIMPLE_KEY))).status).toBe(401);
      expect((await request(server.url).get('/health')).body).toMatchObject({ status: 'ok', verification: 'ok', capabilities: expect.arrayContaining(['execute:attestation-simple']) });
    });

    it('POST /execute answers {status:"ok", executionId, decision, execution_state, requires_override, signature}; POST /verify checks it', async () => {
      const res = await post('/execute', execBody({ amount: 120, country: 'FR' }));
      expect(res.status).toBe(200);
      const runtimeHash = (await request(server.url).get('/health')).body.runtimeHash as string;
      expect(res.body).toEqual({
        status: 'ok',
        executionId: expect.stringMatching(/^[0-9a-f]{64}$/),
        decision: { action: 'approve', requires_override: false, reason: 'Within limits', matchedRuleId: 'ok' },
        execution_state: 'completed',
        runtimeHash,
        requires_override: false,
        signature: expect.any(String),
      });
      const verdict = await post('/verify', res.body);
      expect(verdict.body).toEqual({ valid: true, checks: { signature_verified: true, runtime_verified: true, schema_compatible: true }, errors: [] });
      const { status: _s, requires_override: _r, ...statement } = res.body as Json;
      expect((await post('/verify', statement)).body.valid).toBe(true);
      expect((await post('/verify', { ...statement, execution_state: 'blocked' })).body.checks).toEqual({ signature_verified: false, runtime_verified: true, schema_compatible: true });
      expect((await post('/verify', { ...statement, runtimeHash: 'f'.repeat(64) })).body.checks).toEqual({ signature_verified: false, runtime_verified: false, schema_compatible: true });
      expect((await post('/verify', { ...statement, decision: { action: 'approve' } })).body.checks).toEqual({ signature_verified: false, runtime_verified: true, schema_compatible: false });
      expect((await post('/verify', { ...statement, decision: { ...(statement.decision as Json), reason: 'other' } })).body.valid).toBe(false);
      for (const missing of ['executionId', 'decision', 'execution_state', 'runtimeHash', 'signature']) {
        const { [missing]: _m, ...rest } = statement;
        const r = await post('/verify', rest);
        expect({ missing, status: r.status, body: r.body }).toEqual({ missing, status: 400, body: { error: `${missing} is required.` } });
      }

      // The full attestation is stored as well, and verifies offline.
      const detail = (await get(`/audit/decisions/${res.body.executionId}`)).body as Json;
      expect(detail).toMatchObject({ variant: 'attestation-simple', callerId: 'svc-api-key', execution_state: 'completed' });
      const a = detail.attestation as Json;
      expect(a.executionId).toBe(res.body.executionId);
      expect(a.executionId).toBe(contentHash({ requestId: a.requestId, policyId: 'attest-strict', policyVersion: '1.0.0', signalsHash: contentHash({ amount: 120, country: 'FR' }) }));
      expect(verifyOffline(a, jwks).valid).toBe(true);
    });

    it.each([
      [{ amount: 20000 }, 'pending_override', true],
      [{ amount: 1, country: 'KP' }, 'blocked', false],
    ])('POST /execute with %p answers execution_state %s', async (signals, state, requiresOverride) => {
      const res = await post('/execute', execBody(signals));
      expect(res.body).toMatchObject({ status: 'ok', execution_state: state, requires_override: requiresOverride });
      expect((await post('/verify', res.body)).body.valid).toBe(true);
    });

    it('POST /execute: 400 (executionId is the service\'s), 413, 422 also for no matching rule and an invariant violation', async () => {
      const bad = await post('/execute', { executionId: 'mine', ...execBody({ amount: 1 }) });
      expect({ status: bad.status, body: bad.body }).toEqual({ status: 400, body: { error: 'executionId is assigned by the service in this profile; send only policyId, policyVersion and signals.' } });
      expect((await post('/execute', { policyId: 'attest-strict', signals: {} })).body).toEqual({ error: 'policyVersion is required and must be a non-empty string.' });
      expect((await post('/execute', execBody({ country: 'x'.repeat(1_100_000) }))).status).toBe(413);
      expect((await post('/execute', { ...execBody({ amount: 1 }), policyVersion: '2' })).status).toBe(422);
      expect((await post('/execute', execBody({ amount: 'x' }))).status).toBe(422);
      const noMatch = await post('/execute', execBody({ amount: 0 }));
      expect({ status: noMatch.status, body: noMatch.body }).toEqual({ status: 422, body: { error: 'No matching rule: no rule of the policy matched and it has no default.', code: 'NO_MATCHING_RULE' } });
      const invariant = await post('/execute', execBody({ country: 'FR' }));
      expect(invariant.status).toBe(422);
      expect(invariant.body).toEqual({ error: expect.stringMatching(/^Invariant violation: Rule 'large' could not be evaluated/), code: 'INVARIANT_VIOLATION' });
      expect(((await get('/audit/security')).body as Json[]).map((e) => e.kind)).toContain('invariant_violation');
      // The dry runs say the same without a 422.
      expect((await post('/simulate', execBody({ amount: 0 }))).body).toMatchObject({ wouldSign: false, decision: { ruleMatched: null } });
      expect((await post('/evaluate', execBody({ amount: 0 }))).body).toMatchObject({ wouldDecide: 'reject', ruleMatched: null, reason: 'No matching rule' });
    });

    it('POST /simulate and POST /evaluate write nothing: no decision, replay guard, API call, audit event or log leaf; 400 and 422', async () => {
      await settle();
      const before = await attestationTableCounts(server.dataSource);
      const sim = await post('/simulate', execBody({ amount: 20000 }));
      expect(sim.status).toBe(200);
      expect(sim.body).toMatchObject({
        simulation: true,
        decision: { action: 'approve', ruleMatched: 'large', requires_override: true },
        signalsValidated: true,
        policyLoaded: true,
        wouldSign: true,
        attestationPreview: { policyId: 'attest-strict', execution_state: 'pending_override', signalsHash: contentHash({ amount: 20000 }) },
      });
      expect((await post('/evaluate', execBody({ amount: 5 }))).body).toEqual({ wouldDecide: 'approve', requires_override: false, ruleMatched: 'ok', reason: 'Within limits', signalsValidated: true });
      for (const path of ['/simulate', '/evaluate']) {
        expect((await post(path, { policyId: 'attest-strict', signals: {} })).status).toBe(400);
        expect((await post(path, { ...execBody({ amount: 1 }), policyVersion: '9' })).status).toBe(422);
      }
      await settle();
      expect(await attestationTableCounts(server.dataSource)).toEqual(before);
    });
  });

  describe('without SVC_API_KEY', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer(factory, { ...apiKeysEnv(operator), SVC_PROFILE: 'attestation-simple', RATE_LIMIT_EXECUTE_PER_MINUTE: '4' });
      await publishPolicy(server.dataSource, STRICT_POLICY);
    });
    afterAll(async () => {
      await server.destroy();
    });

    it('authenticates no profile-A route (spec 5.5), while the shared routes keep their keys', async () => {
      const res = await request(server.url).post('/execute').send(execBody({ amount: 5 }));
      expect(res.status).toBe(200);
      expect((await request(server.url).post('/verify').send(res.body)).body.valid).toBe(true);
      expect((await request(server.url).get(`/audit/decisions/${res.body.executionId}`)).body).toMatchObject({ callerId: 'anonymous', variant: 'attestation-simple' });
      expect((await request(server.url).get('/audit/stats')).status).toBe(200);
      expect((await request(server.url).get('/runtime/capabilities').set('authorization', 'Bearer anything')).status).toBe(200);
      expect((await request(server.url).get('/callers/me')).status).toBe(401);
    });

    it('counts the execute limit per client address: one client cannot spend everyone\'s budget', async () => {
      // Two clients on loopback: 127.0.0.2 and 127.0.0.1 (which the test above already spent one of).
      const from = (localAddress: string) =>
        new Promise<number>((resolve, reject) => {
          const body = JSON.stringify(execBody({ amount: 5 }));
          const req = http.request(`${server.url}/execute`, { method: 'POST', localAddress, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode!));
          });
          req.on('error', reject);
          req.end(body);
        });
      const second: number[] = [];
      for (let i = 0; i < 5; i++) second.push(await from('127.0.0.2'));
      expect(second).toEqual([200, 200, 200, 200, 429]);
      expect(await from('127.0.0.1')).toBe(200);
    });
  });
});
