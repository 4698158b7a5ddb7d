import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import request from 'supertest';
import { apiKeysEnv, bearer, businessTransaction, makeKey, publishPolicy, STORAGE_TARGETS, startTestServer, type TestServer } from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });

/** A body: arbitrary JSON, a valid transaction with arbitrary damage, or damaged text. */
const FIELDS = ['businessTransactionId', 'metadata', 'authority', 'authorization', 'intent', 'policy', 'signals'] as const;
const NESTED = ['authority.principalId', 'authority.authorityId', 'authorization.authorityId', 'intent.action', 'intent.parameters', 'policy.name', 'policy.version', 'metadata.tenantId'];

/** A string holding U+0000 somewhere: what PostgreSQL text cannot store. */
const withNul = fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })).map(([a, b]) => `${a}\u0000${b}`);

const mutation = fc.oneof(
  fc.record({ kind: fc.constant('delete' as const), path: fc.constantFrom(...FIELDS, ...NESTED) }),
  fc.record({ kind: fc.constant('set' as const), path: fc.constantFrom(...FIELDS, ...NESTED), value: fc.jsonValue({ maxDepth: 3 }) }),
  fc.record({ kind: fc.constant('set' as const), path: fc.constantFrom(...FIELDS, ...NESTED), value: withNul }),
  fc.record({ kind: fc.constant('extra' as const), key: fc.oneof(fc.string({ maxLength: 12 }), withNul), value: fc.oneof(fc.jsonValue({ maxDepth: 2 }), withNul) }),
);

function applyMutations(base: Record<string, unknown>, mutations: fc.Arbitrary<unknown> extends never ? never : { kind: string; path?: string; key?: string; value?: unknown }[]) {
  const body = structuredClone(base) as Record<string, unknown>;
  for (const m of mutations) {
    if (m.kind === 'extra') {
      Object.defineProperty(body, m.key!, { value: m.value, enumerable: true, writable: true, configurable: true });
      continue;
    }
    const [head, tail] = m.path!.split('.') as [string, string | undefined];
    if (!tail) {
      if (m.kind === 'delete') delete body[head];
      else body[head] = m.value;
    } else if (typeof body[head] === 'object' && body[head] !== null) {
      const inner = body[head] as Record<string, unknown>;
      if (m.kind === 'delete') delete inner[tail];
      else inner[tail] = m.value;
    }
  }
  return body;
}

const damagedText = fc.tuple(fc.nat(), fc.constantFrom('truncate', 'insert', 'replace', 'dupkey'), fc.string({ minLength: 1, maxLength: 3 })).map(([n, how, s]) => {
  const text = JSON.stringify(businessTransaction({ businessTransactionId: randomUUID() }));
  const i = n % text.length;
  if (how === 'truncate') return text.slice(0, i);
  if (how === 'insert') return text.slice(0, i) + s + text.slice(i);
  if (how === 'dupkey') return text.replace('"metadata":', '"metadata":{},"metadata":');
  return text.slice(0, i) + s + text.slice(i + s.length);
});

const bodyArb = fc.oneof(
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? 'null') },
  { weight: 5, arbitrary: fc.array(mutation, { minLength: 1, maxLength: 4 }).map((ms) => JSON.stringify(applyMutations(businessTransaction({ businessTransactionId: randomUUID() }), ms))) },
  { weight: 2, arbitrary: damagedText },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.constantFrom('{"a":1e400}', '{"businessTransactionId":"\\ud800"}', '['.repeat(5000) + ']'.repeat(5000), '', 'null', '[]', '{}', '"x"', '{"__proto__":{"admin":true}}') },
);

/**
 * How the body travels: its content type and content coding, right or damaged. A body sent as
 * valid JSON in an accepted coding must be treated exactly like the plain one.
 */
