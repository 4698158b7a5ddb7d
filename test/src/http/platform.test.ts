import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { OPENAPI, toOpenApiPath } from '@ets/adapters-http';
import { expectRoutesDocumented, STORAGE_TARGETS, startTestServer, type TestServer } from '@ets/test-support';

describe.each(STORAGE_TARGETS)('platform routes on $name', (factory) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(factory);
  });
  afterAll(async () => {
    await server.destroy();
  });

  it('serves /health, /ready, /openapi.yaml, /documentation and /reference without a key', async () => {
    expect((await request(server.url).get('/health')).body).toEqual({ status: 'UP' });
    expect((await request(server.url).get('/ready')).body).toEqual({ status: 'READY' });
    const yaml = await request(server.url).get('/openapi.yaml');
    expect(yaml.status).toBe(200);
    expect(yaml.text).toMatch(/^openapi: 3\.1\.0/);
    for (const page of ['/documentation', '/reference', '/handbook/download-leads']) {
      const res = await request(server.url).get(page).set('accept', 'text/html');
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/text\/html/);
      const csp = String(res.headers['content-security-policy']);
      expect(csp).toContain("default-src 'none'");
      // Air-gapped: the policy names no other host, and the page loads nothing from one.
      expect(csp).not.toMatch(/https?:|\*|'unsafe-eval'/);
      expect(res.text).not.toMatch(/<link[^>]+href=["']?(https?:)?\/\/|@import|url\(\s*["']?(https?:)?\/\/|src=["']?(https?:)?\/\//i);
    }
    // The reference's scripts and styles are served by the service itself.
    const reference = (await request(server.url).get('/reference')).text;
    const assets = [...reference.matchAll(/(?:src|href)="(\/reference\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets).toEqual(expect.arrayContaining(['/reference/assets/scalar-api-reference.js', '/reference/assets/reference.css', '/reference/assets/reference.js']));
    for (const asset of assets) {
      const res = await request(server.url).get(asset);
      expect(`${asset} ${res.status}`).toBe(`${asset} 200`);
      expect(res.text).not.toMatch(/sourceMappingURL/);
    }
    expect((await request(server.url).get('/reference/assets/../../package.json')).status).toBe(404);
    expect((await request(server.url).get('/reference/assets/scalar-api-reference.js.map')).status).toBe(404);
  });

  it('captures a handbook lead once per address before giving the download location', async () => {
    const post = await request(server.url).post('/handbook/download-leads').send({ email: 'Ada@Example.org' });
    expect(post.status).toBe(201);
    expect(post.body).toEqual({ downloadUrl: '/documentation' });
    const form = await request(server.url).get('/handbook/download-leads').query({ email: 'ada@example.ORG' });
    expect(form.status).toBe(302);
    expect(form.headers.location).toBe('/documentation');
    const rows: { n: string | number }[] = await server.dataSource.query("SELECT COUNT(*) AS n FROM handbook_leads WHERE email_key = 'ada@example.org'");
    expect(Number(rows[0]!.n)).toBe(1);
    for (const bad of [{}, { email: 'not-an-address' }, { email: 42 }]) {
      const res = await request(server.url).post('/handbook/download-leads').send(bad);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: 'A valid email address is required.' });
    }
    // The download is the operator guide, served by the service itself.
    expect((await request(server.url).get(post.body.downloadUrl)).text).toContain('operator guide');
  });

  it('keeps /version behind caller authentication', async () => {
    expect((await request(server.url).get('/version')).status).toBe(401);
  });

  it('describes exactly the mounted routes in the OpenAPI document (3.1.0, version 1.0.0), with their query parameters', () => {
    expect(OPENAPI.openapi).toBe('3.1.0');
    expect(OPENAPI.info.version).toBe('1.0.0');
    expectRoutesDocumented(server.httpApp, 'transaction', expect);
  });

  it('documents on every route what the input layer and authentication answer: 400, 415 and 413 with a body, 401 and 429 with a key', () => {
    for (const r of server.httpApp.routes) {
      const statuses = Object.keys(OPENAPI.paths[toOpenApiPath(r.path)]![r.method]!.responses ?? {});
      const expected = ['400', ...(r.method === 'post' ? ['413', '415'] : []), ...(r.auth === 'key' ? ['401', '429'] : [])];
      expect(`${r.method} ${r.path}: ${expected.filter((s) => !statuses.includes(s)).join(',')}`).toBe(`${r.method} ${r.path}: `);
    }
  });

  it('answers 503 NOT_READY with a reason when execution_intents is missing, and /health stays UP', async () => {
    await server.dataSource.query('ALTER TABLE execution_intents RENAME TO execution_intents_gone');
    try {
      const ready = await request(server.url).get('/ready');
      expect(ready.status).toBe(503);
      expect(ready.body).toEqual({ status: 'NOT_READY', reason: 'table execution_intents is missing' });
      expect((await request(server.url).get('/health')).body).toEqual({ status: 'UP' });
    } finally {
      await server.dataSource.query('ALTER TABLE execution_intents_gone RENAME TO execution_intents');
    }
  });
});
