import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import request from 'supertest';
import { apiKeysEnv, bearer, businessTransaction, makeKey, publishPolicy, STORAGE_TARGETS, startTestServer, type TestServer } from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });

/** A body: arbitrary JSON, a valid transaction with arbitrary damage, or damaged text. */
const FIELDS = ['businessTransactionId', 'metadata', 'authority', 'authorization', 'intent', 'policy', 'signals'] as const;
const NESTED = ['authority.principalId', 'authority.authorityId', 'authorization.authorityId', 'intent.action', 'intent.parameters', 'policy.name', 'policy.version', 'metadata.tenantId'];

const mutation = fc.oneof(
  fc.record({ kind: fc.constant('delete' as const), path: fc.constantFrom(...FIELDS, ...NESTED) }),
  fc.record({ kind: fc.constant('set' as const), path: fc.constantFrom(...FIELDS, ...NESTED), value: fc.jsonValue({ maxDepth: 3 }) }),
  fc.record({ kind: fc.constant('extra' as const), key: fc.string({ maxLength: 12 }), value: fc.jsonValue({ maxDepth: 2 }) }),
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

const ALLOWED = new Set([200, 201, 202, 400, 403, 404, 409, 413, 502, 503]);
/** Statuses after which the id must not be claimed: the body was refused before any record. */
const REFUSED_WITHOUT_RECORD = new Set([400, 404, 413, 503]);

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
      fc.asyncProperty(bodyArb, async (text) => {
        const res = await request(server.url).post(path).set('authorization', bearer(agent)).set('content-type', 'application/json').send(text);
        expect(res.status).not.toBe(500);
        expect(ALLOWED.has(res.status)).toBe(true);
        expect(typeof res.body.error === 'string' || res.status < 300).toBe(true);
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
});
