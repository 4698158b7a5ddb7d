import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { parse as parseYaml } from 'yaml';
import { buildOpenApiDocument } from '@ets/adapters-http';
import { canonicalize, verifyOffline } from '@ets/adapters-crypto';
import { measureRuntime, type MeasuredRuntime } from '@ets/server';
import {
  apiKeysEnv,
  attestationTableCounts,
  bearer,
  contentHash,
  EXEC_POLICY,
  expectRoutesDocumented,
  jwksOf,
  makeKey,
  publishPolicy,
  settle,
  STORAGE_TARGETS,
  startTestServer,
  type TestServer,
} from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE' });
const burst = makeKey('burst', { holder: 'SERVICE' });
const racer = makeKey('racer', { holder: 'SERVICE' });
type Json = Record<string, unknown>;

/** The fields an attestation takes from the runtime manifest of `GET /runtime/manifest`. */
const runtimeFieldsOf = (m: Json) => ({
  runtimeVersion: m.version,
  runtimeHash: m.runtimeHash,
  manifestHash: m.manifestHash,
  manifestSignature: m.manifestSignature,
  trustRootVersion: m.trustRootVersion,
  signerKeyId: m.signerKeyId,
  evaluatorHash: m.evaluatorHash,
  evaluatorSemanticHash: m.evaluatorSemanticHash,
  releaseManifestHash: m.releaseManifestHash,
});

