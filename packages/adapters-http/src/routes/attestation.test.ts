import { describe, expect, it } from '@jest/globals';
import request from 'supertest';
import {
  AttestationAudit,
  AttestationRuntime,
  AttestationService,
  AttestationVerifier,
  compilePolicy,
  ExecutionConfirmation,
  OverrideService,
  SecurityEvents,
  silentLogger,
  type AuthenticationAudit,
  type Caller,
  type PolicyDocument,
  type ServiceProfile,
} from '@ets/domain';
import { fakeHasher as hasher, fakeKeys, fakeRuntimeFacts, InMemoryAttestationStore } from '../../../domain/src/attestation/testing.js';
import { createHttpApp } from '../app.js';
import { bearerAuthentication } from '../middleware/authenticate.js';
import { simpleKeyAuthentication } from '../middleware/simple-key.js';
import { attestationRoutes } from './attestation.js';

const POLICY: PolicyDocument = { name: 'p', policyVersion: '1', signalsSchema: { amount: { type: 'number' } }, rules: [{ id: 'ok', when: 'true', action: 'approve', reason: 'ok' }] };

/** The profile-A routes over in-memory fakes; `started: false` leaves the runtime not configured. */
async function build(profile: ServiceProfile, options: { started?: boolean; simpleKey?: string } = {}) {
  let n = 0;
  const ids = { uuid: () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}` };
  const clock = { now: () => new Date('2026-01-01T00:00:00.000Z') };
  const keys = fakeKeys();
  const store = new InMemoryAttestationStore();
  const runtime = new AttestationRuntime({ store, signer: keys.signer, verifier: keys.verifier, hasher, clock, profile, trustRootVersion: 't'.repeat(64), signerKeyId: 'k1' });
  if (options.started !== false) await runtime.start(fakeRuntimeFacts());
  const policies = { find: async () => ({ document: POLICY, contentHash: hasher.contentHash(POLICY), compiled: compilePolicy(POLICY) }) };
  const security = new SecurityEvents({ store, clock, ids });
  const base = { store, runtime, hasher, clock, security, ids };
  const variant = profile === 'attestation-simple' ? 'attestation-simple' : 'attestation';
  const audited: string[] = [];
  const audit: Pick<AuthenticationAudit, 'record'> = { record: async (a) => void audited.push(`${a.outcome} ${a.callerId}`) };
  const onFailure = (a: { method: string; route: string }) => security.record('authentication_failed', { callerId: null, operation: `${a.method} ${a.route}`, detail: 'x' });
  const { app, routes } = createHttpApp({
    logger: silentLogger,
    bodyLimitBytes: 4096,
    modules: [
      attestationRoutes({
        profile,
        service: new AttestationService({ ...base, policies, signer: keys.signer }, variant),
        verifier: new AttestationVerifier({ ...base, verifier: keys.verifier }),
        overrides: new OverrideService({ ...base, signer: keys.signer }),
        confirmation: new ExecutionConfirmation({ ...base, verifier: keys.verifier, proofs: keys.proofs }),
        audit: new AttestationAudit({ store, clock }),
        runtime,
        store,
        clock,
        signingMode: 'disk',
      }),
    ],
    authenticate: bearerAuthentication({ directory: { authenticate: (k) => CALLERS[k] }, audit, onFailure }),
    simpleKeyAuthentication: simpleKeyAuthentication({ key: options.simpleKey, audit, onFailure }),
    limiters: {},
  });
  return { app, routes, store, audited };
}

const EXECUTE = { executionId: 'e1', policyId: 'p', policyVersion: '1', signals: { amount: 1 } };
/** `good`: an agent; `human`: a USER key, who may decide overrides. */
const CALLERS: Record<string, Caller | undefined> = {
  good: { callerId: 'c1', allowedCapabilities: [], allowedPrincipalIds: [], allowedTenantIds: [] },
  human: { callerId: 'h1', credentialHolderType: 'USER', allowedCapabilities: [], allowedPrincipalIds: [], allowedTenantIds: [] },
};

describe('profile-A routes', () => {
  it('mount /execute, /verify and /health only in an attestation profile', async () => {
    const paths = async (p: ServiceProfile) => (await build(p)).routes.map((r) => `${r.method} ${r.path}`);
    const shaped = ['post /execute', 'post /verify', 'get /health'];
    for (const s of shaped) expect(await paths('transaction')).not.toContain(s);
    for (const s of shaped) expect(await paths('attestation')).toContain(s);
    // A human decides an override with a USER key of the directory, in every profile.
    expect((await build('attestation-simple')).routes.filter((r) => r.path !== '/health' && r.path !== '/override').every((r) => r.auth === 'simple-key')).toBe(true);
    expect((await build('attestation-simple')).routes.find((r) => r.path === '/override')?.auth).toBe('key');
    expect((await build('attestation')).routes.filter((r) => r.path !== '/health').every((r) => r.auth === 'key')).toBe(true);
  });

  it('answer 503 "Runtime not configured" (no code) on every route that signs or checks the runtime, and /health says so', async () => {
    const { app } = await build('attestation', { started: false });
    const post = (path: string, body: object) => request(app).post(path).set('authorization', path === '/override' ? 'Bearer human' : 'Bearer good').send(body);
    const expected = { error: 'Runtime not configured: the runtime is starting.' };
    for (const [path, body] of [
      ['/execute', EXECUTE],
      ['/verify', { executionId: 'x' }],
      ['/override', { executionId: 'x', approved: true, approvedBy: 'h1', approverRole: 'r', reason: 'x' }],
      ['/confirm-execution', { attestation: { executionId: 'x' }, executedAction: { actionType: 't', actionId: 'i', actionTimestamp: '2026-01-01T00:00:00Z' } }],
    ] as const) {
      const res = await post(path, body);
      expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 503, body: expected });
    }
    expect((await request(app).get('/runtime/manifest').set('authorization', 'Bearer good')).status).toBe(503);
    // A malformed body is still 400 first; the dry runs still answer.
    expect((await post('/execute', { policyId: 'p' })).status).toBe(400);
    expect((await post('/simulate', { policyId: 'p', policyVersion: '1', signals: {} })).body).toMatchObject({ wouldSign: false, policyLoaded: true });
    expect((await post('/evaluate', { policyId: 'p', policyVersion: '1', signals: {} })).body).toMatchObject({ wouldDecide: 'approve' });
    expect((await request(app).get('/health')).body).toEqual({
      status: 'ok',
      runtimeVersion: null,
      runtimeHash: null,
      verification: 'error',
      audit_db: true,
      signing_mode: 'disk',
      capabilities: ['execute:attestation', 'verify:attestation', 'evaluate', 'simulate', 'override', 'confirm-execution', 'audit', 'runtime-manifest'],
      supportedSchemaVersions: ['1'],
    });
  });

  it('attestation-simple: SVC_API_KEY set means bearer SVC_API_KEY or the same 401 as everywhere, audited; unset means no authentication', async () => {
    const keyed = await build('attestation-simple', { simpleKey: 'sekret-key' });
    for (const auth of [undefined, 'Bearer wrong', 'Bearer sekret-ke', 'Bearer sekret-key2', 'Basic sekret-key', 'Bearer good']) {
      const req = request(keyed.app).post('/execute');
      const res = await (auth ? req.set('authorization', auth) : req).send({ policyId: 'p', policyVersion: '1', signals: {} });
      expect({ auth, status: res.status, body: res.body }).toEqual({ auth, status: 401, body: { error: 'authentication required' } });
    }
    const ok = await request(keyed.app).post('/execute').set('authorization', 'bearer sekret-key').send({ policyId: 'p', policyVersion: '1', signals: {} });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ status: 'ok', execution_state: 'completed' });
    expect(keyed.audited.filter((a) => a.startsWith('FAILURE'))).toHaveLength(6);
    expect(keyed.audited).toContain('SUCCESS svc-api-key');
    expect(keyed.store.securityEvents.map((e) => [e.kind, e.operation])).toContainEqual(['authentication_failed', 'POST /execute']);

    const open = await build('attestation-simple');
    const res = await request(open.app).post('/execute').send({ policyId: 'p', policyVersion: '1', signals: {} });
    expect(res.status).toBe(200);
    expect((await open.store.getDecision(res.body.executionId))!.callerId).toBe('anonymous');
    expect(open.audited).toEqual([]);
  });

  it('record an API call per answered request, except the dry runs and /health', async () => {
    const { app, store } = await build('attestation');
    const k = (r: request.Test) => r.set('authorization', 'Bearer good');
    await k(request(app).post('/execute')).send(EXECUTE);
    await k(request(app).post('/execute')).send({});
    await k(request(app).post('/evaluate')).send({ policyId: 'p', policyVersion: '1', signals: {} });
    await k(request(app).post('/simulate')).send({ policyId: 'p', policyVersion: '1', signals: {} });
    await request(app).get('/health');
    await k(request(app).get('/audit/stats'));
    await request(app).post('/execute').send(EXECUTE);
    await new Promise((r) => setImmediate(r));
    expect(store.apiCalls.map((c) => `${c.method} ${c.route} ${c.status} ${c.callerId}`)).toEqual(['POST /execute 200 c1', 'POST /execute 400 c1', 'GET /audit/stats 200 c1']);
  });
});
