import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { apiKeysEnv, bearer, businessTransaction, makeKey, publishPolicy, sqliteTarget, startTestServer, type TestServer } from '@ets/test-support';

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

  it('limits failed authentication per IP, after which even a valid key is refused unexamined', async () => {
    expect((await request(server.url).get('/callers/me').set('authorization', 'Bearer pk_local_wrong1')).status).toBe(401);
    expect((await request(server.url).get('/callers/me').set('authorization', 'Bearer pk_local_wrong2')).status).toBe(401);
    const events = await countEvents();
    const locked = await request(server.url).get('/callers/me').set('authorization', 'Bearer pk_local_wrong3');
    expect(locked.status).toBe(429);
    expect(locked.body).toEqual(RATE_LIMITED);
    expect(locked.headers['retry-after']).toBeDefined();
    expect((await request(server.url).get('/callers/me').set('authorization', bearer(agent))).status).toBe(429);
    expect(await countEvents()).toBe(events);
  });
});
