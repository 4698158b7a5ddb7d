import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { createDataSource, migrate, MIGRATIONS, TypeOrmStorageHealth } from '@ets/adapters-persistence';
import { STORAGE_TARGETS, type ProvisionedTarget } from '@ets/test-support';

describe.each(STORAGE_TARGETS)('migrations and readiness on $name', (factory) => {
  let db: ProvisionedTarget;
  beforeEach(async () => {
    db = await factory.provision();
  });
  afterEach(async () => {
    await db.drop();
  });

  it('applies every migration once, in order, and a restart applies none twice', async () => {
    const first = createDataSource(db.target);
    await first.initialize();
    expect(await migrate(first)).toEqual(MIGRATIONS.map((m) => new m().name));
    await first.destroy();

    const second = createDataSource(db.target);
    await second.initialize();
    expect(await migrate(second)).toEqual([]);
    const rows: { name: string }[] = await second.query('SELECT name FROM migrations ORDER BY id');
    expect(rows.map((r) => r.name)).toEqual(MIGRATIONS.map((m) => new m().name));
    await second.destroy();
  });

  it('is ready once execution_intents exists, and says why not when it is missing', async () => {
    const ds = createDataSource(db.target);
    await ds.initialize();
    const health = new TypeOrmStorageHealth(ds);
    expect(await health.readiness()).toEqual({ ready: false, reason: 'table execution_intents is missing' });
    await migrate(ds);
    expect(await health.readiness()).toEqual({ ready: true });
    await ds.destroy();
    expect(await health.readiness()).toEqual({ ready: false, reason: 'database connection is not open' });
  });
});
