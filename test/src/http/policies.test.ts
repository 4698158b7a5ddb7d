import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { TypeOrmPolicyStore } from '@ets/adapters-persistence';
import { silentLogger, type PolicyDocument } from '@ets/domain';
import { startServer, type RunningServer } from '@ets/server';
import { apiKeysEnv, bearer, makeKey, STORAGE_TARGETS, startTestServer, type TestKey, type TestServer } from '@ets/test-support';
import { envelope, policyDoc, rawPost } from './governance-fixtures.js';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const carol = makeKey('carol', { holder: 'USER', stepUp: true });
const dave = makeKey('dave', { holder: 'USER' }); // a human without a step-up key
const service = makeKey('svc', { holder: 'SERVICE', stepUp: false });
const role = makeKey('role', { holder: 'ROLE' });
const org = makeKey('org', { holder: 'ORGANIZATION' });
const untyped = makeKey('untyped');
const KEYS = [alice, bob, carol, dave, service, role, org, untyped];

describe.each(STORAGE_TARGETS)('policies and maker-checker over HTTP on $name', (factory) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(factory, apiKeysEnv(...KEYS));
  });
  afterAll(async () => {
    await server.destroy();
  });

  const post = (p: string, key: TestKey | undefined, body?: unknown) => {
    const req = request(server.url).post(p);
    if (key) req.set('authorization', bearer(key));
    return body === undefined ? req : req.send(body as object);
  };
  const get = (p: string, key: TestKey = alice) => request(server.url).get(p).set('authorization', bearer(key));

  let n = 0;
  const nextVersion = () => `${++n}.0.0`;
  /** A fresh first version of gov-test, proposed by alice; returns its change id. */
  async function proposed(version = nextVersion(), by: TestKey = alice): Promise<string> {
    const res = await post(`/policies/gov-test/${version}/pending-changes`, by, { proposedContent: policyDoc(version), reason: 'test' });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }
  const approveAs = (checker: TestKey, id: string, over: Record<string, unknown> = {}) =>
    post(`/policies/pending-changes/${id}/approve`, checker, envelope(checker, id, 'approve', over));

  it('proposes the shipped policy at start as the system; it takes effect only once a human approves it', async () => {
    const pending = await get('/policies/pending-changes?status=PENDING_APPROVAL&pageSize=100');
    expect(pending.status).toBe(200);
    const shipped = (pending.body.items as { policyName: string }[]).filter((c) => c.policyName === 'payments-transfer');
    expect(shipped).toEqual([
      expect.objectContaining({ policyName: 'payments-transfer', policyVersion: '1.0.0', baseVersion: '1.0.0', status: 'PENDING_APPROVAL', proposer: 'system' }),
    ]);
    expect((await get('/policies/in-effect')).body).toEqual([]);
    const before = await post('/policies/validate', alice, { policyId: 'payments-transfer', policyVersion: '1.0.0' });
    expect(before.status).toBe(404);

    const id = (shipped[0] as unknown as { id: string }).id;
    const approved = await approveAs(bob, id);
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ id, status: 'APPROVED', decider: 'bob', proposer: 'system' });

    const inEffect = await get('/policies/in-effect');
    expect(inEffect.body).toEqual([
      {
        name: 'payments-transfer',
        version: '1.0.0',
        contentHash: approved.body.contentHash,
        approvedAt: approved.body.decidedAt,
        approvedBy: 'bob',
        authorityGrantRequired: false,
        signals: { sourced: [] },
      },
    ]);
    expect(inEffect.body[0].contentHash).toMatch(/^[0-9a-f]{64}$/);
    const after = await post('/policies/validate', alice, { policyId: 'payments-transfer', policyVersion: '1.0.0' });
    expect(after.status).toBe(200);
    expect(after.body).toEqual({ valid: true, errors: [] });
  });

  it('answers 401 on every policy route without a key, and /policies/validate keeps {error} for it', async () => {
    for (const [method, p] of [
      ['post', '/policies/validate'],
      ['get', '/policies/in-effect'],
      ['get', '/policies/pending-changes'],
      ['post', '/policies/gov-test/1/pending-changes'],
      ['post', '/policies/pending-changes/x/approve'],
      ['post', '/policies/pending-changes/x/reject'],
    ] as const) {
      const res = await request(server.url)[method](p);
      expect(`${method} ${p} ${res.status}`).toBe(`${method} ${p} 401`);
      expect(res.body).toEqual({ error: 'authentication required' });
    }
  });

  describe('proposals', () => {
    it('answers 201 with the pending change of the contract', async () => {
      const version = nextVersion();
      const res = await post(`/policies/gov-test/${version}/pending-changes`, alice, { proposedContent: policyDoc(version), reason: 'first cut' });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        policyName: 'gov-test',
        baseVersion: version,
        policyVersion: version,
        status: 'PENDING_APPROVAL',
        proposer: 'alice',
        reason: 'first cut',
        createdAt: expect.any(String),
        contentHash: expect.stringMatching(/^[0-9a-f]{64}$/),
        proposedContent: policyDoc(version),
      });
      const noReason = await post(`/policies/gov-test/${nextVersion()}/pending-changes`, alice, { proposedContent: policyDoc(`${n}.0.0`) });
      expect(noReason.status).toBe(201);
      expect(noReason.body.reason).toBeNull();
    });

    it.each([
      ['SERVICE', service],
      ['ROLE', role],
      ['ORGANIZATION', org],
      ['no holder type', untyped],
    ])('refuses a %s key with 403 NON_HUMAN_CALLER_DENIED', async (_what, key) => {
      const res = await post('/policies/gov-test/1.0.0/pending-changes', key, { proposedContent: policyDoc('1.0.0') });
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: expect.any(String), code: 'NON_HUMAN_CALLER_DENIED' });
    });

    it.each([
      ['/policies/./7.0.0/pending-changes', policyDoc('7.0.0', { name: '.' })],
      ['/policies/../7.0.0/pending-changes', policyDoc('7.0.0', { name: '..' })],
      ['/policies/%2E%2E/7.0.0/pending-changes', policyDoc('7.0.0', { name: '..' })],
      ['/policies/gov-test/./pending-changes', policyDoc('7.0.0')],
      ['/policies/gov-test/../pending-changes', policyDoc('7.0.0')],
      ['/policies/gov-test/%2e/pending-changes', policyDoc('7.0.0')],
      ['/policies/gov-test/7.0.0/pending-changes', policyDoc('.')],
      ['/policies/gov-test/7.0.0/pending-changes', policyDoc('..')],
    ])('refuses a dot-only name, version or proposedContent.policyVersion with 400: %s %#', async (p, doc) => {
      const res = await rawPost(server.url, p, bearer(alice), { proposedContent: doc });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: expect.stringMatching(/'\.' or '\.\.'/) });
    });

    it('refuses a name other than the path, invalid content (listing its errors), a bad name, a bad body or reason with 400', async () => {
      const v = nextVersion();
      const cases: [string, unknown, RegExp][] = [
        [`/policies/other/${v}/pending-changes`, { proposedContent: policyDoc(v) }, /proposedContent.name must be 'other'/],
        [
          `/policies/gov-test/${v}/pending-changes`,
          { proposedContent: policyDoc(v, { signalsSchema: { amount: { type: 'object' } }, rules: [{ id: 'r', when: 'signals.amount > "x"', action: 'approve', reason: 'x' }] }) },
          /invalid: .*signalsSchema\.amount\.type/,
        ],
        [`/policies/gov-test/${v}/pending-changes`, { proposedContent: policyDoc(v, { rules: [{ id: 'r', when: 'signals.amount > "x"', action: 'approve', reason: 'x' }] }) }, /rules\[0\]\.when/],
        [`/policies/Bad_Name/${v}/pending-changes`, { proposedContent: policyDoc(v, { name: 'Bad_Name' }) }, /policy name in the path is not valid/],
        [`/policies/gov-test/${v}/pending-changes`, {}, /proposedContent is required/],
        [`/policies/gov-test/${v}/pending-changes`, [policyDoc(v)], /JSON object/],
        [`/policies/gov-test/${v}/pending-changes`, { proposedContent: policyDoc(v), reason: 'x'.repeat(2001) }, /reason must be at most 2000/],
        [`/policies/gov-test/${v}/pending-changes`, { proposedContent: policyDoc(v), reason: 5 }, /reason must be a string/],
      ];
      for (const [p, body, message] of cases) {
        const res = await post(p, alice, body);
        expect(`${p} ${res.status}`).toBe(`${p} 400`);
        expect(res.body).toEqual({ error: expect.stringMatching(message) });
      }
      const bare = await request(server.url).post(`/policies/gov-test/${v}/pending-changes`).set('authorization', bearer(alice));
      expect(bare.status).toBe(400);
      // A reason of exactly 2000 characters is fine.
      expect((await post(`/policies/gov-test/${v}/pending-changes`, alice, { proposedContent: policyDoc(v), reason: 'é'.repeat(2000) })).status).toBe(201);
    });

    it('answers 409 for a version already published or pending, and 404 for an unknown base version', async () => {
      const v = nextVersion();
      const id = await proposed(v);
      const pendingAgain = await post(`/policies/gov-test/${v}/pending-changes`, carol, { proposedContent: policyDoc(v) });
      expect(pendingAgain.status).toBe(409);
      expect(pendingAgain.body).toEqual({ error: expect.stringContaining('pending') });
      expect((await approveAs(bob, id)).status).toBe(200);
      const published = await post(`/policies/gov-test/${v}/pending-changes`, alice, { proposedContent: policyDoc(v, { description: 'changed' }) });
      expect(published.status).toBe(409);
      expect(published.body).toEqual({ error: expect.stringContaining('already published') });

      const unknownBase = await post(`/policies/gov-test/0.0.1-missing/pending-changes`, alice, { proposedContent: policyDoc(nextVersion()) });
      expect(unknownBase.status).toBe(404);
      expect(unknownBase.body).toEqual({ error: "Policy 'gov-test' version '0.0.1-missing' was not found." });
      // Replacing a published version names it as the base.
      const next = nextVersion();
      const replaces = await post(`/policies/gov-test/${v}/pending-changes`, alice, { proposedContent: policyDoc(next) });
      expect(replaces.status).toBe(201);
      expect(replaces.body).toMatchObject({ baseVersion: v, policyVersion: next });
    });
  });

  describe('listing', () => {
    it('filters by status and refuses an unknown or repeated status with 400', async () => {
      const pendingId = await proposed();
      const rejectedId = await proposed();
      expect((await post(`/policies/pending-changes/${rejectedId}/reject`, bob, envelope(bob, rejectedId, 'reject'))).status).toBe(200);
      const all = await get('/policies/pending-changes?pageSize=100');
      expect(all.status).toBe(200);
      expect((all.body.items as { id: string }[]).map((c) => c.id)).toEqual(expect.arrayContaining([pendingId, rejectedId]));
      const pending = (await get('/policies/pending-changes?status=PENDING_APPROVAL&pageSize=100')).body.items as { id: string; status: string }[];
      expect(pending.map((c) => c.id)).toContain(pendingId);
      expect(pending.every((c) => c.status === 'PENDING_APPROVAL')).toBe(true);
      const rejected = (await get('/policies/pending-changes?status=REJECTED&pageSize=100')).body.items as { id: string }[];
      expect(rejected.map((c) => c.id)).toContain(rejectedId);
      expect(rejected.map((c) => c.id)).not.toContain(pendingId);
      for (const q of ['status=pending', 'status=', 'status=APPROVED&status=REJECTED']) {
        const res = await get(`/policies/pending-changes?${q}`);
        expect(`${q} ${res.status}`).toBe(`${q} 400`);
        expect(res.body).toEqual({ error: 'status must be one of PENDING_APPROVAL, APPROVED, REJECTED.' });
      }
      for (const q of ['page=0', 'pageSize=101', 'pageSize=x']) expect((await get(`/policies/pending-changes?${q}`)).status).toBe(400);
      const first = await get('/policies/pending-changes?pageSize=1');
      const second = await get('/policies/pending-changes?pageSize=1&page=2');
      expect(first.body).toMatchObject({ page: 1, pageSize: 1, total: all.body.total });
      expect(first.body.items).toHaveLength(1);
      expect(second.body.items[0].id).toBe(all.body.items[1].id);
    });
  });

  describe('deciding: refusals of spec 2.6 and 5.9 (each leaves the change pending)', () => {
    let id: string;
    beforeAll(async () => {
      id = await proposed();
    });
    const expectStillPending = async () => {
      const list = (await get('/policies/pending-changes?status=PENDING_APPROVAL&pageSize=100')).body.items as { id: string }[];
      expect(list.map((c) => c.id)).toContain(id);
    };

    it.each([
      ['SERVICE', service],
      ['ROLE', role],
      ['ORGANIZATION', org],
      ['no holder type', untyped],
      ['USER without a step-up key', dave],
    ])('403 NON_HUMAN_CALLER_DENIED for a %s key', async (_what, key) => {
      for (const action of ['approve', 'reject'] as const) {
        const res = await post(`/policies/pending-changes/${id}/${action}`, key, envelope(bob, id, action));
        expect(res.status).toBe(403);
        expect(res.body).toEqual({ error: expect.any(String), code: 'NON_HUMAN_CALLER_DENIED' });
      }
      await expectStillPending();
    });

    it('400 without a code for a malformed envelope', async () => {
      const good = envelope(bob, id, 'approve');
      const bodies: unknown[] = [
        undefined,
        {},
        { payload: good.payload },
        { signature: good.signature },
        { payload: { ...good.payload, nonce: 'short' }, signature: good.signature },
        { payload: { ...good.payload, expiresAt: 'soon' }, signature: good.signature },
        envelope(bob, id, 'approve', { expiresAt: '2099-02-30T00:00:00Z' }),
        envelope(bob, id, 'approve', { expiresAt: '2099-01-01T24:00:00Z' }),
        envelope(bob, id, 'approve', { expiresAt: '9999-12-31T23:59:59Z' }),
        envelope(bob, id, 'approve', { expiresAt: new Date(Date.now() + 16 * 60_000).toISOString() }),
        envelope(bob, id, 'approve', { expiresAt: `${new Date(Date.now() + 60_000).toISOString().slice(0, 17)}60Z` }),
        { payload: { ...good.payload, pendingPolicyChangeId: undefined }, signature: good.signature },
      ];
      for (const body of bodies) {
        const res = await post(`/policies/pending-changes/${id}/approve`, bob, body);
        expect(res.status).toBe(400);
        expect(res.body).toEqual({ error: expect.any(String) });
      }
      const noReason = await post(`/policies/pending-changes/${id}/reject`, bob, envelope(bob, id, 'reject', { reason: undefined }));
      expect(noReason.status).toBe(400);
      expect(noReason.body).toEqual({ error: expect.stringContaining('reason') });
      await expectStillPending();
    });

    it('403 STEP_UP_INVALID: wrong key, tampered payload, another change, another action, another caller', async () => {
      const tampered = envelope(bob, id, 'approve');
      tampered.payload.expiresAt = new Date(Date.now() + 600_000).toISOString();
      const cases = [
        ['signed with carol’s key, presented by bob', 'approve', envelope(bob, id, 'approve', {}, carol.stepUpPrivateKeyPem)],
        ['payload changed after signing', 'approve', tampered],
        ['another change id', 'approve', envelope(bob, '00000000-0000-4000-8000-000000000000', 'approve')],
        ['a reject envelope on approve', 'approve', envelope(bob, id, 'reject')],
        ['an approve envelope on reject', 'reject', envelope(bob, id, 'approve', { reason: 'x' })],
        ['callerId of another caller', 'approve', envelope(bob, id, 'approve', { callerId: 'carol' })],
      ] as const;
      for (const [what, action, body] of cases) {
        const res = await post(`/policies/pending-changes/${id}/${action}`, bob, body);
        expect(`${what}: ${res.status} ${res.body.code}`).toBe(`${what}: 403 STEP_UP_INVALID`);
      }
      await expectStillPending();
    });

    it('403 STEP_UP_EXPIRED once expiresAt has passed', async () => {
      const res = await post(`/policies/pending-changes/${id}/approve`, bob, envelope(bob, id, 'approve', { expiresAt: new Date(Date.now() - 1000).toISOString() }));
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: expect.any(String), code: 'STEP_UP_EXPIRED' });
      await expectStillPending();
    });

    it('403 SELF_APPROVAL_DENIED for the proposer, and 404 without a code for an unknown change', async () => {
      const self = await approveAs(alice, id);
      expect(self.status).toBe(403);
      expect(self.body).toEqual({ error: expect.any(String), code: 'SELF_APPROVAL_DENIED' });
      const selfReject = await post(`/policies/pending-changes/${id}/reject`, alice, envelope(alice, id, 'reject'));
      expect(selfReject.body.code).toBe('SELF_APPROVAL_DENIED');
      const unknown = '7d0b5a58-2c1e-4b0e-9b43-5a4f0e7c9d11';
      const missing = await approveAs(bob, unknown);
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual({ error: `Pending change '${unknown}' was not found.` });
      await expectStillPending();
    });

    it('409 STEP_UP_NONCE_REUSED for a nonce used before (on any change)', async () => {
      const other = await proposed();
      const first = envelope(carol, other, 'approve');
      expect((await post(`/policies/pending-changes/${other}/approve`, carol, first)).status).toBe(200);
      const reused = await post(`/policies/pending-changes/${id}/approve`, bob, envelope(bob, id, 'approve', { nonce: first.payload.nonce }));
      expect(reused.status).toBe(409);
      expect(reused.body).toEqual({ error: expect.any(String), code: 'STEP_UP_NONCE_REUSED' });
      await expectStillPending();
    });
  });

  describe('decided changes', () => {
    it('approves once: the same envelope again, another approver, or a reject then get 409 without a code', async () => {
      const id = await proposed();
      const first = envelope(bob, id, 'approve');
      const ok = await post(`/policies/pending-changes/${id}/approve`, bob, first);
      expect(ok.status).toBe(200);
      expect(ok.body).toMatchObject({ id, status: 'APPROVED', decider: 'bob', decidedAt: expect.any(String), appliedAt: expect.any(String) });
      expect(ok.body).not.toHaveProperty('rejectionReason');
      for (const [who, action, body] of [
        ['replayed envelope', 'approve', first],
        ['another approver', 'approve', envelope(carol, id, 'approve')],
        ['a reject', 'reject', envelope(carol, id, 'reject')],
      ] as const) {
        const res = await post(`/policies/pending-changes/${id}/${action}`, who === 'replayed envelope' ? bob : carol, body);
        expect(`${who}: ${res.status}`).toBe(`${who}: 409`);
        expect(res.body).toEqual({ error: expect.any(String) });
      }
    });

    it('rejects with the envelope reason recorded as rejectionReason; nothing is published; then 409', async () => {
      const v = nextVersion();
      const id = await proposed(v);
      const res = await post(`/policies/pending-changes/${id}/reject`, carol, envelope(carol, id, 'reject', { reason: 'Rules too loose' }));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id, status: 'REJECTED', decider: 'carol', rejectionReason: 'Rules too loose', decidedAt: expect.any(String) });
      expect(res.body).not.toHaveProperty('appliedAt');
      expect((await post('/policies/validate', alice, { policyId: 'gov-test', policyVersion: v })).status).toBe(404);
      expect((await approveAs(bob, id)).status).toBe(409);
    });

    it('applies two simultaneous approvals once: one 200, one 409, the version stored once and in effect', async () => {
      for (let round = 0; round < 3; round++) {
        const v = nextVersion();
        const id = await proposed(v);
        const results = await Promise.all([approveAs(bob, id), approveAs(carol, id)]);
        expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
        const rows: unknown[] = await server.dataSource.query(`SELECT seq FROM policy_versions WHERE name = 'gov-test' AND version = '${v}'`);
        expect(rows).toHaveLength(1);
        const winner = results.find((r) => r.status === 200)!;
        expect((await get('/policies/in-effect')).body).toContainEqual(expect.objectContaining({ name: 'gov-test', version: v, approvedBy: winner.body.decider }));
      }
    });

    it('applies 20 simultaneous approvals by one approver, each with its own envelope, once: one 200, 19 409, one audit event', async () => {
      const v = nextVersion();
      const id = await proposed(v);
      const results = await Promise.all(Array.from({ length: 20 }, () => approveAs(bob, id)));
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(1);
      expect(statuses.filter((s) => s === 409)).toHaveLength(19);
      const rows: unknown[] = await server.dataSource.query(`SELECT seq FROM policy_versions WHERE name = 'gov-test' AND version = '${v}'`);
      expect(rows).toHaveLength(1);
      const events: { body: string }[] = await server.dataSource.query(`SELECT body FROM audit_events WHERE kind = 'governance'`);
      const decisions = events.map((e) => JSON.parse(e.body) as { subjectId: string; action: string }).filter((e) => e.subjectId === id && e.action !== 'propose');
      expect(decisions).toHaveLength(1);
    });

    it('lets the approver complete an approval only once its apply claim is released or its lease has run out', async () => {
      const v = nextVersion();
      const id = await proposed(v);
      // Step (a) done by bob; a request of bob's still holds the claim (applying right now).
      const decided = `UPDATE pending_changes SET status = 'APPROVED', decider = 'bob', decided_at = '2026-01-01T00:00:00.000Z', apply_claim = 'held', apply_claim_until = `;
      await server.dataSource.query(`${decided} '${new Date(Date.now() + 60_000).toISOString()}' WHERE id = '${id}'`);
      expect((await approveAs(bob, id)).status).toBe(409);
      expect((await post('/policies/validate', alice, { policyId: 'gov-test', policyVersion: v })).status).toBe(404);
      // That request's process stopped: its lease runs out, and the approver's retry completes.
      await server.dataSource.query(`${decided} '${new Date(Date.now() - 1000).toISOString()}' WHERE id = '${id}'`);
      expect((await approveAs(carol, id)).status).toBe(409);
      const retry = await approveAs(bob, id);
      expect(retry.status).toBe(200);
      expect(retry.body).toMatchObject({ id, status: 'APPROVED', decider: 'bob', appliedAt: expect.any(String) });
      expect(retry.body).not.toHaveProperty('applyClaim');
      expect((await post('/policies/validate', alice, { policyId: 'gov-test', policyVersion: v })).body).toEqual({ valid: true, errors: [] });
      expect((await approveAs(bob, id)).status).toBe(409);
    });

    it('completes an approval whose publication was lost when the same approver retries; anyone else gets 409', async () => {
      const v = nextVersion();
      const id = await proposed(v);
      // Step (a) happened (decided by bob), step (b) did not (nothing published, no appliedAt).
      await server.dataSource.query(`UPDATE pending_changes SET status = 'APPROVED', decider = 'bob', decided_at = '2026-01-01T00:00:00.000Z' WHERE id = '${id}'`);
      expect((await post('/policies/validate', alice, { policyId: 'gov-test', policyVersion: v })).status).toBe(404);
      const other = await approveAs(carol, id);
      expect(other.status).toBe(409);
      const retry = await approveAs(bob, id);
      expect(retry.status).toBe(200);
      expect(retry.body).toMatchObject({ id, status: 'APPROVED', decider: 'bob', decidedAt: '2026-01-01T00:00:00.000Z', appliedAt: expect.any(String) });
      expect((await post('/policies/validate', alice, { policyId: 'gov-test', policyVersion: v })).body).toEqual({ valid: true, errors: [] });
      expect((await approveAs(bob, id)).status).toBe(409);
    });

    it('records proposals and decisions as signed governance audit events that verify', async () => {
      const id = await proposed();
      await approveAs(bob, id);
      const rows: { body: string }[] = await server.dataSource.query(`SELECT body FROM audit_events WHERE kind = 'governance'`);
      const events = rows.map((r) => JSON.parse(r.body) as Record<string, unknown>).filter((e) => e.subjectId === id);
      expect(events.map((e) => [e.action, e.callerId, e.subjectType])).toEqual([
        ['propose', 'alice', 'policy-change'],
        ['approve', 'bob', 'policy-change'],
      ]);
      for (const e of events) {
        expect(e.summary).toEqual(expect.stringContaining("publish policy 'gov-test'"));
        const verified = await request(server.url).post('/audit/verify').send(e);
        expect(verified.body).toMatchObject({ valid: true });
      }
    });
  });

  describe('POST /policies/validate', () => {
    it('answers {valid, errors} on every status but 401', async () => {
      const cases: [unknown, number, string][] = [
        [{}, 400, 'policyId is required.'],
        [{ policyVersion: '1.0.0' }, 400, 'policyId is required.'],
        [{ policyId: '', policyVersion: '' }, 400, 'policyId is required.'],
        [{ policyId: 7, policyVersion: '1.0.0' }, 400, 'policyId is required.'],
        [{ policyId: 'gov-test' }, 400, 'policyVersion is required.'],
        [{ policyId: 'gov-test', policyVersion: '' }, 400, 'policyVersion is required.'],
        [{ policyId: 'gov-test', policyVersion: ['1'] }, 400, 'policyVersion is required.'],
        [{ policyId: 'nope', policyVersion: '1.0.0' }, 404, "Policy 'nope' version '1.0.0' was not found."],
      ];
      for (const [body, status, message] of cases) {
        const res = await post('/policies/validate', alice, body);
        expect(`${JSON.stringify(body)} ${res.status}`).toBe(`${JSON.stringify(body)} ${status}`);
        expect(res.body).toEqual({ valid: false, errors: [message] });
      }
      const notJson = await request(server.url).post('/policies/validate').set('authorization', bearer(alice)).set('content-type', 'application/json').send('{bad');
      expect(notJson.status).toBe(400);
      expect(notJson.body).toEqual({ valid: false, errors: [expect.any(String)] });
      const noBody = await request(server.url).post('/policies/validate').set('authorization', bearer(alice));
      expect(noBody.body).toEqual({ valid: false, errors: ['policyId is required.'] });
    });

    it('validates a published version in full again: 200 valid, and 200 with the errors of one that no longer validates', async () => {
      const v = nextVersion();
      await approveAs(bob, await proposed(v));
      const ok = await post('/policies/validate', service, { policyId: 'gov-test', policyVersion: v });
      expect(ok.status).toBe(200);
      expect(ok.body).toEqual({ valid: true, errors: [] });
      // A version stored when the rules were looser (written to the store directly).
      const legacy = { ...policyDoc('legacy-1'), rules: [{ id: 'r', when: 'signals.amount > "x"', action: 'approve', reason: 'x' }] } as unknown as PolicyDocument;
      await new TypeOrmPolicyStore(server.dataSource).publish({
        name: 'gov-test', version: 'legacy-1', content: legacy, contentHash: '0'.repeat(64), changeId: 'legacy', proposer: 'x', approvedBy: 'y', approvedAt: '2020-01-01T00:00:00.000Z',
      });
      const bad = await post('/policies/validate', alice, { policyId: 'gov-test', policyVersion: 'legacy-1' });
      expect(bad.status).toBe(200);
      expect(bad.body).toEqual({ valid: false, errors: [expect.stringMatching(/^rules\[0\]\.when: /)] });
    });
  });
});