type Transport = { contentType?: string; coding?: string; encode: (b: Buffer) => Buffer; readable: boolean };
const transportArb: fc.Arbitrary<Transport> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Transport>({ contentType: 'application/json', encode: (b) => b, readable: true }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom<Transport>(
      { contentType: 'application/json; charset=utf-8', coding: 'gzip', encode: (b) => gzipSync(b), readable: true },
      { contentType: 'application/json', coding: 'deflate', encode: (b) => deflateSync(b), readable: true },
      { contentType: 'application/json', coding: 'br', encode: (b) => brotliCompressSync(b), readable: true },
    ),
  },
  {
    weight: 3,
    arbitrary: fc.constantFrom<Transport>(
      { contentType: 'text/plain', encode: (b) => b, readable: false },
      { contentType: 'application/x-www-form-urlencoded', encode: (b) => b, readable: false },
      { contentType: 'application/json; charset=utf-16', encode: (b) => b, readable: false },
      { contentType: undefined, encode: (b) => b, readable: false },
      { contentType: 'application/json', coding: 'gzip', encode: (b) => b, readable: false },
      { contentType: 'application/json', coding: 'gzip', encode: (b) => gzipSync(b).subarray(0, 10), readable: false },
      { contentType: 'application/json', coding: 'deflate', encode: (b) => Buffer.concat([Buffer.from([0x78, 0x9c]), b]), readable: false },
      { contentType: 'application/json', coding: 'br', encode: (b) => Buffer.concat([Buffer.from([0xff]), b]), readable: false },
      { contentType: 'application/json', coding: 'compress', encode: (b) => b, readable: false },
    ),
  },
);

const ALLOWED = new Set([200, 201, 202, 400, 403, 404, 409, 413, 415, 502, 503]);
/** Statuses after which the id must not be claimed: the body was refused before any record. */
const REFUSED_WITHOUT_RECORD = new Set([400, 404, 413, 415, 503]);

describe.each(STORAGE_TARGETS)('robustness of /execute and /transactions on $name (property-based)', (factory) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(agent), SVC_SANDBOX: 'true', RATE_LIMIT_EXECUTE_PER_MINUTE: '1000000' });
    await publishPolicy(server.dataSource);
  });
  afterAll(async () => {
    await server.destroy();
  });

  it.each(['/execute', '/transactions'])('never answers 500 to arbitrary and damaged bodies on %s, and stores nothing for a refused one', async (path) => {
    const refusedIds: string[] = [];
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(bodyArb, transportArb, async (text, transport) => {
        const req = request(server.url).post(path).set('authorization', bearer(agent)).serialize((b: unknown) => b as string);
        if (transport.contentType !== undefined) req.set('content-type', transport.contentType);
        if (transport.coding !== undefined) req.set('content-encoding', transport.coding);
        const bytes = Buffer.from(text);
        const res = await req.send(bytes.length > 0 ? (transport.encode(bytes) as never) : (bytes as never));
        expect(res.status).not.toBe(500);
        expect(ALLOWED.has(res.status)).toBe(true);
        expect(typeof res.body.error === 'string' || res.status < 300).toBe(true);
        if (!transport.readable && bytes.length > 0) expect([400, 413, 415]).toContain(res.status);
        if (res.status < 300) accepted++;
        const id = /"businessTransactionId":"([0-9a-f-]{36})"/.exec(text)?.[1];
        if (id && REFUSED_WITHOUT_RECORD.has(res.status) && !/sandboxFailure/.test(text)) refusedIds.push(id);
      }),
      { numRuns: 1200 },
    );
    for (const id of refusedIds.slice(0, 300)) {
      const found = await request(server.url).get(`/transactions/${id}`).set('authorization', bearer(agent));
      expect(`${id} ${found.status}`).toBe(`${id} 404`);
    }
    // The generator does produce valid requests, so both paths of the pipeline were exercised.
    expect(accepted).toBeGreaterThan(0);
    expect(refusedIds.length).toBeGreaterThan(50);
  });

  it('serves back, page by page, every record and intent the arbitrary requests left, each exactly as its own route serves it', async () => {
    const records: { businessTransactionId: string }[] = [];
    for (let page = 1; ; page++) {
      const res = await request(server.url).get(`/trust-records?page=${page}&pageSize=100`).set('authorization', bearer(agent));
      expect(res.status).toBe(200);
      records.push(...res.body.items);
      if (res.body.items.length < 100) break;
    }
    expect(records.length).toBeGreaterThan(0);
    for (const r of records.slice(0, 60)) {
      expect((await request(server.url).get(`/trust-records/${r.businessTransactionId}`).set('authorization', bearer(agent))).body).toEqual(r);
    }
    const intents = await request(server.url).get('/execution-intents?state=PREPARED,RELEASED,FINALIZED,ERRORED,RESOLVED&pageSize=100').set('authorization', bearer(agent));
    expect(intents.status).toBe(200);
    expect(intents.body.total).toBeGreaterThan(0);
  });
});
