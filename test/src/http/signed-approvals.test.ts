import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import request from 'supertest';
import { canonicalize } from '@ets/adapters-crypto';
import type { PolicyDocument } from '@ets/domain';
import {
  apiKeysEnv,
  bearer,
  businessCast,
  businessTransaction,
  makeKey,
  publishPolicy,
  signedApproval,
  STORAGE_TARGETS,
  startTestServer,
  type TestKey,
  type TestServer,
} from '@ets/test-support';

const { alice, bob, agent } = businessCast();
const ann = makeKey('ann', { holder: 'USER', capabilities: ['*'], stepUp: true });
const KEYS = apiKeysEnv(alice, bob, ann, agent);

const overridePolicy = (name: string, approvalScope?: PolicyDocument['approvalScope']): PolicyDocument => ({
  name,
  policyVersion: '1.0.0',
  signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
  ...(approvalScope ? { approvalScope } : {}),
  rules: [
    { id: 'large', when: "'amount' in intent.parameters && intent.parameters.amount > 1000", action: 'approve', requires_override: true, reason: 'Large transfer needs a second look' },
    { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
  ],
});

const BOUND: PolicyDocument = {
  name: 'bound',
  policyVersion: '1.0.0',
  signalsSchema: { amount: { type: 'number' }, payee: { type: 'string' } },
  boundSignals: { amount: 'intent.parameters.amount', payee: 'parameters.payee' },
  rules: [{ id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' }],
};

const signalsHash = (signals: unknown) => createHash('sha256').update(canonicalize(signals)).digest('hex');

describe.each(STORAGE_TARGETS)('signed approvals and bound signals on $name', (factory) => {
  let sandbox: TestServer;
  let plain: TestServer;

  beforeAll(async () => {
    sandbox = await startTestServer(factory, { ...KEYS, SVC_SANDBOX: 'true' });
    plain = await startTestServer(factory, KEYS);
    for (const server of [sandbox, plain]) {
      await publishPolicy(server.dataSource, overridePolicy('override-value', { value: 'intent.parameters.amount' }));
      await publishPolicy(server.dataSource, overridePolicy('override-resource', { resourceId: 'intent.parameters.invoiceId' }));
      await publishPolicy(server.dataSource, overridePolicy('override-none'));
      await publishPolicy(server.dataSource, BOUND);
    }
  });
  afterAll(async () => {
    await sandbox?.destroy();
    await plain?.destroy();
  });

  const post = (server: TestServer, p: string, key: TestKey, body: unknown) => request(server.url).post(p).set('authorization', bearer(key)).send(body as object);
  const large = (policy = 'override-value', over: Record<string, unknown> = {}) =>
    businessTransaction({
      intent: { action: 'sandbox:echo', parameters: { amount: 5000, currency: 'EUR', invoiceId: 'inv-42' } },
      policy: { name: policy, version: '1.0.0' },
      signals: { amount: 5000, country: 'FR' },
      ...over,
    });
  const withApproval = (tx: Record<string, unknown>, approval: unknown) => ({ ...tx, authorization: { ...(tx.authorization as object), approval } });
  /** An approval signed by `signer`'s step-up key, valid for `tx` unless `over` says otherwise. */
  const approvalBy = (signer: TestKey, tx: Record<string, unknown>, over: Record<string, unknown> = {}) =>
    signedApproval(signer.stepUpPrivateKeyPem!, {
      approvalId: randomUUID(),
      approverId: signer.record.callerId,
      businessTransactionId: tx.businessTransactionId,
      action: (tx.intent as { action: string }).action,
      scope: { field: 'value', value: 5000 },
      signalsHash: signalsHash(tx.signals ?? {}),
      expiresAt: new Date(Date.now() + 300_000).toISOString(),
      nonce: randomBytes(32).toString('base64url'),
      ...over,
    });
  const demoApproval = async (tx: Record<string, unknown>, scope: Record<string, unknown> = { field: 'value', value: 5000 }) => {
    const res = await post(sandbox, '/sandbox/approvals', agent, { businessTransactionId: tx.businessTransactionId, action: 'sandbox:echo', scope, signals: tx.signals });
    expect(res.status).toBe(201);
    return res.body as { payload: Record<string, unknown>; signature: string };
  };

  it('a requires_override decision without an approval is recorded, not released (202 PENDING_OVERRIDE)', async () => {
    const res = await post(sandbox, '/execute', agent, large());
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ executionStatus: 'PENDING_OVERRIDE', decision: { requires_override: true } });
    expect(res.body.trustRecord.executions).toEqual([]);
  });

  it('sandbox mode: the demo approver signs an approval (valid 5 minutes) that releases the decision', async () => {
    const tx = large();
    const approval = await demoApproval(tx);
    expect(approval.payload).toEqual({
      approvalId: expect.any(String),
      approverId: 'sandbox-demo-approver',
      businessTransactionId: tx.businessTransactionId,
      action: 'sandbox:echo',
      scope: { field: 'value', value: 5000 },
      signalsHash: signalsHash(tx.signals),
      expiresAt: expect.any(String),
      nonce: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    const validFor = Date.parse(approval.payload.expiresAt as string) - Date.now();
    expect(validFor).toBeGreaterThan(280_000);
    expect(validFor).toBeLessThanOrEqual(300_000);
    const res = await post(sandbox, '/execute', agent, withApproval(tx, approval));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ executionStatus: 'EXECUTED', decision: { matchedRuleId: 'large', requires_override: true } });
    expect(res.body.trustRecord.transaction.authorization.approval).toEqual(approval);
  });

  it('an approval used twice at once is accepted once: one request wins', async () => {
    const tx = large();
    const body = withApproval(tx, await demoApproval(tx));
    const results = await Promise.all(Array.from({ length: 8 }, () => post(sandbox, '/execute', agent, body)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) {
      expect([403, 409]).toContain(r.status);
      if (r.status === 403) expect(r.body.code).toBe('APPROVAL_INVALID');
    }
  });

  it('a human approver (a USER with a step-up key, not the requester) may approve', async () => {
    const tx = large();
    const res = await post(sandbox, '/execute', agent, withApproval(tx, approvalBy(bob, tx)));
    expect(res.status).toBe(200);
    // Rule 5: a request without signals is checked against the hash of {} instead of skipping the check.
    const bare = large();
    delete bare.signals;
    expect((await post(sandbox, '/execute', agent, withApproval(bare, approvalBy(bob, bare, { signalsHash: signalsHash({ amount: 5000 }) })))).body.code).toBe('APPROVAL_INVALID');
    expect((await post(sandbox, '/execute', agent, withApproval(bare, approvalBy(bob, bare, { signalsHash: signalsHash({}) })))).status).toBe(200);
  });

  it('an approval expiring more than 15 minutes ahead is refused, saying so; one within 15 minutes releases', async () => {
    const tx = large('override-value');
    const far = await post(sandbox, '/execute', agent, withApproval(tx, approvalBy(bob, tx, { expiresAt: '2099-01-01T00:00:00Z' })));
    expect({ status: far.status, body: far.body }).toEqual({
      status: 403,
      body: { error: expect.stringMatching(/^The approval is not valid: it expires more than 15 minutes ahead of the server's clock/), code: 'APPROVAL_INVALID' },
    });
    const res = await post(sandbox, '/execute', agent, withApproval(tx, approvalBy(bob, tx, { expiresAt: new Date(Date.now() + 14 * 60_000).toISOString() })));
    expect(res.status).toBe(200);
  });

  describe('an invalid approval is 403 APPROVAL_INVALID and stores nothing', () => {
    const cases: [string, (tx: Record<string, unknown>) => unknown, TestKey?][] = [
      ['another value than the request (scope.value)', (tx) => approvalBy(bob, tx, { scope: { field: 'value', value: 4999 } })],
      ['scoped by resource where the policy scopes by value (rule 4)', (tx) => approvalBy(bob, tx, { scope: { field: 'resourceId', resourceId: 'inv-42' } })],
      ["other signals than the request's (rule 5)", (tx) => approvalBy(bob, tx, { signalsHash: signalsHash({ amount: 5000 }) })],
      ['expired', (tx) => approvalBy(bob, tx, { expiresAt: new Date(Date.now() - 1000).toISOString() })],
      ['valid until 2099 (more than 15 minutes ahead)', (tx) => approvalBy(bob, tx, { expiresAt: '2099-01-01T00:00:00Z' })],
      ['valid 16 minutes', (tx) => approvalBy(bob, tx, { expiresAt: new Date(Date.now() + 16 * 60_000).toISOString() })],
      ['for another transaction', (tx) => approvalBy(bob, tx, { businessTransactionId: randomUUID() })],
      ['for another action', (tx) => approvalBy(bob, tx, { action: 'sandbox:other' })],
      ['signed with another key than the approver’s', (tx) => {
        const a = approvalBy(alice, tx);
        return signedApproval(alice.stepUpPrivateKeyPem!, { ...a.payload, approverId: 'bob' });
      }],
      ['by someone who is not a verified human with a step-up key', (tx) => approvalBy(bob, tx, { approverId: 'agent-7' })],
      ['by the requester itself', (tx) => approvalBy(ann, tx), ann],
      ['malformed', () => ({ payload: 'approved' })],
      ['tampered after signing', (tx) => {
        const a = approvalBy(bob, tx);
        return { ...a, payload: { ...a.payload, expiresAt: new Date(Date.now() + 900_000).toISOString() } };
      }],
    ];
    it.each(cases)('%s', async (_what, make, requester = agent) => {
      const tx = large('override-value', requester === ann ? { authority: { principalId: 'ann', authorityId: 'auth-1' }, metadata: {} } : {});
      const res = await post(sandbox, '/execute', requester, withApproval(tx, make(tx)));
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: expect.stringMatching(/^The approval is not valid: /), code: 'APPROVAL_INVALID' });
      expect((await request(sandbox.url).get(`/transactions/${tx.businessTransactionId}`).set('authorization', bearer(alice))).status).toBe(404);
      // Nothing was stored: the same transaction goes through with a valid approval.
      const retry = await post(sandbox, '/execute', requester, withApproval(tx, approvalBy(bob, tx)));
      expect(retry.status).toBe(200);
    });
  });

  it('scoped by resource: scope.resourceId must be the value at approvalScope.resourceId, or the transaction when the policy names none', async () => {
    const tx = large('override-resource');
    expect((await post(sandbox, '/execute', agent, withApproval(tx, approvalBy(bob, tx, { scope: { field: 'resourceId', resourceId: 'inv-43' } })))).body.code).toBe('APPROVAL_INVALID');
    expect((await post(sandbox, '/execute', agent, withApproval(tx, approvalBy(bob, tx, { scope: { field: 'resourceId', resourceId: 'inv-42' } })))).status).toBe(200);
    const none = large('override-none');
    const scope = { field: 'resourceId', resourceId: none.businessTransactionId };
    expect((await post(sandbox, '/execute', agent, withApproval(none, await demoApproval(none, scope)))).status).toBe(200);
  });

  it.each<[string, Record<string, unknown>]>([
    ['businessTransactionId', { businessTransactionId: 'abc' }],
    ['action', { action: 'payments:transfer' }],
    ['action', { action: 'sandbox' }],
    ['scope', { scope: { field: 'value' } }],
    ['scope', { scope: { field: 'amount', value: 1 } }],
    ['signals', { signals: [1] }],
    ['color', { color: 'blue' }],
  ])('POST /sandbox/approvals refuses a request breaking %s (400), signing nothing', async (field, over) => {
    const res = await post(sandbox, '/sandbox/approvals', agent, { businessTransactionId: randomUUID(), action: 'sandbox:echo', scope: { field: 'value', value: 1 }, ...over });
    expect(res.status).toBe(400);
    expect(res.body.error).toContain(field);
  });

  it('outside sandbox mode there is no /sandbox/approvals, and the demo approver approves nothing', async () => {
    expect((await post(plain, '/sandbox/approvals', agent, { businessTransactionId: randomUUID(), action: 'sandbox:echo', scope: { field: 'value', value: 5000 } })).status).toBe(404);
    const tx = large();
    const res = await post(plain, '/execute', agent, withApproval(tx, await demoApproval(tx)));
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ code: 'APPROVAL_INVALID', error: expect.stringContaining('sandbox mode') });
    expect((await post(plain, '/execute', agent, withApproval(tx, approvalBy(bob, tx)))).status).toBe(200);
  });

  describe('bound signals: the signal the decision rests on must equal the value released', () => {
    const bound = (parameters: Record<string, unknown>, signals: Record<string, unknown>) =>
      businessTransaction({ intent: { action: 'sandbox:echo', parameters }, policy: { name: 'bound', version: '1.0.0' }, signals });

    it('agreeing signal and parameters are released', async () => {
      expect((await post(plain, '/execute', agent, bound({ amount: 120, payee: 'acme' }, { amount: 120.0, payee: 'acme' }))).status).toBe(200);
    });

    it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
      ['the amount differs', { amount: 120, payee: 'acme' }, { amount: 12, payee: 'acme' }],
      ['the payee differs', { amount: 120, payee: 'acme' }, { amount: 120, payee: 'evil' }],
      ['the signal is not sent', { amount: 120, payee: 'acme' }, { payee: 'acme' }],
      ['the parameter is missing', { amount: 120 }, { amount: 120, payee: 'acme' }],
      ['the types differ', { amount: '120', payee: 'acme' }, { amount: 120, payee: 'acme' }],
    ])('refused when %s (bound-signal-mismatch, signed Refusal Record)', async (_what, parameters, signals) => {
      const tx = bound(parameters, signals);
      const res = await post(plain, '/execute', agent, tx);
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('POLICY_DENIED');
      const refusal = (await request(plain.url).get(`/refusal/${tx.businessTransactionId}`).set('authorization', bearer(alice))).body;
      expect(refusal).toMatchObject({ matchedRuleId: 'bound-signal-mismatch', assessment: { businessValidation: { status: 'FAILED' } } });
    });
  });
});