describe.each(STORAGE_TARGETS)('shipped policies folder on $name', (factory) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ets-policies-'));
  let server: TestServer;
  afterAll(async () => {
    await server?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('proposes the valid files (JSON or YAML) and logs and skips invalid ones without failing the start', async () => {
    writeFileSync(path.join(dir, 'broken.json'), '{"name": ');
    writeFileSync(path.join(dir, 'invalid.json'), JSON.stringify({ name: 'invalid-one', policyVersion: '1', signalsSchema: { a: { type: 'date' } }, rules: [] }));
    writeFileSync(path.join(dir, 'duplicate-key.json'), '{"name":"dup","name":"dup2"}');
    writeFileSync(path.join(dir, 'good.yaml'), 'name: yaml-policy\npolicyVersion: "2.0.0"\nsignalsSchema:\n  amount: { type: number }\nrules:\n  - { id: ok, when: "signals.amount < 5", action: approve, reason: small }\n');
    writeFileSync(path.join(dir, 'notes.txt'), 'not a policy');
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob), SVC_POLICIES_DIR: dir });
    const list = await request(server.url).get('/policies/pending-changes').set('authorization', bearer(alice));
    expect(list.status).toBe(200);
    expect((list.body.items as { policyName: string; proposer: string }[]).map((c) => [c.policyName, c.proposer])).toEqual([['yaml-policy', 'system']]);
  });
});

