import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import request from 'supertest';
import type { PolicyDocument } from '@ets/domain';
import { apiKeysEnv, bearer, businessTransaction, makeKey, publishPolicy, STORAGE_TARGETS, startTestServer, type TestKey, type TestServer } from '@ets/test-support';
import { envelope } from './governance-fixtures.js';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['sandbox:echo'], tenants: ['t1'] });

/** Version 1: sanctioned countries refused, large amounts overridden, the rest approved; `amount` bound to the intent. */
const v1: PolicyDocument = {
  name: 'impact-test',
  policyVersion: '1.0.0',
  signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
  rules: [
    { id: 'sanctioned', when: "has(signals.country) && signals.country in ['KP', 'IR']", action: 'reject', reason: 'Country is sanctioned' },
    { id: 'large', when: 'has(signals.amount) && signals.amount > 10000', action: 'approve', requires_override: true, reason: 'Large transfer' },
    { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
  ],
  boundSignals: { amount: 'intent.parameters.amount' },
};

/** Version 2: RU sanctioned too, above 50000 refused, the override from 5000, only FR and DE approved, the rest refused by default. */
const v2: PolicyDocument = {
  ...v1,
  policyVersion: '2.0.0',
  rules: [
    { id: 'sanctioned', when: "has(signals.country) && signals.country in ['KP', 'IR', 'RU']", action: 'reject', reason: 'Country is sanctioned' },
    { id: 'huge', when: 'has(signals.amount) && signals.amount > 50000', action: 'reject', reason: 'Too large' },
    { id: 'large', when: 'has(signals.amount) && signals.amount > 5000', action: 'approve', requires_override: true, reason: 'Large transfer' },
    { id: 'eu', when: "has(signals.country) && signals.country in ['FR', 'DE']", action: 'approve', reason: 'Within the EU' },
  ],
  default: { action: 'reject', reason: 'Outside the EU' },
};

const other: PolicyDocument = { ...v1, name: 'impact-other' };

/** A transaction of `policy` whose bound amount is sent both as the signal and as the intent's parameter. */
const tx = (amount: unknown, country: string, over: { policy?: string; paramAmount?: unknown } = {}) =>
  businessTransaction({
    intent: { action: 'sandbox:echo', parameters: { amount: 'paramAmount' in over ? over.paramAmount : amount } },
    policy: { name: over.policy ?? 'impact-test', version: '1.0.0' },
    signals: { amount, country },
  });

describe.each(STORAGE_TARGETS)('impact preview of a pending policy change on $name', (factory) => {
  let server: TestServer;
  let changeId: string;
  /** businessTransactionId of each request, by its label. */
  const ids: Record<string, string> = {};
  const get = (p: string, key: TestKey = bob) => request(server.url).get(p).set('authorization', bearer(key));
  const post = (p: string, body: unknown, key: TestKey = agent) => request(server.url).post(p).set('authorization', bearer(key)).send(body as object);

  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, agent), SVC_SANDBOX: 'true' });
    await publishPolicy(server.dataSource, v1);
    await publishPolicy(server.dataSource, other);
    // One after another, each answered before the next: their decision times are in this order.
    const history: [label: string, route: string, body: Record<string, unknown>, status: number][] = [
      ['FR 100', '/execute', tx(100, 'FR'), 200],
      ['RU 100', '/execute', tx(100, 'RU'), 200],
      ['FR 7000', '/execute', tx(7000, 'FR'), 200],
      ['DE 20000', '/execute', tx(20000, 'DE'), 202],
      ['FR 60000', '/execute', tx(60000, 'FR'), 202],
      ['KP 100', '/execute', tx(100, 'KP'), 403],
      ['US 100', '/execute', tx(100, 'US'), 200],
      ['FR 100 recorded', '/transactions', tx(100, 'FR'), 201],
      ['FR lots', '/execute', tx('lots', 'FR'), 403],
      // Refused before the rules were evaluated: not replayed.
      ['bound mismatch', '/execute', tx(100, 'FR', { paramAmount: 200 }), 403],
      // Another policy: not replayed.
      ['other policy', '/execute', tx(100, 'RU', { policy: 'impact-other' }), 200],
    ];
    for (const [label, route, body, status] of history) {
      const res = await post(route, body);
      expect(`${label}: ${res.status}`).toBe(`${label}: ${status}`);
      ids[label] = body.businessTransactionId as string;
    }
    // A claim as stored before decisions kept their input (migration 0017): not replayed.
    const q = factory.name === 'postgres' ? '($1, $2, $3, $4)' : '(?, ?, ?, ?)';
    await server.dataSource.query(`INSERT INTO business_transactions (business_transaction_id, caller_id, outcome, created_at) VALUES ${q}`, [randomUUID(), 'agent-7', 'EXECUTED', new Date().toISOString()]);

    const proposed = await post('/policies/impact-test/1.0.0/pending-changes', { proposedContent: v2, reason: 'tighter' }, alice);
    expect(proposed.status).toBe(201);
    changeId = proposed.body.id as string;
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it('keeps the decision input with the claim only when the rules were evaluated', async () => {
    const q = factory.name === 'postgres' ? '$1' : '?';
    const row = async (label: string) =>
      ((await server.dataSource.query(`SELECT policy_name, policy_version, decision_action, matched_rule_id, decision_input FROM business_transactions WHERE business_transaction_id = ${q}`, [ids[label]])) as Record<string, string | null>[])[0]!;
    expect(await row('DE 20000')).toEqual({
      policy_name: 'impact-test',
      policy_version: '1.0.0',
      decision_action: 'requires_override',
      matched_rule_id: 'large',
      decision_input: expect.any(String),
    });
    expect(JSON.parse((await row('DE 20000')).decision_input!)).toEqual({ signals: { amount: 20000, country: 'DE' }, intent: { action: 'sandbox:echo', parameters: { amount: 20000 } } });
    expect(await row('bound mismatch')).toEqual({ policy_name: null, policy_version: null, decision_action: null, matched_rule_id: null, decision_input: null });
    expect((await row('FR lots')).matched_rule_id).toBe('signal-type-violation');
  });

  it('replays the proposed version over every recorded decision of the policy, with exact counts', async () => {
    const res = await get(`/policies/pending-changes/${changeId}/impact`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      policyName: 'impact-test',
      fromVersion: '1.0.0',
      toVersion: '2.0.0',
      replayed: 9,
      changed: 4,
      byTransition: { 'approve->reject': 2, 'approve->requires_override': 1, 'requires_override->reject': 1 },
      byRule: { eu: 2, sanctioned: 2, large: 2, huge: 1, default: 1, 'signal-type-violation': 1 },
      examples: [
        { businessTransactionId: ids['US 100'], before: { action: 'approve', matchedRuleId: 'ok' }, after: { action: 'reject', matchedRuleId: 'default' } },
        { businessTransactionId: ids['FR 60000'], before: { action: 'requires_override', matchedRuleId: 'large' }, after: { action: 'reject', matchedRuleId: 'huge' } },
        { businessTransactionId: ids['FR 7000'], before: { action: 'approve', matchedRuleId: 'ok' }, after: { action: 'requires_override', matchedRuleId: 'large' } },
        { businessTransactionId: ids['RU 100'], before: { action: 'approve', matchedRuleId: 'ok' }, after: { action: 'reject', matchedRuleId: 'sanctioned' } },
      ],
    });
    // The default limit (1000) and the largest take the same nine.
    expect((await get(`/policies/pending-changes/${changeId}/impact?limit=10000`)).body).toEqual(res.body);
  });

  it('replays only the latest `limit` decisions, newest first', async () => {
    const res = await get(`/policies/pending-changes/${changeId}/impact?limit=3`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      replayed: 3,
      changed: 1,
      byTransition: { 'approve->reject': 1 },
      byRule: { 'signal-type-violation': 1, eu: 1, default: 1 },
      examples: [{ businessTransactionId: ids['US 100'] }],
    });
    expect((await get(`/policies/pending-changes/${changeId}/impact?limit=1`)).body).toMatchObject({ replayed: 1, changed: 0, byTransition: {}, byRule: { 'signal-type-violation': 1 }, examples: [] });
  });

  it('refuses what is not a USER key, an unknown or non-policy change, and anything but a limit 1 to 10000', async () => {
    expect((await request(server.url).get(`/policies/pending-changes/${changeId}/impact`)).status).toBe(401);
    const service = await get(`/policies/pending-changes/${changeId}/impact`, agent);
    expect(service.status).toBe(403);
    expect(service.body).toEqual({ error: expect.any(String), code: 'NON_HUMAN_CALLER_DENIED' });
    expect((await get(`/policies/pending-changes/${randomUUID()}/impact`)).status).toBe(404);
    const grant = await post(
      '/authority-grants/changes',
      { kind: 'grant', grantee: 'agent-7', action: 'sandbox:echo', limits: [], expiresAt: new Date(Date.now() + 3_600_000).toISOString(), reason: 'not a policy' },
      alice,
    );
    expect(grant.status).toBe(201);
    expect((await get(`/policies/pending-changes/${grant.body.id}/impact`)).status).toBe(404);
    for (const query of ['limit=0', 'limit=10001', 'limit=1.5', 'limit=1e3', 'limit=', 'limit=5&limit=6', 'limit[a]=5', 'page=1', 'limit=5&x=1']) {
      const res = await get(`/policies/pending-changes/${changeId}/impact?${query}`);
      expect(`${query}: ${res.status}`).toBe(`${query}: 400`);
      expect(res.body).toEqual({ error: expect.any(String) });
    }
  });

  it('answers 400 for any limit but a whole number 1 to 10000, and never 500 (fast-check)', async () => {
    const valid = (s: string) => /^[1-9]\d{0,4}$/.test(s) && Number(s) <= 10000;
    const limitArb = fc.oneof(
      fc.integer({ min: -5, max: 10005 }).map(String),
      fc.string({ maxLength: 12 }),
      fc.constantFrom('1e3', '0x10', '00', '010', ' 7', '7 ', '+7', '-0', '9007199254740993', '\u0000', 'NaN', 'Infinity', '٣'),
    );
    await fc.assert(
      fc.asyncProperty(limitArb, fc.option(fc.string({ minLength: 1, maxLength: 8 })), async (limit, extra) => {
        const query = `limit=${encodeURIComponent(limit)}${extra !== null ? `&${encodeURIComponent(extra)}=1` : ''}`;
        const res = await get(`/policies/pending-changes/${changeId}/impact?${query}`);
        const expected = valid(limit) && extra === null ? 200 : 400;
        expect(`${JSON.stringify(query)}: ${res.status}`).toBe(`${JSON.stringify(query)}: ${expected}`);
        if (expected === 200) expect(res.body.replayed).toBe(Math.min(9, Number(limit)));
      }),
      { numRuns: 80 },
    );
  });

  it('is 409 once the change is decided', async () => {
    const rejected = await post(`/policies/pending-changes/${changeId}/reject`, envelope(bob, changeId, 'reject'), bob);
    expect(rejected.status).toBe(200);
    const res = await get(`/policies/pending-changes/${changeId}/impact`);
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: expect.any(String) });
  });
});
