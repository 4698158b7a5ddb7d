import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { DataSource } from 'typeorm';
import { appendToLog, createDataSource, migrate, storeTransaction, type Run } from '@ets/adapters-persistence';
import { logRows, STORAGE_TARGETS, type ProvisionedTarget } from '@ets/test-support';

// The group commit of both stores (store-transaction.ts): the store transactions submitted in one
// turn of the event loop share one database transaction, yet each caller gets its own outcome: a
// job that fails is undone alone, whether it failed before writing, after writing, or with an error
// of the database itself (which on PostgreSQL aborts the whole transaction).

describe.each(STORAGE_TARGETS)('group commit on $name', (factory) => {
  let db: ProvisionedTarget;
  let ds: DataSource;
  const pg = factory.name === 'postgres';
  const insert = (run: Run, id: string) =>
    run(pg ? 'INSERT INTO handbook_leads (email_key, email, created_at) VALUES ($1, $1, $2)' : 'INSERT INTO handbook_leads (email_key, email, created_at) VALUES (?, ?, ?)', pg ? [id, 'now'] : [id, id, 'now']);
  const stored = async (): Promise<string[]> =>
    ((await ds.query('SELECT email_key FROM handbook_leads ORDER BY email_key')) as { email_key: string }[]).map((r) => r.email_key);
  const key = (i: number) => `k${String(i).padStart(3, '0')}`;

  beforeEach(async () => {
    db = await factory.provision();
    ds = createDataSource(db.target);
    await ds.initialize();
    await migrate(ds);
  });
  afterEach(async () => {
    await ds.destroy();
    await db.drop();
  });

  it('commits every job of a turn, and fails alone a job that throws after writing', async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) =>
        storeTransaction(ds, async (run) => {
          await insert(run, key(i));
          appendToLog(run, [{ kind: 'receipt', id: key(i), body: JSON.stringify({ i }) }]);
          if (i % 10 === 3) throw new Error(`job ${i} fails after writing`);
          return i;
        }),
      ),
    );
    const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [i] : []));
    expect(failed).toEqual([3, 13, 23, 33]);
    expect(results.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<number>).value)).toEqual(
      Array.from({ length: 40 }, (_, i) => i).filter((i) => i % 10 !== 3),
    );
    const kept = Array.from({ length: 40 }, (_, i) => i).filter((i) => i % 10 !== 3).map(key);
    expect(await stored()).toEqual(kept);
    // The log holds exactly the committed jobs' leaves, at dense indices.
    const rows = await logRows(ds);
    expect(rows.map((r) => r.index)).toEqual(kept.map((_, i) => i));
    expect(rows.map((r) => r.id).sort()).toEqual(kept);
  });

  it('fails alone a job the database refuses (a duplicate key), the others of its turn commit', async () => {
    await storeTransaction(ds, (run) => insert(run, key(5)));
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => storeTransaction(ds, (run) => insert(run, key(i)))));
    expect(results.flatMap((r, i) => (r.status === 'rejected' ? [i] : []))).toEqual([5]);
    expect(await stored()).toEqual(Array.from({ length: 20 }, (_, i) => key(i)));
  });

  it('fails alone a job that fails before writing anything, without undoing the others', async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        storeTransaction(ds, async (run) => {
          if (i % 4 === 0) throw new Error('refused before writing');
          await insert(run, key(i));
        }),
      ),
    );
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(5);
    expect(await stored()).toEqual(Array.from({ length: 20 }, (_, i) => i).filter((i) => i % 4 !== 0).map(key));
  });

  it('answers each caller only once its transaction is committed (a new connection sees it)', async () => {
    const other = createDataSource(db.target, { readOnly: pg });
    if (pg) await other.initialize();
    try {
      const reader = pg ? other : ds;
      await Promise.all(
        Array.from({ length: 10 }, async (_, i) => {
          await storeTransaction(ds, (run) => insert(run, key(i)));
          const [row] = (await reader.query(pg ? 'SELECT COUNT(*) AS n FROM handbook_leads WHERE email_key = $1' : 'SELECT COUNT(*) AS n FROM handbook_leads WHERE email_key = ?', [key(i)])) as { n: string | number }[];
          expect(Number(row!.n)).toBe(1);
        }),
      );
    } finally {
      if (other.isInitialized) await other.destroy();
    }
  });
});
