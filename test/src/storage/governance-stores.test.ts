import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource, migrate, TypeOrmPendingChangeStore, TypeOrmPolicyStore } from '@ets/adapters-persistence';
import type { DecisionRequest, GovernanceEvent, PendingChange, PolicyDocument, PolicyVersion, Signed } from '@ets/domain';
import { governanceEvent, STORAGE_TARGETS, type ProvisionedTarget } from '@ets/test-support';

const nonce = () => randomBytes(32).toString('base64url');

const doc = (name: string, version: string): PolicyDocument => ({
  name,
  policyVersion: version,
  signalsSchema: { amount: { type: 'number' } },
  rules: [{ id: 'ok', when: 'signals.amount < 10', action: 'approve', reason: `v${version}` }],
});

const version = (name: string, v: string, approvedAt: string, changeId = randomUUID()): PolicyVersion => ({
  name,
  version: v,
  content: doc(name, v),
  contentHash: 'a'.repeat(64),
  changeId,
  proposer: 'alice',
  approvedBy: 'bob',
  approvedAt,
});

const change = (over: Partial<PendingChange> = {}): PendingChange => ({
  id: randomUUID(),
  kind: 'policy',
  subject: `p-${randomUUID()}/1`,
  payload: { any: ['json', 1, true, null] },
  status: 'PENDING_APPROVAL',
  proposer: 'alice',
  createdAt: new Date().toISOString(),
  ...over,
});

const proposal = (): Signed<GovernanceEvent> => governanceEvent('propose', 'alice');

const approve = (c: PendingChange, decider: string, over: Partial<DecisionRequest> = {}): DecisionRequest => ({
  id: c.id,
  kind: c.kind,
  decision: 'APPROVED',
  decider,
  decidedAt: new Date().toISOString(),
  nonce: nonce(),
  event: governanceEvent('approve', decider, c.id),
  ...over,
});

