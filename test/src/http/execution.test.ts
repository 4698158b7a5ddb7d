import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { verifyRecord } from '@ets/adapters-crypto';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  makeKey,
  publishPolicy,
  STORAGE_TARGETS,
  startTestServer,
  type TestServer,
} from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['sandbox:echo', 'test:echo', 'payments:transfer'], tenants: ['t1'] });
const human = makeKey('operator-ann', { holder: 'USER', capabilities: ['*'], principals: ['agent-7'] });
const narrow = makeKey('narrow', { holder: 'SERVICE', capabilities: [], principals: ['agent-7'], tenants: ['t1'] });

describe.each(STORAGE_TARGETS)('execution pipeline on $name', (factory) => {
  let server: TestServer;
  let contentHash: string;
  let jwks: { keys: object[] };
  const post = (path: string, body: unknown, key = agent) => request(server.url).post(path).set('authorization', bearer(key)).send(body as object);
  const get = (path: string, key = agent) => request(server.url).get(path).set('authorization', bearer(key));

  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(agent, human, narrow), SVC_SANDBOX: 'true' });
    contentHash = await publishPolicy(server.dataSource);
    jwks = (await request(server.url).get('/.well-known/jwks.json')).body;
  });
  afterAll(async () => {
    await server.destroy();
  });

  describe('the authentication event of /execute and /transactions, stored with the request\'s first record', () => {
    /** The ids of the agent's events on the pipeline's two routes. */
    const pipelineEvents = async (): Promise<string[]> =>
      (await get('/audit/auth-events?limit=500', human)).body.events
        .filter((e: { route: string; callerId: string }) => ['/execute', '/transactions'].includes(e.route) && e.callerId === 'agent-7')
        .map((e: { eventId: string }) => e.eventId);
    const leafOf = async (eventId: string): Promise<number> => {
      const [r] = (await server.dataSource.query(`SELECT COUNT(*) AS n FROM transparency_log_leaves WHERE record_kind = 'audit-event' AND record_id = '${eventId}'`)) as { n: string | number }[];
      return Number(r!.n);
    };

    it('stores exactly one signed event per request, whatever the outcome (executed, refused, recorded, invalid, duplicate), each a leaf of the log', async () => {
      const before = new Set(await pipelineEvents());
      const tx = businessTransaction();
      expect((await post('/execute', tx)).status).toBe(200);
      expect((await post('/execute', tx)).status).toBe(409);
      expect((await post('/execute', businessTransaction({ signals: { amount: 120, country: 'KP' } }))).status).toBe(403);
      expect((await post('/transactions', businessTransaction())).status).toBe(201);
      expect((await post('/execute', { ...businessTransaction(), businessTransactionId: 'nope' })).status).toBe(400);
      expect((await post('/execute', businessTransaction({ policy: { name: 'no-such-policy', version: '1.0.0' } }))).status).toBe(404);
      const added = (await pipelineEvents()).filter((id) => !before.has(id));
      expect(added).toHaveLength(6);
      for (const id of added) expect(await leafOf(id)).toBe(1);
    });

    it('fails closed: when the event cannot be stored nothing is released, nothing is stored, and the answer is 503 AUDIT_UNAVAILABLE', async () => {
      const tx = businessTransaction();
      await server.dataSource.query('ALTER TABLE audit_events RENAME TO audit_events_gone');
      try {
        const res = await post('/execute', tx);
        expect(res.status).toBe(503);
        expect(res.body).toEqual({ error: expect.any(String), code: 'AUDIT_UNAVAILABLE' });
        expect((await post('/transactions', businessTransaction())).body.code).toBe('AUDIT_UNAVAILABLE');
      } finally {
        await server.dataSource.query('ALTER TABLE audit_events_gone RENAME TO audit_events');
      }
      // The intent and the event were one commit: neither exists, so the same id is still free.
      expect((await get(`/execution-intents/${tx.businessTransactionId}`)).status).toBe(404);
      expect((await post('/execute', tx)).status).toBe(200);
    });
  });

  it('releases an approved action: intent first, then a signed, chained Trust Record that verifies with only the JWKS', async () => {
    const tx = businessTransaction();
    const res = await post('/execute', tx);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ businessTransactionId: tx.businessTransactionId, executionStatus: 'EXECUTED', decision: { action: 'approve', matchedRuleId: 'ok' } });
    expect(res.body.result).toMatchObject({ echo: { amount: 120 } });
    const record = res.body.trustRecord;
    expect(record.transaction.policy.contentHash).toBe(contentHash);
    expect(record.assessment).toEqual({
      authority: { status: 'VERIFIED', callerId: 'agent-7', principalId: 'agent-7', grant: null },
      businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] },
      execution: { status: 'EXECUTED' },
    });
    expect(record.executions).toHaveLength(1);
    expect(record.executions[0]).toEqual(expect.objectContaining({ chainHash: expect.stringMatching(/^[0-9a-f]{64}$/), chainSignature: expect.any(String) }));
    expect(verifyRecord(record, jwks)).toEqual(expect.objectContaining({ valid: true }));
    expect((await get(`/trust-records/${tx.businessTransactionId}`)).body).toEqual(record);
    expect((await get(`/transactions/${tx.businessTransactionId}`)).body).toMatchObject({ outcome: 'EXECUTED', trustRecord: record, refusal: null });

    const intent = await get(`/execution-intents/${tx.businessTransactionId}`);
    expect(intent.status).toBe(200);
    expect(intent.body.status.state).toBe('FINALIZED');
    expect(intent.body.intent.businessTransactionHash).toBe(record.businessTransactionHash);
    expect(JSON.stringify(intent.body.intent)).not.toContain('inv-42');
    expect(intent.body.intent).not.toHaveProperty('parameters');
    expect(JSON.stringify(intent.body)).not.toMatch(/release_?[cC]ontext/);
    expect(verifyRecord(intent.body.intent, jwks).valid).toBe(true);
    expect((await request(server.url).post('/execution-intents/verify').send(intent.body.intent)).body).toMatchObject({ valid: true, errors: [] });
    const tampered = { ...intent.body.intent, action: 'sandbox:other' };
    expect((await request(server.url).post('/execution-intents/verify').send(tampered)).body.valid).toBe(false);
    expect((await request(server.url).post('/execution-intents/verify').send({ a: 1 })).status).toBe(400);

    // The next execution extends the deployment's chain.
    const next = await post('/execute', businessTransaction());
    expect(next.body.trustRecord.executions[0].previousChainHash).toBeDefined();
    expect(next.body.trustRecord.executions[0].previousChainHash).not.toBeNull();
  });

  it('answers a duplicate id with 409 on both routes, and of concurrent requests exactly one wins', async () => {
    const tx = businessTransaction();
    expect((await post('/execute', tx)).status).toBe(200);
    const again = await post('/execute', tx);
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ error: `Business Transaction '${tx.businessTransactionId}' already exists.` });
    expect((await post('/transactions', tx)).status).toBe(409);

    const racing = businessTransaction();
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => post(i % 2 ? '/execute' : '/transactions', racing)));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200 || s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(11);
  });

  it.each([
    ['a malformed id, before anything else', { businessTransactionId: 'abc', metadata: null }, 'businessTransactionId must be a valid UUID.'],
    ['a missing object', { metadata: undefined }, 'metadata is required and must be an object.'],
    ['a null object', { authority: null }, 'authority is required and must be an object.'],
    ['a non-object', { intent: 'pay' }, 'intent is required and must be an object.'],
    ['a required field that is not a string', { policy: { name: 'exec-test', version: 1 } }, 'policy.version is required and must be a string.'],
    ['a broken trust chain', { authorization: { authorityId: 'someone-else' } }, 'authorization.authorityId must match authority.authorityId.'],
  ])('answers 400 without a code for %s, and stores nothing', async (_what, over, message) => {
    for (const path of ['/execute', '/transactions']) {
      const tx = businessTransaction(over);
      const res = await post(path, tx);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: message });
      if (typeof tx.businessTransactionId === 'string' && tx.businessTransactionId.length === 36) {
        expect((await get(`/transactions/${tx.businessTransactionId}`)).status).toBe(404);
      }
    }
  });

  it('applies the caller rules: principal, tenant, capability', async () => {
    const principal = await post('/execute', businessTransaction({}, 'someone-else'));
    expect(principal.status).toBe(403);
    expect(principal.body).toEqual({ error: 'Caller is not permitted to assert this authority.principalId.' });
    const empty = await post('/transactions', businessTransaction({}, ''));
    expect(empty.status).toBe(403);
    expect((await post('/execute', businessTransaction({ metadata: {} }, 'agent-7'), human)).status).toBe(200);

    const tenant = await post('/execute', businessTransaction({ metadata: { tenantId: 't2' } }));
    expect(tenant.status).toBe(403);
    expect(tenant.body.code).toBe('TENANT_NOT_ALLOWED');
    expect((await post('/execute', businessTransaction({ metadata: {} }))).status).toBe(200);

    const capability = await post('/execute', businessTransaction(), narrow);
    expect(capability.status).toBe(403);
    expect(capability.body.code).toBe('CAPABILITY_NOT_ALLOWED');
  });

  it('answers 404 for an unknown policy version and 503 CONNECTOR_NOT_REGISTERED for an action without a connector', async () => {
    const unknown = await post('/execute', businessTransaction({ policy: { name: 'exec-test', version: '9.9.9' } }));
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: "Policy 'exec-test' version '9.9.9' was not found." });
    for (const action of ['payments:transfer', 'test:echo']) {
      const res = await post('/execute', businessTransaction({ intent: { action, parameters: {} } }));
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('CONNECTOR_NOT_REGISTERED');
      expect((await post('/transactions', businessTransaction({ intent: { action, parameters: {} } }))).body.code).toBe('CONNECTOR_NOT_REGISTERED');
    }
  });

  it('refuses by policy with 403 POLICY_DENIED and a signed Refusal Record under the same content hash', async () => {
    const tx = businessTransaction({ signals: { amount: 5, country: 'KP' } });
    const res = await post('/execute', tx);
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: 'Execution rejected: Country is sanctioned', code: 'POLICY_DENIED' });
    // Where the signed record is: the body stays the spec's envelope.
    expect(res.headers.link).toBe(`</refusal/${tx.businessTransactionId}>; rel="related"`);
    const refusal = await get(`/refusal/${tx.businessTransactionId}`);
    expect(refusal.status).toBe(200);
    expect(refusal.body).toMatchObject({ policyContentHash: contentHash, matchedRuleId: 'sanctioned', reason: 'Country is sanctioned', decision: { action: 'reject' } });
    expect(refusal.body.assessment.execution.status).toBe('REFUSED');
    expect((await request(server.url).post('/refusal/verify').send(refusal.body)).body).toMatchObject({ valid: true, errors: [] });
    expect((await request(server.url).post('/refusal/verify').send({ ...refusal.body, reason: 'fine' })).body.valid).toBe(false);
    expect((await request(server.url).post('/refusal/verify').send({ hello: 1 })).status).toBe(400);
    expect(verifyRecord(refusal.body, jwks).valid).toBe(true);
    expect((await post('/execute', tx)).status).toBe(409);
    expect((await get(`/execution-intents/${tx.businessTransactionId}`)).body.code).toBe('EXECUTION_INTENT_NOT_FOUND');
    expect((await get(`/refusal/${businessTransaction().businessTransactionId}`)).status).toBe(404);

    const refusedTx = businessTransaction({ signals: { country: 'IR' } });
    const byTransactions = await post('/transactions', refusedTx);
    expect(byTransactions.status).toBe(403);
    expect(byTransactions.body.code).toBe('POLICY_DENIED');
    expect(byTransactions.headers.link).toBe(`</refusal/${refusedTx.businessTransactionId}>; rel="related"`);
    // Other 403s have no record to point to.
    const otherForbidden = await post('/execute', businessTransaction({ metadata: { tenantId: 'not-mine' } }));
    expect(otherForbidden.body.code).toBe('TENANT_NOT_ALLOWED');
    expect(otherForbidden.headers.link).toBeUndefined();
  });

  it('checks declared signal types before any rule: signal-type-violation naming the signal', async () => {
    const tx = businessTransaction({ signals: { amount: '120', country: 'KP' } });
    const res = await post('/execute', tx);
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('POLICY_DENIED');
    expect(res.body.error).toContain('amount');
    const refusal = (await get(`/refusal/${tx.businessTransactionId}`)).body;
    expect(refusal.matchedRuleId).toBe('signal-type-violation');
    // Undeclared and unsent signals are not affected.
    expect((await post('/execute', businessTransaction({ signals: { undeclared: [1, 2], country: 'FR' } }))).status).toBe(200);
  });

  it('records but does not release an approval that requires override (202)', async () => {
    const tx = businessTransaction({ signals: { amount: 20000, country: 'FR' } });
    const res = await post('/execute', tx);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ executionStatus: 'PENDING_OVERRIDE', decision: { requires_override: true } });
    expect(res.body.trustRecord.executions).toEqual([]);
    expect((await get(`/execution-intents/${tx.businessTransactionId}`)).status).toBe(404);
  });

  it('records without release on POST /transactions', async () => {
    const tx = businessTransaction();
    const res = await post('/transactions', tx);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ status: 'RECORDED', decision: { action: 'approve' } });
    expect(res.body.trustRecord.executions).toEqual([]);
    expect(res.body.trustRecord.assessment.execution.status).toBe('NOT_RELEASED');
    expect(verifyRecord(res.body.trustRecord, jwks).valid).toBe(true);
    expect((await get(`/execution-intents/${tx.businessTransactionId}`)).status).toBe(404);
    const stored = await get(`/transactions/${tx.businessTransactionId}`);
    expect(stored.body).toMatchObject({ businessTransactionId: tx.businessTransactionId, outcome: 'RECORDED', trustRecord: res.body.trustRecord, refusal: null });
  });

  it('drives every intent state through the sandbox connector and lets a human resolve', async () => {
    const before = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { sandboxFailure: 'before-send' } } });
    const r1 = await post('/execute', before);
    expect(r1.status).toBe(502);
    expect(r1.body).toMatchObject({ code: 'RUNTIME_ERROR', executionStatus: 'NOT_EXECUTED' });
    expect((await get(`/execution-intents/${before.businessTransactionId}`)).body.status).toMatchObject({ state: 'ERRORED', error: { phase: 'before-send' } });

    const after = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { sandboxFailure: 'after-send' } } });
    const r2 = await post('/execute', after);
    expect(r2.status).toBe(502);
    expect(r2.body).toEqual({ error: expect.any(String), code: 'EXECUTION_OUTCOME_UNKNOWN', executionStatus: 'EXECUTION_UNKNOWN' });
    expect((await get(`/execution-intents/${after.businessTransactionId}`)).body.status.state).toBe('ERRORED');
    expect((await get(`/trust-records/${after.businessTransactionId}`)).status).toBe(404);

    const listed = await get('/execution-intents');
    const ids = (listed.body.items as { intent: { businessTransactionId: string } }[]).map((i) => i.intent.businessTransactionId);
    expect(ids).toEqual(expect.arrayContaining([before.businessTransactionId, after.businessTransactionId]));

    const resolvePath = `/execution-intents/${after.businessTransactionId}/resolve`;
    const notHuman = await post(resolvePath, { found: 'NOT_EXECUTED', note: 'checked' }, agent);
    expect(notHuman.status).toBe(403);
    expect(notHuman.body.code).toBe('NON_HUMAN_CALLER_DENIED');
    for (const bad of [{}, { found: 'MAYBE', note: 'x' }, { found: 'EXECUTED' }, { found: 'EXECUTED', note: '' }]) {
      const r = await post(resolvePath, bad, human);
      expect(r.status).toBe(400);
      expect(r.body.code).toBe('EXECUTION_INTENT_RESOLUTION_INVALID');
    }
    const resolved = await post(resolvePath, { found: 'NOT_EXECUTED', note: 'No payment with this reference at the bank.' }, human);
    expect(resolved.status).toBe(200);
    expect(resolved.body.status).toMatchObject({
      state: 'RESOLVED',
      resolution: { found: 'NOT_EXECUTED', note: 'No payment with this reference at the bank.', resolvedBy: 'operator-ann', previousState: 'ERRORED' },
    });
    const twice = await post(resolvePath, { found: 'NOT_EXECUTED', note: 'again' }, human);
    expect(twice.status).toBe(409);
    expect(twice.body.code).toBe('EXECUTION_INTENT_NOT_RESOLVABLE');

    const done = businessTransaction();
    await post('/execute', done);
    const finalized = await post(`/execution-intents/${done.businessTransactionId}/resolve`, { found: 'EXECUTED', note: 'x' }, human);
    expect(finalized.status).toBe(409);
    expect(finalized.body.code).toBe('EXECUTION_INTENT_NOT_RESOLVABLE');
    const missing = await post(`/execution-intents/${businessTransaction().businessTransactionId}/resolve`, { found: 'EXECUTED', note: 'x' }, human);
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('EXECUTION_INTENT_NOT_FOUND');
  });

  it('lists with page and pageSize and refuses bad paging with 400', async () => {
    for (const path of ['/transactions', '/trust-records']) {
      const res = await get(`${path}?page=1&pageSize=2`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ page: 1, pageSize: 2 });
      expect(res.body.items.length).toBeLessThanOrEqual(2);
      expect(res.body.total).toBeGreaterThan(2);
      for (const q of ['page=abc', 'pageSize=101', 'page=0', 'pageSize=0', 'page=1.5', 'pageSize=-1']) {
        const bad = await get(`${path}?${q}`);
        expect(bad.status).toBe(400);
        expect(bad.body.code).toBeUndefined();
      }
    }
    const second = await get('/transactions?page=2&pageSize=2');
    const first = await get('/transactions?page=1&pageSize=2');
    expect(second.body.items[0].businessTransactionId).not.toBe(first.body.items[0].businessTransactionId);
  });

  it('answers 401 before reading the body, and 413 for a body over the limit', async () => {
    for (const path of ['/execute', '/transactions']) {
      const anonymous = await request(server.url).post(path).send(businessTransaction());
      expect(anonymous.status).toBe(401);
      expect(anonymous.body).toEqual({ error: 'authentication required' });
      const tx = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { blob: 'x'.repeat(1024 * 1024 + 10) } } });
      const tooLarge = await post(path, tx);
      expect(tooLarge.status).toBe(413);
      expect(tooLarge.body).toEqual({ error: 'Request body is too large.' });
      expect((await get(`/transactions/${tx.businessTransactionId}`)).status).toBe(404);
    }
  });

  it('answers the GET 404s with the spec messages', async () => {
    const id = businessTransaction().businessTransactionId;
    expect((await get(`/transactions/${id}`)).body).toEqual({ error: 'Business Transaction not found.' });
    expect((await get(`/trust-records/${id}`)).body).toEqual({ error: 'Execution Trust Record not found.' });
  });
});