describe.each(STORAGE_TARGETS)('profile A (SVC_PROFILE=attestation) on $name', (factory) => {
  let server: TestServer;
  let jwks: { keys: Json[] };
  const post = (path: string, body: unknown, key = agent) => request(server.url).post(path).set('authorization', bearer(key)).send(body as object);
  const get = (path: string, key = agent) => request(server.url).get(path).set('authorization', bearer(key));
  const execute = (signals: Json, over: Json = {}) => post('/execute', { executionId: `run-${randomUUID()}`, policyId: 'exec-test', policyVersion: '1.0.0', signals, ...over });

  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(agent, burst, racer), SVC_PROFILE: 'attestation', RATE_LIMIT_EXECUTE_PER_MINUTE: '40' });
    await publishPolicy(server.dataSource);
    jwks = await jwksOf(server.url);
  });
  afterAll(async () => {
    await server.destroy();
  });

  it('describes exactly the mounted routes in the profile\'s OpenAPI document', async () => {
    expectRoutesDocumented(server.httpApp, 'attestation', expect);
    const yaml = (await request(server.url).get('/openapi.yaml')).text;
    expect(yaml).toContain('operationId: executeAttestation');
    // The profile's own document: its routes and shapes, nothing of another profile.
    expect(parseYaml(yaml)).toEqual(JSON.parse(JSON.stringify(buildOpenApiDocument('attestation'))));
    expect(yaml).not.toContain('x-profiles');
    expect(yaml).not.toContain('Decide and release a business action (profile T)');
    expect(yaml).not.toContain('x-profile-security');
    const reference = await request(server.url).get('/reference');
    expect(reference.status).toBe(200);
    // The interactive reference renders the profile's own /openapi.yaml in the browser.
    expect(reference.text).toContain("/reference/assets/reference.js");
    expect(yaml).toContain('Bind the action taken to its attestation');
    expect((await request(server.url).get('/documentation')).text).toContain('runtime: verified</code> means</strong>');
  });

  it('GET /health, /runtime/manifest and /runtime/capabilities describe a signed runtime', async () => {
    const health = await request(server.url).get('/health');
    const manifest = await get('/runtime/manifest');
    expect(manifest.status).toBe(200);
    const m = manifest.body as Json;
    expect(health.body).toEqual({
      status: 'ok',
      runtimeVersion: m.version,
      runtimeHash: m.runtimeHash,
      verification: 'ok',
      audit_db: true,
      signing_mode: 'disk',
      capabilities: m.capabilities,
      supportedSchemaVersions: ['1'],
    });
    expect(m).toMatchObject({ manifestType: 'runtime-manifest', capabilities: expect.arrayContaining(['execute:attestation', 'verify:attestation']), supportedSchemaVersions: ['1'], platform: `node ${process.version}` });
    expect(Date.parse(m.startedAt as string)).not.toBeNaN();
    const { manifestHash, manifestSignature, ...unsigned } = m;
    expect(manifestHash).toBe(contentHash(unsigned));
    expect(m.releaseManifestHash).toBe(
      contentHash({ version: m.version, runtimeHash: m.runtimeHash, evaluatorHash: m.evaluatorHash, evaluatorSemanticHash: m.evaluatorSemanticHash, capabilities: m.capabilities, supportedSchemaVersions: m.supportedSchemaVersions }),
    );
    expect(m.trustRootVersion).toBe(contentHash(jwks.keys.map((k) => k.kid).sort()));
    expect(jwks.keys.map((k) => k.kid)).toContain(m.signerKeyId);
    expect(manifestSignature).toEqual(expect.any(String));
    // What the hashes cover is in the manifest. This server runs the TypeScript sources (ts-jest),
    // so they are what runtimeHash covers: the hash of the code that ran, as this process measures it.
    expect(m.runtimeHash).toBe(contentHash(m.runtimeContents));
    expect(m.evaluatorHash).toBe(contentHash(m.evaluatorContents));
    const measured = measureRuntime({ runtimeVersion: String(m.version) });
    expect(m.runtimeContents).toEqual({ ...(measured as MeasuredRuntime).runtimeContents, code: 'sources' });
    expect(m.evaluatorContents).toEqual((measured as MeasuredRuntime).evaluatorContents);
    expect((await get('/runtime/capabilities')).body).toEqual({ capabilities: m.capabilities });
    for (const path of ['/runtime/manifest', '/runtime/capabilities']) expect((await request(server.url).get(path)).status).toBe(401);
  });

  it('POST /execute answers 200 with an attestation whose every field has its meaning, and it verifies', async () => {
    const signals = { amount: 120, country: 'FR' };
    const res = await post('/execute', { executionId: 'run-fields', policyId: 'exec-test', policyVersion: '1.0.0', signals });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['attestation', 'requires_override', 'status']);
    expect(res.body).toMatchObject({ status: 'approved', requires_override: false });
    const a = res.body.attestation as Json;
    const m = (await get('/runtime/manifest')).body as Json;
    const signalsHash = contentHash(signals);
    const executionId = contentHash({ requestId: 'run-fields', policyId: 'exec-test', policyVersion: '1.0.0', signalsHash });
    const decision = { action: 'approve', requires_override: false, reason: 'Within limits', matchedRuleId: 'ok' };
    expect(a).toEqual({
      executionId,
      execution_fingerprint: contentHash({ executionId, bundleHash: contentHash(EXEC_POLICY), evaluatorArtifactHash: a.evaluatorArtifactHash, signalsHash, decision, execution_state: 'completed' }),
      requestId: 'run-fields',
      policyId: 'exec-test',
      policyVersion: '1.0.0',
      schemaVersion: '1',
      ...runtimeFieldsOf(m),
      decision,
      execution_state: 'completed',
      signalsHash,
      bundleHash: contentHash(EXEC_POLICY),
      evaluatorArtifactHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      callerId: 'agent-7',
      issuedAt: expect.any(String),
      signature: expect.any(String),
    });
    expect(verifyOffline(a, jwks)).toMatchObject({ kind: 'attestation', valid: true });
    // The same policy decides the same artifact; the bundle is the policy's contentHash.
    expect((await get('/policies/in-effect')).body).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'exec-test', contentHash: a.bundleHash })]));
    expect((await post('/verify', a)).body).toEqual({ valid: true, checks: { signature: 'verified', runtime: 'verified', schema: 'verified' }, errors: [] });
    expect((await get(`/audit/decisions/${executionId}`)).body).toMatchObject({ executionId, requestId: 'run-fields', execution_state: 'completed', attestation: a });
  });

  it.each([
    [{ amount: 20000 }, 'pending_override', true, 'large'],
    [{ amount: 5, country: 'KP' }, 'blocked', false, 'sanctioned'],
  ])('POST /execute with %p answers status %s, stored as such', async (signals, status, requiresOverride, rule) => {
    const res = await execute(signals);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status, requires_override: requiresOverride, attestation: { execution_state: status, decision: { matchedRuleId: rule } } });
    expect((await get(`/audit/decisions/${res.body.attestation.executionId}`)).body.execution_state).toBe(status);
  });

  it('POST /execute: 400 for each missing or mistyped field, 401, 413 and 422 (policy, signals, replay), storing nothing', async () => {
    const before = await attestationTableCounts(server.dataSource);
    const valid = { executionId: 'run-400', policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: 1 } };
    for (const [over, message] of [
      [{ executionId: undefined }, 'executionId is required and must be a non-empty string.'],
      [{ executionId: '' }, 'executionId is required and must be a non-empty string.'],
      [{ policyId: 7 }, 'policyId is required and must be a non-empty string.'],
      [{ policyVersion: null }, 'policyVersion is required and must be a non-empty string.'],
      [{ signals: undefined }, 'signals is required and must be an object.'],
      [{ signals: [1] }, 'signals is required and must be an object.'],
    ] as const) {
      const res = await post('/execute', { ...valid, ...over });
      expect({ over, status: res.status, body: res.body }).toEqual({ over, status: 400, body: { error: message } });
    }
    expect((await request(server.url).post('/execute').set('authorization', bearer(agent)).set('content-type', 'application/json').send('{"a":')).status).toBe(400);
    expect((await request(server.url).post('/execute').send(valid)).body).toEqual({ error: 'authentication required' });
    const big = await post('/execute', { ...valid, signals: { country: 'x'.repeat(1_100_000) } });
    expect(big.status).toBe(413);
    const notFound = await post('/execute', { ...valid, policyVersion: '9.9.9' });
    expect({ status: notFound.status, body: notFound.body }).toEqual({ status: 422, body: { error: "Policy 'exec-test' version '9.9.9' was not found." } });
    const signals = await post('/execute', { ...valid, signals: { amount: 'many', colour: 'red' } });
    expect({ status: signals.status, body: signals.body }).toEqual({
      status: 422,
      body: { error: "Signals do not match the policy's signalsSchema: signal 'amount' must be of type number; signal 'colour' is not declared in signalsSchema." },
    });
    await settle();
    const after = await attestationTableCounts(server.dataSource);
    // What every keyed request leaves (its API call, the signed audit event of its authentication
    // and that event's log leaf, the security event of the 401), and nothing else.
    const everyRequest = {
      attestation_api_calls: 0,
      attestation_security_events: 0,
      audit_events: 0,
      transparency_log_leaves: 0,
      transparency_log_nodes: 0,
      transparency_log_checkpoints: 0,
      'transparency_log_head.tree_size': 0,
    };
    expect({ ...after, ...everyRequest }).toEqual({ ...before, ...everyRequest });

    const first = await post('/execute', { ...valid, executionId: 'run-replay' });
    expect(first.status).toBe(200);
    const replay = await post('/execute', { ...valid, executionId: 'run-replay', signals: { amount: 2 } });
    expect({ status: replay.status, body: replay.body }).toEqual({ status: 422, body: { error: "executionId 'run-replay' was already used: an execution is attested once.", code: 'EXECUTION_ID_REPLAYED' } });
    expect((await get('/audit/security?limit=5')).body).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'execution_replayed', callerId: 'agent-7', detail: "executionId 'run-replay' was sent again" })]));
  });

  it('POST /execute: of 10 simultaneous requests with one executionId exactly one is attested; the others are 422 replays, each a security event', async () => {
    const executionId = `race-${randomUUID()}`;
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => post('/execute', { executionId, policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: i + 1 } }, racer)),
    );
    const replay = { error: `executionId '${executionId}' was already used: an execution is attested once.`, code: 'EXECUTION_ID_REPLAYED' };
    expect(results.map((r) => r.status).sort()).toEqual([200, 422, 422, 422, 422, 422, 422, 422, 422, 422]);
    for (const r of results.filter((x) => x.status === 422)) expect(r.body).toEqual(replay);
    const events = (await get('/audit/security?limit=100', racer)).body as Json[];
    expect(events.filter((e) => e.kind === 'execution_replayed' && e.detail === `executionId '${executionId}' was sent again`)).toHaveLength(9);
    expect(((await get('/audit/decisions?limit=100', racer)).body as Json[]).filter((d) => d.requestId === executionId)).toHaveLength(1);
  });

  it('POST /execute: 429 with Retry-After once a caller used its execute budget (others are unaffected)', async () => {
    let limited: request.Response | undefined;
    for (let i = 0; i < 45 && !limited; i++) {
      const res = await post('/execute', {}, burst);
      if (res.status === 429) limited = res;
      else expect(res.status).toBe(400);
    }
    expect(limited?.body).toEqual({ error: 'Rate limit exceeded. Try again later.', code: 'RATE_LIMITED' });
    expect(Number(limited?.headers['retry-after'])).toBeGreaterThan(0);
    expect((await execute({ amount: 1 })).status).toBe(200);
  });

  it('POST /verify: valid, and each check failing as documented; 400 and 401', async () => {
    const a = (await execute({ amount: 3 })).body.attestation as Json;
    // A dishonest signer with the service's own key: only the runtime and schema checks can tell.
    const resign = async (x: Json): Promise<Json> => {
      const { signature: _s, ...unsigned } = x;
      const sig = await server.signingKeys.signingKeys().sign(Buffer.from(canonicalize(unsigned)));
      return { ...unsigned, signature: sig.signature };
    };
    const check = async (x: Json) => (await post('/verify', x)).body as { valid: boolean; checks: Json; errors: string[] };
    expect(await check(a)).toEqual({ valid: true, checks: { signature: 'verified', runtime: 'verified', schema: 'verified' }, errors: [] });
    expect(await check({ ...a, callerId: 'someone-else' })).toEqual({ valid: false, checks: { signature: 'failed', runtime: 'verified', schema: 'verified' }, errors: ['signature: does not verify'] });
    expect((await check({ ...a, decision: { ...(a.decision as Json), action: 'reject' } })).checks).toEqual({ signature: 'failed', runtime: 'verified', schema: 'failed' });
    expect(await check({ ...a, signerKeyId: 'ed25519-unknown' })).toMatchObject({ valid: false, checks: { signature: 'failed' } });
    expect((await check(await resign({ ...a, runtimeHash: 'f'.repeat(64) }))).checks).toEqual({ signature: 'verified', runtime: 'failed', schema: 'verified' });
    const foreign = 'e'.repeat(64);
    const foreignSig = (await server.signingKeys.signingKeys().sign(Buffer.from(foreign))).signature;
    expect((await check(await resign({ ...a, manifestHash: foreign, manifestSignature: foreignSig }))).checks.runtime).toBe('unknown');
    expect((await check(await resign({ ...a, manifestSignature: foreignSig }))).checks.runtime).toBe('failed');
    expect((await check(await resign({ ...a, schemaVersion: '0' }))).checks.schema).toBe('failed');
    const { schemaVersion: _v, ...noVersion } = a;
    expect((await check(await resign(noVersion))).checks.schema).toBe('unknown');
    expect((await check(await resign({ ...a, executionId: 'a'.repeat(64) }))).errors).toContain('executionId: does not recompute from requestId, policyId, policyVersion and signalsHash');
    expect((await post('/verify', [a])).status).toBe(400);
    expect((await request(server.url).post('/verify').send(a)).status).toBe(401);
  });

  it('POST /evaluate answers what would be decided, without side effects; 400, 401, 422', async () => {
    await settle();
    const before = await attestationTableCounts(server.dataSource);
    const dry = (signals: Json, over: Json = {}) => post('/evaluate', { policyId: 'exec-test', policyVersion: '1.0.0', signals, ...over });
    expect((await dry({ amount: 20000 })).body).toEqual({ wouldDecide: 'approve', requires_override: true, ruleMatched: 'large', reason: 'Large transfer needs a second look', signalsValidated: true });
    expect((await dry({ amount: 1, country: 'KP' })).body).toEqual({ wouldDecide: 'reject', requires_override: false, ruleMatched: 'sanctioned', reason: 'Country is sanctioned', signalsValidated: true });
    expect((await dry({ amount: true })).body).toEqual({
      wouldDecide: 'reject',
      requires_override: false,
      ruleMatched: null,
      reason: "Signals do not match the policy's signalsSchema: signal 'amount' must be of type number.",
      signalsValidated: false,
    });
    expect((await dry({ amount: 1 }, { policyVersion: '0' })).status).toBe(422);
    expect((await dry({ amount: 1 }, { policyId: '' })).status).toBe(400);
    await settle();
    expect(await attestationTableCounts(server.dataSource)).toEqual(before);
    expect((await request(server.url).post('/evaluate').send({})).status).toBe(401);
  });

  it('POST /simulate answers the decision and the attestation preview, and writes no audit record and no replay record', async () => {
    const m = (await get('/runtime/manifest')).body as Json;
    await settle();
    const before = await attestationTableCounts(server.dataSource);
    const sim = await post('/simulate', { policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: 20000 } });
    expect(sim.status).toBe(200);
    expect(sim.body).toEqual({
      simulation: true,
      decision: { action: 'approve', reason: 'Large transfer needs a second look', ruleMatched: 'large', requires_override: true },
      signalsValidated: true,
      policyLoaded: true,
      wouldSign: true,
      attestationPreview: {
        policyId: 'exec-test',
        policyVersion: '1.0.0',
        schemaVersion: '1',
        ...runtimeFieldsOf(m),
        decision: { action: 'approve', requires_override: true, reason: 'Large transfer needs a second look', matchedRuleId: 'large' },
        execution_state: 'pending_override',
        signalsHash: contentHash({ amount: 20000 }),
        bundleHash: contentHash(EXEC_POLICY),
        evaluatorArtifactHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      },
    });
    const invalid = await post('/simulate', { policyId: 'exec-test', policyVersion: '1.0.0', signals: { nope: 1 } });
    expect(invalid.body).toMatchObject({ signalsValidated: false, wouldSign: false, attestationPreview: { decision: null, execution_state: null } });
    expect((await post('/simulate', { policyId: 'exec-test', policyVersion: '0', signals: {} })).status).toBe(422);
    expect((await post('/simulate', { policyId: 'exec-test' })).status).toBe(400);
    await settle();
    // Not a decision, a verification, a security event, an API call, an override, a replay guard,
    // an audit event of the caller's authentication or a leaf of the log: every table that profile
    // A's audit or replay guard writes to (after queued API calls were written) is as it was.
    expect(await attestationTableCounts(server.dataSource)).toEqual(before);
    // A failed authentication is audited (and is a security event) as on every keyed route.
    expect((await request(server.url).post('/simulate').send({})).status).toBe(401);
    await settle();
    const refused = await attestationTableCounts(server.dataSource);
    expect({ audit_events: refused.audit_events - before.audit_events!, security: refused.attestation_security_events - before.attestation_security_events! }).toEqual({ audit_events: 1, security: 1 });
  });

  it('changing any field of an attestation fails its verification (over HTTP and offline)', async () => {
    const a = (await execute({ amount: 7 })).body.attestation as Json;
    for (const field of Object.keys(a)) {
      if (field === 'signature') continue;
      const value = a[field];
      const changed = typeof value === 'string' ? (value.endsWith('0') ? `${value.slice(0, -1)}1` : `${value.slice(0, -1)}0`) : { ...(value as Json), reason: 'x' };
      const tampered = { ...a, [field]: changed };
      expect({ field, offline: verifyOffline(tampered, jwks).valid }).toEqual({ field, offline: false });
      const verdict = (await post('/verify', tampered)).body;
      expect({ field, valid: verdict.valid }).toEqual({ field, valid: false });
    }
  });
});