describe.each(STORAGE_TARGETS)('governance stores on $name', (factory) => {
  let db: ProvisionedTarget;
  let ds: DataSource;
  /** A second connection (pool) to the same database: another process, as far as the database can tell. */
  let ds2: DataSource;
  /**
   * On PostgreSQL the change store of `ds2`. On SQLite the same store: its transactions are
   * asynchronous, and two connections of one process to one file would wait on each other's write
   * lock while blocking the event loop (processes are tested end to end).
   */
  let changes: TypeOrmPendingChangeStore;
  let changes2: TypeOrmPendingChangeStore;
  let policies: TypeOrmPolicyStore;
  let policies2: TypeOrmPolicyStore;

  beforeAll(async () => {
    db = await factory.provision();
    ds = createDataSource(db.target);
    await ds.initialize();
    await migrate(ds);
    ds2 = createDataSource(db.target);
    await ds2.initialize();
    changes = new TypeOrmPendingChangeStore(ds);
    changes2 = factory.name === 'postgres' ? new TypeOrmPendingChangeStore(ds2) : changes;
    policies = new TypeOrmPolicyStore(ds);
    policies2 = new TypeOrmPolicyStore(ds2);
  });
  afterAll(async () => {
    await ds2?.destroy();
    await ds?.destroy();
    await db?.drop();
  });

  describe('PolicyStore', () => {
    it('never changes a published version: publishing it again stores nothing and returns the original', async () => {
      const first = version('immutable', '1.0.0', '2026-01-01T00:00:00.000Z');
      expect(await policies.publish(first)).toEqual(first);
      const other = { ...version('immutable', '1.0.0', '2026-02-01T00:00:00.000Z'), content: doc('immutable', 'changed') };
      expect(await policies.publish(other)).toEqual(first);
      expect(await policies.find({ name: 'immutable', version: '1.0.0' })).toEqual(first);
      expect(await policies.find({ name: 'immutable', version: '9' })).toBeUndefined();
    });

    it('stores a version once when two connections publish it at the same moment', async () => {
      const a = version('raced', '1.0.0', '2026-01-01T00:00:00.000Z');
      const b = version('raced', '1.0.0', '2026-01-01T00:00:00.000Z');
      const [ra, rb] = await Promise.all([policies.publish(a), policies2.publish(b)]);
      expect(ra.changeId).toBe(rb.changeId);
      expect([a.changeId, b.changeId]).toContain(ra.changeId);
      const rows: unknown[] = await ds.query(`SELECT seq FROM policy_versions WHERE name = 'raced'`);
      expect(rows).toHaveLength(1);
    });

    it('has in effect, per name, the most recently approved version (not the latest version string, not the last inserted)', async () => {
      await policies.publish(version('effect-a', '1.0.0', '2026-03-01T00:00:00.000Z'));
      await policies.publish(version('effect-a', '3.0.0', '2026-03-03T00:00:00.000Z'));
      // Approved before 3.0.0 but published (applied) after it: 3.0.0 stays in effect.
      await policies.publish(version('effect-a', '2.0.0', '2026-03-02T00:00:00.000Z'));
      await policies.publish(version('effect-b', '1.0.0', '2026-03-01T00:00:00.000Z'));
      // Approved at the same instant: the one stored later wins.
      await policies.publish(version('effect-b', '0.9.0', '2026-03-01T00:00:00.000Z'));
      const inEffect = (await policies.inEffect()).filter((p) => p.name.startsWith('effect-'));
      expect(inEffect.map((p) => `${p.name}@${p.version}`)).toEqual(['effect-a@3.0.0', 'effect-b@0.9.0']);
      expect(inEffect[0]!.content).toEqual(doc('effect-a', '3.0.0'));
      // One name's version in effect is the same as the list's.
      expect([await policies.versionInEffect('effect-a'), await policies.versionInEffect('effect-b'), await policies.versionInEffect('effect-none')]).toEqual(['3.0.0', '0.9.0', undefined]);
    });
  });

  describe('PendingChangeStore', () => {
    it('stores and reads back a change with every optional field absent or present', async () => {
      const bare = change({ subject: undefined });
      expect(await changes.create(bare, proposal())).toBe(true);
      expect(await changes.get(bare.id)).toEqual(bare);
      const full = change({ proposerStepUpKey: 'MCowBQYDK2VwAyEA-raw-key_0123456789abcdefghijk', reason: 'why', decider: 'x', decidedAt: '2026-01-01T00:00:00.000Z', rejectionReason: 'no', appliedAt: '2026-01-01T00:00:01.000Z', status: 'REJECTED' });
      expect(await changes.create(full, proposal())).toBe(true);
      expect(await changes.get(full.id)).toEqual(full);
      expect(await changes.get(randomUUID())).toBeUndefined();
    });

    it('keeps at most one pending change per kind and subject, also under concurrency', async () => {
      const subject = `exclusive-${randomUUID()}`;
      const results = await Promise.all([changes.create(change({ subject }), proposal()), changes2.create(change({ subject }), proposal()), changes.create(change({ subject }), proposal())]);
      expect(results.filter(Boolean)).toHaveLength(1);
      // Another kind, or no subject at all, is not limited.
      expect(await changes.create(change({ subject, kind: 'connector' }), proposal())).toBe(true);
      expect(await changes.create(change({ subject: undefined }), proposal())).toBe(true);
      expect(await changes.create(change({ subject: undefined }), proposal())).toBe(true);
      // Once the pending one is decided, a new one may be proposed.
      const [pending] = await changes.list({ kind: 'policy', subject, status: 'PENDING_APPROVAL' });
      await changes.decide(approve(pending!, 'bob'));
      expect(await changes.create(change({ subject }), proposal())).toBe(true);
    });

    it('lists by kind, status and subject, oldest first', async () => {
      const kind = `list-${randomUUID()}`.slice(0, 40);
      const a = change({ kind, createdAt: '2026-01-01T00:00:02.000Z' });
      const b = change({ kind, createdAt: '2026-01-01T00:00:01.000Z' });
      const c = change({ kind, createdAt: '2026-01-01T00:00:03.000Z' });
      for (const x of [a, b, c]) await changes.create(x, proposal());
      await changes.decide({ ...approve(c, 'bob'), decision: 'REJECTED', rejectionReason: 'no' });
      expect((await changes.list({ kind })).map((x) => x.id)).toEqual([b.id, a.id, c.id]);
      expect((await changes.list({ kind, status: 'PENDING_APPROVAL' })).map((x) => x.id)).toEqual([b.id, a.id]);
      expect(await changes.list({ kind, status: 'REJECTED' })).toEqual([
        expect.objectContaining({ id: c.id, status: 'REJECTED', decider: 'bob', rejectionReason: 'no' }),
      ]);
      expect((await changes.list({ kind, subject: a.subject })).map((x) => x.id)).toEqual([a.id]);
    });

    it('pages a kind\'s changes, oldest first, with the total of the status asked', async () => {
      const kind = `page-${randomUUID()}`.slice(0, 40);
      const made = Array.from({ length: 5 }, (_, i) => change({ kind, createdAt: `2026-01-01T00:00:0${i}.000Z` }));
      for (const x of made) await changes.create(x, proposal());
      await changes.decide({ ...approve(made[4]!, 'bob'), decision: 'REJECTED', rejectionReason: 'no' });
      const ids = made.map((x) => x.id);
      expect(await changes.page({ kind }, 1, 2)).toMatchObject({ page: 1, pageSize: 2, total: 5 });
      expect((await changes.page({ kind }, 2, 2)).items.map((x) => x.id)).toEqual(ids.slice(2, 4));
      expect((await changes.page({ kind }, 3, 2)).items.map((x) => x.id)).toEqual(ids.slice(4));
      expect(await changes.page({ kind }, 4, 2)).toMatchObject({ items: [], total: 5 });
      const pending = await changes.page({ kind, status: 'PENDING_APPROVAL' }, 1, 100);
      expect(pending).toMatchObject({ total: 4 });
      expect(pending.items.map((x) => x.id)).toEqual(ids.slice(0, 4));
    });

    it('decides by compare-and-set: of two simultaneous decisions (two connections) exactly one wins', async () => {
      for (let round = 0; round < 5; round++) {
        const c = change();
        await changes.create(c, proposal());
        const results = await Promise.all([changes.decide(approve(c, 'bob')), changes2.decide(approve(c, 'carol')), changes.decide({ ...approve(c, 'dave'), decision: 'REJECTED', rejectionReason: 'x' })]);
        expect(results.every((r) => r.nonceFresh)).toBe(true);
        const winners = results.filter((r) => r.decided);
        expect(winners).toHaveLength(1);
        const stored = await changes.get(c.id);
        expect(stored!.status).not.toBe('PENDING_APPROVAL');
        // Every caller sees the one decision that was made.
        for (const r of results) expect(r.change).toEqual(stored);
      }
    });

    it('accepts a nonce once, whatever change or kind it is used for, under concurrency', async () => {
      const shared = nonce();
      const targets = [change(), change(), change({ kind: 'connector', subject: undefined }), change()];
      for (const t of targets) await changes.create(t, proposal());
      const results = await Promise.all(targets.map((t, i) => (i % 2 === 0 ? changes : changes2).decide(approve(t, 'bob', { nonce: shared }))));
      expect(results.filter((r) => r.nonceFresh)).toHaveLength(1);
      expect(results.filter((r) => r.decided)).toHaveLength(1);
      // A refused nonce changed nothing.
      const statuses = await Promise.all(targets.map(async (t) => (await changes.get(t.id))!.status));
      expect(statuses.filter((s) => s === 'PENDING_APPROVAL')).toHaveLength(3);
    });

    it('keeps the nonce used when the compare-and-set loses, and for a change that does not exist', async () => {
      const c = change();
      await changes.create(c, proposal());
      await changes.decide(approve(c, 'bob'));
      const late = approve(c, 'carol');
      expect(await changes.decide(late)).toMatchObject({ nonceFresh: true, decided: false, change: { status: 'APPROVED', decider: 'bob' } });
      expect(await changes.decide({ ...late, id: randomUUID() })).toEqual({ nonceFresh: false, decided: false });
      const ghost = approve(change(), 'bob');
      expect(await changes.decide(ghost)).toEqual({ nonceFresh: true, decided: false, change: undefined });
      // The kind must match too.
      const other = change({ kind: 'connector', subject: undefined });
      await changes.create(other, proposal());
      expect(await changes.decide({ ...approve(other, 'bob'), kind: 'policy' })).toMatchObject({ nonceFresh: true, decided: false, change: undefined });
    });

    it('marks an approved change applied once, by the holder of its apply claim only', async () => {
      const c = change();
      await changes.create(c, proposal());
      const claim = { token: randomUUID(), until: '2999-01-01T00:00:00.000Z' };
      await changes.decide(approve(c, 'bob', { applyClaim: claim }));
      expect(await changes.get(c.id)).not.toHaveProperty('appliedAt');
      expect(await changes2.markApplied(c.id, '2026-05-01T00:00:00.000Z', randomUUID())).toBe(false);
      expect(await changes.markApplied(c.id, '2026-05-02T00:00:00.000Z', claim.token)).toBe(true);
      expect(await changes2.markApplied(c.id, '2026-05-03T00:00:00.000Z', claim.token)).toBe(false);
      expect(await changes.get(c.id)).toMatchObject({ status: 'APPROVED', appliedAt: '2026-05-02T00:00:00.000Z' });
    });

    it('gives the apply claim of an unapplied approval to one of many concurrent claims by its approver, once it is free', async () => {
      const now = '2026-05-01T12:00:00.000Z';
      const claimOf = (at = now) => ({ token: randomUUID(), until: new Date(Date.parse(at) + 60_000).toISOString() });
      const c = change();
      await changes.create(c, proposal());
      const held = claimOf();
      await changes.decide(approve(c, 'bob', { applyClaim: held }));
      const claim = (decider = 'bob', at = now, on = changes) => on.claimApply({ id: c.id, kind: c.kind, decider, claim: claimOf(at), now: at, event: governanceEvent('approve', decider, c.id) });
      // Held by the deciding request until its lease ends.
      expect(await claim('bob', '2026-05-01T12:01:00.000Z')).toBe(false);
      // Given back after a failure: one of twenty concurrent claims (two connections) wins.
      await changes2.releaseApply(c.id, randomUUID()); // not the holder: nothing changes
      expect(await claim()).toBe(false);
      await changes2.releaseApply(c.id, held.token);
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => claim('bob', now, i % 2 ? changes : changes2)));
      expect(results.filter(Boolean)).toHaveLength(1);
      // Its lease ran out (the process stopped): taken over, again by exactly one.
      const later = '2026-05-01T12:01:00.001Z';
      const again = await Promise.all(Array.from({ length: 20 }, (_, i) => claim('bob', later, i % 2 ? changes : changes2)));
      expect(again.filter(Boolean)).toHaveLength(1);
      // Never for another approver, another kind, a change not approved, or one applied.
      await changes.releaseApply(c.id, held.token);
      expect(await claim('carol', '2999-01-01T00:00:00.000Z')).toBe(false);
      expect(await changes.claimApply({ id: c.id, kind: 'connector', decider: 'bob', claim: claimOf(), now: '2999-01-01T00:00:00.000Z', event: governanceEvent('approve', 'bob', c.id) })).toBe(false);
      const pending = change();
      await changes.create(pending, proposal());
      expect(await changes.claimApply({ id: pending.id, kind: pending.kind, decider: 'bob', claim: claimOf(), now, event: governanceEvent('approve', 'bob', pending.id) })).toBe(false);
      const token = randomUUID();
      expect(await changes.claimApply({ id: c.id, kind: c.kind, decider: 'bob', claim: { token, until: '2999-01-01T00:00:00.000Z' }, now: '2999-01-01T00:00:00.000Z', event: governanceEvent('approve', 'bob', c.id) })).toBe(true);
      expect(await changes.markApplied(c.id, '2026-05-01T12:02:00.000Z', token)).toBe(true);
      expect(await claim('bob', '3000-01-01T00:00:00.000Z')).toBe(false);
      // The claim is the store's business: a change read back does not carry it.
      expect(Object.keys((await changes.get(c.id))!)).not.toEqual(expect.arrayContaining([expect.stringMatching(/claim/i)]));
    });

    it('stores each governance event with what it records, in one transaction: the event and its log leaf exist if and only if the change does', async () => {
      /** Which of these events are stored, and which are leaves of the transparency log. */
      const stored = async (...events: Signed<GovernanceEvent>[]) => {
        const ids = events.map((e) => e.eventId);
        const list = ids.map((_, i) => (factory.name === 'postgres' ? `$${i + 1}` : '?')).join(', ');
        const rows = (await ds.query(`SELECT event_id, body FROM audit_events WHERE event_id IN (${list})`, ids)) as { event_id: string; body: string }[];
        const leaves = (await ds.query(`SELECT record_id FROM transparency_log_leaves WHERE record_kind = 'audit-event' AND record_id IN (${list})`, ids)) as { record_id: string }[];
        for (const r of rows) expect(JSON.parse(r.body)).toEqual(events.find((e) => e.eventId === r.event_id));
        return { rows: rows.map((r) => r.event_id).sort(), leaves: leaves.map((r) => r.record_id).sort() };
      };
      const only = (...events: Signed<GovernanceEvent>[]) => {
        const ids = events.map((e) => e.eventId).sort();
        return { rows: ids, leaves: ids };
      };

      // A proposal: stored with its event; a refused one (a pending change of the subject exists) with neither.
      const subject = `atomic-${randomUUID()}`;
      const c = change({ subject });
      const [proposed, refusedProposal] = [proposal(), proposal()];
      expect(await changes.create(c, proposed)).toBe(true);
      expect(await changes2.create(change({ subject }), refusedProposal)).toBe(false);
      expect(await stored(proposed, refusedProposal)).toEqual(only(proposed));

      // A decision whose transaction fails after the compare-and-set (its event cannot be stored:
      // an id already used) leaves nothing: the change pending, the nonce unused, no event, no leaf.
      const failing = approve(c, 'bob', { event: { ...governanceEvent('approve', 'bob', c.id), eventId: proposed.eventId } });
      await expect(changes.decide(failing)).rejects.toThrow();
      expect((await changes.get(c.id))!.status).toBe('PENDING_APPROVAL');
      expect(await stored(proposed)).toEqual(only(proposed));
      const leavesBefore = Number(((await ds.query('SELECT COUNT(*) AS n FROM transparency_log_leaves')) as { n: string }[])[0]!.n);

      // Twenty concurrent decisions, two connections: one wins, with its event; the nineteen others store none.
      const attempts = Array.from({ length: 20 }, (_, i) => approve(c, i % 3 === 0 ? 'carol' : 'bob', i === 0 ? { nonce: failing.nonce } : {}));
      const results = await Promise.all(attempts.map((a, i) => (i % 2 ? changes : changes2).decide(a)));
      // The failed decision's nonce (attempt 0) was not consumed.
      expect(results.every((r) => r.nonceFresh)).toBe(true);
      expect(results.filter((r) => r.decided)).toHaveLength(1);
      const winner = attempts[results.findIndex((r) => r.decided)]!;
      expect(await stored(...attempts.map((a) => a.event))).toEqual(only(winner.event));
      expect((await changes.get(c.id))!.decider).toBe(winner.decider);
      // Exactly one leaf more: the winner's event.
      expect(Number(((await ds.query('SELECT COUNT(*) AS n FROM transparency_log_leaves')) as { n: string }[])[0]!.n)).toBe(leavesBefore + 1);
      // A reused nonce stores no event either.
      const reused = approve(c, 'bob', { nonce: winner.nonce });
      expect(await changes.decide(reused)).toEqual({ nonceFresh: false, decided: false });
      expect(await stored(reused.event)).toEqual({ rows: [], leaves: [] });
    });

    it('stores the completion event of an unapplied approval with the claim that completes it, and only then', async () => {
      const c = change();
      await changes.create(c, proposal());
      const held = { token: randomUUID(), until: '2026-05-01T12:01:00.000Z' };
      await changes.decide(approve(c, 'bob', { applyClaim: held }));
      const attempt = (now: string) => ({ id: c.id, kind: c.kind, decider: 'bob', claim: { token: randomUUID(), until: '2999-01-01T00:00:00.000Z' }, now, event: governanceEvent('approve', 'bob', c.id) });
      const early = attempt('2026-05-01T12:00:30.000Z');
      expect(await changes.claimApply(early)).toBe(false);
      const late = Array.from({ length: 10 }, () => attempt('2026-05-01T12:02:00.000Z'));
      const won = await Promise.all(late.map((a, i) => (i % 2 ? changes : changes2).claimApply(a)));
      expect(won.filter(Boolean)).toHaveLength(1);
      const ids = [early, ...late].map((a) => a.event.eventId);
      const list = ids.map((_, i) => (factory.name === 'postgres' ? `$${i + 1}` : '?')).join(', ');
      const rows = (await ds.query(`SELECT event_id FROM audit_events WHERE event_id IN (${list})`, ids)) as { event_id: string }[];
      expect(rows.map((r) => r.event_id)).toEqual([late[won.indexOf(true)]!.event.eventId]);
    });

    it('keeps the partial unique index of pending subjects after the apply-claim migration', async () => {
      const subject = `after-0006-${randomUUID()}`;
      expect(await changes.create(change({ subject }), proposal())).toBe(true);
      expect(await changes2.create(change({ subject }), proposal())).toBe(false);
    });

    it('keeps used nonces durably: a new connection after a restart still refuses them', async () => {
      const c = change();
      await changes.create(c, proposal());
      const used = approve(c, 'bob');
      await changes.decide(used);
      const reopened = createDataSource(db.target);
      await reopened.initialize();
      try {
        const c2 = change();
        const store = new TypeOrmPendingChangeStore(reopened);
        await store.create(c2, proposal());
        expect(await store.decide(approve(c2, 'bob', { nonce: used.nonce }))).toEqual({ nonceFresh: false, decided: false });
      } finally {
        await reopened.destroy();
      }
    });
  });
});
