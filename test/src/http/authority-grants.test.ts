import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import type { PolicyDocument } from '@ets/domain';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  envelope,
  businessCast,
  governed,
  publishPolicy,
  STORAGE_TARGETS,
  startTestServer,
  type TestKey,
  type TestServer,
} from '@ets/test-support';

const { alice, bob, agent } = businessCast();

const POLICY: PolicyDocument = {
  name: 'granted',
  policyVersion: '1.0.0',
  signalsSchema: { amount: { type: 'number' } },
  requireAuthorityGrant: true,
  rules: [{ id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' }],
};

const LIMITS = [
  { path: 'intent.parameters.amount', min: 10, max: 1000 },
  { path: 'intent.parameters.currency', oneOf: ['EUR'] },
];

describe.each(STORAGE_TARGETS)('authority grants on $name', (factory) => {
  let server: TestServer;
  let n = 0;
  const action = () => `sandbox:pay${++n}`;

  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, agent), SVC_SANDBOX: 'true' });
    await publishPolicy(server.dataSource, POLICY);
  });
  afterAll(async () => {
    await server?.destroy();
  });

  const post = (p: string, key: TestKey, body: unknown) => request(server.url).post(p).set('authorization', bearer(key)).send(body as object);
  const get = (p: string, key: TestKey = alice) => request(server.url).get(p).set('authorization', bearer(key));
  const grantBody = (act: string, over: Record<string, unknown> = {}) => ({
    kind: 'grant',
    grantee: 'agent-7',
    action: act,
    limits: LIMITS,
    expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    reason: 'pays suppliers',
    ...over,
  });
  const grant = (act: string, over: Record<string, unknown> = {}) => governed(server.url, '/authority-grants', alice, bob, grantBody(act, over));
  const execute = async (act: string, parameters: Record<string, unknown> = { amount: 120, currency: 'EUR' }) => {
    const tx = businessTransaction({ intent: { action: act, parameters }, policy: { name: 'granted', version: '1.0.0' }, signals: {} });
    return Object.assign(await post('/execute', agent, tx), { id: tx.businessTransactionId as string });
  };
  const refusalOf = async (id: string) => (await get(`/refusal/${id}`)).body;

  it.each<[string, Record<string, unknown>]>([
    ['kind', { kind: 'give' }],
    ['grantee', { grantee: '' }],
    ['grantee', { grantee: 'system' }],
    ['action', { action: 'pay' }],
    ['limits', { limits: 'amount < 1000' }],
    ['limits[0].path', { limits: [{ path: 'parameters.amount', max: 1 }] }],
    ['limits[0].path', { limits: [{ path: 'signals.amount', max: 1 }] }],
    ['limits[0]', { limits: [{ path: 'intent.parameters.amount' }] }],
    ['limits[0].min', { limits: [{ path: 'intent.parameters.amount', min: '1' }] }],
    ['limits[0].min', { limits: [{ path: 'intent.parameters.amount', min: 5, max: 1 }] }],
    ['limits[0].oneOf', { limits: [{ path: 'intent.parameters.currency', oneOf: [] }] }],
    ['limits[0].oneOf', { limits: [{ path: 'intent.parameters.currency', oneOf: [{ eur: 1 }] }] }],
    ['limits[0].unit', { limits: [{ path: 'intent.parameters.amount', max: 1, unit: 'EUR' }] }],
    ['expiresAt', { expiresAt: '2026-02-30T00:00:00Z' }],
    ['expiresAt', { expiresAt: new Date(Date.now() - 1000).toISOString() }],
    ['expiresAt', { expiresAt: '9999-12-31T23:59:59Z' }],
    ['expiresAt', { expiresAt: new Date(Date.now() + 367 * 86400_000).toISOString() }],
    ['reason', { reason: 7 }],
    ['color', { color: 'blue' }],
  ])('a grant proposal breaking %s is 400 naming it', async (field, over) => {
    const res = await post('/authority-grants/changes', alice, grantBody(action(), over));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: expect.stringContaining(field) });
  });

  it('a grant expires at most SVC_GRANT_MAX_DAYS (default 366) days ahead: 400 naming expiresAt and the limit, nothing stored', async () => {
    const before = (await get('/authority-grants/changes?pageSize=100')).body.total as number;
    const far = await post('/authority-grants/changes', alice, grantBody(action(), { expiresAt: '9999-12-31T23:59:59Z' }));
    expect({ status: far.status, body: far.body }).toEqual({ status: 400, body: { error: expect.stringMatching(/^expiresAt must be at most 366 days ahead \(SVC_GRANT_MAX_DAYS\)/) } });
    expect((await get('/authority-grants/changes?pageSize=100')).body.total).toBe(before);
    expect((await post('/authority-grants/changes', alice, grantBody(action(), { expiresAt: new Date(Date.now() + 365 * 86400_000).toISOString() }))).status).toBe(201);
  });

  it('nobody grants authority to themselves: neither the proposer nor the approver may be the grantee', async () => {
    const self = await post('/authority-grants/changes', alice, grantBody(action(), { grantee: 'alice' }));
    expect(self.status).toBe(403);
    expect(self.body).toMatchObject({ code: 'SELF_GRANT_DENIED' });
    const forBob = await post('/authority-grants/changes', alice, grantBody(action(), { grantee: 'bob' }));
    expect(forBob.status).toBe(201);
    const byBob = await post(`/authority-grants/changes/${forBob.body.id}/approve`, bob, envelope(bob, forBob.body.id, 'approve'));
    expect(byBob.status).toBe(403);
    expect(byBob.body).toMatchObject({ code: 'SELF_GRANT_DENIED' });
    expect((await get(`/authority-grants/changes?status=PENDING_APPROVAL&pageSize=100`)).body.items.map((c: { id: string }) => c.id)).toContain(forBob.body.id);
    expect((await post('/authority-grants/changes', agent, grantBody(action()))).body).toMatchObject({ code: 'NON_HUMAN_CALLER_DENIED' });
  });

  it('a policy that requires a grant refuses a key without one (NOT_AUTHORIZED), with a signed Refusal Record', async () => {
    const res = await execute(action());
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ code: 'POLICY_DENIED' });
    const record = await refusalOf(res.id);
    expect(record).toMatchObject({ matchedRuleId: 'NOT_AUTHORIZED', assessment: { authority: { status: 'FAILED', grant: null } } });
    expect((await request(server.url).post('/refusal/verify').send(record)).body.valid).toBe(true);
    const inEffect = (await get('/policies/in-effect')).body.find((p: { name: string }) => p.name === 'granted');
    expect(inEffect).toMatchObject({ authorityGrantRequired: true, signals: { sourced: [] } });
  });

  it('checks every limit at and just past its bounds; the grant checked is in the assessment', async () => {
    const act = action();
    const approved = await grant(act);
    expect(approved).toMatchObject({ kind: 'grant', grantee: 'agent-7', action: act, limits: LIMITS, status: 'APPROVED', decider: 'bob' });
    const inForce = (await get('/authority-grants?pageSize=100', agent)).body.items;
    expect(inForce).toContainEqual({
      grantId: approved.id,
      grantee: 'agent-7',
      action: act,
      limits: LIMITS,
      expiresAt: approved.expiresAt,
      proposer: 'alice',
      approvedBy: 'bob',
      grantedAt: approved.decidedAt,
    });
    for (const amount of [10, 1000]) {
      const ok = await execute(act, { amount, currency: 'EUR' });
      expect(ok.status).toBe(200);
      expect(ok.body.trustRecord.assessment.authority).toEqual({
        status: 'VERIFIED',
        callerId: 'agent-7',
        principalId: 'agent-7',
        grant: { grantId: approved.id, action: act, limits: LIMITS, expiresAt: approved.expiresAt },
      });
    }
    for (const parameters of [{ amount: 9.99, currency: 'EUR' }, { amount: 1000.01, currency: 'EUR' }, { amount: 100, currency: 'USD' }, { amount: '100', currency: 'EUR' }, { currency: 'EUR' }]) {
      const refused = await execute(act, parameters);
      expect(refused.status).toBe(403);
      const record = await refusalOf(refused.id);
      expect(record).toMatchObject({ matchedRuleId: 'NOT_AUTHORIZED', assessment: { authority: { status: 'FAILED', grant: { grantId: approved.id } } } });
    }
    // A grant for one action gives no authority for another.
    expect((await refusalOf((await execute(action())).id)).matchedRuleId).toBe('NOT_AUTHORIZED');
  });

  it('after its expiry a grant refuses as AUTHORITY_EXPIRED, and is no longer listed', async () => {
    const act = action();
    const approved = await grant(act, { expiresAt: new Date(Date.now() + 2500).toISOString() });
    expect((await execute(act)).status).toBe(200);
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(approved.expiresAt as string) - Date.now() + 100)));
    const res = await execute(act);
    expect(res.status).toBe(403);
    expect(await refusalOf(res.id)).toMatchObject({ matchedRuleId: 'AUTHORITY_EXPIRED', assessment: { authority: { status: 'FAILED', grant: { grantId: approved.id } } } });
    expect((await get('/authority-grants?pageSize=100')).body.items.map((g: { grantId: string }) => g.grantId)).not.toContain(approved.id);
  });

  it('revoke: a revoked grant refuses as NOT_AUTHORIZED; revoking twice is 409', async () => {
    const act = action();
    const approved = await grant(act);
    const revoke = await governed(server.url, '/authority-grants', alice, bob, { kind: 'revoke', grantId: approved.id, reason: 'done' });
    expect(revoke).toMatchObject({ kind: 'revoke', grantId: approved.id, grantee: 'agent-7', action: act, status: 'APPROVED' });
    expect((await refusalOf((await execute(act)).id)).matchedRuleId).toBe('NOT_AUTHORIZED');
    expect((await post('/authority-grants/changes', alice, { kind: 'revoke', grantId: approved.id })).status).toBe(409);
    expect((await post('/authority-grants/changes', alice, { kind: 'revoke', grantId: '00000000-0000-4000-8000-000000000000' })).status).toBe(409);
    // Not an id the service makes (a lower-case UUID): 400, naming grantId.
    const malformed = await post('/authority-grants/changes', alice, { kind: 'revoke', grantId: 'no-such-grant' });
    expect({ status: malformed.status, error: malformed.body.error }).toEqual({ status: 400, error: expect.stringMatching(/^grantId is not valid: a lower-case UUID/) });
    expect((await get('/authority-grants?pageSize=100')).body.items.map((g: { grantId: string }) => g.grantId)).not.toContain(approved.id);
  });

  it('a grant revoked between decision and release: nothing is released (409 AUTHORIZATION_NO_LONGER_VALID)', async () => {
    const act = action();
    const approved = await grant(act);
    const pending = execute(act, { amount: 120, currency: 'EUR', sandboxPauseBeforeReleaseMs: 1500 });
    await new Promise((r) => setTimeout(r, 300));
    await governed(server.url, '/authority-grants', alice, bob, { kind: 'revoke', grantId: approved.id });
    const res = await pending;
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'AUTHORIZATION_NO_LONGER_VALID', executionStatus: 'NOT_EXECUTED' });
    expect((await get(`/execution-intents/${res.id}`)).body.status).toMatchObject({ state: 'ERRORED', error: { phase: 'recheck-failed' } });
  });

  it('a grant that expires between decision and release: nothing is released', async () => {
    const act = action();
    const approved = await grant(act, { expiresAt: new Date(Date.now() + 3000).toISOString() });
    const res = await execute(act, { amount: 120, currency: 'EUR', sandboxPauseBeforeReleaseMs: Math.max(0, Date.parse(approved.expiresAt as string) - Date.now() + 200) });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'AUTHORIZATION_NO_LONGER_VALID', executionStatus: 'NOT_EXECUTED' });
  });
});

describe.each(STORAGE_TARGETS)('SVC_GRANT_MAX_DAYS on $name', (factory) => {
  let server: TestServer;
  afterAll(async () => {
    await server?.destroy();
  });

  it('bounds how far ahead a grant may expire', async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, agent), SVC_GRANT_MAX_DAYS: '2' });
    const propose = (days: number) =>
      request(server.url)
        .post('/authority-grants/changes')
        .set('authorization', bearer(alice))
        .send({ kind: 'grant', grantee: 'agent-7', action: `sandbox:pay${Math.round(days * 10)}`, limits: [], expiresAt: new Date(Date.now() + days * 86400_000).toISOString(), reason: 'r' });
    const three = await propose(3);
    expect({ status: three.status, error: three.body.error }).toEqual({ status: 400, error: expect.stringMatching(/^expiresAt must be at most 2 days ahead \(SVC_GRANT_MAX_DAYS\)/) });
    expect((await propose(1.9)).status).toBe(201);
  });
});
