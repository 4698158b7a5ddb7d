import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import request from 'supertest';
import { apiKeysEnv, bearer, businessTransaction, heldApproval, makeKey, publishPolicy, rowCounts, STORAGE_TARGETS, startTestServer, type TestKey, type TestServer } from '@ets/test-support';
import { envelope, policyDoc } from './governance-fixtures.js';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });

const NUL = '\u0000';
type Method = 'post' | 'delete';

/**
 * The request input layer (CONTRACT "Requests, reads and lists") on the running service: every
 * route that reads a body, keyed or public, answers a damaged or unknown Content-Encoding with 400,
 * another content type with 415, U+0000 and numbers JSON cannot carry exactly with 400, the same on
 * both stores, and stores nothing for any of them.
 */
describe.each(STORAGE_TARGETS)('request input on $name', (factory) => {
  let server: TestServer;
  let changeId: string;
  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, agent), RATE_LIMIT_PUBLIC_PER_MINUTE: '100000' });
    await publishPolicy(server.dataSource);
    const proposed = await request(server.url).post('/policies/gov-test/1.0.0/pending-changes').set('authorization', bearer(alice)).send({ proposedContent: policyDoc('1.0.0') });
    expect(proposed.status).toBe(201);
    changeId = proposed.body.id as string;
  });
  afterAll(async () => {
    await server?.destroy();
  });

  const counts = () => rowCounts(server.dataSource);

  /** Each route that reads a body, with the key it takes (none: public), a body it would accept and its method (POST unless named). */
  const bodyRoutes = (): [string, TestKey | undefined, () => unknown, Method?][] => [
    ['/execute', agent, () => businessTransaction()],
    ['/transactions', agent, () => businessTransaction()],
    ['/verify', alice, () => ({ businessTransactionId: randomUUID() })],
    ['/receipt', alice, () => ({ businessTransactionId: randomUUID() })],
    ['/replay', alice, () => ({ businessTransactionId: randomUUID() })],
    ['/policies/validate', alice, () => ({ policyId: 'exec-test', policyVersion: '1.0.0' })],
    ['/policies/gov-test/1.0.0/pending-changes', alice, () => ({ proposedContent: policyDoc('1.0.0') })],
    [`/policies/pending-changes/${changeId}/approve`, bob, () => envelope(bob, changeId, 'approve')],
    [`/policies/pending-changes/${changeId}/reject`, bob, () => envelope(bob, changeId, 'reject')],
    [`/execution-intents/${randomUUID()}/resolve`, alice, () => ({ found: 'EXECUTED', note: 'checked' })],
    ['/external-connectors/changes', alice, () => ({ kind: 'revoke', capability: 'pay:transfer', reason: 'not used' })],
    [`/external-connectors/changes/${randomUUID()}/approve`, bob, () => envelope(bob, randomUUID(), 'approve')],
    [`/external-connectors/changes/${randomUUID()}/reject`, bob, () => envelope(bob, randomUUID(), 'reject')],
    ['/business-signal-sources/changes', alice, () => ({ kind: 'revoke', name: 'erp', reason: 'not used' })],
    [`/business-signal-sources/changes/${randomUUID()}/approve`, bob, () => envelope(bob, randomUUID(), 'approve')],
    [`/business-signal-sources/changes/${randomUUID()}/reject`, bob, () => envelope(bob, randomUUID(), 'reject')],
    ['/authority-grants/changes', alice, () => ({ kind: 'revoke', grantId: randomUUID(), reason: 'not used' })],
    [`/authority-grants/changes/${randomUUID()}/approve`, bob, () => envelope(bob, randomUUID(), 'approve')],
    [`/authority-grants/changes/${randomUUID()}/reject`, bob, () => envelope(bob, randomUUID(), 'reject')],
    ['/sandbox/approvals', agent, () => ({ businessTransactionId: randomUUID(), action: 'sandbox:echo', scope: { field: 'value', value: 1 } })],
    ['/evaluate', alice, () => ({ policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: 1 } })],
    ['/simulate', alice, () => ({ policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: 1 } })],
    ['/override', alice, () => ({ executionId: randomUUID(), approved: true, approvedBy: 'alice', approverRole: 'risk', reason: 'checked' })],
    ['/confirm-execution', alice, () => ({ attestation: {}, executedAction: { actionType: 'x', actionId: 'y', actionTimestamp: '2026-01-01T00:00:00Z' } })],
    ['/refusal/verify', undefined, () => ({})],
    ['/execution-intents/verify', undefined, () => ({})],
    ['/audit/verify', undefined, () => ({})],
    ['/handbook/download-leads', undefined, () => ({ email: `lead-${randomUUID()}@example.com` })],
    ['/mcp-servers/changes', alice, () => ({ kind: 'revoke', name: 'files', reason: 'not used' })],
    [`/mcp-servers/changes/${randomUUID()}/approve`, bob, () => envelope(bob, randomUUID(), 'approve')],
    [`/mcp-servers/changes/${randomUUID()}/reject`, bob, () => envelope(bob, randomUUID(), 'reject')],
    ['/mcp', agent, () => ({ jsonrpc: '2.0', id: 1, method: 'tools/list' })],
    [`/overrides/${randomUUID()}/approve`, bob, () => heldApproval(bob, businessTransaction())],
    [`/overrides/${randomUUID()}/reject`, bob, () => envelope(bob, randomUUID(), 'reject')],
    ['/console/session', undefined, () => ({ apiKey: 'pk_local_not-a-key' })],
    ['/console/session', alice, () => ({}), 'delete'],
  ];

  it('covers every mounted route that reads a body', () => {
    const template = (path: string) => path.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, ':id').replace('/gov-test/1.0.0/', '/:name/:version/');
    const covered = new Set(bodyRoutes().map(([route, , , method]) => `${method ?? 'post'} ${template(route)}`));
    const mounted = server.httpApp.routes.filter((r) => r.method !== 'get').map((r) => `${r.method} ${r.path}`);
    expect(mounted.filter((path) => !covered.has(path))).toEqual([]);
  });

  /** A POST (or the method named) sending exactly these bytes (superagent would serialise a Buffer as JSON). */
  const postBytes = (path: string, key: TestKey | undefined, bytes: Buffer | string, headers: Record<string, string>, method: Method = 'post') => {
    const req = request(server.url)[method](path).serialize((b: unknown) => b as string);
    if (key) req.set('authorization', bearer(key));
    for (const [k, v] of Object.entries(headers)) req.set(k, v);
    return req.send(bytes as never);
  };

  const errorText = (res: request.Response): string => (path(res) === '/policies/validate' ? res.body.errors?.[0] : res.body.error) as string;
  const path = (res: request.Response): string => new URL((res as unknown as { request: { url: string } }).request.url).pathname;

  it('answers 400, never 500, to a damaged or unknown Content-Encoding on every route that reads a body; nothing is stored', async () => {
    const before = await counts();
    for (const [route, key, body, method] of bodyRoutes()) {
      const json = Buffer.from(JSON.stringify(body()));
      for (const [what, coding, bytes] of [
        ['plain body labelled gzip', 'gzip', json],
        ['truncated gzip', 'gzip', gzipSync(json).subarray(0, 20)],
        ['garbage deflate', 'deflate', Buffer.from('definitely not deflate')],
        ['garbage br', 'br', Buffer.from([0xde, 0xad, 0xbe, 0xef, 0x00])],
        ['unknown coding', 'x-unknown', json],
      ] as const) {
        const res = await postBytes(route, key, bytes, { 'content-type': 'application/json', 'content-encoding': coding }, method);
        expect(`${route} ${what}: ${res.status}`).toBe(`${route} ${what}: 400`);
        expect(errorText(res)).toMatch(/Content-Encoding/);
      }
    }
    expect(await counts()).toEqual(before);
  });

  it('reads a gzip body like a plain one', async () => {
    const tx = businessTransaction();
    const res = await postBytes('/transactions', agent, gzipSync(JSON.stringify(tx)), { 'content-type': 'application/json; charset=utf-8', 'content-encoding': 'gzip' });
    expect(res.status).toBe(201);
    expect(res.body.businessTransactionId).toBe(tx.businessTransactionId);
  });

  it('answers 415 with the envelope to a body that is not application/json, on every route that reads one; nothing is stored', async () => {
    const before = await counts();
    for (const [route, key, body, method] of bodyRoutes()) {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=iso-8859-1']) {
        const res = await postBytes(route, key, JSON.stringify(body()), { 'content-type': type }, method);
        expect(`${route} ${type}: ${res.status}`).toBe(`${route} ${type}: 415`);
        expect(errorText(res)).toBe('Request body must be JSON: Content-Type application/json (charset=utf-8, if any).');
      }
      const boundary = '----ets-boundary';
      const multipart = `--${boundary}\r\nContent-Disposition: form-data; name="body"\r\nContent-Type: application/json\r\n\r\n${JSON.stringify(body())}\r\n--${boundary}--\r\n`;
      const res = await postBytes(route, key, multipart, { 'content-type': `multipart/form-data; boundary=${boundary}` }, method);
      expect(`${route} multipart: ${res.status}`).toBe(`${route} multipart: 415`);
      expect(errorText(res)).toBe('Request body must be JSON: Content-Type application/json (charset=utf-8, if any).');
    }
    expect(await counts()).toEqual(before);
  });

  /** A POST with exactly these Content-Type headers (none, one or several), which supertest cannot send. */
  const postWithContentTypes = (route: string, key: TestKey | undefined, body: string, contentTypes: string[], method: Method = 'post') =>
    new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
      const url = new URL(route, server.url);
      const req = http.request({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: method.toUpperCase() }, (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) as Record<string, unknown> }));
      });
      if (key) req.setHeader('authorization', bearer(key));
      if (contentTypes.length > 0) req.setHeader('content-type', contentTypes);
      req.setHeader('content-length', Buffer.byteLength(body));
      req.on('error', reject);
      req.end(body);
    });

  it('answers 415 to a body without Content-Type and to one with two Content-Type headers (application/json first or last), on every route that reads one; nothing is stored', async () => {
    const before = await counts();
    const message = 'Request body must be JSON: Content-Type application/json (charset=utf-8, if any).';
    for (const [route, key, body, method] of bodyRoutes()) {
      for (const [what, types] of [
        ['no content type', []],
        ['application/json, text/plain', ['application/json', 'text/plain']],
        ['text/plain, application/json', ['text/plain', 'application/json']],
        ['application/json twice', ['application/json', 'application/json']],
      ] as const) {
        const res = await postWithContentTypes(route, key, JSON.stringify(body()), [...types], method);
        expect(`${route} ${what}: ${res.status}`).toBe(`${route} ${what}: 415`);
        expect(route === '/policies/validate' ? (res.body.errors as string[])[0] : res.body.error).toBe(message);
      }
    }
    expect(await counts()).toEqual(before);
    // One application/json header is read.
    const tx = businessTransaction();
    expect((await postWithContentTypes('/transactions', agent, JSON.stringify(tx), ['application/json'])).status).toBe(201);
  });

  it('answers 400 to U+0000 in an id, name, version, reason or any body string; nothing is stored', async () => {
    const before = await counts();
    const tx = (over: Record<string, unknown>) => ({ ...businessTransaction(), ...over });
    const cases: [string, TestKey | undefined, unknown][] = [
      ['/execute', agent, tx({ businessTransactionId: `${randomUUID()}${NUL}` })],
      ['/execute', agent, tx({ policy: { name: `exec-test${NUL}`, version: '1.0.0' } })],
      ['/transactions', agent, tx({ policy: { name: 'exec-test', version: `1.0.0${NUL}` } })],
      ['/transactions', agent, tx({ metadata: { tenantId: `t1${NUL}` } })],
      ['/transactions', agent, tx({ intent: { action: 'sandbox:echo', parameters: { reference: `inv${NUL}` } } })],
      ['/verify', alice, { businessTransactionId: NUL }],
      ['/replay', alice, { businessTransactionId: `x${NUL}` }],
      ['/policies/validate', alice, { policyId: `exec-test${NUL}`, policyVersion: '1.0.0' }],
      ['/policies/gov-test/2.0.0/pending-changes', alice, { proposedContent: policyDoc('2.0.0'), reason: `why${NUL}` }],
      ['/policies/gov-test/2.0.0/pending-changes', alice, { proposedContent: policyDoc(`2.0.0${NUL}`) }],
      ['/policies/gov-test/2.0.0/pending-changes', alice, { proposedContent: policyDoc('2.0.0', { name: `gov-test${NUL}` }) }],
      [`/policies/pending-changes/${changeId}/reject`, bob, envelope(bob, changeId, 'reject', { reason: `no${NUL}` })],
      [`/execution-intents/${randomUUID()}/resolve`, alice, { found: 'EXECUTED', note: `n${NUL}` }],
      ['/external-connectors/changes', alice, { kind: 'revoke', capability: 'pay:transfer', reason: `why${NUL}` }],
      ['/external-connectors/changes', alice, { kind: 'revoke', capability: `pay${NUL}:transfer`, reason: 'why' }],
      ['/business-signal-sources/changes', alice, { kind: 'revoke', name: 'erp', reason: `why${NUL}` }],
      ['/business-signal-sources/changes', alice, { kind: 'revoke', name: `erp${NUL}`, reason: 'why' }],
      ['/authority-grants/changes', alice, { kind: 'revoke', grantId: randomUUID(), reason: `why${NUL}` }],
      ['/authority-grants/changes', alice, { kind: 'grant', grantee: `agent${NUL}`, action: 'sandbox:echo', limits: [], expiresAt: '2099-01-01T00:00:00Z', reason: 'why' }],
      ['/evaluate', alice, { policyId: `exec-test${NUL}`, policyVersion: '1.0.0', signals: {} }],
      ['/simulate', alice, { policyId: 'exec-test', policyVersion: '1.0.0', signals: { country: `F${NUL}R` } }],
      ['/override', alice, { executionId: randomUUID(), approved: false, approvedBy: 'alice', approverRole: 'risk', reason: `no${NUL}` }],
      ['/confirm-execution', alice, { attestation: { executionId: NUL }, executedAction: { actionType: 'x', actionId: 'y', actionTimestamp: '2026-01-01T00:00:00Z' } }],
      ['/audit/verify', undefined, { recordType: NUL }],
      ['/handbook/download-leads', undefined, { email: `a${NUL}@example.com` }],
    ];
    for (const [route, key, body] of cases) {
      const res = await postBytes(route, key, JSON.stringify(body), { 'content-type': 'application/json' });
      expect(`${route}: ${res.status}`).toBe(`${route}: 400`);
      expect(errorText(res)).toMatch(/holds U\+0000/);
    }
    expect(await counts()).toEqual(before);
  });

  it('answers 400 to U+0000 in every path parameter of every mounted route, taken from the route table; nothing is stored', async () => {
    const before = await counts();
    const PARAM = /:([A-Za-z0-9_]+)/g;
    const routes = server.httpApp.routes.filter((r) => r.path.includes(':'));
    // The table, not a list kept by hand: a route added later is covered without a change here.
    expect(routes.map((r) => `${r.method} ${r.path}`)).toEqual(
      expect.arrayContaining(['get /trust-records/:id/proof', 'post /external-connectors/changes/:id/approve', 'get /audit/decisions/:executionId', 'get /keys/:keyId']),
    );
    for (const route of routes) {
      for (const [, name] of route.path.matchAll(PARAM)) {
        const path = route.path.replace(PARAM, (_m, p: string) => (p === name ? `${randomUUID()}%00` : randomUUID()));
        const req = request(server.url)[route.method](path);
        if (route.auth !== 'none') req.set('authorization', bearer(alice));
        const res = await (route.method === 'get' ? req : req.send({}));
        const what = `${route.method.toUpperCase()} ${route.path} (${name})`;
        expect(`${what}: ${res.status}`).toBe(`${what}: 400`);
        expect(res.body.error).toBe(`The path parameter '${name}' must not hold U+0000.`);
      }
    }
    expect(await counts()).toEqual(before);
  });

  it('answers 400 to U+0000 in a query value; nothing is stored', async () => {
    const before = await counts();
    const gets: [string, TestKey | undefined][] = [
      ['/policies/pending-changes?status=PENDING%00', alice],
      ['/audit/auth-events?before=2026-01-01T00:00:00Z%00', alice],
      ['/transactions?page=1%00', agent],
      ['/trust-records?pageSize=1%00', agent],
      ['/execution-intents?state=PREPARED%00', agent],
      ['/execution-intents?page=%00', alice],
      ['/external-connectors/changes?status=%00', alice],
      ['/audit/decisions?policyId=%00', alice],
      ['/log/leaves?start=0%00&count=1', undefined],
      ['/handbook/download-leads?email=a%00@example.com', undefined],
    ];
    for (const [route, key] of gets) {
      const req = request(server.url).get(route);
      const res = await (key ? req.set('authorization', bearer(key)) : req);
      expect(`${route}: ${res.status}`).toBe(`${route}: 400`);
      expect(res.body.error).toBe('The query string must not hold U+0000.');
    }
    expect(await counts()).toEqual(before);
  });

  it('answers 400 to an integer JSON cannot carry exactly (beyond ±(2^53 − 1)), storing nothing, and takes 2^53 − 1', async () => {
    const bigger = businessTransaction();
    const text = JSON.stringify(bigger).replace('"amount":120,"currency"', '"amount":9007199254740993,"currency"');
    expect(text).toContain('9007199254740993');
    for (const route of ['/execute', '/transactions']) {
      const res = await postBytes(route, agent, text, { 'content-type': 'application/json' });
      expect(res.status).toBe(400);
      expect(res.body.error).toBe(
        'Request body cannot be processed: the number at $.intent.parameters.amount is beyond ±(2^53 − 1), which a JSON number does not carry exactly; send such a value as a string.',
      );
    }
    expect((await request(server.url).get(`/transactions/${bigger.businessTransactionId}`).set('authorization', bearer(agent))).status).toBe(404);
    const exact = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { amount: Number.MAX_SAFE_INTEGER, big: '9007199254740993' } } });
    const ok = await request(server.url).post('/transactions').set('authorization', bearer(agent)).send(exact);
    expect(ok.status).toBe(201);
    expect(ok.body.trustRecord.transaction.intent.parameters).toEqual({ amount: 9007199254740991, big: '9007199254740993' });
  });

  it('answers 400 to a number whose written value is not that of its double (1e-400, 0.300…01), storing nothing, and takes 1.20e2 as 120', async () => {
    const before = await counts();
    for (const [token, carried] of [
      ['1e-400', '0'],
      ['0.30000000000000000000000001', '0.3'],
    ]) {
      const text = JSON.stringify(businessTransaction()).replace('"amount":120,"currency"', `"amount":${token},"currency"`);
      expect(text).toContain(token);
      for (const route of ['/execute', '/transactions']) {
        const res = await postBytes(route, agent, text, { 'content-type': 'application/json' });
        expect(`${route} ${token}: ${res.status}`).toBe(`${route} ${token}: 400`);
        expect(res.body.error).toBe(
          `Request body cannot be processed: the number at $.intent.parameters.amount is not one a JSON number carries exactly (it would be stored and signed as ${carried}); send such a value as a string.`,
        );
      }
    }
    expect(await counts()).toEqual(before);
    const same = businessTransaction();
    const ok = await postBytes('/transactions', agent, JSON.stringify(same).replace('"amount":120,"currency"', '"amount":1.20e2,"currency"'), { 'content-type': 'application/json' });
    expect(ok.status).toBe(201);
    expect(ok.body.trustRecord.transaction.intent.parameters.amount).toBe(120);
  });

  it('answers 401 to a request with two Authorization headers, even when both hold a valid key', async () => {
    const twice = (values: string[]) =>
      new Promise<{ status: number; body: unknown }>((resolve, reject) => {
        const url = new URL('/callers/me', server.url);
        const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'GET' }, (res) => {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) as unknown }));
        });
        req.setHeader('authorization', values);
        req.on('error', reject);
        req.end();
      });
    expect(await twice([bearer(alice)])).toMatchObject({ status: 200 });
    expect(await twice([bearer(alice), bearer(alice)])).toEqual({ status: 401, body: { error: 'authentication required' } });
    expect(await twice([bearer(alice), 'Bearer pk_local_wrong'])).toEqual({ status: 401, body: { error: 'authentication required' } });
    expect(await twice(['Bearer pk_local_wrong', bearer(alice)])).toEqual({ status: 401, body: { error: 'authentication required' } });
  });
});
