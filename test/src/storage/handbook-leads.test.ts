import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { DataSource } from 'typeorm';
import { createDataSource, migrate, TypeOrmHandbookLeadStore } from '@ets/adapters-persistence';
import { STORAGE_TARGETS, type ProvisionedTarget } from '@ets/test-support';

const at = new Date('2026-01-02T03:04:05.000Z');

describe.each(STORAGE_TARGETS)('handbook lead store on $name', (factory) => {
  let db: ProvisionedTarget;
  let ds: DataSource;
  let store: TypeOrmHandbookLeadStore;
  beforeEach(async () => {
    db = await factory.provision();
    ds = createDataSource(db.target);
    await ds.initialize();
    await migrate(ds);
    store = new TypeOrmHandbookLeadStore(ds);
  });
  afterEach(async () => {
    await ds.destroy();
    await db.drop();
  });

  const rows = (): Promise<{ email_key: string; email: string; created_at: string }[]> =>
    ds.query('SELECT email_key, email, created_at FROM handbook_leads ORDER BY email_key');

  it('stores a new address once, keyed by its lower-cased form, keeping the first casing', async () => {
    expect(await store.add('Ada.Lovelace@Example.org', at)).toBe(true);
    expect(await store.add('ada.lovelace@example.org', new Date(at.getTime() + 1000))).toBe(false);
    expect(await store.add('ADA.LOVELACE@EXAMPLE.ORG', at)).toBe(false);
    expect(await store.add('grace@example.org', at)).toBe(true);
    expect(await rows()).toEqual([
      { email_key: 'ada.lovelace@example.org', email: 'Ada.Lovelace@Example.org', created_at: at.toISOString() },
      { email_key: 'grace@example.org', email: 'grace@example.org', created_at: at.toISOString() },
    ]);
  });

  it('stores exactly one row, and reports exactly one add as new, under concurrent adds in any casing', async () => {
    const variants = Array.from({ length: 20 }, (_, i) =>
      [...'race@example.org'].map((c, j) => ((i >> j % 5) & 1 ? c.toUpperCase() : c)).join(''),
    );
    const results = await Promise.all(variants.map((email) => store.add(email, at)));
    expect(results.filter((r) => r)).toHaveLength(1);
    const stored = await rows();
    expect(stored).toHaveLength(1);
    expect(stored[0]!.email_key).toBe('race@example.org');
    expect(variants).toContain(stored[0]!.email);
  });
});
