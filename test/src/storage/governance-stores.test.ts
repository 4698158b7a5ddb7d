import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource, migrate, TypeOrmPendingChangeStore, TypeOrmPolicyStore } from '@ets/adapters-persistence';
import type { DecisionRequest, PendingChange, PolicyDocument, PolicyVersion } from '@ets/domain';
import { STORAGE_TARGETS, type ProvisionedTarget } from '@ets/test-support';

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

const approve = (c: PendingChange, decider: string, over: Partial<DecisionRequest> = {}): DecisionRequest => ({
  id: c.id,
  kind: c.kind,
  decision: 'APPROVED',
  decider,
  decidedAt: new Date().toISOString(),
  nonce: nonce(),
  ...over,
});

describe.each(STORAGE_TARGETS)('governance stores on $name', (factory) => {
  let db: ProvisionedTarget;
  let ds: DataSource;
  /** A second connection (pool) to the same database: another process, as far as the database can tell. */
  let ds2: DataSource;
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
    changes2 = new TypeOrmPendingChangeStore(ds2);
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
    });
  });

  describe('PendingChangeStore', () => {
    it('stores and reads back a change with every optional field absent or present', async () => {
      const bare = change({ subject: undefined });
      expect(await changes.create(bare)).toBe(true);
      expect(await changes.get(bare.id)).toEqual(bare);
      const full = change({ reason: 'why', decider: 'x', decidedAt: '2026-01-01T00:00:00.000Z', rejectionReason: 'no', appliedAt: '2026-01-01T00:00:01.000Z', status: 'REJECTED' });
      expect(await changes.create(full)).toBe(true);
      expect(await changes.get(full.id)).toEqual(full);
      expect(await changes.get(randomUUID())).toBeUndefined();
    });

    it('keeps at most one pending change per kind and subject, also under concurrency', async () => {
      const subject = `exclusive-${randomUUID()}`;
      const results = await Promise.all([changes.create(change({ subject })), changes2.create(change({ subject })), changes.create(change({ subject }))]);
      expect(results.filter(Boolean)).toHaveLength(1);
      // Another kind, or no subject at all, is not limited.
      expect(await changes.create(change({ subject, kind: 'connector' }))).toBe(true);
      expect(await changes.create(change({ subject: undefined }))).toBe(true);
      expect(await changes.create(change({ subject: undefined }))).toBe(true);
      // Once the pending one is decided, a new one may be proposed.
      const [pending] = await changes.list({ kind: 'policy', subject, status: 'PENDING_APPROVAL' });
      await changes.decide(approve(pending!, 'bob'));
      expect(await changes.create(change({ subject }))).toBe(true);
    });

    it('lists by kind, status and subject, oldest first', async () => {
      const kind = `list-${randomUUID()}`.slice(0, 40);
      const a = change({ kind, createdAt: '2026-01-01T00:00:02.000Z' });
      const b = change({ kind, createdAt: '2026-01-01T00:00:01.000Z' });
      const c = change({ kind, createdAt: '2026-01-01T00:00:03.000Z' });
      for (const x of [a, b, c]) await changes.create(x);
      await changes.decide({ ...approve(c, 'bob'), decision: 'REJECTED', rejectionReason: 'no' });
      expect((await changes.list({ kind })).map((x) => x.id)).toEqual([b.id, a.id, c.id]);
      expect((await changes.list({ kind, status: 'PENDING_APPROVAL' })).map((x) => x.id)).toEqual([b.id, a.id]);
      expect(await changes.list({ kind, status: 'REJECTED' })).toEqual([
        expect.objectContaining({ id: c.id, status: 'REJECTED', decider: 'bob', rejectionReason: 'no' }),
      ]);
      expect((await changes.list({ kind, subject: a.subject })).map((x) => x.id)).toEqual([a.id]);
    });

    it('decides by compare-and-set: of two simultaneous decisions (two connections) exactly one wins', async () => {
      for (let round = 0; round < 5; round++) {
        const c = change();
        await changes.create(c);
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
      for (const t of targets) await changes.create(t);
      const results = await Promise.all(targets.map((t, i) => (i % 2 === 0 ? changes : changes2).decide(approve(t, 'bob', { nonce: shared }))));
      expect(results.filter((r) => r.nonceFresh)).toHaveLength(1);
      expect(results.filter((r) => r.decided)).toHaveLength(1);
      // A refused nonce changed nothing.
      const statuses = await Promise.all(targets.map(async (t) => (await changes.get(t.id))!.status));
      expect(statuses.filter((s) => s === 'PENDING_APPROVAL')).toHaveLength(3);
    });

    it('keeps the nonce used when the compare-and-set loses, and for a change that does not exist', async () => {
      const c = change();
      await changes.create(c);
      await changes.decide(approve(c, 'bob'));
      const late = approve(c, 'carol');
      expect(await changes.decide(late)).toMatchObject({ nonceFresh: true, decided: false, change: { status: 'APPROVED', decider: 'bob' } });
      expect(await changes.decide({ ...late, id: randomUUID() })).toEqual({ nonceFresh: false, decided: false });
      const ghost = approve(change(), 'bob');
      expect(await changes.decide(ghost)).toEqual({ nonceFresh: true, decided: false, change: undefined });
      // The kind must match too.
      const other = change({ kind: 'connector', subject: undefined });
      await changes.create(other);
      expect(await changes.decide({ ...approve(other, 'bob'), kind: 'policy' })).toMatchObject({ nonceFresh: true, decided: false, change: undefined });
    });

    it('marks an approved change applied once (the first time is kept)', async () => {
      const c = change();
      await changes.create(c);
      await changes.decide(approve(c, 'bob'));
      expect(await changes.get(c.id)).not.toHaveProperty('appliedAt');
      await changes.markApplied(c.id, '2026-05-01T00:00:00.000Z');
      await changes2.markApplied(c.id, '2026-05-02T00:00:00.000Z');
      expect(await changes.get(c.id)).toMatchObject({ status: 'APPROVED', appliedAt: '2026-05-01T00:00:00.000Z' });
    });

    it('keeps used nonces durably: a new connection after a restart still refuses them', async () => {
      const c = change();
      await changes.create(c);
      const used = approve(c, 'bob');
      await changes.decide(used);
      const reopened = createDataSource(db.target);
      await reopened.initialize();
      try {
        const c2 = change();
        const store = new TypeOrmPendingChangeStore(reopened);
        await store.create(c2);
        expect(await store.decide(approve(c2, 'bob', { nonce: used.nonce }))).toEqual({ nonceFresh: false, decided: false });
      } finally {
        await reopened.destroy();
      }
    });
  });
});
