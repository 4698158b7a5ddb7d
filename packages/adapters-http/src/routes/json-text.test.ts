import { describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { recordingLogger, type TextPage } from '@ets/domain';
import { createHttpApp } from '../app.js';
import type { RouteModule } from '../route-table.js';
import { jsonWithTexts, sendJsonText, streamTextPage } from './json-text.js';

async function* texts(items: string[], failAt?: number): AsyncGenerator<string> {
  for (const [i, t] of items.entries()) {
    if (i === failAt) throw new Error('store down');
    await new Promise((r) => setImmediate(r));
    yield t;
  }
  if (failAt === items.length) throw new Error('store down');
}
const page = (items: string[], failAt?: number): TextPage => ({ items: texts(items, failAt), page: 2, pageSize: 3, total: 7 });

const stored = [JSON.stringify({ a: '<b>&</b>', n: 1 }), JSON.stringify({ __proto__: null, x: [1, { y: null }] }), '{"z":"\\u0000-free"}'];

function build(items: () => TextPage) {
  const routes: RouteModule = (t) => {
    t.get('/page', { auth: 'none' }, async (req, res) => streamTextPage(req, res, items()));
    t.get('/one', { auth: 'none' }, (req, res) => sendJsonText(req, res, jsonWithTexts({ id: 'x' }, { record: stored[0], missing: undefined })));
  };
  return createHttpApp({ logger: recordingLogger().logger, bodyLimitBytes: 1024, modules: [routes], authenticate: (_q, _s, next) => next(), limiters: {} }).app;
}

describe('serving stored JSON texts', () => {
  it('writes a page as the bytes res.json would send for the parsed items (json escape included)', async () => {
    const app = build(() => page(stored));
    const res = await request(app).get('/page');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    const expected = { items: stored.map((s) => JSON.parse(s) as unknown), page: 2, pageSize: 3, total: 7 };
    expect(res.text).toBe(JSON.stringify(expected).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026'));
    expect(res.body).toEqual(expected);
    expect((await request(build(() => page([]))).get('/page')).body).toEqual({ items: [], page: 2, pageSize: 3, total: 7 });
  });

  it('puts stored texts beside plain fields', async () => {
    expect(jsonWithTexts({}, { a: '1' })).toBe('{"a":1}');
    expect(jsonWithTexts({ b: 2 }, {})).toBe('{"b":2}');
    const res = await request(build(() => page([]))).get('/one');
    expect(res.body).toEqual({ id: 'x', record: JSON.parse(stored[0]!), missing: null });
  });

  it('answers a store failure before the first byte with the error envelope', async () => {
    const res = await request(build(() => page(stored, 0))).get('/page');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: 'Internal Server Error' });
  });

  it('cuts the connection on a store failure after the first byte, so a truncated page is never taken for a whole one', async () => {
    const app = build(() => page(stored, 2));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const outcome = await new Promise<string>((resolve) => {
        http
          .get(`http://127.0.0.1:${(server.address() as AddressInfo).port}/page`, (res) => {
            let text = '';
            res.on('data', (d) => (text += d));
            res.on('end', () => resolve(`ended: ${text}`));
            res.on('error', () => resolve('aborted'));
            res.on('aborted', () => resolve('aborted'));
          })
          .on('error', () => resolve('aborted'));
      });
      expect(outcome).toBe('aborted');
    } finally {
      server.close();
    }
  });
});
