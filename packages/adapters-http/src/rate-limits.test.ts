import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createClient } from 'redis';
import { recordingLogger, silentLogger, type CallerDirectory } from '@ets/domain';
import { createHttpApp } from './app.js';
import { bearerAuthentication } from './middleware/authenticate.js';
import { createRateLimiters, type RateLimiters, type RateLimitOptions } from './rate-limits.js';
import type { RouteModule } from './route-table.js';

const RATE_LIMITED_BODY = '{"error":"Rate limit exceeded. Try again later.","code":"RATE_LIMITED"}';
const KEYS: Record<string, string> = { 'key-a': 'caller-a', 'key-b': 'caller-b' };

const memoryLogger = recordingLogger;

const open: RateLimiters[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

/** Fake routes of each kind; counts handler calls, key checks and audited authentications. */
function build(limits: Partial<RateLimitOptions> = {}, opts: { handlerDelayMs?: number; trustProxy?: boolean; auditDelayMs?: number } = {}) {
  const calls = { health: 0, public: 0, execute: 0, keyed: 0, validate: 0, authenticate: 0 };
  const audited: { callerId: string | null; outcome: string }[] = [];
  const delay = (ms = opts.handlerDelayMs ?? 0) => new Promise((r) => setTimeout(r, ms));
  const routes: RouteModule = (t) => {
    t.get('/health', { auth: 'none', limiter: 'health' }, (_req, res) => void (calls.health++, res.json({ status: 'UP' })));
    t.get('/public', { auth: 'none', limiter: 'public' }, (_req, res) => void (calls.public++, res.json({ ok: true })));
    t.post('/execute', { auth: 'key', limiter: 'execute' }, async (_req, res) => {
      calls.execute++;
      await delay();
      res.json({ caller: res.locals.caller.callerId });
    });
    t.get('/keyed', { auth: 'key' }, async (_req, res) => {
      calls.keyed++;
      await delay();
      res.json({ caller: res.locals.caller.callerId });
    });
    t.post('/validate-like', { auth: 'none', limiter: 'public', errorShape: 'validation' }, (_req, res) => void (calls.validate++, res.json({ valid: true, errors: [] })));
  };
  const directory: CallerDirectory = {
    authenticate: (raw) => {
      calls.authenticate++;
      const callerId = KEYS[raw];
      return callerId ? { callerId, allowedCapabilities: [], allowedPrincipalIds: [], allowedTenantIds: [] } : undefined;
    },
  };
  // Storing an audit event takes a moment, as a database write does.
  const audit = { record: async (e: { callerId: string | null; outcome: string }) => void (await delay(opts.auditDelayMs ?? 0), audited.push(e)) };
  const rl = createRateLimiters({ executePerMinute: 100, healthPerMinute: 100, authFailurePerMinute: 100, publicPerMinute: 100, ...limits });
  open.push(rl);
  const { app } = createHttpApp({
    logger: silentLogger,
    bodyLimitBytes: 1024,
    modules: [routes],
    authenticate: bearerAuthentication({ directory, audit, failureLimit: rl.authFailure }),
    limiters: rl.limiters,
    callerLimiters: rl.callerLimiters,
    trustProxy: opts.trustProxy,
  });
  return { app, calls, rl, audited };
}

function expectRateLimited(res: request.Response, maxRetryAfter = 60) {
  expect(res.status).toBe(429);
  expect(res.text).toBe(RATE_LIMITED_BODY);
  expect(res.headers['content-type']).toMatch(/application\/json/);
  const retryAfter = Number(res.headers['retry-after']);
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(maxRetryAfter);
}

describe('per-IP limits of public routes (spec 8)', () => {
  it('refuses /health over its limit with 429, the envelope, Retry-After, and no handler call', async () => {
    const { app, calls } = build({ healthPerMinute: 2 });
    expect((await request(app).get('/health')).status).toBe(200);
    const second = await request(app).get('/health');
    expect(second.status).toBe(200);
    expect(second.headers['ratelimit']).toMatch(/limit=2, remaining=0/);
    expectRateLimited(await request(app).get('/health'));
    expectRateLimited(await request(app).get('/health'));
    expect(calls.health).toBe(2);
  });

  it('refuses other public routes over the public limit, counted apart from the health limit', async () => {
    const { app, calls } = build({ healthPerMinute: 1, publicPerMinute: 3 });
    expect((await request(app).get('/health')).status).toBe(200);
    expectRateLimited(await request(app).get('/health'));
    for (let i = 0; i < 3; i++) expect((await request(app).get('/public')).status).toBe(200);
    expectRateLimited(await request(app).get('/public'));
    expect(calls).toMatchObject({ health: 1, public: 3 });
  });

  it('keeps the {valid:false, errors} shape of a validation-shaped route on 429', async () => {
    const { app, calls } = build({ publicPerMinute: 1 });
    expect((await request(app).post('/validate-like').send({})).status).toBe(200);
    const res = await request(app).post('/validate-like').send({});
    expect(res.status).toBe(429);
    expect(res.body).toEqual({ valid: false, errors: ['Rate limit exceeded. Try again later.'] });
    expect(res.headers['retry-after']).toBeDefined();
    expect(calls.validate).toBe(1);
  });

  it('opens again when the one-minute window ends, with Retry-After counting down on the clock', async () => {
    let t = Date.parse('2026-03-01T10:00:00Z');
    const { app, calls } = build({ publicPerMinute: 1, now: () => t });
    expect((await request(app).get('/public')).status).toBe(200);
    t += 15_000;
    const refused = await request(app).get('/public');
    expectRateLimited(refused);
    expect(refused.headers['retry-after']).toBe('45');
    t += 45_000;
    expect((await request(app).get('/public')).status).toBe(200);
    expect(calls.public).toBe(2);
  });

  it('keys IPv6 clients by their /56 (ipKeyGenerator)', async () => {
    const { app } = build({ publicPerMinute: 1 }, { trustProxy: true });
    const from = (ip: string) => request(app).get('/public').set('x-forwarded-for', ip);
    expect((await from('2001:db8:0:1::1')).status).toBe(200);
    expectRateLimited(await from('2001:db8:0:2::99')); // same /56
    expect((await from('2001:db8:0:100::1')).status).toBe(200); // another /56
    expect((await from('192.0.2.1')).status).toBe(200);
    expectRateLimited(await from('192.0.2.1'));
    expect((await from('192.0.2.2')).status).toBe(200);
  });
});

describe('per-caller execute limit (spec 8)', () => {
  it('gives each authenticated caller its own budget, and refuses over it before the handler', async () => {
    const { app, calls } = build({ executePerMinute: 2 });
    const exec = (key: string) => request(app).post('/execute').set('authorization', `Bearer ${key}`).send({});
    expect((await exec('key-a')).body).toEqual({ caller: 'caller-a' });
    expect((await exec('key-a')).status).toBe(200);
    expectRateLimited(await exec('key-a'));
    expect((await exec('key-b')).body).toEqual({ caller: 'caller-b' });
    expect((await exec('key-b')).status).toBe(200);
    expectRateLimited(await exec('key-b'));
    expect(calls.execute).toBe(4);
    // Keyed by caller: authentication ran for every request, refused ones included.
    expect(calls.authenticate).toBe(6);
  });

  it('does not limit keyed routes other than the one naming the execute limiter', async () => {
    const { app, calls } = build({ executePerMinute: 1 });
    for (let i = 0; i < 3; i++) expect((await request(app).get('/keyed').set('authorization', 'Bearer key-a')).status).toBe(200);
    expect(calls.keyed).toBe(3);
  });
});

describe('failed-authentication limit (spec 5.10, 8)', () => {
  const keyed = (app: Parameters<typeof request>[0], key?: string) => {
    const r = request(app).get('/keyed');
    return key ? r.set('authorization', `Bearer ${key}`) : r;
  };

  it('never counts successful requests', async () => {
    const { app, calls } = build({ authFailurePerMinute: 2 });
    for (let i = 0; i < 10; i++) expect((await keyed(app, 'key-a')).status).toBe(200);
    expect(calls.keyed).toBe(10);
  });

  it('never refuses concurrent successful requests, however many are in flight', async () => {
    const { app, calls } = build({ authFailurePerMinute: 2 }, { handlerDelayMs: 50 });
    const results = await Promise.all(Array.from({ length: 12 }, () => keyed(app, 'key-a')));
    expect(results.map((r) => r.status)).toEqual(Array(12).fill(200));
    expect(calls.keyed).toBe(12);
  });

  it('refuses failures over the limit with 429, unaudited, and never a valid key from the same address', async () => {
    const { app, calls, audited } = build({ authFailurePerMinute: 2 });
    expect((await keyed(app)).status).toBe(401);
    expect((await keyed(app, 'wrong')).status).toBe(401);
    expectRateLimited(await keyed(app, 'wrong'));
    expectRateLimited(await keyed(app));
    expect(audited.filter((e) => e.outcome === 'FAILURE')).toHaveLength(2);

    expect((await keyed(app, 'key-a')).body).toEqual({ caller: 'caller-a' });
    const exec = await request(app).post('/execute').set('authorization', 'Bearer key-b').set('content-type', 'application/json').send('{"a":1}');
    expect(exec.body).toEqual({ caller: 'caller-b' });
    expect(calls.keyed + calls.execute).toBe(2);
    expect(audited.filter((e) => e.outcome === 'SUCCESS')).toHaveLength(2);
    // Public routes are not affected.
    expect((await request(app).get('/public')).status).toBe(200);
  });

  it('lets at most the limit of 300 concurrent bad keys through to 401 and the audit; a valid key keeps getting 200 meanwhile', async () => {
    const { app, audited } = build({ authFailurePerMinute: 30 }, { auditDelayMs: 5 });
    const server = app.listen(0);
    try {
      const bad = Array.from({ length: 300 }, (_, i) => keyed(server, `wrong-${i}`));
      const good = Array.from({ length: 30 }, () => keyed(server, 'key-a'));
      const [badResults, goodResults] = await Promise.all([Promise.all(bad), Promise.all(good)]);
      const statuses = badResults.map((r) => r.status);
      expect(statuses.filter((s) => s === 401)).toHaveLength(30);
      expect(statuses.filter((s) => s === 429)).toHaveLength(270);
      expect(goodResults.map((r) => r.status)).toEqual(Array(30).fill(200));
      expect(audited.filter((e) => e.outcome === 'FAILURE')).toHaveLength(30);
      expect((await keyed(server, 'key-a')).status).toBe(200);
    } finally {
      server.close();
    }
  });

  it('counts a request with two Authorization headers as a failure', async () => {
    const { app, audited } = build({ authFailurePerMinute: 1 });
    const twice = () => request(app).get('/keyed').set('authorization', ['Bearer key-a', 'Bearer key-a'] as unknown as string);
    expect((await twice()).status).toBe(401);
    expectRateLimited(await twice());
    expect(audited).toEqual([expect.objectContaining({ callerId: null, outcome: 'FAILURE' })]);
  });

  it('counts failures only, interleaved with successes', async () => {
    const { app } = build({ authFailurePerMinute: 2 });
    expect((await keyed(app, 'wrong')).status).toBe(401);
    expect((await keyed(app, 'key-a')).status).toBe(200);
    expect((await keyed(app, 'key-a')).status).toBe(200);
    expect((await keyed(app, 'wrong')).status).toBe(401);
    expectRateLimited(await keyed(app, 'wrong'));
    expect((await keyed(app, 'key-a')).status).toBe(200);
  });

  it('answers failures with 401 again when the window ends', async () => {
    let t = Date.parse('2026-03-01T10:00:00Z');
    const { app } = build({ authFailurePerMinute: 1, now: () => t });
    expect((await keyed(app, 'wrong')).status).toBe(401);
    t += 59_000;
    const locked = await keyed(app, 'wrong');
    expectRateLimited(locked);
    expect(locked.headers['retry-after']).toBe('1');
    t += 1_000;
    expect((await keyed(app, 'wrong')).status).toBe(401);
  });
});

describe('shared Redis store (SVC_REDIS_URL)', () => {
  const REDIS_URL = process.env.ETS_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const prefix = `ets:test:${process.pid}:${randomBytes(6).toString('hex')}:`;
  const admin = createClient({ url: REDIS_URL });

  afterAll(async () => {
    if (!admin.isOpen) await admin.connect();
    const keys: string[] = [];
    for await (const batch of admin.scanIterator({ MATCH: `${prefix}*`, COUNT: 100 })) keys.push(...batch);
    if (keys.length) await admin.del(keys);
    await admin.close();
  });

  const buildShared = async (limits: Partial<RateLimitOptions>, sub = '') => {
    const b = build({ ...limits, store: { redisUrl: REDIS_URL, prefix: `${prefix}${sub}` } });
    await b.rl.ready();
    return b;
  };

  it('shares counts between two instances, per limiter, with its own key prefix', async () => {
    const one = await buildShared({ publicPerMinute: 3, authFailurePerMinute: 1 });
    const two = await buildShared({ publicPerMinute: 3, authFailurePerMinute: 1 });
    expect((await request(one.app).get('/public')).status).toBe(200);
    expect((await request(two.app).get('/public')).status).toBe(200);
    expect((await request(one.app).get('/public')).status).toBe(200);
    expectRateLimited(await request(two.app).get('/public'));
    expect(one.calls.public + two.calls.public).toBe(3);

    // A failure seen by one instance counts on the other; a valid key is still served there.
    expect((await request(one.app).get('/keyed').set('authorization', 'Bearer wrong')).status).toBe(401);
    expectRateLimited(await request(two.app).get('/keyed').set('authorization', 'Bearer wrong'));
    expect((await request(two.app).get('/keyed').set('authorization', 'Bearer key-a')).status).toBe(200);
    expect(one.audited.length + two.audited.length).toBe(2); // one failure, one success

    await admin.connect();
    const keys: string[] = [];
    for await (const batch of admin.scanIterator({ MATCH: `${prefix}*`, COUNT: 100 })) keys.push(...batch);
    expect(keys.map((k) => k.slice(prefix.length).replace(/:.*/, '')).sort()).toEqual(['auth-failure', 'public']);
  });

  it('lets at most the limit of 300 concurrent bad keys on two instances through to 401; a valid key keeps getting 200', async () => {
    const one = await buildShared({ authFailurePerMinute: 30 }, 'concurrent:');
    const two = await buildShared({ authFailurePerMinute: 30 }, 'concurrent:');
    const servers = [one.app.listen(0), two.app.listen(0)];
    try {
      const results = await Promise.all(
        Array.from({ length: 330 }, (_, i) => request(servers[i % 2]!).get('/keyed').set('authorization', i % 11 === 0 ? 'Bearer key-a' : `Bearer wrong-${i}`)),
      );
      const bad = results.filter((_, i) => i % 11 !== 0).map((r) => r.status);
      expect(bad).toHaveLength(300);
      expect(bad.filter((s) => s === 401)).toHaveLength(30);
      expect(bad.filter((s) => s === 429)).toHaveLength(270);
      expect(results.filter((_, i) => i % 11 === 0).map((r) => r.status)).toEqual(Array(30).fill(200));
      expect([...one.audited, ...two.audited].filter((e) => e.outcome === 'FAILURE')).toHaveLength(30);
    } finally {
      for (const s of servers) s.close();
    }
  });

  it('keeps serving, and limiting per instance, when Redis cannot be reached', async () => {
    const { logger, lines } = memoryLogger();
    const rl = createRateLimiters({
      executePerMinute: 100,
      healthPerMinute: 2,
      authFailurePerMinute: 100,
      publicPerMinute: 100,
      store: { redisUrl: 'redis://:s3cret-password@127.0.0.1:1', prefix },
      logger,
    });
    open.push(rl);
    const { app } = createHttpApp({
      logger: silentLogger,
      bodyLimitBytes: 1024,
      modules: [(t) => t.get('/health', { auth: 'none', limiter: 'health' }, (_req, res) => void res.json({ status: 'UP' }))],
      authenticate: (_req, _res, next) => next(),
      limiters: rl.limiters,
    });
    await new Promise((r) => setTimeout(r, 100));
    expect((await request(app).get('/health')).status).toBe(200);
    expect((await request(app).get('/health')).status).toBe(200);
    expectRateLimited(await request(app).get('/health'));
    const warnings = lines.filter((l) => l.level === 'warn');
    expect(warnings.map((l) => l.msg)).toEqual(['rate-limit store (Redis) unavailable; counting per instance until it is back']);
    expect(JSON.stringify(lines)).not.toContain('s3cret-password');
    expect(warnings[0]!.obj).toMatchObject({ err: { message: expect.stringContaining('ECONNREFUSED') } });
  });
});
