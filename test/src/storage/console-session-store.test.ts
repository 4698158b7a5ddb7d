import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { TypeOrmConsoleSessionStore } from '@ets/adapters-persistence';
import type { ConsoleSessionRow } from '@ets/domain';
import { STORAGE_TARGETS, twoConnections } from '@ets/test-support';

const row = (over: Partial<ConsoleSessionRow> = {}): ConsoleSessionRow => ({
  idHash: randomBytes(32).toString('hex'),
  callerId: 'alice',
  keyRef: randomBytes(32).toString('hex'),
  createdAt: '2026-03-01T09:00:00.000Z',
  expiresAt: '2026-03-01T09:30:00.000Z',
  endsAt: '2026-03-01T21:00:00.000Z',
  ...over,
});

/** The console's session store (ConsoleSessionStore) on each database, from two connections: what two instances share. */
describe.each(STORAGE_TARGETS)('console session store on $name', (factory) => {
  let close: () => Promise<void>;
  let one: TypeOrmConsoleSessionStore;
  let other: TypeOrmConsoleSessionStore;
  beforeAll(async () => {
    const db = await twoConnections(factory);
    close = db.close;
    [one, other] = db.sources.map((ds) => new TypeOrmConsoleSessionStore(ds)) as [TypeOrmConsoleSessionStore, TypeOrmConsoleSessionStore];
  });
  afterAll(async () => {
    await close?.();
  });

  it('finds a session made on the other connection; an unknown one is undefined', async () => {
    const r = row();
    await one.create(r);
    expect(await other.find(r.idHash)).toEqual(r);
    expect(await other.find('0'.repeat(64))).toBeUndefined();
  });

  it('moves the idle expiry forward only, whatever order concurrent extensions land in', async () => {
    const r = row();
    await one.create(r);
    const times = ['2026-03-01T09:31:00.000Z', '2026-03-01T09:45:00.000Z', '2026-03-01T09:40:00.000Z', '2026-03-01T09:20:00.000Z'];
    await Promise.all(times.map((t, i) => (i % 2 ? one : other).extend(r.idHash, t)));
    expect((await one.find(r.idHash))?.expiresAt).toBe('2026-03-01T09:45:00.000Z');
  });

  it('removes one session at once for every connection, and every expired one in one go', async () => {
    const gone = row();
    await one.create(gone);
    await other.remove(gone.idHash);
    expect(await one.find(gone.idHash)).toBeUndefined();
    const expired = [row({ expiresAt: '2026-03-01T08:00:00.000Z' }), row({ expiresAt: '2026-03-01T08:59:59.999Z' }), row({ expiresAt: '2026-03-01T09:00:00.000Z' })];
    const live = row({ expiresAt: '2026-03-01T09:00:00.001Z' });
    for (const r of [...expired, live]) await one.create(r);
    expect(await other.removeExpired('2026-03-01T09:00:00.000Z')).toBeGreaterThanOrEqual(3);
    for (const r of expired) expect(await one.find(r.idHash)).toBeUndefined();
    expect(await one.find(live.idHash)).toEqual(live);
  });
});