describe.each(STORAGE_TARGETS)('one step-up key is one person, across a change of the key file, on $name', (factory) => {
  let server: TestServer;
  let restarted: RunningServer | undefined;
  afterAll(async () => {
    await restarted?.close();
    await server?.destroy();
  });

  it('refuses a checker who holds the key the proposer proposed with (403 SELF_APPROVAL_DENIED), under another caller id', async () => {
    server = await startTestServer(factory, apiKeysEnv(alice, bob));
    const proposal = await request(server.url).post('/policies/gov-test/1.0.0/pending-changes').set('authorization', bearer(alice)).send({ proposedContent: policyDoc('1.0.0') });
    expect(proposal.status).toBe(201);
    const id = proposal.body.id as string;
    await server.close();

    // The key file now gives alice's step-up key to 'alice-2' (alice's keys removed): the same person.
    const alice2: TestKey = { ...makeKey('alice-2', { holder: 'USER' }), stepUpPrivateKeyPem: alice.stepUpPrivateKeyPem };
    alice2.record = { ...alice2.record, stepUpPublicKey: (alice.record.stepUpPublicKey as string).replace(/\n/g, '\r\n') };
    restarted = await startServer({ ...server.settings, apiKeysInline: JSON.stringify([alice2.record, bob.record]) }, silentLogger);
    const decide = (key: TestKey, action: 'approve' | 'reject') =>
      request(restarted!.url).post(`/policies/pending-changes/${id}/${action}`).set('authorization', bearer(key)).send(envelope(key, id, action));
    for (const action of ['approve', 'reject'] as const) {
      const res = await decide(alice2, action);
      expect({ action, status: res.status, code: res.body.code }).toEqual({ action, status: 403, code: 'SELF_APPROVAL_DENIED' });
    }
    const pending = await request(restarted.url).get('/policies/pending-changes?status=PENDING_APPROVAL').set('authorization', bearer(bob));
    expect((pending.body.items as { id: string }[]).map((c) => c.id)).toContain(id);
    expect((await decide(bob, 'approve')).status).toBe(200);
  });
});
