import { describe, expect, it } from '@jest/globals';
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
