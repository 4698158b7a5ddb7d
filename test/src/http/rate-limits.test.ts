import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { apiKeysEnv, bearer, businessTransaction, makeKey, publishPolicy, sqliteTarget, STORAGE_TARGETS, startTestServer, type TestServer } from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const RATE_LIMITED = { error: 'Rate limit exceeded. Try again later.', code: 'RATE_LIMITED' };

describe('rate limits on the running service (spec 8)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(sqliteTarget, {
      ...apiKeysEnv(agent),
      RATE_LIMIT_EXECUTE_PER_MINUTE: '2',
      RATE_LIMIT_HEALTH_PER_MINUTE: '3',
      RATE_LIMIT_PUBLIC_PER_MINUTE: '2',
      RATE_LIMIT_AUTH_FAILURE_PER_MINUTE: '2',
    });
    await publishPolicy(server.dataSource);
  });
  afterAll(async () => {
    await server.destroy();
  });

  const countEvents = async (): Promise<number> => {
    const rows: { n: string | number }[] = await server.dataSource.query('SELECT COUNT(*) AS n FROM audit_events');
    return Number(rows[0]!.n);
  };

  it('limits POST /execute per caller; a refused request is not evaluated, signed or stored', async () => {
    for (let i = 0; i < 2; i++) expect((await request(server.url).post('/execute').set('authorization', bearer(agent)).send(businessTransaction())).status).toBe(200);
    const events = await countEvents();
    const tx = businessTransaction();
    const refused = await request(server.url).post('/execute').set('authorization', bearer(agent)).send(tx);
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual(RATE_LIMITED);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(await countEvents()).toBe(events); // no audit event was signed or stored
    const claimed: unknown[] = await server.dataSource.query('SELECT 1 FROM business_transactions WHERE business_transaction_id = ?', [tx.businessTransactionId]);
    expect(claimed).toHaveLength(0);
    // Other keyed routes are not limited by the execute budget.
    expect((await request(server.url).get('/callers/me').set('authorization', bearer(agent))).status).toBe(200);
  });

  it('limits /health and /ready per IP', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await request(server.url).get(i % 2 ? '/ready' : '/health')).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    const res = await request(server.url).get('/health');
    expect(res.body).toEqual(RATE_LIMITED);
    expect(res.headers['retry-after']).toBeDefined();
  });

  it('limits key discovery with the public limiter', async () => {
    expect((await request(server.url).get('/.well-known/jwks.json')).status).toBe(200);
    expect((await request(server.url).get('/.well-known/jwks.json')).status).toBe(200);
    const res = await request(server.url).get('/keys/anything');
    expect(res.status).toBe(429);
    expect(res.body).toEqual(RATE_LIMITED);
  });

  it('limits failed authentication per IP: failures over it get 429 unaudited, a valid key from the same IP still 200', async () => {
    expect((await request(server.url).get('/callers/me').set('authorization', 'Bearer pk_local_wrong1')).status).toBe(401);
    expect((await request(server.url).get('/callers/me').set('authorization', 'Bearer pk_local_wrong2')).status).toBe(401);
    const events = await countEvents();
    const locked = await request(server.url).get('/callers/me').set('authorization', 'Bearer pk_local_wrong3');
    expect(locked.status).toBe(429);
    expect(locked.body).toEqual(RATE_LIMITED);
    expect(locked.headers['retry-after']).toBeDefined();
    expect(await countEvents()).toBe(events);
    expect((await request(server.url).get('/callers/me').set('authorization', bearer(agent))).status).toBe(200);
    expect(await countEvents()).toBe(events + 1);
  });
});

describe.each(STORAGE_TARGETS)('failed-authentication limit under concurrency on $name (memory store)', (factory) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(agent), RATE_LIMIT_AUTH_FAILURE_PER_MINUTE: '30' });
  });
  afterAll(async () => {
    await server.destroy();
  });

  it('answers at most 30 of 300 concurrent bad keys with 401 and audits only those; the rest 429; a valid key gets 200 throughout', async () => {
    const results = await Promise.all(
      Array.from({ length: 330 }, (_, i) => request(server.url).get('/callers/me').set('authorization', i % 11 === 0 ? bearer(agent) : `Bearer pk_local_wrong${i}`)),
    );
    const bad = results.filter((_, i) => i % 11 !== 0).map((r) => r.status);
    expect(bad.filter((s) => s === 401)).toHaveLength(30);
    expect(bad.filter((s) => s === 429)).toHaveLength(270);
    expect(results.filter((_, i) => i % 11 === 0).map((r) => r.status)).toEqual(Array(30).fill(200));
    const rows: { outcome: string; n: string | number }[] = await server.dataSource.query(
      `SELECT CASE WHEN caller_id IS NULL THEN 'FAILURE' ELSE 'SUCCESS' END AS outcome, COUNT(*) AS n FROM audit_events WHERE kind = 'caller-authentication' GROUP BY caller_id IS NULL`,
    );
    expect(Object.fromEntries(rows.map((r) => [r.outcome, Number(r.n)]))).toEqual({ FAILURE: 30, SUCCESS: 30 });
  });
});

describe('the execute limit covers what signs for a caller in sandbox mode', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(sqliteTarget, { ...apiKeysEnv(agent), SVC_SANDBOX: 'true', RATE_LIMIT_EXECUTE_PER_MINUTE: '2' });
    await publishPolicy(server.dataSource);
  });
  afterAll(async () => {
    await server.destroy();
  });

  it('a sandbox approval or an execution the limiter refuses is never signed, and consumes no approval', async () => {
    const tx = businessTransaction({ signals: { amount: 20000, country: 'FR' } }); // requires_override
    const issued = await request(server.url).post('/sandbox/approvals').set('authorization', bearer(agent)).send({ businessTransactionId: tx.businessTransactionId, action: 'sandbox:echo', scope: { field: 'resourceId', resourceId: tx.businessTransactionId }, signals: tx.signals });
    expect(issued.status).toBe(201);
    expect((await request(server.url).post('/execute').set('authorization', bearer(agent)).send(businessTransaction())).status).toBe(200);
    const refused = await request(server.url).post('/sandbox/approvals').set('authorization', bearer(agent)).send({ businessTransactionId: tx.businessTransactionId, action: 'sandbox:echo', scope: { field: 'value', value: 1 } });
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual(RATE_LIMITED);
    const withApproval = { ...tx, authorization: { ...(tx.authorization as object), approval: issued.body } };
    expect((await request(server.url).post('/execute').set('authorization', bearer(agent)).send(withApproval)).status).toBe(429);
    const used: unknown[] = await server.dataSource.query('SELECT 1 FROM single_use_ids WHERE id = ?', [issued.body.payload.approvalId]);
    expect(used).toHaveLength(0);
  });
});
