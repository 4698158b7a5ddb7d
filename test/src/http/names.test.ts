import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import request from 'supertest';
import { apiKeysEnv, bearer, makeKey, rowCounts, STORAGE_TARGETS, startTestServer, type TestKey, type TestServer } from '@ets/test-support';
import { policyDoc } from './governance-fixtures.js';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });

/**
 * Characters that make a name look like another, or hide in it (CONTRACT "Review rules, round 2"):
 * whitespace, control characters, invisible and direction marks, and non-ASCII letters that look
 * like ASCII ones.
 */
const LOOK_ALIKE_CHARS = [
  ' ', '\t', '\n', '\r', '\u000b', '\u000c', '\u00a0', '\u1680', '\u2000', '\u2007', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000',
  '\u0001', '\u001b', '\u007f', '\u0080', '\u0085', '\u009f',
  '\u00ad', '\u034f', '\u061c', '\u115f', '\u180e', '\u200b', '\u200c', '\u200d', '\u200e', '\u200f', '\u202a', '\u202e', '\u2060', '\u2063', '\u2066', '\u2069', '\ufeff', '\ufe0f',
  '\u0430', '\u0435', '\u043e', '\u0131', '\u00e9', '\uff11', '\uff41', '\u2024', '\u2010', '\u2011', '\u2212', '\ud835\udfcf',
];
const lookAlike = fc.constantFrom(...LOOK_ALIKE_CHARS);
/** A valid name with one or more look-alike characters put in at the start, inside or at the end. */
const spoiled = (valid: string) =>
  fc.tuple(fc.array(fc.tuple(fc.nat({ max: valid.length }), lookAlike), { minLength: 1, maxLength: 3 }), fc.boolean()).map(([inserts, replace]) => {
    // By code point: a second insert must not split the surrogate pair a first one put in.
    const s = [...valid];
    for (const [at, ch] of inserts) s.splice(Math.min(at, s.length), replace && at < s.length ? 1 : 0, ch);
    return s.join('');
  });
/** Any text holding at least one character outside visible ASCII. */
const encodable = (s: string): boolean => {
  try {
    encodeURIComponent(s);
    return true;
  } catch {
    return false;
  }
};
const notVisibleAscii = fc
  .oneof(fc.string({ unit: 'grapheme', maxLength: 12 }), fc.string({ unit: 'binary', maxLength: 12 }))
  .filter((s) => /[^\x21-\x7e]/.test(s) && encodable(s));
const bad = (valid: string) => fc.oneof({ weight: 4, arbitrary: spoiled(valid) }, { weight: 1, arbitrary: notVisibleAscii });

type Call = { field: string; path: string; body: unknown };
const future = () => new Date(Date.now() + 30 * 86400_000).toISOString();

/** One proposal with one name, version or id replaced by a look-alike of a valid one. */
const callArb: fc.Arbitrary<Call> = fc.oneof(
  bad('gov-test').map((name) => ({ field: 'policy name in the path', path: `/policies/${encodeURIComponent(name)}/1.0.0/pending-changes`, body: { proposedContent: policyDoc('1.0.0', { name }) } })),
  bad('1.0.0').map((version) => ({ field: 'policy version in the path', path: `/policies/gov-test/${encodeURIComponent(version)}/pending-changes`, body: { proposedContent: policyDoc(version) } })),
  bad('1.0.0').map((version) => ({ field: 'proposedContent.policyVersion', path: '/policies/gov-test/1.0.0/pending-changes', body: { proposedContent: policyDoc(version) } })),
  bad('2.0.0').map((version) => ({ field: 'proposedContent.policyVersion (new version)', path: '/policies/gov-test/2.0.0/pending-changes', body: { proposedContent: policyDoc(version) } })),
  bad('payments:transfer').map((capability) => ({ field: 'connector capability', path: '/external-connectors/changes', body: { kind: 'revoke', capability, reason: 'r' } })),
  bad('payments:transfer').map((capability) => ({
    field: 'connector capability (register)',
    path: '/external-connectors/changes',
    body: { kind: 'register', capability, endpoint: 'https://pay.example.com/release', policyName: 'gov-test', forwardedParameters: [], reason: 'r' },
  })),
  bad('gov-test').map((policyName) => ({
    field: 'connector policyName',
    path: '/external-connectors/changes',
    body: { kind: 'register', capability: 'payments:transfer', endpoint: 'https://pay.example.com/release', policyName, forwardedParameters: [], reason: 'r' },
  })),
  bad('erp').map((name) => ({ field: 'source name', path: '/business-signal-sources/changes', body: { kind: 'register', name, endpoint: 'https://erp.example.com/facts', reason: 'r' } })),
  bad('erp').map((name) => ({ field: 'source name (revoke)', path: '/business-signal-sources/changes', body: { kind: 'revoke', name, reason: 'r' } })),
  bad('agent-7').map((grantee) => ({ field: 'grantee', path: '/authority-grants/changes', body: { kind: 'grant', grantee, action: 'payments:transfer', limits: [], expiresAt: future(), reason: 'r' } })),
  bad('payments:transfer').map((action) => ({ field: 'grant action', path: '/authority-grants/changes', body: { kind: 'grant', grantee: 'agent-7', action, limits: [], expiresAt: future(), reason: 'r' } })),
  bad(randomUUID()).map((grantId) => ({ field: 'grantId', path: '/authority-grants/changes', body: { kind: 'revoke', grantId, reason: 'r' } })),
);

describe.each(STORAGE_TARGETS)('names, versions and ids people read are visible ASCII on $name', (factory) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob), SVC_POLICIES_DIR: '/nonexistent-ets-policies' });
  });
  afterAll(async () => {
    await server?.destroy();
  });
  const post = (path: string, body: unknown, key: TestKey = alice) => request(server.url).post(path).set('authorization', bearer(key)).send(body as object);

  it('refuses a policy version with a trailing space or an invisible character (400), publishes nothing, and shows no look-alike', async () => {
    for (const version of ['1.0.0 ', ' 1.0.0', '1.0.0\u200b', '1.0.0\u00a0', '1.0.\u0030\u0301', '１.0.0', '1.0.0\t']) {
      for (const [path, doc] of [
        [`/policies/gov-test/${encodeURIComponent(version)}/pending-changes`, policyDoc(version)],
        ['/policies/gov-test/1.0.0/pending-changes', policyDoc(version)],
      ] as const) {
        const res = await post(path, { proposedContent: doc });
        expect({ version, path, status: res.status }).toEqual({ version, path, status: 400 });
        expect(res.body.error).toMatch(/[vV]ersion/);
      }
    }
    const pending = await request(server.url).get('/policies/pending-changes?pageSize=100').set('authorization', bearer(alice));
    expect(pending.body.items).toEqual([]);
    // The pattern's own characters are fine.
    for (const version of ['1.0.0', '2024.06.1-rc.1+build_7', 'v3']) expect((await post(`/policies/gov-test/${version}/pending-changes`, { proposedContent: policyDoc(version) })).status).toBe(201);
  });

  it('answers 400 and stores nothing for any name, version or id with whitespace, control, invisible or non-ASCII characters (property-based)', async () => {
    const before = await rowCounts(server.dataSource);
    await fc.assert(
      fc.asyncProperty(callArb, async (call) => {
        const res = await post(call.path, call.body);
        expect({ field: call.field, body: call.body, status: res.status, code: res.body.code }).toEqual({ field: call.field, body: call.body, status: 400, code: undefined });
        expect(typeof res.body.error).toBe('string');
      }),
      { numRuns: 300 },
    );
    expect(await rowCounts(server.dataSource)).toEqual(before);
  });
});
