import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import request from 'supertest';
import { apiKeysEnv, bearer, makeKey, rowCounts, STORAGE_TARGETS, startTestServer, type TestKey, type TestServer } from '@ets/test-support';
import { envelope, policyDoc } from './governance-fixtures.js';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });

/** Text with U+0000 somewhere, ordinary text, and the values the routes do take. */
const withNul = fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })).map(([a, b]) => `${a}\u0000${b}`);
const text = fc.oneof({ weight: 3, arbitrary: withNul }, { weight: 2, arbitrary: fc.string({ maxLength: 24 }) }, { weight: 1, arbitrary: fc.constantFrom('gov-test', '1.0.0', '.', '..', randomUUID()) });
/** A path segment: percent-encoded text, or raw bytes that do not percent-decode. */
const segment = fc.oneof({ weight: 5, arbitrary: text.map((s) => encodeURIComponent(s)) }, { weight: 1, arbitrary: fc.constantFrom('%', '%zz', '%E0%A4%A', '%00', '%C0%80', 'a%2500') });

/** How a body travels: right, or with a damaged coding or a wrong content type. */
const transport = fc.constantFrom(
  { type: 'application/json', coding: undefined, encode: (b: Buffer) => b },
  { type: 'application/json; charset=utf-8', coding: 'gzip', encode: (b: Buffer) => gzipSync(b) },
  { type: 'application/json', coding: 'gzip', encode: (b: Buffer) => b },
  { type: 'application/json', coding: 'gzip', encode: (b: Buffer) => gzipSync(b).subarray(0, 12) },
  { type: 'application/json', coding: 'deflate', encode: (b: Buffer) => b },
  { type: 'application/json', coding: 'br', encode: (b: Buffer) => Buffer.concat([Buffer.from([0xff, 0x00]), b]) },
  { type: 'application/json', coding: 'x-unknown', encode: (b: Buffer) => b },
  { type: 'text/plain', coding: undefined, encode: (b: Buffer) => b },
);

type Call = { method: 'get' | 'post'; path: string; key?: TestKey; body?: unknown; proposal?: boolean; lead?: boolean };

/**
 * Governance, reads (by a USER key and by a key that reads its own caller's only), lists with
 * their paging and filters, resolution and public routes, with arbitrary ids, names, versions,
 * reasons and query values.
 */
