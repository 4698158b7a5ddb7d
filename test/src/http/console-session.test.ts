import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { silentLogger } from '@ets/domain';
import { startServer, type RunningServer } from '@ets/server';
import { apiKeysEnv, bearer, envelope, makeKey, STORAGE_TARGETS, startTestServer, type TestKey, type TestServer } from '@ets/test-support';
import { policyDoc } from './governance-fixtures.js';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const service = makeKey('svc', { holder: 'SERVICE', capabilities: ['*'] });

/** The cookie pair (`ets_session=…`) of a Set-Cookie answer, and its attributes. */
function sessionCookie(res: request.Response): { pair: string; attributes: string[] } {
  const header = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('ets_session='));
  if (!header) throw new Error(`no ets_session cookie in ${JSON.stringify(res.headers)}`);
  const [pair, ...attributes] = header.split(';').map((p) => p.trim());
  return { pair: pair!, attributes };
}

/**
 * CONTRACT "Approvers' console": signing in trades a USER key for an HttpOnly session cookie and a
 * CSRF token; the cookie authenticates every keyed route as that key, with the same audit events;
 * writes need the token; sign-out ends the session at once, on every instance; sessions live in
 * the database as hashes. On both stores.
 */
describe.each(STORAGE_TARGETS)('console sessions on $name', (factory) => {
  let server: TestServer;
  let second: RunningServer;
  beforeAll(async () => {
    server = await startTestServer(factory, apiKeysEnv(alice, bob, service));
    // A second instance on the same database (and data dir): what a load balancer spreads requests over.
    second = await startServer({ ...server.settings, port: 0 }, silentLogger);
  });
  afterAll(async () => {
    await second?.close();
    await server?.destroy();
  });

  const signIn = async (key: TestKey, url = server.url) => {
    const res = await request(url).post('/console/session').send({ apiKey: key.raw });
    expect(res.status).toBe(201);
    return { cookie: sessionCookie(res), body: res.body as { callerId: string; csrfToken: string; expiresAt: string } };
  };

  it('signs a USER key in: an HttpOnly, SameSite=Strict cookie on / (Secure only over TLS), the caller, a CSRF token and the idle expiry', async () => {
    const before = Date.now();
    const { cookie, body } = await signIn(alice);
    expect(cookie.pair).toMatch(/^ets_session=[A-Za-z0-9_-]{43}$/);
    expect(cookie.attributes.map((a) => a.toLowerCase()).sort()).toEqual(['httponly', 'path=/', 'samesite=strict']);
    expect(body).toEqual({ callerId: 'alice', csrfToken: expect.stringMatching(/^[0-9a-f]{64}$/), expiresAt: expect.any(String) });
    const idle = Date.parse(body.expiresAt) - before;
    expect(idle).toBeGreaterThan(29 * 60_000);
    expect(idle).toBeLessThanOrEqual(31 * 60_000);
    // Neither the key nor the session id is stored: the row holds a hash of the id and a reference of the key.
    const rows = (await server.dataSource.query('SELECT * FROM console_sessions')) as Record<string, string>[];
    const stored = JSON.stringify(rows);
    expect(rows.length).toBeGreaterThan(0);
    expect(stored).not.toContain(cookie.pair.slice('ets_session='.length));
    expect(stored).not.toContain(alice.raw);
    expect(stored).not.toContain(alice.record.keyHash as string);
    expect(stored).not.toContain(body.csrfToken);
  });

  it('authenticates every keyed route as the key that signed in, audited like the key, and lets a page get its CSRF token again', async () => {
    const { cookie, body } = await signIn(alice);
    const me = await request(server.url).get('/callers/me').set('cookie', cookie.pair);
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ callerId: 'alice', credentialHolderType: 'USER', stepUpKeyRegistered: true });
    const again = await request(server.url).get('/console/session').set('cookie', cookie.pair);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ callerId: 'alice', csrfToken: body.csrfToken, expiresAt: expect.any(String) });
    const events = await request(server.url).get('/audit/auth-events?limit=20').set('cookie', cookie.pair);
    expect(events.status).toBe(200);
    expect(events.body.events).toEqual(expect.arrayContaining([expect.objectContaining({ callerId: 'alice', route: '/callers/me', method: 'GET', outcome: 'SUCCESS' })]));
    // Without a cookie there is no session to describe (and no failed authentication: the sign-in page asks this).
    expect((await request(server.url).get('/console/session').set('authorization', bearer(alice))).status).toBe(404);
    expect((await request(server.url).get('/console/session')).status).toBe(404);
    // A cookie naming no live session is a failed authentication, and the cookie is cleared.
    const stale = await request(server.url).get('/console/session').set('cookie', 'ets_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
    expect(stale.status).toBe(401);
    expect(sessionCookie(stale).pair).toBe('ets_session=');
  });

  it('needs the CSRF token on every write made with the cookie (403 CSRF_TOKEN_INVALID), and decides with it', async () => {
    const a = await signIn(alice);
    const b = await signIn(bob);
    const proposal = { proposedContent: policyDoc('1.0.0', { name: 'console-test' }), reason: 'console' };
    for (const token of [undefined, '', 'f'.repeat(64), b.body.csrfToken]) {
      const req = request(server.url).post('/policies/console-test/1.0.0/pending-changes').set('cookie', a.cookie.pair);
      if (token !== undefined) req.set('x-csrf-token', token);
      const refused = await req.send(proposal);
      expect(`${token}: ${refused.status} ${refused.body.code}`).toBe(`${token}: 403 CSRF_TOKEN_INVALID`);
    }
    const proposed = await request(server.url).post('/policies/console-test/1.0.0/pending-changes').set('cookie', a.cookie.pair).set('x-csrf-token', a.body.csrfToken).send(proposal);
    expect(proposed.status).toBe(201);
    expect(proposed.body.proposer).toBe('alice');
    // Bob decides on the second instance, with his own session made on the first.
    const approved = await request(second.url)
      .post(`/policies/pending-changes/${proposed.body.id}/approve`)
      .set('cookie', b.cookie.pair)
      .set('x-csrf-token', b.body.csrfToken)
      .send(envelope(bob, proposed.body.id, 'approve'));
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ status: 'APPROVED', decider: 'bob' });
    // A request with Authorization is authenticated by it alone: no CSRF token needed, the cookie ignored.
    const withKey = await request(server.url).post('/policies/console-test/2.0.0/pending-changes').set('cookie', a.cookie.pair).set('authorization', bearer(bob)).send({ ...proposal, proposedContent: policyDoc('2.0.0', { name: 'console-test' }) });
    expect(withKey.status).toBe(201);
    expect(withKey.body.proposer).toBe('bob');
  });

  it('refuses keys that are not USER (403 NON_HUMAN_CALLER_DENIED), unknown keys (401, audited) and bodies without a key (400)', async () => {
    const svc = await request(server.url).post('/console/session').send({ apiKey: service.raw });
    expect(svc.status).toBe(403);
    expect(svc.body.code).toBe('NON_HUMAN_CALLER_DENIED');
    expect(svc.headers['set-cookie']).toBeUndefined();
    const unknown = await request(server.url).post('/console/session').send({ apiKey: 'pk_local_not-a-key' });
    expect(unknown.status).toBe(401);
    expect(unknown.body).toEqual({ error: 'authentication required' });
    const failures = await request(server.url).get('/audit/auth-events?limit=50').set('authorization', bearer(alice));
    expect(failures.body.events).toEqual(expect.arrayContaining([expect.objectContaining({ callerId: null, route: '/console/session', outcome: 'FAILURE' })]));
    for (const body of [{}, { apiKey: 42 }, { apiKey: '' }, []]) {
      const res = await request(server.url).post('/console/session').send(body);
      expect(`${JSON.stringify(body)}: ${res.status}`).toBe(`${JSON.stringify(body)}: 400`);
    }
    // A made-up or damaged cookie is a failed authentication like an unknown key.
    for (const pair of ['ets_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'ets_session=x', 'ets_session=%00']) {
      const res = await request(server.url).get('/callers/me').set('cookie', pair);
      expect(`${pair}: ${res.status}`).toBe(`${pair}: 401`);
    }
  });

  it('signs out at once on every instance; an idle-expired session no longer authenticates', async () => {
    const { cookie, body } = await signIn(alice, second.url);
    expect((await request(server.url).get('/callers/me').set('cookie', cookie.pair)).status).toBe(200);
    const noToken = await request(server.url).delete('/console/session').set('cookie', cookie.pair);
    expect(noToken.status).toBe(403);
    const out = await request(server.url).delete('/console/session').set('cookie', cookie.pair).set('x-csrf-token', body.csrfToken);
    expect(out.status).toBe(204);
    expect(sessionCookie(out).pair).toBe('ets_session=');
    for (const url of [server.url, second.url]) expect((await request(url).get('/callers/me').set('cookie', cookie.pair)).status).toBe(401);

    // Idle expiry is kept by the database: a session whose expiry has passed is refused and removed.
    const idle = await signIn(bob);
    expect((await request(second.url).get('/callers/me').set('cookie', idle.cookie.pair)).status).toBe(200);
    await server.dataSource.query(`UPDATE console_sessions SET expires_at = '2000-01-01T00:00:00.000Z'`);
    expect((await request(second.url).get('/callers/me').set('cookie', idle.cookie.pair)).status).toBe(401);
    // The next sign-in removes every expired session on the way: only its own is left.
    await signIn(alice);
    expect(Number((await server.dataSource.query('SELECT COUNT(*) AS n FROM console_sessions'))[0].n)).toBe(1);
  });

  it('counts sign-ins with a wrong key and requests with an unknown cookie against the failed-authentication limit', async () => {
    const limited = await startTestServer(factory, { ...apiKeysEnv(alice), RATE_LIMIT_AUTH_FAILURE_PER_MINUTE: '2' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 2; i++) statuses.push((await request(limited.url).post('/console/session').send({ apiKey: 'pk_local_wrong' })).status);
      statuses.push((await request(limited.url).get('/callers/me').set('cookie', 'ets_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).status);
      expect(statuses).toEqual([401, 401, 429]);
      // A valid key is never refused by it.
      expect((await request(limited.url).post('/console/session').send({ apiKey: alice.raw })).status).toBe(201);
    } finally {
      await limited.destroy();
    }
  });

  it('sets Secure with SVC_COOKIE_SECURE=true (TLS ends at a proxy in front)', async () => {
    const secure = await startTestServer(factory, { ...apiKeysEnv(alice), SVC_COOKIE_SECURE: 'true' });
    try {
      const res = await request(secure.url).post('/console/session').send({ apiKey: alice.raw });
      expect(res.status).toBe(201);
      expect(sessionCookie(res).attributes.map((a) => a.toLowerCase())).toContain('secure');
    } finally {
      await secure.destroy();
    }
  });
});
