import { describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { DomainError, silentLogger, type Clock, type HandbookLeadStore } from '@ets/domain';
import { createHttpApp } from '../app.js';
import { handbookRoutes, isValidLeadEmail } from './handbook.js';

const INVALID = { error: 'A valid email address is required.' };
const NOW = new Date('2026-02-03T04:05:06.000Z');

/** In-memory fake of the port: one lead per address, ignoring case. */
class MemoryLeads implements HandbookLeadStore {
  readonly rows = new Map<string, { email: string; at: Date }>();
  calls = 0;
  async add(email: string, at: Date): Promise<boolean> {
    this.calls++;
    const key = email.toLowerCase();
    if (this.rows.has(key)) return false;
    this.rows.set(key, { email, at });
    return true;
  }
}

function build(downloadUrl = '/documentation') {
  const leads = new MemoryLeads();
  const clock: Clock = { now: () => NOW };
  const { app } = createHttpApp({
    logger: silentLogger,
    bodyLimitBytes: 4096,
    modules: [handbookRoutes({ leads, clock, downloadUrl })],
    authenticate: (req, res, next) => {
      if (req.get('authorization') !== 'Bearer good') return next(new DomainError('unauthenticated', 'authentication required'));
      res.locals.caller = { callerId: 'c1' };
      next();
    },
    limiters: {},
  });
  return { app, leads };
}

describe('POST /handbook/download-leads (public)', () => {
  it('stores the lead and answers 201 with the download location, without a key', async () => {
    const { app, leads } = build();
    const res = await request(app).post('/handbook/download-leads').send({ email: 'Ada@Example.org' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ downloadUrl: '/documentation' });
    expect([...leads.rows.entries()]).toEqual([['ada@example.org', { email: 'Ada@Example.org', at: NOW }]]);
  });

  it('answers 201 again for an address already stored (any casing), storing it once', async () => {
    const { app, leads } = build('https://example.org/handbook.pdf');
    for (const email of ['ada@example.org', 'ADA@EXAMPLE.ORG']) {
      const res = await request(app).post('/handbook/download-leads').send({ email });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ downloadUrl: 'https://example.org/handbook.pdf' });
    }
    expect(leads.rows.size).toBe(1);
  });

  it.each([
    ['no body', undefined],
    ['an empty object', {}],
    ['a null email', { email: null }],
    ['a number', { email: 42 }],
    ['an array', { email: ['ada@example.org'] }],
    ['an empty string', { email: '' }],
    ['no @', { email: 'ada.example.org' }],
    ['two @', { email: 'ada@home@example.org' }],
    ['no domain dot', { email: 'ada@localhost' }],
    ['a space', { email: 'ada lovelace@example.org' }],
    ['a quoted space', { email: '"ada lovelace"@example.org' }],
    ['a surrounding space', { email: ' ada@example.org' }],
    ['a trailing newline', { email: 'ada@example.org\n' }],
    ['over 320 characters', { email: `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.${'e'.repeat(63)}.org` }],
    ['a JSON array body', ['ada@example.org']],
    ['a JSON string body', 'ada@example.org'],
  ])('answers 400 with the spec message and no code for %s, storing nothing', async (_label, body) => {
    const { app, leads } = build();
    const req = request(app).post('/handbook/download-leads').set('content-type', 'application/json');
    const res = await (body === undefined ? req : req.send(JSON.stringify(body)));
    expect(res.status).toBe(400);
    expect(res.body).toEqual(INVALID);
    expect(leads.calls).toBe(0);
  });

  it('answers 400 for a body that is not JSON', async () => {
    const { app } = build();
    const res = await request(app).post('/handbook/download-leads').set('content-type', 'application/json').send('{"email":');
    expect(res.status).toBe(400);
    expect(res.body.code).toBeUndefined();
  });
});

describe('GET /handbook/download-leads (browser form, public)', () => {
  it('stores the lead and redirects to the download', async () => {
    const { app, leads } = build();
    const res = await request(app).get('/handbook/download-leads').query({ email: 'grace@example.org' });
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('/documentation');
    expect(leads.rows.get('grace@example.org')).toEqual({ email: 'grace@example.org', at: NOW });
  });

  it.each([
    ['no email', ''],
    ['a malformed email', '?email=grace'],
    ['a repeated email parameter', '?email=a%40example.org&email=b%40example.org'],
    ['an encoded space', '?email=grace%20hopper%40example.org'],
  ])('answers 400 for %s, storing nothing', async (_label, query) => {
    const { app, leads } = build();
    const res = await request(app).get(`/handbook/download-leads${query}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual(INVALID);
    expect(leads.calls).toBe(0);
  });

  it('needs no key, like the POST: a browser form sends none', async () => {
    const { app, leads } = build();
    const res = await request(app).get('/handbook/download-leads').query({ email: 'ada@example.org' });
    expect(res.status).toBe(302);
    expect(leads.calls).toBe(1);
  });
});

describe('isValidLeadEmail', () => {
  it('accepts ordinary addresses', () => {
    for (const e of ['a@b.co', 'first.last+tag@sub.example.org', 'X_Y-z@EXAMPLE.COM', 'ü@exämple.de']) expect(isValidLeadEmail(e)).toBe(true);
  });
  it('accepts a long address within the part limits, and rejects one over 320 characters', () => {
    expect(isValidLeadEmail(`${'a'.repeat(64)}@${'b'.repeat(60)}.com`)).toBe(true);
    expect(isValidLeadEmail(`a@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.${'e'.repeat(63)}.${'f'.repeat(60)}.org`)).toBe(false);
  });
});
