import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource, migrate, TypeOrmNoticeOutbox, TypeOrmPendingChangeStore } from '@ets/adapters-persistence';
import type { OutboundNotice, PendingChange } from '@ets/domain';
import { governanceEvent, STORAGE_TARGETS, type ProvisionedTarget } from '@ets/test-support';

const T0 = Date.UTC(2026, 0, 1);
const at = (seconds: number): string => new Date(T0 + seconds * 1000).toISOString();

const change = (subject = `s-${randomUUID()}`): PendingChange => ({
  id: randomUUID(),
  kind: 'policy',
  subject,
  payload: { any: 1 },
  status: 'PENDING_APPROVAL',
  proposer: 'alice',
  createdAt: at(0),
});
const event = () => governanceEvent();
const notice = (createdAt = at(0), endpoint = 'https://hooks.example.com/a'): OutboundNotice => ({
  deliveryId: randomUUID(),
  messageId: `msg_${randomUUID()}`,
  endpoint,
  body: { type: 'pending.created', item: { kind: 'policy', id: 'c', summary: 'é ✓', consoleUrl: 'https://x/console#/items/policy/c' }, createdAt },
  createdAt,
});

describe.each(STORAGE_TARGETS)('notifications outbox on $name', (factory) => {
  let db: ProvisionedTarget;
  let ds: DataSource;
  let ds2: DataSource;
  let outbox: TypeOrmNoticeOutbox;
  /** PostgreSQL: a second connection pool (another instance). SQLite: the same store (its instances are processes). */
  let outbox2: TypeOrmNoticeOutbox;
  let changes: TypeOrmPendingChangeStore;
  const claim = (now: string, o = outbox, limit = 100, token = randomUUID()) => o.claimDue({ now, leaseUntil: new Date(Date.parse(now) + 60_000).toISOString(), token, limit }).then((items) => ({ token, items }));
  const rows = async () => (await ds.query('SELECT delivery_id, attempts, next_attempt_at, lease_token, last_error FROM pending_item_notices ORDER BY created_at, delivery_id')) as Record<string, unknown>[];

  beforeAll(async () => {
    db = await factory.provision();
    ds = createDataSource(db.target);
    await ds.initialize();
    await migrate(ds);
    ds2 = createDataSource(db.target);
    await ds2.initialize();
    outbox = new TypeOrmNoticeOutbox(ds);
    outbox2 = factory.name === 'postgres' ? new TypeOrmNoticeOutbox(ds2) : outbox;
    changes = new TypeOrmPendingChangeStore(ds);
  });
  afterAll(async () => {
    await ds2?.destroy();
    await ds?.destroy();
    await db?.drop();
  });
  const clear = () => ds.query('DELETE FROM pending_item_notices');

  it('stores a proposal\'s notices in its commit, and none for a proposal refused', async () => {
    await clear();
    const c = change();
    const mine = [notice(), notice(at(0), 'https://hooks.example.com/b')];
    expect(await changes.create(c, event(), mine)).toBe(true);
    // Same subject while the first is pending: refused, and nothing of it is stored.
    expect(await changes.create(change(c.subject), event(), [notice()])).toBe(false);
    const { items } = await claim(at(1));
    const byId = (x: { deliveryId: string }, y: { deliveryId: string }) => (x.deliveryId < y.deliveryId ? -1 : 1);
    expect(items).toEqual(mine.map((n) => ({ ...n, attempts: 0 })).sort(byId));
  });

  it('leases what is due to one claimer; delivered removes it, failed reschedules it; a stale token changes nothing', async () => {
    await clear();
    const [a, b] = [notice(at(10)), notice(at(20))];
    await changes.create(change(), event(), [a, b]);
    expect((await claim(at(5))).items).toEqual([]); // not due yet
    const first = await claim(at(15));
    expect(first.items.map((n) => n.deliveryId)).toEqual([a.deliveryId]);
    const second = await claim(at(25));
    expect(second.items.map((n) => n.deliveryId)).toEqual([b.deliveryId]); // a is leased
    await outbox.delivered(a.deliveryId, second.token); // not its lease
    await outbox.failed(a.deliveryId, second.token, { attempts: 9, nextAttemptAt: null, error: 'x' });
    expect(await rows()).toEqual([
      expect.objectContaining({ delivery_id: a.deliveryId, lease_token: first.token }),
      expect.objectContaining({ delivery_id: b.deliveryId, lease_token: second.token }),
    ]);
    await outbox.delivered(a.deliveryId, first.token);
    await outbox.failed(b.deliveryId, second.token, { attempts: 1, nextAttemptAt: at(100), error: 'answered 500' });
    expect(await rows()).toEqual([{ delivery_id: b.deliveryId, attempts: 1, next_attempt_at: at(100), lease_token: null, last_error: 'answered 500' }]);
    expect((await claim(at(99))).items).toEqual([]);
    const again = await claim(at(100));
    expect(again.items).toEqual([{ ...b, attempts: 1 }]);
    // A lease that ran out (its worker stopped) is taken over.
    const takeover = await claim(at(100 + 61));
    expect(takeover.items.map((n) => n.deliveryId)).toEqual([b.deliveryId]);
    await outbox.failed(b.deliveryId, takeover.token, { attempts: 11, nextAttemptAt: null, error: 'gave up' });
    expect((await claim(at(1_000_000))).items).toEqual([]); // given up: kept, never due
    expect(await rows()).toEqual([{ delivery_id: b.deliveryId, attempts: 11, next_attempt_at: null, lease_token: null, last_error: 'gave up' }]);
  });

  it('gives each of many due notices to exactly one of many concurrent claimers (two connections on PostgreSQL)', async () => {
    await clear();
    const all = Array.from({ length: 60 }, (_, i) => notice(at(i % 7)));
    for (let i = 0; i < all.length; i += 6) await changes.create(change(), event(), all.slice(i, i + 6));
    const claims = await Promise.all(Array.from({ length: 12 }, (_, i) => claim(at(1000), i % 2 ? outbox2 : outbox, 7)));
    const taken = claims.flatMap((c) => c.items.map((n) => n.deliveryId));
    expect(taken.length).toBe(new Set(taken).size);
    const rest = await claim(at(1000), outbox, 100);
    expect([...taken, ...rest.items.map((n) => n.deliveryId)].sort()).toEqual(all.map((n) => n.deliveryId).sort());
  });
});
