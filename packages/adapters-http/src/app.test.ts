import { describe, expect, it } from '@jest/globals';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import request from 'supertest';
import { DomainError, recordingLogger } from '@ets/domain';
import { createHttpApp } from './app.js';
import type { RouteModule } from './route-table.js';

const memoryLogger = recordingLogger;

const testRoutes: RouteModule = (t) => {
  t.post('/echo', { auth: 'none' }, (req, res) => {
    res.json({ body: req.body ?? null });
  });
  t.post('/validate-like', { auth: 'none', errorShape: 'validation' }, () => {
    throw new DomainError('invalid', 'policyId is required.');
  });
  t.get('/boom', { auth: 'none' }, () => {
    throw new Error('database password=hunter2 exploded');
  });
  t.get('/typed', { auth: 'none' }, () => {
    throw new DomainError('bad_gateway', 'Outcome unknown.', 'EXECUTION_OUTCOME_UNKNOWN', { executionStatus: 'EXECUTION_UNKNOWN' });
  });
  t.post('/keyed', { auth: 'key' }, (req, res) => {
    res.json({ body: req.body });
  });
  t.get('/things/:id', { auth: 'none', query: ['q'] }, (req, res) => {
    res.json({ id: req.params.id, query: req.query });
  });
};

function build() {
  const { logger, lines } = memoryLogger();
  let bodyReadBeforeAuth = false;
  const { app } = createHttpApp({
    logger,
    bodyLimitBytes: 1024,
    modules: [testRoutes],
    authenticate: (req, _res, next) => {
      bodyReadBeforeAuth = req.body !== undefined;
      next(new DomainError('unauthenticated', 'authentication required'));
    },
    limiters: {},
  });
  return { app, lines, bodyReadBeforeAuth: () => bodyReadBeforeAuth };
}

describe('central error handling (spec 2.1)', () => {
  it('answers an unknown route with 404 and the envelope only', async () => {
    const res = await request(build().app).get('/no/such/route');
    expect(res.status).toBe(404);
    expect(Object.keys(res.body)).toEqual(['error']);
  });

  it('answers malformed JSON with 400 and no code', async () => {
    const res = await request(build().app).post('/echo').set('content-type', 'application/json').send('{"a":');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'Request body is not valid JSON.' });
  });

  it('refuses a body with a duplicate key with 400', async () => {
    const res = await request(build().app).post('/echo').set('content-type', 'application/json').send('{"a":1,"a":2}');
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/Duplicate key "a"/);
    expect(res.body.code).toBeUndefined();
  });

  it('answers a body over the limit with 413', async () => {
    const res = await request(build().app).post('/echo').set('content-type', 'application/json').send(JSON.stringify({ a: 'x'.repeat(2000) }));
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ error: 'Request body is too large.' });
  });

  it('answers an unhandled failure with a bare 500 and logs a correlation id only', async () => {
    const { app, lines } = build();
    const res = await request(app).get('/boom');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: 'Internal Server Error' });
    expect(res.text).not.toContain('hunter2');
    const logged = lines.find((l) => l.msg === 'unhandled failure');
    expect(logged?.obj).toHaveProperty('correlationId');
    expect(res.text).not.toContain((logged!.obj as { correlationId: string }).correlationId);
  });

  it('puts the code and the spec extra fields of a typed error in the body', async () => {
    const res = await request(build().app).get('/typed');
    expect(res.status).toBe(502);
    expect(res.body).toEqual({ error: 'Outcome unknown.', code: 'EXECUTION_OUTCOME_UNKNOWN', executionStatus: 'EXECUTION_UNKNOWN' });
  });

  it('renders errors of a validation-shaped route as {valid:false, errors}', async () => {
    const res = await request(build().app).post('/validate-like').send({});
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ valid: false, errors: ['policyId is required.'] });
  });

  it('authenticates before reading the body', async () => {
    const b = build();
    const res = await request(b.app).post('/keyed').set('content-type', 'application/json').send('{"not json');
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: 'authentication required' });
    expect(b.bodyReadBeforeAuth()).toBe(false);
  });

  it('gives every response a request id and logs one line per request without headers', async () => {
    const { app, lines } = build();
    const res = await request(app).post('/echo').set('authorization', 'Bearer pk_local_secret').send({ x: 1 });
    expect(res.headers['x-request-id']).toMatch(/[0-9a-f-]{36}/);
    const line = lines.find((l) => l.msg === 'request');
    expect(line?.obj).toMatchObject({ method: 'POST', path: '/echo', status: 200, requestId: res.headers['x-request-id'] });
    expect(JSON.stringify(lines)).not.toContain('pk_local_secret');
  });
});

