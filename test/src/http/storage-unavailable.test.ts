import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import type { QueryRunner } from 'typeorm';
import { STORAGE_UNAVAILABLE_MESSAGE } from '@ets/adapters-persistence';
import { apiKeysEnv, bearer, businessTransaction, makeKey, postgresTarget, publishPolicy, startTestServer, type TestServer } from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const POOL_SIZE = 20;

/**
 * A request that cannot get a database connection in time (every pooled PostgreSQL connection busy
 * for longer than the pool's 5 s wait) is `503 STORAGE_UNAVAILABLE`, whatever route and store call
 * ran into it, never a 500 (issue 9: 100 concurrent POST /verify answered 500 65 times); the
 * service serves again as soon as a connection is free. PostgreSQL only: SQLite has one
 * in-process connection and no pool to wait for.
 *
 * The server runs with authentication disabled so that keyed routes reach their own storage calls
 * (an authenticated request's first write is its audit event, whose failure is 503
 * AUDIT_UNAVAILABLE, also checked).
 */
describe('a storage connection that cannot be had in time, on postgres', () => {
  let server: TestServer;
  let keyed: TestServer;
  beforeAll(async () => {
    server = await startTestServer(postgresTarget, { SVC_AUTH_DISABLED: 'true', RATE_LIMIT_PUBLIC_PER_MINUTE: '100000' });
    await publishPolicy(server.dataSource);
    keyed = await startTestServer(postgresTarget, { ...apiKeysEnv(agent) });
  });
  afterAll(async () => {
    await server?.destroy();
    await keyed?.destroy();
  });

  /** Takes every connection of the server's pool (those that cannot be had are taken already); `free` gives them back. */
  async function exhaustPool(s: TestServer): Promise<{ free(): Promise<void> }> {
    const runners = Array.from({ length: POOL_SIZE }, () => s.dataSource.createQueryRunner());
    const held = (await Promise.allSettled(runners.map(async (r) => (await r.connect(), r)))).flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
    expect(held.length).toBeGreaterThan(POOL_SIZE - 3);
    return { free: async () => void (await Promise.all(held.map((r: QueryRunner) => r.release()))) };
  }

  it('answers 503 STORAGE_UNAVAILABLE on public and keyed reads and writes while every connection is taken, then serves again', async () => {
    const calls: [string, () => request.Test][] = [
      ['GET /log/leaves (public)', () => request(server.url).get('/log/leaves?start=0&count=1')],
      ['GET /transactions', () => request(server.url).get('/transactions')],
      ['GET /trust-records/{id}', () => request(server.url).get(`/trust-records/${randomUUID()}`)],
      ['GET /verification/{id}', () => request(server.url).get(`/verification/${randomUUID()}`)],
      ['POST /verify', () => request(server.url).post('/verify').send({ businessTransactionId: randomUUID() })],
      ['POST /transactions', () => request(server.url).post('/transactions').send(businessTransaction({}, 'anonymous'))],
      ['GET /policies/pending-changes', () => request(server.url).get('/policies/pending-changes')],
    ];
    const pool = await exhaustPool(server);
    let answers: request.Response[];
    try {
      answers = await Promise.all(calls.map(([, call]) => call()));
    } finally {
      await pool.free();
    }
    const expected = { status: 503, body: { error: STORAGE_UNAVAILABLE_MESSAGE, code: 'STORAGE_UNAVAILABLE' } };
    expect(answers.map((a, i) => ({ route: calls[i]![0], status: a.status, body: a.body as unknown }))).toEqual(calls.map(([route]) => ({ route, ...expected })));
    expect((await request(server.url).get('/transactions')).status).toBe(200);
    expect((await request(server.url).get('/log/leaves?start=0&count=1')).status).toBe(200);
  }, 60_000);

  it('answers 503, never 500, to an authenticated request that cannot store its audit event', async () => {
    const pool = await exhaustPool(keyed);
    let answer: request.Response;
    try {
      answer = await request(keyed.url).get('/transactions').set('authorization', bearer(agent));
    } finally {
      await pool.free();
    }
    expect(answer.status).toBe(503);
    expect(['AUDIT_UNAVAILABLE', 'STORAGE_UNAVAILABLE']).toContain(answer.body.code);
    expect((await request(keyed.url).get('/transactions').set('authorization', bearer(agent))).status).toBe(200);
  }, 60_000);
});
