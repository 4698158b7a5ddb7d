import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { compactVerify, createLocalJWKSet, decodeProtectedHeader } from 'jose';
import { unwrapServedRecord, verifyOffline } from '@ets/adapters-crypto';
import { apiKeysEnv, bearer, contentHash, jwksOf, makeKey, publishPolicy, settle, STORAGE_TARGETS, startTestServer, type TestServer } from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE' });
const other = makeKey('agent-8', { holder: 'SERVICE' });
const auditor = makeKey('auditor', { holder: 'USER' });
/** A human who also executes: may not decide an override of their own execution. */
const ann = makeKey('ann', { holder: 'USER' });
const SIMPLE_KEY = 'svc-simple-key-0123456789';
type Json = Record<string, unknown>;

/**
 * The routes both variants of profile A share (spec 4.2): /override, /confirm-execution and
 * /audit/*. What differs is how an attestation is obtained (the simple variant answers a signed
 * statement and stores the full attestation, read back from GET /audit/decisions/{executionId}),
 * who calls (the simple variant's one SVC_API_KEY caller reads everything) and what /verify takes.
 */
interface Variant {
  profile: 'attestation' | 'attestation-simple';
  env: Record<string, string>;
  /** The caller of the profile-A routes, and its Authorization header. */
  callerId: string;
  auth: string;
  /** A key that reads every caller's records. */
  readerAuth: string;
  /** API calls recorded by one `attest`. */
  callsPerAttest: number;
}

const VARIANTS: Variant[] = [
  { profile: 'attestation', env: { ...apiKeysEnv(agent, other, auditor, ann), SVC_PROFILE: 'attestation' }, callerId: 'agent-7', auth: bearer(agent), readerAuth: bearer(auditor), callsPerAttest: 1 },
  {
    profile: 'attestation-simple',
    env: { ...apiKeysEnv(auditor, ann), SVC_PROFILE: 'attestation-simple', SVC_API_KEY: SIMPLE_KEY, RATE_LIMIT_EXECUTE_PER_MINUTE: '200' },
    callerId: 'svc-api-key',
    auth: `Bearer ${SIMPLE_KEY}`,
    readerAuth: `Bearer ${SIMPLE_KEY}`,
    callsPerAttest: 2,
  },
];

