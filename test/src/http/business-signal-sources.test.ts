import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import type tls from 'node:tls';
import path from 'node:path';
import request from 'supertest';
import { decodeJwt } from 'jose';
import { verifyOffline } from '@ets/adapters-crypto';
import type { PolicyDocument } from '@ets/domain';
import {
  answerJson,
  apiKeysEnv,
  bearer,
  businessTransaction,
  envelope,
  businessCast,
  ed25519Key,
  governed,
  jwksOf,
  publishPolicy,
  restartTestServer,
  scriptedSource,
  sourceProof,
  startTestNetwork,
  STORAGE_TARGETS,
  startTestServer,
  type Ed25519TestKey,
  type TestKey,
  type TestNetwork,
  type TestServer,
} from '@ets/test-support';

const { alice, bob, agent } = businessCast();
const SANDBOX_JOURNAL = 'sandbox-releases.jsonl';

/** A policy that asks `source` for the invoice's amount and decides on it. */
const sourcedPolicy = (name: string, source: string, over: Partial<PolicyDocument> = {}): PolicyDocument => ({
  name,
  policyVersion: '1.0.0',
  signalsSchema: { invoiceAmount: { type: 'number' }, country: { type: 'string' } },
  signalSources: { invoiceAmount: { source, fact: 'invoice.amount', subject: 'intent.parameters.invoiceId' } },
  rules: [
    { id: 'large', when: 'signals.invoiceAmount > 5000', action: 'reject', reason: 'Invoice too large' },
    { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
  ],
  ...over,
});

describe.each(STORAGE_TARGETS)('business signal sources on $name', (factory) => {
  let network: TestNetwork;
  let server: TestServer;
  let jwks: { keys: object[] };
  let n = 0;

  beforeAll(async () => {
    network = await startTestNetwork();
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, agent), ...network.env, SVC_SANDBOX: 'true', SVC_SOURCE_TIMEOUT_MS: '1000' });
    jwks = await jwksOf(server.url);
  });
  afterAll(async () => {
    await server?.destroy();
    await network?.close();
  });

  const post = (p: string, key: TestKey, body: unknown) => request(server.url).post(p).set('authorization', bearer(key)).send(body as object);
  const get = (p: string, key: TestKey = alice) => request(server.url).get(p).set('authorization', bearer(key));
  const released = (id: string): boolean => {
    const file = path.join(server.settings.dataDir, SANDBOX_JOURNAL);
    return existsSync(file) && readFileSync(file, 'utf8').includes(id);
  };

  /** A registered source served by `handler` (with `key`, or none), and a published policy asking it. */
  async function source(handler: Parameters<TestNetwork['https']>[1], key: Ed25519TestKey | null, policy: Partial<PolicyDocument> = {}) {
    const name = `erp${++n}`;
    const srv = await network.https(`${name}.src.test`, handler);
    await governed(server.url, '/business-signal-sources', alice, bob, {
      kind: 'register',
      name,
      endpoint: srv.url('/facts'),
      ...(key ? { publicKey: key.publicKeyPem } : {}),
      reason: 'invoices',
    });
    const policyName = `sourced-${name}`;
    await publishPolicy(server.dataSource, sourcedPolicy(policyName, name, policy));
    return { name, srv, policyName };
  }

  const execute = async (policyName: string, over: { parameters?: Record<string, unknown>; signals?: Record<string, unknown> } = {}) => {
    const tx = businessTransaction({
      intent: { action: 'sandbox:echo', parameters: { invoiceId: 'inv-42', amount: 120, ...over.parameters } },
      policy: { name: policyName, version: '1.0.0' },
      signals: over.signals ?? {},
    });
    return Object.assign(await post('/execute', agent, tx), { id: tx.businessTransactionId as string });
  };
  const refusal = async (id: string) => (await get(`/refusal/${id}`)).body;

  describe('governance', () => {
    it.each<[string, Record<string, unknown>]>([
      ['kind', { kind: 'update' }],
      ['name', { name: 'ERP' }],
      ['name', { name: undefined }],
      ['endpoint', { endpoint: 'http://erp.src.test/facts' }],
      ['endpoint', { endpoint: 'https://127.0.0.1/facts' }],
      ['endpoint', { endpoint: 'https://2130706433/facts' }],
      ['endpoint', { endpoint: 'https://0177.0.0.1/facts' }],
      ['endpoint', { endpoint: 'https://0x7f000001/facts' }],
      ['endpoint', { endpoint: 'https://127.1/facts' }],
      ['endpoint', { endpoint: 'https://[::1]/facts' }],
      ['endpoint', { endpoint: 'https://[::ffff:127.0.0.1]/facts' }],
      ['endpoint', { endpoint: 'https://[64:ff9b::7f00:1]/facts' }],
      ['endpoint', { endpoint: 'https://[2002:7f00:1::]/facts' }],
      ['endpoint', { endpoint: 'https://localhost/facts' }],
      ['endpoint', { endpoint: 'https://ops@erp.src.test/facts' }],
      ['endpoint', { endpoint: 'https://private.src.test/facts' }],
      ['endpoint', { endpoint: 'https://nowhere.src.test/facts' }],
      ['publicKey', { publicKey: 'not a key' }],
      ['publicKey', { publicKey: ed25519Key().privateKeyPem }],
      ['reason', { reason: 'x'.repeat(2001) }],
      ['color', { color: 'blue' }],
    ])('a register proposal breaking %s is 400 naming it', async (field, over) => {
      network.dns.set('private.src.test', { A: ['10.0.0.8'] });
      const body: Record<string, unknown> = { kind: 'register', name: `bad${++n}`, endpoint: 'https://private.src.test/facts', ...over };
      if (!('endpoint' in over)) body.endpoint = (await network.https(`ok${n}.src.test`, answerJson({}))).url('/facts');
      for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
      const res = await post('/business-signal-sources/changes', alice, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: expect.stringContaining(field) });
    });

    it('refuses an endpoint whose port is 0 or beyond 65535, though its host resolves (400 naming the port)', async () => {
      const url = (await network.https(`port${++n}.src.test`, answerJson({}))).url('/facts');
      for (const port of ['0', '00', '65536', '99999']) {
        const res = await post('/business-signal-sources/changes', alice, { kind: 'register', name: `port${n}`, endpoint: url.replace(/:\d+\//, `:${port}/`), reason: 'r' });
        expect({ port, status: res.status, body: res.body }).toEqual({ port, status: 400, body: { error: 'endpoint must have a port from 1 to 65535.' } });
      }
      expect((await post('/business-signal-sources/changes', alice, { kind: 'register', name: `port${n}`, endpoint: url, reason: 'r' })).status).toBe(201);
    });

    it('register, list, reject, revoke: maker-checker with step-up, one active source per name', async () => {
      const key = ed25519Key();
      const srv = await network.https('gov.src.test', answerJson({}));
      expect((await post('/business-signal-sources/changes', agent, { kind: 'register', name: 'gov', endpoint: srv.url('/f') })).body).toMatchObject({ code: 'NON_HUMAN_CALLER_DENIED' });
      const proposed = await post('/business-signal-sources/changes', alice, { kind: 'register', name: 'gov', endpoint: srv.url('/f'), publicKey: key.publicKeyPem, reason: 'r' });
      expect(proposed.status).toBe(201);
      expect(proposed.body).toEqual({
        id: expect.any(String),
        kind: 'register',
        name: 'gov',
        endpoint: srv.url('/f'),
        publicKey: key.publicKeyPem,
        keyId: key.keyId,
        reason: 'r',
        proposer: 'alice',
        status: 'PENDING_APPROVAL',
        createdAt: expect.any(String),
      });
      expect((await post('/business-signal-sources/changes', alice, { kind: 'register', name: 'gov', endpoint: srv.url('/f') })).status).toBe(409);
      const approved = await post(`/business-signal-sources/changes/${proposed.body.id}/approve`, bob, envelope(bob, proposed.body.id, 'approve'));
      expect(approved.body).toMatchObject({ status: 'APPROVED', decider: 'bob', appliedAt: expect.any(String) });
      const listed = await get('/business-signal-sources?pageSize=100', agent);
      expect(listed.body.items).toContainEqual({
        registrationId: proposed.body.id,
        name: 'gov',
        endpoint: srv.url('/f'),
        publicKey: key.publicKeyPem,
        keyId: key.keyId,
        proposer: 'alice',
        approvedBy: 'bob',
        registeredAt: approved.body.decidedAt,
      });
      expect((await post('/business-signal-sources/changes', alice, { kind: 'register', name: 'gov', endpoint: srv.url('/f') })).status).toBe(409);
      const changes = await get('/business-signal-sources/changes?status=APPROVED&pageSize=100');
      expect(changes.body.items.map((c: { id: string }) => c.id)).toContain(proposed.body.id);

      const revoke = await post('/business-signal-sources/changes', alice, { kind: 'revoke', name: 'gov', reason: 'gone' });
      expect(revoke.body).toMatchObject({ kind: 'revoke', registrationId: proposed.body.id });
      const rejected = await post(`/business-signal-sources/changes/${revoke.body.id}/reject`, bob, envelope(bob, revoke.body.id, 'reject'));
      expect(rejected.body).toMatchObject({ status: 'REJECTED', rejectionReason: 'Not like this' });
      await governed(server.url, '/business-signal-sources', alice, bob, { kind: 'revoke', name: 'gov' });
      expect((await get('/business-signal-sources?pageSize=100')).body.items.map((s: { name: string }) => s.name)).not.toContain('gov');
      expect((await post('/business-signal-sources/changes', alice, { kind: 'revoke', name: 'gov' })).status).toBe(409);
    });
  });

  it('asks the source, records a Trusted Signal with its proof, decides on it, and carries it to the in-effect list', async () => {
    const key = ed25519Key();
    const handler = scriptedSource(key, (_q, honest) => ({ body: honest() }));
    const { name, policyName } = await source(handler, key);
    const res = await execute(policyName, { signals: { country: 'FR' } });
    expect(res.status).toBe(200);
    expect(handler.questions).toEqual([{ fact: 'invoice.amount', subject: 'inv-42', businessTransactionId: res.id, nonce: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) }, expect.anything()]);
    const [atDecision, atRelease] = handler.questions;
    expect(atRelease!.nonce).not.toBe(atDecision!.nonce); // asked again at release, with a fresh nonce
    const trusted = res.body.trustRecord.assessment.businessValidation;
    expect(trusted).toEqual({
      status: 'VERIFIED',
      sourcedSignals: [
        {
          signal: 'invoiceAmount',
          source: name,
          fact: 'invoice.amount',
          subject: 'inv-42',
          value: 120,
          validUntil: expect.any(String),
          nonce: atDecision!.nonce,
          sourceKeyId: key.keyId,
          sourceProof: expect.any(String),
          sourceProofVerified: true,
          fetchedAt: expect.any(String),
        },
      ],
    });
    expect(verifyOffline(res.body.trustRecord, jwks as never).valid).toBe(true);
    const inEffect = (await get('/policies/in-effect')).body.find((p: { name: string }) => p.name === policyName);
    expect(inEffect).toMatchObject({ authorityGrantRequired: false, signals: { sourced: ['invoiceAmount'] } });
  });

  it('asks every source of a policy at once, under one deadline: two sources answering in 600 ms each fit a 1 s deadline', async () => {
    const key = ed25519Key();
    const asked: number[] = [];
    const slow = () => scriptedSource(key, (_q, honest) => {
      asked.push(Date.now());
      return { body: honest(), delayMs: 600 };
    });
    const { name: first } = await source(slow(), key);
    const second = `erp${++n}`;
    const srv = await network.https(`${second}.src.test`, slow());
    await governed(server.url, '/business-signal-sources', alice, bob, { kind: 'register', name: second, endpoint: srv.url('/facts'), publicKey: key.publicKeyPem, reason: 'limits' });
    const policyName = `sourced-two-${second}`;
    await publishPolicy(
      server.dataSource,
      sourcedPolicy(policyName, first, {
        signalsSchema: { invoiceAmount: { type: 'number' }, creditLimit: { type: 'number' } },
        signalSources: {
          invoiceAmount: { source: first, fact: 'invoice.amount', subject: 'intent.parameters.invoiceId' },
          creditLimit: { source: second, fact: 'customer.creditLimit', subject: 'intent.parameters.invoiceId' },
        },
      }),
    );
    const res = await execute(policyName);
    // One after the other they would need 1.2 s, past the deadline (SVC_SOURCE_TIMEOUT_MS 1000).
    expect(res.status).toBe(200);
    expect(res.body.trustRecord.assessment.businessValidation.sourcedSignals.map((s: { signal: string }) => s.signal).sort()).toEqual(['creditLimit', 'invoiceAmount']);
    // Both questions of the decision arrived before either was answered (and so did the re-check's).
    expect(asked).toHaveLength(4);
    expect(asked[1]! - asked[0]!).toBeLessThan(600);
    expect(asked[3]! - asked[2]!).toBeLessThan(600);
  });

  it('decides on the source value, not the caller value: a large invoice is refused by the rule', async () => {
    const key = ed25519Key();
    const { policyName } = await source(scriptedSource(key, (_q, honest) => ({ body: honest(9000) })), key);
    const res = await execute(policyName);
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: 'Execution rejected: Invoice too large', code: 'POLICY_DENIED' });
  });

  it('refuses a caller whose value differs from the source (source-mismatch), with a signed Refusal Record', async () => {
    const key = ed25519Key();
    const { policyName } = await source(scriptedSource(key, (_q, honest) => ({ body: honest(120) })), key);
    const res = await execute(policyName, { signals: { invoiceAmount: 100 } });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('POLICY_DENIED');
    const record = await refusal(res.id);
    expect(record).toMatchObject({ matchedRuleId: 'source-mismatch', assessment: { businessValidation: { status: 'FAILED', sourcedSignals: [expect.objectContaining({ value: 120 })] } } });
    expect((await request(server.url).post('/refusal/verify').send(record)).body.valid).toBe(true);
    // The same value sent by the caller is no mismatch (100 and 100.0 are one JSON number).
    expect((await execute(policyName, { signals: { invoiceAmount: 120.0 } })).status).toBe(200);
  });

  describe('a source that cannot be asked or trusted refuses the request as SOURCE_UNAVAILABLE', () => {
    const other = ed25519Key();
    const cases: [string, (key: Ed25519TestKey) => Parameters<typeof scriptedSource>[1]][] = [
      ['times out (never answers)', () => () => undefined],
      ['answers after the deadline', () => (_q, honest) => ({ body: honest(), delayMs: 1500 })],
      ['signs with another key', () => (_q, honest) => {
        const body = honest();
        return { body: { ...body, proof: sourceProof(other, body as never) } };
      }],
      ['sends no proof', () => (_q, honest) => {
        const { proof: _p, ...body } = honest();
        return { body };
      }],
      ['replays an answer signed for an old nonce', (key) => (q) => {
        const statement = { fact: q.fact, subject: q.subject, value: 120, validUntil: new Date(Date.now() + 60_000).toISOString(), nonce: 'an-earlier-question-s-nonce-0123456789abcd' };
        return { body: { ...statement, proof: sourceProof(key, statement) } };
      }],
      ['lies about the subject', (key) => (q) => {
        const statement = { fact: q.fact, subject: 'inv-other', value: 120, validUntil: new Date(Date.now() + 60_000).toISOString(), nonce: q.nonce };
        return { body: { ...statement, proof: sourceProof(key, statement) } };
      }],
      ['answers a value of another type', (key) => (q) => {
        const statement = { fact: q.fact, subject: q.subject, value: '120', validUntil: new Date(Date.now() + 60_000).toISOString(), nonce: q.nonce };
        return { body: { ...statement, proof: sourceProof(key, statement) } };
      }],
      ['answers a fact already past its validUntil', () => (_q, honest) => ({ body: honest(120, new Date(Date.now() - 1000).toISOString()) })],
      ['answers 404', () => () => ({ status: 404, body: { error: 'no such invoice' } })],
      ['answers garbage', () => () => ({ body: 'not an answer' })],
    ];
    it.each(cases)('a source that %s', async (_what, script) => {
      const key = ed25519Key();
      const { policyName } = await source(scriptedSource(key, script(key)), key);
      const res = await execute(policyName);
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('POLICY_DENIED');
      const record = await refusal(res.id);
      expect(record).toMatchObject({ matchedRuleId: 'SOURCE_UNAVAILABLE', assessment: { businessValidation: { status: 'FAILED' }, execution: { status: 'REFUSED' } } });
      expect(released(res.id)).toBe(false);
    });

    it('a source the policy names that is not registered, or whose name resolves to a private address', async () => {
      await publishPolicy(server.dataSource, sourcedPolicy('sourced-nobody', 'nobody'));
      const res = await execute('sourced-nobody');
      expect(res.status).toBe(403);
      expect((await refusal(res.id)).reason).toContain("source 'nobody' is not registered");

      const key = ed25519Key();
      const { name, srv, policyName } = await source(scriptedSource(key, (_q, honest) => ({ body: honest() })), key);
      const answers = [
        { A: ['10.1.2.3'] },
        { A: ['169.254.169.254'] },
        { AAAA: ['fd00::8'] },
        { AAAA: ['::1'] },
        { AAAA: ['::ffff:127.0.0.1'] },
        { AAAA: ['64:ff9b::7f00:1'] },
        { AAAA: ['2002:7f00:1::'] },
        { A: [srv.address, '10.0.0.1'] }, // one bad answer among good ones
      ];
      for (const answer of answers) {
        network.dns.set(`${name}.src.test`, answer);
        const res = await execute(policyName);
        expect(`${JSON.stringify(answer)} ${res.status}`).toBe(`${JSON.stringify(answer)} 403`);
        expect((await refusal(res.id)).reason).toContain('not public');
      }
    });

    it('a subject missing from the request', async () => {
      const key = ed25519Key();
      const { policyName } = await source(scriptedSource(key, (_q, honest) => ({ body: honest() })), key);
      const tx = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { amount: 1 } }, policy: { name: policyName, version: '1.0.0' } });
      const res = await post('/execute', agent, tx);
      expect(res.status).toBe(403);
      expect((await refusal(tx.businessTransactionId as string)).reason).toContain('intent.parameters.invoiceId');
    });
  });

  it('a source registered without a key is trusted by TLS alone (sourceProofVerified false)', async () => {
    const { policyName } = await source(scriptedSource(undefined, (_q, honest) => ({ body: honest() })), null);
    const res = await execute(policyName);
    expect(res.status).toBe(200);
    expect(res.body.trustRecord.assessment.businessValidation.sourcedSignals[0]).toMatchObject({ sourceKeyId: null, sourceProof: null, sourceProofVerified: false });
    expect(verifyOffline(res.body.trustRecord, jwks as never).valid).toBe(true);
  });

  describe('re-check at release: nothing is sent when a fact no longer holds', () => {
    const pause = { sandboxPauseBeforeReleaseMs: 1200 };
    const expectNotReleased = async (res: { status: number; body: Record<string, unknown>; id: string }) => {
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ code: 'AUTHORIZATION_NO_LONGER_VALID', executionStatus: 'NOT_EXECUTED' });
      expect(released(res.id)).toBe(false);
      const intent = (await get(`/execution-intents/${res.id}`)).body;
      expect(intent.status).toMatchObject({ state: 'ERRORED', error: { phase: 'recheck-failed', message: expect.stringMatching(/^Nothing was released: /) } });
      expect((await get(`/trust-records/${res.id}`)).status).toBe(404);
    };

    it('the source changes its answer between decision and release', async () => {
      const key = ed25519Key();
      let value = 120;
      const { policyName } = await source(scriptedSource(key, (_q, honest) => ({ body: honest(value) })), key);
      const pending = execute(policyName, { parameters: pause });
      await new Promise((r) => setTimeout(r, 400));
      value = 4000;
      await expectNotReleased(await pending);
    });

    it("the fact's validUntil passes between decision and release", async () => {
      const key = ed25519Key();
      const { policyName } = await source(scriptedSource(key, (_q, honest) => ({ body: honest(120, new Date(Date.now() + 700).toISOString()) })), key);
      await expectNotReleased(await execute(policyName, { parameters: pause }));
    });

    it("the source's name answers another address between decision and release", async () => {
      const key = ed25519Key();
      const { name, policyName } = await source(scriptedSource(key, (_q, honest) => ({ body: honest() })), key);
      const pending = execute(policyName, { parameters: pause });
      await new Promise((r) => setTimeout(r, 400));
      network.dns.set(`${name}.src.test`, { AAAA: ['::ffff:127.0.0.1'] });
      await expectNotReleased(await pending);
    });

    it('an unchanged answer is released', async () => {
      const key = ed25519Key();
      const { policyName } = await source(scriptedSource(key, (_q, honest) => ({ body: honest() })), key);
      const res = await execute(policyName, { parameters: { sandboxPauseBeforeReleaseMs: 300 } });
      expect(res.status).toBe(200);
      expect(released(res.id)).toBe(true);
    });
  });

  it('a release to an external connector carries the facts as signed conditions and expires no later than the earliest', async () => {
    const key = ed25519Key();
    const validUntil = new Date(Date.now() + 4000).toISOString();
    const { name, policyName } = await source(scriptedSource(key, (_q, honest) => ({ body: honest(120, validUntil) })), key);
    const endpoint = await network.https('pay.ext.test', answerJson({ status: 'executed', result: { paid: true } }));
    await governed(server.url, '/external-connectors', alice, bob, {
      kind: 'register',
      capability: `pay${n}:transfer`,
      endpoint: endpoint.url('/release'),
      policyName,
      forwardedParameters: ['invoiceId'],
      timeoutMs: 10000,
    });
    const tx = businessTransaction({ intent: { action: `pay${n}:transfer`, parameters: { invoiceId: 'inv-42' } }, policy: { name: policyName, version: '1.0.0' } });
    const res = await post('/execute', agent, tx);
    expect(res.status).toBe(200);
    const claims = decodeJwt(JSON.parse(endpoint.received[0]!).release as string);
    expect(claims.conditions).toEqual([{ signal: 'invoiceAmount', value: 120, validUntil, source: name }]);
    // NumericDates to the millisecond (RFC 7519 allows fractions): no later than the fact's validUntil.
    expect(claims.exp).toBeLessThanOrEqual(Date.parse(validUntil) / 1000);
  });

  // Last: it restarts the service.
  it('calls to a source share a kept connection, and stopping the service closes it', async () => {
    const key = ed25519Key();
    const { srv, policyName } = await source(scriptedSource(key, (_q, honest) => ({ body: honest() })), key);
    const seen = { handshakes: 0, open: 0 };
    srv.server.on('secureConnection', (socket: tls.TLSSocket) => {
      seen.handshakes++;
      seen.open++;
      socket.once('close', () => seen.open--);
    });
    for (let i = 0; i < 3; i++) expect((await execute(policyName)).status).toBe(200);
    expect(srv.received.length).toBeGreaterThanOrEqual(3);
    expect(seen).toEqual({ handshakes: 1, open: 1 });
    server = await restartTestServer(server);
    await new Promise((r) => setTimeout(r, 100));
    expect(seen.open).toBe(0);
  });
});