const callArb: fc.Arbitrary<Call> = fc.oneof(
  fc.record({ name: fc.oneof(segment, fc.constant('gov-test')), version: segment, docName: fc.oneof(text, fc.constant('gov-test')), docVersion: text, reason: fc.option(text) }).map(
    ({ name, version, docName, docVersion, reason }) => ({
      method: 'post' as const,
      path: `/policies/${name}/${version}/pending-changes`,
      key: alice,
      body: { proposedContent: policyDoc(docVersion, { name: docName }), ...(reason !== null ? { reason } : {}) },
      proposal: true,
    }),
  ),
  fc.record({ id: fc.oneof(segment, fc.constant(randomUUID())), action: fc.constantFrom('approve' as const, 'reject' as const), reason: text, nonce: fc.option(text) }).map(({ id, action, reason, nonce }) => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(id);
    } catch {
      decoded = id;
    }
    return { method: 'post' as const, path: `/policies/pending-changes/${id}/${action}`, key: bob, body: envelope(bob, decoded, action, { reason, ...(nonce !== null ? { nonce } : {}) }) };
  }),
  fc.record({ route: fc.constantFrom('transactions', 'trust-records', 'refusal', 'execution-intents', 'verification', 'receipt/latest'), id: segment, key: fc.constantFrom(agent, alice) }).map(({ route, id, key }) => ({
    method: 'get' as const,
    path: `/${route}/${id}`,
    key,
  })),
  segment.map((id) => ({ method: 'get' as const, path: `/keys/${id}` })),
  fc
    .record({
      route: fc.constantFrom(
        '/policies/pending-changes?status=',
        '/audit/auth-events?before=',
        '/transactions?page=1&pageSize=',
        '/transactions?page=',
        '/transactions?callerId=',
        '/transactions?outcome=',
        '/transactions?from=',
        '/transactions?to=2026-01-01&from=',
        '/transactions?outcome=EXECUTED&to=',
        '/trust-records?pageSize=',
        '/trust-records?pageSize=2&page=',
        '/execution-intents?state=',
        '/execution-intents?state=PREPARED,ERRORED&page=',
        '/execution-intents?pageSize=',
        '/handbook/download-leads?email=',
      ),
      value: segment,
      key: fc.constantFrom(agent, alice),
    })
    .map(({ route, value, key }) => ({ method: 'get' as const, path: `${route}${value}`, key: route.startsWith('/handbook') ? undefined : key })),
  fc.record({ id: segment, found: fc.oneof(text, fc.constantFrom('EXECUTED', 'NOT_EXECUTED')), note: text }).map(({ id, found, note }) => ({
    method: 'post' as const,
    path: `/execution-intents/${id}/resolve`,
    key: alice,
    body: { found, note },
  })),
  fc.record({ kind: fc.oneof(text, fc.constantFrom('register', 'revoke')), capability: fc.oneof(text, fc.constant('pay:transfer')), reason: text, endpoint: text, policyName: text, timeoutMs: fc.oneof(fc.integer(), text) }).map(
    (body) => ({ method: 'post' as const, path: '/external-connectors/changes', key: alice, body, proposal: true }),
  ),
  fc.record({ id: fc.oneof(segment, fc.constant(randomUUID())), action: fc.constantFrom('approve' as const, 'reject' as const), reason: text }).map(({ id, action, reason }) => ({
    method: 'post' as const,
    path: `/external-connectors/changes/${id}/${action}`,
    key: bob,
    body: envelope(bob, id, action, { reason }),
  })),
  fc.record({ route: fc.constantFrom('/external-connectors/changes?status=', '/external-connectors/changes?page=', '/external-connectors?pageSize='), value: segment }).map(({ route, value }) => ({
    method: 'get' as const,
    path: `${route}${value}`,
    key: alice,
  })),
  fc.record({ route: fc.constantFrom('/evaluate', '/simulate'), policyId: fc.oneof(text, fc.constant('exec-test')), policyVersion: text, signal: text }).map(({ route, policyId, policyVersion, signal }) => ({
    method: 'post' as const,
    path: route,
    key: agent,
    body: { policyId, policyVersion, signals: { country: signal } },
  })),
  fc.record({ executionId: text, approved: fc.boolean(), by: fc.oneof(text, fc.constant('alice')), role: text, reason: text, key: fc.constantFrom(agent, alice) }).map(({ executionId, approved, by, role, reason, key }) => ({
    method: 'post' as const,
    path: '/override',
    key,
    body: { executionId, approved, approvedBy: by, approverRole: role, reason },
  })),
  fc.record({ id: text, type: text, at: text }).map(({ id, type, at }) => ({
    method: 'post' as const,
    path: '/confirm-execution',
    key: agent,
    body: { attestation: { executionId: id }, executedAction: { actionType: type, actionId: id, actionTimestamp: at } },
  })),
  fc.record({ route: fc.constantFrom('/audit/decisions?limit=', '/audit/decisions?from=', '/audit/security?to=', '/audit/decisions/'), value: segment }).map(({ route, value }) => ({
    method: 'get' as const,
    path: `${route}${value}`,
    key: agent,
  })),
  fc.record({ route: fc.constantFrom('/verify', '/receipt', '/replay'), id: text, key: fc.constantFrom(agent, alice) }).map(({ route, id, key }) => ({ method: 'post' as const, path: route, key, body: { businessTransactionId: id } })),
  fc.record({ route: fc.constantFrom('/refusal/verify', '/execution-intents/verify', '/audit/verify'), id: text, kind: text }).map(({ route, id, kind }) => ({
    method: 'post' as const,
    path: route,
    body: { recordType: kind, businessTransactionId: id, signature: id },
  })),
  fc.oneof(text, fc.uuid().map((u) => `lead-${u}@example.com`)).map((email) => ({ method: 'post' as const, path: '/handbook/download-leads', body: { email }, lead: true })),
  // Console sign-in: arbitrary keys and bodies (never a session for a key that is not a USER key's).
  fc.oneof(text.map((apiKey) => ({ apiKey })), fc.constantFrom({}, { apiKey: 7 }, { apiKey: agent.raw }, { apiKey: [alice.raw] })).map((body) => ({ method: 'post' as const, path: '/console/session', body })),
);


describe.each(STORAGE_TARGETS)('robustness of governance, read and public routes on $name (property-based)', (factory) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, agent), RATE_LIMIT_PUBLIC_PER_MINUTE: '1000000', SVC_POLICIES_DIR: '/nonexistent-ets-policies' });
  });
  afterAll(async () => {
    await server?.destroy();
  });

  const counts = () => rowCounts(server.dataSource);

  it('never answers 500 to U+0000 and arbitrary text in ids, names, versions, reasons, paths and queries, or to damaged bodies; stores only what it answers 201 to', async () => {
    const before = await counts();
    let proposals = 0;
    const leads = new Set<string>();
    const seen = new Set<number>();
    await fc.assert(
      fc.asyncProperty(callArb, transport, async (call, how) => {
        let req = request(server.url)[call.method](call.path);
        if (call.key) req = req.set('authorization', bearer(call.key));
        let res: request.Response;
        if (call.method === 'post') {
          req = req.serialize((b: unknown) => b as string).set('content-type', how.type);
          if (how.coding) req = req.set('content-encoding', how.coding);
          res = await req.send(how.encode(Buffer.from(JSON.stringify(call.body))) as never);
        } else {
          res = await req;
        }
        seen.add(res.status);
        expect(`${call.method} ${call.path}: ${res.status}`).not.toMatch(/: 5\d\d$/);
        expect(typeof res.body.error === 'string' || Array.isArray(res.body.errors) || res.status < 400).toBe(true);
        if (res.status === 201 && call.proposal) proposals++;
        if (res.status === 201 && call.lead) leads.add(String((call.body as { email: unknown }).email).toLowerCase());
        // Whatever holds U+0000 is refused before anything is read or stored.
        if (JSON.stringify(call.body ?? '').includes('\\u0000') || /%00/i.test(call.path)) expect([400, 401, 404, 415]).toContain(res.status);
      }),
      { numRuns: 400 },
    );
    const after = await counts();
    expect(after).toEqual({ ...before, pending_changes: before.pending_changes! + proposals, handbook_leads: before.handbook_leads! + leads.size });
    // The generator reaches the refusals it is about.
    expect([...seen]).toEqual(expect.arrayContaining([400, 415]));
  });
});
