import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import request from 'supertest';
import type { RouteSpec } from '@ets/adapters-http';
import { apiKeysEnv, bearer, businessTransaction, makeKey, STORAGE_TARGETS, startTestServer, type TestServer } from '@ets/test-support';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const pager = makeKey('pager', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });

/** A mounted route's URL with every path parameter filled in. */
const urlOf = (r: RouteSpec): string => r.path.replace(/:[A-Za-z0-9_]+/g, 'x');

/**
 * "A query parameter a route does not know is 400, on every route": each route declares the
 * query parameters it reads (route-table.ts), the OpenAPI document lists the same ones (checked in
 * platform.test.ts and per profile by expectRoutesDocumented), and any other name is refused with
 * the error envelope naming it, before the handler runs.
 */
describe.each(STORAGE_TARGETS)('query parameters on $name', (factory) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(alice, pager), RATE_LIMIT_PUBLIC_PER_MINUTE: '1000000', RATE_LIMIT_HEALTH_PER_MINUTE: '1000000' });
  });
  afterAll(async () => {
    await server?.destroy();
  });

  const get = (path: string, key = alice) => request(server.url).get(path).set('authorization', bearer(key));

  it('answers 400 naming the parameter, with the known ones, and serves the known ones as before', async () => {
    for (const [path, name, takes] of [
      ['/audit/auth-events?page=2', 'page', 'takes only limit, before, beforeEventId'],
      ['/audit/auth-events?limit=5&pageSize=5', 'pageSize', 'takes only limit, before, beforeEventId'],
      ['/health?verbose=1', 'verbose', 'takes no query parameter'],
      ['/transactions?page=1&pagesize=5', 'pagesize', 'takes only page, pageSize'],
      ['/log/leaves?start=0&count=1&limit=5', 'limit', 'takes only start, count'],
      ['/trust-records?page[size]=5', 'page[size]', 'takes only page, pageSize'],
    ] as const) {
      const res = await get(path);
      expect(`${path} ${res.status}`).toBe(`${path} 400`);
      expect(res.body).toEqual({ error: expect.stringContaining(`Unknown query parameter "${name}"`) });
      expect(res.body.error).toContain(takes);
    }
    // A POST with a query string is refused before its body is read.
    const post = await request(server.url).post('/execute?dryRun=true').set('authorization', bearer(pager)).send(businessTransaction());
    expect(post.status).toBe(400);
    expect(post.body).toEqual({ error: 'Unknown query parameter "dryRun": POST /execute takes no query parameter.' });
    // Keyed routes authenticate first: no key, 401 whatever the query says.
    expect((await request(server.url).get('/audit/auth-events?page=2')).status).toBe(401);
    for (const path of ['/audit/auth-events?limit=5', '/transactions?page=1&pageSize=5', '/health', '/execution-intents?state=PREPARED&page=1']) {
      expect(`${path} ${(await get(path)).status}`).toBe(`${path} 200`);
    }
  });

  it('pages /audit/auth-events by cursor: every event once, none skipped, also when many share one occurredAt', async () => {
    // Ten events of the caller `pager`, seven of them in one millisecond (a burst of requests).
    const at = (i: number) => (i < 7 ? '2001-02-03T04:05:06.007Z' : `2001-02-03T04:05:0${i - 7}.000Z`);
    const ids: string[] = Array.from({ length: 10 }, () => randomUUID());
    const pg = server.dataSource.options.type === 'postgres';
    for (const [i, eventId] of ids.entries()) {
      const event = { eventId, kind: 'caller-authentication', callerId: 'pager', route: '/callers/me', method: 'GET', outcome: 'SUCCESS', occurredAt: at(i), keyId: 'k', signature: 's' };
      await server.dataSource.query(
        `INSERT INTO audit_events (event_id, kind, caller_id, occurred_at, body) VALUES (${pg ? '$1, $2, $3, $4, $5' : '?, ?, ?, ?, ?'})`,
        [eventId, event.kind, event.callerId, event.occurredAt, JSON.stringify(event)],
      );
    }
    const seen: { eventId: string; occurredAt: string }[] = [];
    let query = 'limit=3';
    for (let pages = 0; pages < 50; pages++) {
      const res = await get(`/audit/auth-events?${query}`, pager);
      expect(res.status).toBe(200);
      const events = res.body.events as { eventId: string; occurredAt: string }[];
      if (events.length === 0) break;
      seen.push(...events);
      const last = events[events.length - 1]!;
      query = `limit=3&before=${encodeURIComponent(last.occurredAt)}&beforeEventId=${encodeURIComponent(last.eventId)}`;
    }
    // Newest first throughout, and each of the ten exactly once (the reads themselves added newer events).
    const times = seen.map((e) => e.occurredAt);
    expect([...times].sort().reverse()).toEqual(times);
    const ours = seen.filter((e) => ids.includes(e.eventId)).map((e) => e.eventId);
    expect(ours.sort()).toEqual([...ids].sort());
    expect(new Set(seen.map((e) => e.eventId)).size).toBe(seen.length);

    // `before` alone keeps only what is strictly older; beforeEventId needs before.
    const older = await get(`/audit/auth-events?before=${encodeURIComponent(at(0))}`, pager);
    expect((older.body.events as { eventId: string }[]).map((e) => e.eventId).sort()).toEqual(ids.slice(7).sort());
    for (const q of [`beforeEventId=${ids[0]}`, `before=${encodeURIComponent(at(0))}&beforeEventId=`, `before=${encodeURIComponent(at(0))}&beforeEventId=a%20b`]) {
      const res = await get(`/audit/auth-events?${q}`, pager);
      expect(`${q} ${res.status}`).toBe(`${q} 400`);
      expect(Object.keys(res.body)).toEqual(['error']);
    }
  });

  it('answers 400, never 500, to an unknown query parameter of any name on every mounted GET route (property-based)', async () => {
    const routes = server.httpApp.routes.filter((r) => r.method === 'get');
    expect(routes.length).toBeGreaterThan(30);
    const check = async (route: RouteSpec, name: string, value: string) => {
      const url = `${urlOf(route)}?${encodeURIComponent(name)}=${encodeURIComponent(value)}`;
      const res = await get(url);
      expect(`GET ${url} → ${res.status}`).toBe(`GET ${url} → 400`);
      expect(Object.keys(res.body)).toEqual(['error']);
      expect(res.body.error).toMatch(name.includes('\u0000') ? /U\+0000/ : /^Unknown query parameter /);
    };
    // Every route at least once, then arbitrary names (any text: brackets, dots, `__proto__`, …).
    for (const route of routes) await check(route, 'unknownParameter', '1');
    const name = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.string({ unit: 'binary-ascii', maxLength: 20 }),
      fc.string({ unit: 'grapheme', maxLength: 20 }),
      fc.constantFrom('__proto__', 'constructor', 'a[b]', 'a.b', 'PAGE', 'page ', ' limit', 'x'.repeat(500)),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), name, fc.string({ maxLength: 10 }), async (route, n, value) => {
        fc.pre(!(route.query ?? []).includes(n));
        await check(route, n, value);
      }),
      { numRuns: 300 },
    );
  });
});
