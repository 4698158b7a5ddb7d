import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import type { PolicyDocument } from '@ets/domain';
import { startExampleReceiver, type ExampleReceiver } from '@ets/release-receiver';
import {
  answerJson,
  apiKeysEnv,
  bearer,
  businessTransaction,
  makeKey,
  publishPolicy,
  startTestNetwork,
  STORAGE_TARGETS,
  startTestServer,
  type TestKey,
  type TestNetwork,
  type TestServer,
} from '@ets/test-support';
import { envelope } from './governance-fixtures.js';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const svc = makeKey('svc', { holder: 'SERVICE', capabilities: ['*'] });
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });

const POLICY: PolicyDocument = {
  name: 'ext-pay',
  policyVersion: '1.0.0',
  signalsSchema: { amount: { type: 'number' } },
  rules: [{ id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' }],
};

describe.each(STORAGE_TARGETS)('external connectors on $name: governed registration and the signed release', (factory) => {
  let network: TestNetwork;
  let server: TestServer;
  let receiver: ExampleReceiver;
  let jwks: { keys: { kid: string }[] };

  beforeAll(async () => {
    network = await startTestNetwork();
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, svc, agent), ...network.env, SVC_SANDBOX: 'true' });
    await publishPolicy(server.dataSource, POLICY);
    await publishPolicy(server.dataSource); // exec-test
    jwks = (await request(server.url).get('/.well-known/jwks.json')).body;
    receiver = await startExampleReceiver({ tls: await network.ca.issue(['receiver.ext.test']), hostName: 'receiver.ext.test', address: network.address(), jwks: `${server.url}/.well-known/jwks.json` });
    network.dns.set('receiver.ext.test', { A: [receiver.address] });
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.destroy();
    await network?.close();
  });

  const post = (p: string, key: TestKey, body: unknown) => request(server.url).post(p).set('authorization', bearer(key)).send(body as object);
  const get = (p: string, key: TestKey = alice) => request(server.url).get(p).set('authorization', bearer(key));
  let n = 0;
  const capability = () => `ext${++n}:transfer`;
  const registerBody = (cap: string, over: Record<string, unknown> = {}) => ({
    kind: 'register',
    capability: cap,
    endpoint: receiver.endpoint,
    policyName: 'ext-pay',
    forwardedParameters: ['amount', 'currency'],
    reason: 'pay suppliers',
    ...over,
  });
  /** Proposed by alice, approved by bob; returns the registration id. */
  async function registered(cap: string, over: Record<string, unknown> = {}): Promise<string> {
    const proposed = await post('/external-connectors/changes', alice, registerBody(cap, over));
    expect(proposed.status).toBe(201);
    const approved = await post(`/external-connectors/changes/${proposed.body.id}/approve`, bob, envelope(bob, proposed.body.id, 'approve'));
    expect(approved.status).toBe(200);
    return proposed.body.id as string;
  }
  async function revoked(cap: string): Promise<void> {
    const proposed = await post('/external-connectors/changes', alice, { kind: 'revoke', capability: cap, reason: 'done' });
    expect(proposed.status).toBe(201);
    expect((await post(`/external-connectors/changes/${proposed.body.id}/approve`, bob, envelope(bob, proposed.body.id, 'approve'))).status).toBe(200);
  }
  async function execute(cap: string, parameters: Record<string, unknown> = { amount: 120, currency: 'EUR', reference: 'inv-42' }) {
    const tx = businessTransaction({ intent: { action: cap, parameters }, policy: { name: 'ext-pay', version: '1.0.0' } });
    return Object.assign(await post('/execute', agent, tx), { id: tx.businessTransactionId as string });
  }
  const intentStatus = async (id: string) => (await get(`/execution-intents/${id}`)).body.status;

  describe('proposals: every rule of spec 2.5 is a 400 naming the field, and nothing is stored', () => {
    const cases: [string, Record<string, unknown>][] = [
      ['kind', { kind: 'update' }],
      ['kind', { kind: undefined }],
      ['capability', { capability: undefined }],
      ['capability', { capability: `a:${'b'.repeat(127)}` }],
      ['capability', { capability: 'Payments:transfer' }],
      ['capability', { capability: 'payments' }],
      ['capability', { capability: 'payments:transfer:now' }],
      ['capability', { capability: 'pay ments:transfer' }],
      ['capability', { capability: 'sandbox:transfer' }],
      ['capability', { capability: 'test:transfer' }],
      ['reason', { reason: 'x'.repeat(2001) }],
      ['reason', { reason: 7 }],
      ['endpoint', { endpoint: undefined }],
      ['endpoint', { endpoint: 'http://receiver.ext.test/release' }],
      ['endpoint', { endpoint: 'https://2130706433/release' }],
      ['endpoint', { endpoint: 'https://0177.0.0.1/release' }],
      ['endpoint', { endpoint: 'https://0x7f000001/release' }],
      ['endpoint', { endpoint: 'https://127.1/release' }],
      ['endpoint', { endpoint: 'https://[::1]/release' }],
      ['endpoint', { endpoint: 'https://[::ffff:127.0.0.1]/release' }],
      ['endpoint', { endpoint: 'https://[::ffff:7f00:1]/release' }],
      ['endpoint', { endpoint: 'https://[64:ff9b::7f00:1]/release' }],
      ['endpoint', { endpoint: 'https://[2002:7f00:1::]/release' }],
      ['endpoint', { endpoint: 'https://localhost/release' }],
      ['endpoint', { endpoint: 'https://receiver.localhost/release' }],
      ['endpoint', { endpoint: 'https://intranet/release' }],
      ['endpoint', { endpoint: 'https://ops@receiver.ext.test/release' }],
      ['endpoint', { endpoint: 'https://ops:pw@receiver.ext.test/release' }],
      ['endpoint', { endpoint: 'https://receiver.ext.test/release#frag' }],
      ['endpoint', { endpoint: 'https://private.ext.test/release' }],
      ['endpoint', { endpoint: 'https://private6.ext.test/release' }],
      ['endpoint', { endpoint: 'https://nowhere.ext.test/release' }],
      ['policyName', { policyName: undefined }],
      ['policyName', { policyName: 'Ext Pay' }],
      ['policyName', { policyName: 'x'.repeat(129) }],
      ['forwardedParameters', { forwardedParameters: undefined }],
      ['forwardedParameters', { forwardedParameters: 'amount' }],
      ['forwardedParameters', { forwardedParameters: ['amount', '1st'] }],
      ['forwardedParameters', { forwardedParameters: ['a'.repeat(65)] }],
      ['forwardedParameters', { forwardedParameters: ['amount', 'amount'] }],
      ['forwardedParameters', { forwardedParameters: [3] }],
      ['timeoutMs', { timeoutMs: 999 }],
      ['timeoutMs', { timeoutMs: 30001 }],
      ['timeoutMs', { timeoutMs: 1500.5 }],
      ['timeoutMs', { timeoutMs: '5000' }],
      ['color', { color: 'blue' }],
    ];
    it('refuses an endpoint whose port is 0 or beyond 65535, though its host resolves (400 naming the port)', async () => {
      for (const port of ['0', '00', '65536', '99999']) {
        const body = registerBody(capability(), { endpoint: receiver.endpoint.replace(/:\d+\//, `:${port}/`) });
        const res = await post('/external-connectors/changes', alice, body);
        expect({ port, status: res.status, body: res.body }).toEqual({ port, status: 400, body: { error: 'endpoint must have a port from 1 to 65535.' } });
      }
      expect((await get('/external-connectors/changes?status=PENDING_APPROVAL&pageSize=100')).body.items.filter((c: { endpoint?: string }) => /:(0|00|65536|99999)\//.test(c.endpoint ?? ''))).toEqual([]);
    });

    it.each(cases)('%s (case %#)', async (field, over) => {
      network.dns.set('private.ext.test', { A: ['10.0.0.8'] });
      network.dns.set('private6.ext.test', { A: [receiver.address], AAAA: ['fd00::8'] });
      const body = registerBody(capability(), over);
      for (const k of Object.keys(body)) if ((body as Record<string, unknown>)[k] === undefined) delete (body as Record<string, unknown>)[k];
      const res = await post('/external-connectors/changes', alice, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: expect.stringContaining(field) });
      expect((await get('/external-connectors/changes?pageSize=100')).body.items.map((c: { capability: string }) => c.capability)).not.toContain(body.capability);
    });

    it('a revoke takes kind, capability and reason only', async () => {
      const res = await post('/external-connectors/changes', alice, { kind: 'revoke', capability: capability(), endpoint: receiver.endpoint });
      expect(res.status).toBe(400);
      expect(res.body.error).toContain('endpoint is not a field of a revoke proposal');
    });
  });

  it('register: 201 with the change (endpoint normalised, timeout 10000 by default); approve 200; the registration is active at once', async () => {
    const cap = capability();
    const endpoint = receiver.endpoint.replace('https://receiver.ext.test', 'HTTPS://Receiver.EXT.test').replace('/release', '/x/../release');
    const proposed = await post('/external-connectors/changes', alice, registerBody(cap, { endpoint }));
    expect(proposed.status).toBe(201);
    expect(proposed.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      kind: 'register',
      capability: cap,
      reason: 'pay suppliers',
      proposer: 'alice',
      status: 'PENDING_APPROVAL',
      createdAt: expect.any(String),
      endpoint: receiver.endpoint,
      policyName: 'ext-pay',
      forwardedParameters: ['amount', 'currency'],
      timeoutMs: 10000,
    });
    const id = proposed.body.id as string;
    expect((await execute(cap)).body).toMatchObject({ code: 'CONNECTOR_NOT_REGISTERED' }); // pending is not active

    expect((await post(`/external-connectors/changes/${id}/approve`, alice, envelope(alice, id, 'approve'))).body).toMatchObject({ code: 'SELF_APPROVAL_DENIED' });
    const approved = await post(`/external-connectors/changes/${id}/approve`, bob, envelope(bob, id, 'approve'));
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ id, status: 'APPROVED', decider: 'bob', decidedAt: expect.any(String), appliedAt: expect.any(String) });
    expect((await post(`/external-connectors/changes/${id}/approve`, bob, envelope(bob, id, 'approve'))).status).toBe(409);

    const active = await get(`/external-connectors?pageSize=100`, svc);
    expect(active.status).toBe(200);
    expect(active.body).toMatchObject({ page: 1, pageSize: 100, total: expect.any(Number) });
    expect(active.body.items).toContainEqual({
      registrationId: id,
      capability: cap,
      endpoint: receiver.endpoint,
      policyName: 'ext-pay',
      forwardedParameters: ['amount', 'currency'],
      timeoutMs: 10000,
      proposer: 'alice',
      approvedBy: 'bob',
      registeredAt: approved.body.decidedAt,
    });

    const again = await post('/external-connectors/changes', alice, registerBody(cap));
    expect(again.status).toBe(409); // at most one active registration per capability
  });

  it('reject: 200 with the rejection reason, nothing registered; proposing needs a USER key; one pending change per capability', async () => {
    const cap = capability();
    expect((await post('/external-connectors/changes', svc, registerBody(cap))).body).toMatchObject({ code: 'NON_HUMAN_CALLER_DENIED' });
    const proposed = await post('/external-connectors/changes', alice, registerBody(cap));
    expect((await post('/external-connectors/changes', alice, registerBody(cap))).status).toBe(409);
    const rejected = await post(`/external-connectors/changes/${proposed.body.id}/reject`, bob, envelope(bob, proposed.body.id, 'reject', { reason: 'wrong endpoint' }));
    expect(rejected.status).toBe(200);
    expect(rejected.body).toMatchObject({ status: 'REJECTED', decider: 'bob', rejectionReason: 'wrong endpoint' });
    expect((await get('/external-connectors?pageSize=100')).body.items.map((r: { capability: string }) => r.capability)).not.toContain(cap);
    expect((await post('/external-connectors/changes', alice, { kind: 'revoke', capability: cap })).status).toBe(409); // nothing to revoke
  });

  it('lists changes page by page, with a status filter', async () => {
    const all = await get('/external-connectors/changes?page=1&pageSize=2');
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ page: 1, pageSize: 2, total: expect.any(Number) });
    expect(all.body.items.length).toBeLessThanOrEqual(2);
    const rejected = await get('/external-connectors/changes?status=REJECTED&pageSize=100');
    expect(rejected.body.items.every((c: { status: string }) => c.status === 'REJECTED')).toBe(true);
    expect((await get('/external-connectors/changes?pageSize=101')).status).toBe(400);
    expect((await get('/external-connectors/changes?status=DONE')).status).toBe(400);
  });

  it('releases to the endpoint: a signed release with only the forwarded parameters, verified by the receiver, executed once', async () => {
    const cap = capability();
    const registrationId = await registered(cap, { timeoutMs: 5000 });
    const before = receiver.executed.length;
    const res = await execute(cap, { amount: 120, currency: 'EUR', reference: 'inv-42', secret: 'not forwarded' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ executionStatus: 'EXECUTED', result: { received: { amount: 120, currency: 'EUR' }, action: cap } });
    expect(receiver.executed.length - before).toBe(1);
    const release = receiver.executed.at(-1)!;
    expect(release).toMatchObject({
      iss: 'ets',
      aud: receiver.endpoint,
      businessTransactionId: res.body.businessTransactionId,
      action: cap,
      parameters: { amount: 120, currency: 'EUR' },
      intentHash: res.body.trustRecord.businessTransactionHash,
      conditions: [],
    });
    expect(jwks.keys.map((k) => k.kid)).toContain(release.kid);
    // Valid for exactly its timeout (NumericDates to the millisecond), wherever in the second it was signed.
    expect(Math.round(release.exp * 1000) - Math.round(release.iat * 1000)).toBe(5000);
    expect(res.body.result.releaseId).toBe(release.jti);
    expect(res.body.trustRecord.executions[0]).toMatchObject({ connector: cap.split(':')[0], status: 'SUCCEEDED' });
    const intent = await get(`/execution-intents/${res.body.businessTransactionId}`);
    expect(intent.body.status.state).toBe('FINALIZED');
    expect(registrationId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('a request for a registered action must name the registration policy', async () => {
    const cap = capability();
    await registered(cap);
    const res = await post('/execute', agent, businessTransaction({ intent: { action: cap, parameters: {} } })); // exec-test policy
    expect(res.status).toBe(400);
    expect(res.body.error).toContain("policy 'ext-pay'");
  });

  it('revoke ends the registration: the action has no connector any more', async () => {
    const cap = capability();
    await registered(cap);
    await revoked(cap);
    expect((await get('/external-connectors?pageSize=100')).body.items.map((r: { capability: string }) => r.capability)).not.toContain(cap);
    const res = await execute(cap);
    expect(res.status).toBe(503);
    expect(res.body.code).toBe('CONNECTOR_NOT_REGISTERED');
  });

  it('revoke between decision and release: nothing is sent (NOT_EXECUTED)', async () => {
    const cap = capability();
    await registered(cap);
    const before = receiver.executed.length;
    const pending = execute(cap, { amount: 5, sandboxPauseBeforeReleaseMs: 1500 });
    await new Promise((r) => setTimeout(r, 300));
    await revoked(cap);
    const res = await pending;
    expect(res.status).toBe(502);
    expect(res.body).toMatchObject({ code: 'RUNTIME_ERROR', executionStatus: 'NOT_EXECUTED' });
    expect(receiver.executed.length).toBe(before);
    expect(await intentStatus(res.id)).toMatchObject({ state: 'ERRORED', error: { phase: 'before-send', message: expect.stringContaining('revoked') } });
  });

  it('a name whose answer changes between proposal and release is checked again: nothing is sent to the new address', async () => {
    const cap = capability();
    const srv = await network.https('rebind.ext.test', answerJson({ status: 'executed', result: 'should not happen' }));
    await registered(cap, { endpoint: srv.url('/release') });
    network.dns.set('rebind.ext.test', { AAAA: ['::ffff:127.0.0.1'] });
    const res = await execute(cap);
    expect(res.status).toBe(502);
    expect(res.body).toMatchObject({ code: 'RUNTIME_ERROR', executionStatus: 'NOT_EXECUTED' });
    expect(srv.received).toEqual([]);
    expect(await intentStatus(res.id)).toMatchObject({ state: 'ERRORED', error: { phase: 'before-send' } });
  });

  it('multi-address fallback: the first address refuses, the next checked one gets the release, once', async () => {
    const cap = capability();
    const srv = await network.https('fallback.ext.test', answerJson({ status: 'executed', result: { ok: true } }));
    await registered(cap, { endpoint: srv.url('/release') });
    network.dns.set('fallback.ext.test', { A: [network.address(), srv.address] });
    const res = await execute(cap);
    expect(res.status).toBe(200);
    expect(res.body.result).toEqual({ ok: true });
    expect(srv.received).toHaveLength(1);
  });

  it.each([
    ['a timeout after sending', (() => undefined) as Parameters<TestNetwork['https']>[1]],
    ['a reset after sending', ((req) => req.socket.destroy()) as Parameters<TestNetwork['https']>[1]],
    ['a 500', answerJson({ error: 'boom' }, 500)],
    ['an answer outside the protocol', answerJson({ done: true })],
  ])('%s is an unknown outcome: 502 EXECUTION_OUTCOME_UNKNOWN, intent ERRORED, delivered once', async (_what, handler) => {
    const cap = capability();
    const host = `unknown${n}.ext.test`;
    const srv = await network.https(host, handler);
    await registered(cap, { endpoint: srv.url('/release'), timeoutMs: 1000 });
    const res = await execute(cap);
    expect(res.status).toBe(502);
    expect(res.body).toMatchObject({ code: 'EXECUTION_OUTCOME_UNKNOWN', executionStatus: 'EXECUTION_UNKNOWN' });
    expect(srv.received).toHaveLength(1);
    expect(await intentStatus(res.id)).toMatchObject({ state: 'ERRORED', error: { phase: 'outcome-unknown' } });
  });

  it('conditionsNotMet: the endpoint did not act; 409 AUTHORIZATION_NO_LONGER_VALID, NOT_EXECUTED', async () => {
    const cap = capability();
    const srv = await network.https('conditions.ext.test', answerJson({ status: 'conditionsNotMet', reason: 'invoice already paid' }));
    await registered(cap, { endpoint: srv.url('/release') });
    const res = await execute(cap);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'AUTHORIZATION_NO_LONGER_VALID', executionStatus: 'NOT_EXECUTED' });
    expect(res.body.error).toContain('invoice already paid');
    expect(srv.received).toHaveLength(1);
    expect(await intentStatus(res.id)).toMatchObject({ state: 'ERRORED', error: { phase: 'conditions-not-met' } });
  });
});
