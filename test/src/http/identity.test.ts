import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { apiKeysEnv, bearer, makeKey, STORAGE_TARGETS, startTestServer, type TestServer } from '@ets/test-support';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['sandbox:echo'], principals: ['agent-7', 'team-a'], tenants: ['t1'] });
const other = makeKey('other', { holder: 'SERVICE' });

describe.each(STORAGE_TARGETS)('caller authentication and audit on $name', (factory) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(factory, apiKeysEnv(alice, agent, other));
  });
  afterAll(async () => {
    await server.destroy();
  });

  it.each([
    ['no Authorization header', undefined],
    ['another scheme', `Basic ${Buffer.from('a:b').toString('base64')}`],
    ['Bearer with nothing after it', 'Bearer '],
    ['an unknown key', 'Bearer pk_local_not-a-configured-key'],
    ['a key with a trailing space inside the token', `Bearer ${agent.raw} x`],
    ['the key hash instead of the key', `Bearer ${agent.record.keyHash as string}`],
  ])('answers 401 "authentication required" for %s', async (_what, header) => {
    const req = request(server.url).get('/callers/me');
    const res = header === undefined ? await req : await req.set('authorization', header);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: 'authentication required' });
  });

  it('refuses an unauthenticated POST before its (broken) body is parsed', async () => {
    const res = await request(server.url).get('/audit/auth-events').set('content-type', 'application/json').send('{broken');
    expect(res.status).toBe(401);
  });

  it('describes the caller on /callers/me without the key or its hash', async () => {
    const res = await request(server.url).get('/callers/me').set('authorization', bearer(agent));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      callerId: 'agent-7',
      credentialHolderType: 'SERVICE',
      allowedCapabilities: ['sandbox:echo'],
      allowedPrincipalIds: ['agent-7', 'team-a'],
      allowedTenantIds: ['t1'],
      stepUpKeyRegistered: false,
    });
    expect(res.text).not.toContain(agent.raw);
    expect(res.text).not.toContain(agent.record.keyHash as string);
    const me = await request(server.url).get('/callers/me').set('authorization', bearer(alice));
    expect(me.body).toMatchObject({ callerId: 'alice', credentialHolderType: 'USER', stepUpKeyRegistered: true, allowedPrincipalIds: ['alice'] });
  });

  it('reports the build identifier on /version with a key', async () => {
    const res = await request(server.url).get('/version').set('authorization', `bearer ${other.raw}`);
    expect(res.status).toBe(200);
    expect(typeof res.body.build).toBe('string');
  });

  it('publishes the signing key as an OKP JWK, and 404 for an unknown key id', async () => {
    const jwks = await request(server.url).get('/.well-known/jwks.json');
    expect(jwks.status).toBe(200);
    expect(jwks.body.keys).toHaveLength(1);
    const [key] = jwks.body.keys;
    expect(key).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
    expect(key.d).toBeUndefined();
    expect((await request(server.url).get(`/keys/${encodeURIComponent(key.kid)}`)).body).toEqual(key);
    const missing = await request(server.url).get('/keys/no-such-key');
    expect(missing.status).toBe(404);
  });

  it('keeps a signed event per authentication, verifiable by anyone; a changed event does not verify', async () => {
    await request(server.url).get('/callers/me').set('authorization', 'Bearer pk_local_wrong');
    await request(server.url).get('/callers/me').set('authorization', bearer(other));
    const res = await request(server.url).get('/audit/auth-events?limit=100').set('authorization', bearer(alice));
    expect(res.status).toBe(200);
    const events = res.body.events as Record<string, unknown>[];
    const failure = events.find((e) => e.outcome === 'FAILURE');
    const success = events.find((e) => e.outcome === 'SUCCESS' && e.callerId === 'other');
    expect(failure).toMatchObject({ kind: 'caller-authentication', callerId: null, route: '/callers/me', method: 'GET' });
    expect(success).toMatchObject({ route: '/callers/me', outcome: 'SUCCESS' });
    const { keys } = (await request(server.url).get('/.well-known/jwks.json')).body;
    expect(success!.keyId).toBe(keys[0].kid);

    for (const event of [failure, success]) {
      const ok = await request(server.url).post('/audit/verify').send(event);
      expect(ok.status).toBe(200);
      expect(ok.body).toEqual({ valid: true, keyId: keys[0].kid, errors: [] });
    }
    for (const change of [{ outcome: 'SUCCESS' }, { callerId: 'alice' }, { occurredAt: '2020-01-01T00:00:00.000Z' }, { route: '/x' }]) {
      const bad = await request(server.url).post('/audit/verify').send({ ...failure, ...change });
      expect(bad.status).toBe(200);
      expect(bad.body.valid).toBe(false);
      expect(bad.body.errors.length).toBeGreaterThan(0);
    }
    const notAnEvent = await request(server.url).post('/audit/verify').send({ hello: 'world' });
    expect(notAnEvent.status).toBe(400);
    const dup = await request(server.url).post('/audit/verify').set('content-type', 'application/json').send('{"eventId":"a","eventId":"b"}');
    expect(dup.status).toBe(400);
  });

  it('shows a non-USER key only its own caller’s events, newest first, and pages with before', async () => {
    const res = await request(server.url).get('/audit/auth-events?limit=500').set('authorization', bearer(agent));
    const events = res.body.events as { callerId: string; occurredAt: string }[];
    expect(events.length).toBeGreaterThan(0);
    expect(events.every((e) => e.callerId === 'agent-7')).toBe(true);
    const times = events.map((e) => e.occurredAt);
    expect([...times].sort().reverse()).toEqual(times);
    const before = await request(server.url).get(`/audit/auth-events?before=${encodeURIComponent(times[0]!)}`).set('authorization', bearer(agent));
    expect((before.body.events as { occurredAt: string }[]).every((e) => e.occurredAt < times[0]!)).toBe(true);
    for (const q of ['limit=0', 'limit=abc', 'limit=501', 'before=yesterday']) {
      expect((await request(server.url).get(`/audit/auth-events?${q}`).set('authorization', bearer(agent))).status).toBe(400);
    }
  });

  it('fails closed with AUDIT_UNAVAILABLE when the audit event cannot be stored', async () => {
    await server.dataSource.query('ALTER TABLE audit_events RENAME TO audit_events_gone');
    try {
      const res = await request(server.url).get('/callers/me').set('authorization', bearer(agent));
      expect(res.status).toBe(503);
      expect(res.body).toEqual({ error: expect.any(String), code: 'AUDIT_UNAVAILABLE' });
    } finally {
      await server.dataSource.query('ALTER TABLE audit_events_gone RENAME TO audit_events');
    }
    expect((await request(server.url).get('/callers/me').set('authorization', bearer(agent))).status).toBe(200);
  });
});

describe('SVC_AUTH_DISABLED=true', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(STORAGE_TARGETS[0]!, { SVC_AUTH_DISABLED: 'true' });
  });
  afterAll(async () => {
    await server.destroy();
  });

  it('accepts keyed routes without a key', async () => {
    const res = await request(server.url).get('/callers/me');
    expect(res.status).toBe(200);
    expect(res.body.callerId).toBe('anonymous');
  });
});