describe('the request input layer (CONTRACT "Requests, reads and lists")', () => {
  const json = JSON.stringify({ a: 'b', n: 1 });
  // Bytes as they are: superagent would serialise a Buffer as JSON under a JSON content type.
  const post = (path = '/echo') => request(build().app).post(path).serialize((b: unknown) => b as string);
  const UNSUPPORTED = { error: 'Request body must be JSON: Content-Type application/json (charset=utf-8, if any).' };

  it.each(['application/json', 'application/json; charset=utf-8', 'Application/JSON;Charset="UTF-8"'])('reads a body sent as %s', async (type) => {
    const res = await post().set('content-type', type).send(json);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ body: { a: 'b', n: 1 } });
  });

  it.each(['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', 'application/json; profile=x', 'application/jsonx', 'multipart/form-data; boundary=x', '*/*'])(
    'answers 415 with the envelope to a body sent as %s',
    async (type) => {
      const res = await post().set('content-type', type).send(json);
      expect(res.status).toBe(415);
      expect(res.body).toEqual(UNSUPPORTED);
    },
  );

  it('answers 415 to a body without a content type, and reads a request without a body as no body', async () => {
    const untyped = await post().set('content-type', '').send(Buffer.from(json));
    expect(untyped.status).toBe(415);
    const none = await post();
    expect(none.status).toBe(200);
    expect(none.body).toEqual({ body: null });
  });

  it('keeps the {valid:false, errors} shape of a validation-shaped route on 415', async () => {
    const res = await post('/validate-like').set('content-type', 'text/plain').send('x');
    expect(res.status).toBe(415);
    expect(res.body).toEqual({ valid: false, errors: [UNSUPPORTED.error] });
  });

  it.each([
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
    ['GZIP', gzipSync],
    ['identity', (b: Buffer) => b],
  ])('inflates a body sent with Content-Encoding %s', async (coding, encode) => {
    const res = await post().set('content-type', 'application/json').set('content-encoding', coding).send(encode(Buffer.from(json)));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ body: { a: 'b', n: 1 } });
  });

  it.each([
    ['a plain body labelled gzip', 'gzip', Buffer.from(json)],
    ['a truncated gzip stream', 'gzip', gzipSync(Buffer.from(json)).subarray(0, 12)],
    ['a gzip stream cut before its trailer', 'gzip', gzipSync(Buffer.from(json)).subarray(0, -4)],
    ['garbage labelled deflate', 'deflate', Buffer.from('not deflate at all')],
    ['garbage labelled br', 'br', Buffer.from([0xff, 0xfe, 0x00, 0x01, 0x02])],
    ['an unknown coding', 'compress', Buffer.from(json)],
    ['two codings', 'gzip, br', brotliCompressSync(gzipSync(Buffer.from(json)))],
    ['zstd (not accepted, whatever Node supports)', 'zstd', Buffer.from(json)],
  ])('answers 400, never 500, to %s', async (_what, coding, bytes) => {
    const res = await post().set('content-type', 'application/json').set('content-encoding', coding).send(bytes);
    expect(res.status).toBe(400);
    expect(Object.keys(res.body)).toEqual(['error']);
    expect(res.body.error).toMatch(/Content-Encoding/);
  });

  it('bounds the inflated size by the body limit: 413', async () => {
    const bomb = gzipSync(Buffer.from(JSON.stringify({ a: 'x'.repeat(100_000) })));
    expect(bomb.length).toBeLessThan(1024);
    const res = await post().set('content-type', 'application/json').set('content-encoding', 'gzip').send(bomb);
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ error: 'Request body is too large.' });
  });

  it('answers 400 to numbers JSON does not carry exactly and to U+0000 in the body', async () => {
    for (const text of ['{"n":9007199254740993}', '{"n":-9007199254740992}', '{"s":"a\\u0000"}', '{"k\\u0000":1}']) {
      const res = await post().set('content-type', 'application/json').send(text);
      expect(`${text} ${res.status}`).toBe(`${text} 400`);
      expect(res.body.error).toMatch(/^Request body cannot be processed: /);
    }
    expect((await post().set('content-type', 'application/json').send('{"n":9007199254740991}')).body).toEqual({ body: { n: 9007199254740991 } });
  });

  it('answers 400 to U+0000 in a path parameter or the query, and to a path that is not percent-encoded UTF-8', async () => {
    const { app } = build();
    expect((await request(app).get('/things/a%00b')).body).toEqual({ error: "The path parameter 'id' must not hold U+0000." });
    expect((await request(app).get('/things/a%00b')).status).toBe(400);
    for (const query of ['?q=%00', '?q=a&q=b%00', '?k%00=1', '?a[b]=%00']) {
      const res = await request(app).get(`/things/ok${query}`);
      expect(`${query} ${res.status}`).toBe(`${query} 400`);
      expect(res.body).toEqual({ error: 'The query string must not hold U+0000.' });
    }
    expect((await request(app).get('/things/%E0%A4%A')).status).toBe(400);
    expect((await request(app).get('/things/a%2500?q=%2500')).body).toEqual({ id: 'a%00', query: { q: '%00' } });
  });

  it('answers 400 to a query parameter the route does not declare, naming it and the known ones', async () => {
    const { app } = build();
    const res = await request(app).get('/things/ok?q=1&Q=2');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'Unknown query parameter "Q": GET /things/{id} takes only q.' });
    const long = await request(app).get(`/things/ok?${'x'.repeat(100)}=1`);
    expect(long.body).toEqual({ error: `Unknown query parameter "${'x'.repeat(64)}…": GET /things/{id} takes only q.` });
    expect((await request(app).post('/echo?q=1').set('content-type', 'application/json').send('{}')).body).toEqual({ error: 'Unknown query parameter "q": POST /echo takes no query parameter.' });
  });
});

describe('the audit of successful authentications', () => {
  it('runs on every keyed route but those declared audit: false; identification runs on all of them', async () => {
    const identified: string[] = [];
    const audited: string[] = [];
    const { app } = createHttpApp({
      logger: memoryLogger().logger,
      bodyLimitBytes: 1024,
      modules: [
        (t) => {
          t.post('/dry-run', { auth: 'key', audit: false }, (_req, res) => res.json({ ok: true }));
          t.post('/recorded', { auth: 'key' }, (_req, res) => res.json({ ok: true }));
        },
      ],
      authenticate: {
        identify: (req, _res, next) => {
          identified.push(req.path);
          next();
        },
        audit: (req, _res, next) => {
          audited.push(req.path);
          next();
        },
      },
      limiters: {},
    });
    expect((await request(app).post('/dry-run').send({})).status).toBe(200);
    expect((await request(app).post('/recorded').send({})).status).toBe(200);
    expect({ identified, audited }).toEqual({ identified: ['/dry-run', '/recorded'], audited: ['/recorded'] });
  });
});
