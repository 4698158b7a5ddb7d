import { createHash, randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { DataSource } from 'typeorm';
import { createDataSource, migrate, MIGRATIONS, TypeOrmExecutionStore, TypeOrmStorageHealth } from '@ets/adapters-persistence';
import { EVERY_CALLER } from '@ets/domain';
import { STORAGE_TARGETS, type ProvisionedTarget } from '@ets/test-support';

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

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

  it('0013 numbers existing records by following the chain from the head, whatever their creation times, and scopes them by their claim', async () => {
    const before = MIGRATIONS.filter((m) => new m().name !== 'ReadScopeChainOrderInFlight1763684400000');
    expect(before).toHaveLength(MIGRATIONS.length - 1);
    const old = new DataSource({ ...createDataSource(db.target).options, migrations: before } as never);
    await old.initialize();
    await migrate(old);
    const pg = db.name === 'postgres';
    const p = (sql: string) => (pg ? sql.replace(/\?/g, (() => { let n = 0; return () => `$${++n}`; })()) : sql);

    // 230 linked records (more than one batch of reads and of writes) stored with creation times
    // that do not follow the chain (the bug of issue 9 item 7), and one record without executions.
    const ids = Array.from({ length: 230 }, () => randomUUID());
    let previous: string | null = null;
    for (const [i, id] of ids.entries()) {
      const chainHash = sha256(`${previous ?? ''}:${id}`);
      const body = JSON.stringify({ recordType: 'execution-trust-record', businessTransactionId: id, executions: [{ executionId: `e${i}`, previousChainHash: previous, chainHash, chainSignature: 's' }] });
      const at = new Date(Date.UTC(2025, 0, 1, 0, 0, (i * 7919) % 230)).toISOString();
      await old.query(p('INSERT INTO business_transactions (business_transaction_id, caller_id, outcome, created_at) VALUES (?, ?, ?, ?)'), [id, `caller-${i % 2}`, 'EXECUTED', at]);
      await old.query(p('INSERT INTO trust_records (business_transaction_id, body, created_at) VALUES (?, ?, ?)'), [id, body, at]);
      previous = chainHash;
    }
    await old.query(p('UPDATE execution_chain SET head_hash = ? WHERE id = 1'), [previous]);
    const recorded = randomUUID();
    await old.query(p('INSERT INTO business_transactions (business_transaction_id, caller_id, outcome, created_at) VALUES (?, ?, ?, ?)'), [recorded, 'caller-1', 'RECORDED', '2024-01-01T00:00:00.000Z']);
    await old.query(p('INSERT INTO trust_records (business_transaction_id, body, created_at) VALUES (?, ?, ?)'), [recorded, JSON.stringify({ businessTransactionId: recorded, executions: [] }), '2024-01-01T00:00:00.000Z']);
    await old.destroy();

    const ds = createDataSource(db.target);
    await ds.initialize();
    expect(await migrate(ds)).toEqual(['ReadScopeChainOrderInFlight1763684400000']);
    const rows = (await ds.query('SELECT business_transaction_id, caller_id, chain_position FROM trust_records')) as { business_transaction_id: string; caller_id: string; chain_position: string | number | null }[];
    const byId = new Map(rows.map((r) => [r.business_transaction_id, r]));
    expect(ids.map((id) => Number(byId.get(id)!.chain_position))).toEqual(ids.map((_, i) => i + 1));
    expect(byId.get(recorded)!.chain_position).toBeNull();
    expect(ids.map((id) => byId.get(id)!.caller_id)).toEqual(ids.map((_, i) => `caller-${i % 2}`));
    const [chain] = (await ds.query('SELECT head_position FROM execution_chain WHERE id = 1')) as { head_position: string | number }[];
    expect(Number(chain!.head_position)).toBe(230);

    const store = new TypeOrmExecutionStore(ds);
    const listed: string[] = [];
    for (const page of [1, 2, 3]) {
      for await (const text of (await store.listTrustRecordTexts(EVERY_CALLER, page, 100)).items) listed.push((JSON.parse(text) as { businessTransactionId: string }).businessTransactionId);
    }
    expect(listed).toEqual([...ids, recorded]);
    expect(await store.getTrustRecordText(recorded, { callerId: 'caller-0' })).toBeUndefined();
    expect(await store.getTrustRecordText(recorded, { callerId: 'caller-1' })).toBeDefined();
    await ds.destroy();
  });
});