describe.each(STORAGE_TARGETS)('profile A overrides, confirmations and audit on $name', (factory) => {
  describe.each(VARIANTS)('SVC_PROFILE=$profile', (v) => {
    let server: TestServer;
    let jwks: { keys: Json[] };
    const post = (path: string, body: unknown, auth = v.auth) => request(server.url).post(path).set('authorization', auth).send(body as object);
    const get = (path: string, auth = v.auth) => request(server.url).get(path).set('authorization', auth);
    /** The attestation /execute signed and stored, and what it answered (what its /verify takes). */
    const attested = async (signals: Json, auth = v.auth): Promise<{ attestation: Json; answer: Json }> => {
      const body = { policyId: 'exec-test', policyVersion: '1.0.0', signals };
      if (v.profile === 'attestation') {
        const res = await post('/execute', { executionId: `run-${randomUUID()}`, ...body }, auth);
        expect(res.status).toBe(200);
        return { attestation: res.body.attestation as Json, answer: res.body.attestation as Json };
      }
      const res = await post('/execute', body, auth);
      expect(res.status).toBe(200);
      const detail = await get(`/audit/decisions/${res.body.executionId}`, auth);
      expect(detail.status).toBe(200);
      return { attestation: detail.body.attestation as Json, answer: res.body as Json };
    };
    const attest = async (signals: Json, auth = v.auth): Promise<Json> => (await attested(signals, auth)).attestation;
    /** A human decides: a USER key (the key directory's, in both variants) naming itself as `approvedBy`. */
    const override = (executionId: unknown, approved: boolean, auth = bearer(auditor), approvedBy = 'auditor') =>
      post('/override', { executionId, approved, approvedBy, approverRole: 'risk officer', reason: 'Called the customer' }, auth);

    beforeAll(async () => {
      server = await startTestServer(factory, v.env);
      await publishPolicy(server.dataSource);
      jwks = await jwksOf(server.url);
    });
    afterAll(async () => {
      await server.destroy();
    });

    describe('POST /override', () => {
      it('approves a pending override once: the signed resolution, then 409; a rejection; 404 without a pending override; 400', async () => {
        const pending = await attest({ amount: 20000 });
        const res = await override(pending.executionId, true);
        expect(res.status).toBe(200);
        expect(res.body).toEqual({
          status: 'approved',
          overrideId: expect.stringMatching(/^[0-9a-f-]{36}$/),
          resolution: expect.objectContaining({ status: 'executed', execution_fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/), signature: expect.any(String) }),
        });
        const r = res.body.resolution as Json;
        expect(r).toMatchObject({ recordType: 'override-resolution', overrideId: res.body.overrideId, executionId: pending.executionId, approved: true, approvedBy: 'auditor', approverRole: 'risk officer', decidedBy: 'auditor', previousFingerprint: pending.execution_fingerprint });
        expect(r.execution_fingerprint).toBe(
          contentHash({ executionId: r.executionId, previousFingerprint: r.previousFingerprint, overrideId: r.overrideId, status: 'executed', approvedBy: 'auditor', approverRole: 'risk officer', reason: 'Called the customer', resolvedAt: r.resolvedAt }),
        );
        expect(verifyOffline(unwrapServedRecord(res.body).record, jwks)).toMatchObject({ kind: 'override-resolution', valid: true });
        const again = await override(pending.executionId, false);
        expect({ status: again.status, body: again.body }).toEqual({ status: 409, body: { error: 'The override of this execution was already resolved.' } });
        expect((await get(`/audit/decisions/${pending.executionId}`)).body).toMatchObject({ execution_state: 'executed', override: r, attestation: pending });

        const rejected = await attest({ amount: 30000 });
        expect((await override(rejected.executionId, false)).body).toEqual({ status: 'rejected', executionId: rejected.executionId });
        expect((await get(`/audit/decisions/${rejected.executionId}`)).body.execution_state).toBe('rejected');

        const completed = await attest({ amount: 1 });
        for (const id of [completed.executionId, 'f'.repeat(64), 'anything']) {
          const res404 = await override(id, true);
          expect({ id, status: res404.status, body: res404.body }).toEqual({ id, status: 404, body: { error: 'No pending override for this executionId.' } });
        }
        for (const body of [{}, { executionId: 'x', approved: 'yes', approvedBy: 'auditor', approverRole: 'r', reason: 'x' }, { executionId: 'x', approved: true, approvedBy: 'auditor', approverRole: 'r' }]) {
          expect((await post('/override', body, bearer(auditor))).status).toBe(400);
        }
        expect((await request(server.url).post('/override').send({})).status).toBe(401);
      });

      it('is decided only by a USER key other than the requester\'s, as itself: otherwise 403 and nothing changes', async () => {
        const pending = await attest({ amount: 20000 });
        const refused = async (auth: string, approvedBy: string, status: number, code?: string) => {
          const res = await override(pending.executionId, true, auth, approvedBy);
          expect({ auth, approvedBy, status: res.status, code: res.body.code }).toEqual({ auth, approvedBy, status, code });
        };
        if (v.profile === 'attestation') {
          // The requesting agent, and an agent that cannot even read the execution, approving "as" a human.
          await refused(v.auth, 'auditor', 403, 'NON_HUMAN_CALLER_DENIED');
          await refused(bearer(other), 'bob', 403, 'NON_HUMAN_CALLER_DENIED');
        } else {
          // The simple variant's one caller is no human: its key does not open /override at all.
          await refused(v.auth, 'auditor', 401);
        }
        // A human deciding in another's name.
        await refused(bearer(auditor), 'bob', 403, 'SELF_APPROVAL_DENIED');
        await refused(bearer(auditor), 'ann', 403, 'SELF_APPROVAL_DENIED');
        if (v.profile === 'attestation') {
          // A human deciding on their own execution.
          const own = await attest({ amount: 20001 }, bearer(ann));
          const res = await override(own.executionId, true, bearer(ann), 'ann');
          expect({ status: res.status, code: res.body.code }).toEqual({ status: 403, code: 'SELF_APPROVAL_DENIED' });
          expect((await get(`/audit/decisions/${own.executionId}`, bearer(auditor))).body).toMatchObject({ execution_state: 'pending_override', override: null });
          // Another human decides it.
          expect((await override(own.executionId, false)).status).toBe(200);
        }
        expect((await get(`/audit/decisions/${pending.executionId}`, v.readerAuth)).body).toMatchObject({ execution_state: 'pending_override', override: null });
        const res = await override(pending.executionId, true);
        expect(res.status).toBe(200);
        expect(res.body.resolution).toMatchObject({ approvedBy: 'auditor', decidedBy: 'auditor' });
      });

      it('of simultaneous overrides exactly one resolves; the others get 409', async () => {
        const pending = await attest({ amount: 50000 });
        const results = await Promise.all(Array.from({ length: 8 }, (_, i) => override(pending.executionId, i % 2 === 0)));
        const statuses = results.map((r) => r.status).sort();
        expect(statuses).toEqual([200, 409, 409, 409, 409, 409, 409, 409]);
        const winner = results.find((r) => r.status === 200)!.body as Json;
        const detail = (await get(`/audit/decisions/${pending.executionId}`)).body;
        expect(detail.execution_state).toBe(winner.status === 'approved' ? 'executed' : 'rejected');
      });
    });

    describe('POST /confirm-execution', () => {
      const action = (over: Json = {}) => ({ actionType: 'payment', actionId: 'pay-1', actionTimestamp: new Date().toISOString(), ...over });

      it('binds the action to the attestation that authorized it, within the default window of 300 s, with a JWS proof', async () => {
        const a = await attest({ amount: 10 });
        const res = await post('/confirm-execution', { attestation: a, executedAction: action({ actionDetails: { bank: 'x' } }) });
        expect(res.status).toBe(200);
        expect(res.body).toEqual({ matched: true, executionId: a.executionId, withinTimeWindow: true, proof: expect.any(String), reasons: [] });
        const { payload } = await compactVerify(res.body.proof as string, createLocalJWKSet(jwks as never));
        expect(decodeProtectedHeader(res.body.proof as string)).toMatchObject({ alg: 'EdDSA', typ: 'ets-execution-confirmation+jwt' });
        expect(JSON.parse(new TextDecoder().decode(payload))).toMatchObject({
          executionId: a.executionId,
          attestationHash: contentHash(a),
          executedAction: { actionType: 'payment', actionId: 'pay-1', actionDetailsHash: contentHash({ bank: 'x' }) },
          matched: true,
          withinTimeWindow: true,
          timeWindowSeconds: 300,
          authorizedAt: a.issuedAt,
          confirmedBy: v.callerId,
        });
        expect((await get(`/audit/decisions/${a.executionId}`)).body.confirmation).toMatchObject({ actionType: 'payment', actionId: 'pay-1' });

        const late = new Date(Date.parse(a.issuedAt as string) + 301_000).toISOString();
        expect((await post('/confirm-execution', { attestation: a, executedAction: action({ actionTimestamp: late }) })).body).toMatchObject({ matched: true, withinTimeWindow: false });
        expect((await post('/confirm-execution', { attestation: a, executedAction: action({ actionTimestamp: late }), timeWindowSeconds: 3600 })).body.withinTimeWindow).toBe(true);
        const second = await post('/confirm-execution', { attestation: a, executedAction: action({ actionId: 'pay-2' }) });
        expect(second.body).toMatchObject({ matched: false, reasons: ["executedAction: the execution is already bound to action payment 'pay-1'"] });
      });

      it('does not match a tampered, foreign, blocked or still pending attestation; an approved override authorizes it', async () => {
        const a = await attest({ amount: 10 });
        const confirm = async (attestation: Json) => (await post('/confirm-execution', { attestation, executedAction: action() })).body as Json;
        expect(await confirm({ ...a, policyVersion: '2.0.0' })).toMatchObject({ matched: false, reasons: expect.arrayContaining(['signature: does not verify']) });
        expect(await confirm({ ...a, executionId: 'f'.repeat(64) })).toMatchObject({ matched: false, reasons: expect.arrayContaining(['executionId: no attestation was issued for it']) });
        const blocked = await attest({ amount: 1, country: 'KP' });
        expect(await confirm(blocked)).toMatchObject({ matched: false, withinTimeWindow: false, reasons: ['execution_state: the execution is blocked, not authorized'] });
        const pending = await attest({ amount: 20000 });
        expect((await confirm(pending)).matched).toBe(false);
        await override(pending.executionId, true);
        expect(await confirm(pending)).toMatchObject({ matched: true, withinTimeWindow: true });
        // The simple variant's answer is a statement, not the attestation: it takes the one GET /audit/decisions/{executionId} holds.
        if (v.profile === 'attestation-simple') {
          const { answer, attestation } = await attested({ amount: 11 });
          expect(await confirm(answer)).toMatchObject({ matched: false, reasons: expect.arrayContaining([expect.stringContaining('signature')]) });
          expect(await confirm(attestation)).toMatchObject({ matched: true });
        }
      });

      it('answers 400 for a malformed body, 401 without a key', async () => {
        const a = await attest({ amount: 10 });
        for (const body of [
          {},
          { attestation: a },
          { attestation: {}, executedAction: action() },
          { attestation: a, executedAction: action({ actionId: '' }) },
          { attestation: a, executedAction: action({ actionTimestamp: 'yesterday' }) },
          { attestation: a, executedAction: action({ actionDetails: 'x' }) },
          { attestation: a, executedAction: action(), timeWindowSeconds: 0 },
          { attestation: a, executedAction: action(), timeWindowSeconds: '60' },
        ]) {
          const res = await post('/confirm-execution', body);
          expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: undefined });
        }
        expect((await request(server.url).post('/confirm-execution').send({})).status).toBe(401);
      });
    });

    describe('audit routes', () => {
      it('GET /audit/decisions: newest first, default limit 50, filters, paging, and 400 for bad values', async () => {
        const mine = [await attest({ amount: 1 }), await attest({ amount: 2, country: 'KP' }), await attest({ amount: 3 })];
        const list = (await get('/audit/decisions')).body as Json[];
        expect(list.length).toBeLessThanOrEqual(50);
        expect(list.slice(0, 3).map((r) => r.executionId)).toEqual([mine[2]!.executionId, mine[1]!.executionId, mine[0]!.executionId]);
        expect(list[0]).toEqual({
          executionId: mine[2]!.executionId,
          requestId: mine[2]!.requestId,
          variant: v.profile,
          callerId: v.callerId,
          policyId: 'exec-test',
          policyVersion: '1.0.0',
          decision: mine[2]!.decision,
          execution_state: 'completed',
          createdAt: mine[2]!.issuedAt,
        });
        expect(((await get('/audit/decisions?limit=1&offset=1')).body as Json[]).map((r) => r.executionId)).toEqual([mine[1]!.executionId]);
        const rejected = (await get('/audit/decisions?decision=reject&limit=500')).body as Json[];
        expect(rejected.every((r) => (r.decision as Json).action === 'reject')).toBe(true);
        expect(rejected.map((r) => r.executionId)).toContain(mine[1]!.executionId);
        const window = (await get(`/audit/decisions?from=${encodeURIComponent(mine[1]!.issuedAt as string)}&to=${encodeURIComponent(mine[2]!.issuedAt as string)}&policyId=exec-test`)).body as Json[];
        expect(window.map((r) => r.executionId)).toEqual([mine[2]!.executionId, mine[1]!.executionId]);
        expect((await get('/audit/decisions?policyId=nope')).body).toEqual([]);
        for (const q of ['limit=0', 'limit=501', 'limit=1.5', 'offset=-1', 'offset=x', 'from=tomorrow', 'to=2026-02-30T00:00:00Z', 'from=2026-01-01T23:59:60Z', 'decision=blocked', 'from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z']) {
          const res = await get(`/audit/decisions?${q}`);
          expect({ q, status: res.status, code: res.body.code }).toEqual({ q, status: 400, code: undefined });
        }
        expect((await get(`/audit/decisions/${'0'.repeat(64)}`)).body).toEqual({ error: 'Decision not found.' });
        expect((await get(`/audit/decisions/${'0'.repeat(64)}`)).status).toBe(404);
        for (const path of ['/audit/decisions', '/audit/stats', '/audit/security', `/audit/decisions/${mine[0]!.executionId}`]) expect((await request(server.url).get(path)).status).toBe(401);
      });

      // The simple variant has one caller (the holder of SVC_API_KEY), who reads everything.
      if (v.profile === 'attestation') {
        it('a non-USER key reads only its own caller\'s decisions and events; a USER key reads all', async () => {
          const theirs = await attest({ amount: 4 }, bearer(other));
          expect((await get(`/audit/decisions/${theirs.executionId}`)).status).toBe(404);
          expect((await get(`/audit/decisions/${theirs.executionId}`, bearer(other))).status).toBe(200);
          expect((await get(`/audit/decisions/${theirs.executionId}`, bearer(auditor))).status).toBe(200);
          expect(((await get('/audit/decisions?limit=500', bearer(other))).body as Json[]).every((r) => r.callerId === 'agent-8')).toBe(true);
          expect(((await get('/audit/decisions?limit=500', bearer(auditor))).body as Json[]).map((r) => r.callerId)).toEqual(expect.arrayContaining(['agent-7', 'agent-8']));
          expect((await get('/audit/stats', bearer(other))).body.total_decisions).toBe('1');
          // A non-USER key sees the security events of its own caller only.
          expect(((await get('/audit/security?limit=500')).body as Json[]).every((e) => e.callerId === 'agent-7')).toBe(true);
        });
      }

      it('GET /audit/stats counts decisions, verifications, security events and API calls, each as a string', async () => {
        const before = (await get('/audit/stats', v.readerAuth)).body as Record<string, string>;
        for (const n of Object.values(before)) expect(n).toMatch(/^\d+$/);
        const { answer } = await attested({ amount: 5 });
        expect((await post('/verify', answer)).body.valid).toBe(true);
        expect((await post('/verify', { ...answer, executionId: 'f'.repeat(64) })).body.valid).toBe(false);
        await request(server.url).post('/override').set('authorization', 'Bearer wrong').send({});
        await settle();
        const after = (await get('/audit/stats', v.readerAuth)).body as Record<string, string>;
        const delta = (k: string) => Number(after[k]) - Number(before[k]);
        expect(Object.keys(after).sort()).toEqual(['decisions_today', 'invalid_verifications', 'total_api_calls', 'total_decisions', 'total_security_events', 'total_verifications', 'valid_verifications']);
        expect({
          total_decisions: delta('total_decisions'),
          decisions_today: delta('decisions_today'),
          total_verifications: delta('total_verifications'),
          valid_verifications: delta('valid_verifications'),
          invalid_verifications: delta('invalid_verifications'),
          // the invalid attestation, the failed authentication
          total_security_events: delta('total_security_events'),
          // /execute (and in the simple variant the read of its attestation), 2 x /verify, and the first /audit/stats
          total_api_calls: delta('total_api_calls'),
        }).toEqual({ total_decisions: 1, decisions_today: 1, total_verifications: 2, valid_verifications: 1, invalid_verifications: 1, total_security_events: 2, total_api_calls: v.callsPerAttest + 3 });
      });

      it('GET /audit/security lists security events newest first, with from, to and limit; 400 for bad values', async () => {
        const since = new Date().toISOString();
        const pending = await attest({ amount: 20000 });
        await override(pending.executionId, true);
        await override(pending.executionId, true);
        await request(server.url).get('/audit/stats').set('authorization', 'Bearer nope');
        const events = (await get(`/audit/security?from=${encodeURIComponent(since)}`, v.readerAuth)).body as Json[];
        expect(events.map((e) => e.kind)).toEqual(['authentication_failed', 'override_conflict']);
        expect(events[0]).toEqual({ eventId: expect.any(String), kind: 'authentication_failed', occurredAt: expect.any(String), callerId: null, operation: 'GET /audit/stats', executionId: null, detail: expect.any(String) });
        expect(events[1]).toMatchObject({ callerId: 'auditor', operation: 'override', executionId: pending.executionId });
        expect(((await get('/audit/security?limit=1', v.readerAuth)).body as Json[]).length).toBe(1);
        expect((await get(`/audit/security?to=${encodeURIComponent(since)}&from=${encodeURIComponent(since)}`, v.readerAuth)).body).toEqual([]);
        for (const q of ['limit=0', 'limit=x', 'from=x', 'to=2026-01-01']) expect((await get(`/audit/security?${q}`, v.readerAuth)).status).toBe(400);
      });
    });
  });
});
