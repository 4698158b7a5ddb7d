import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { DataSource } from 'typeorm';
import { createDataSource, migrate, TypeOrmPublishedKeyStore } from '@ets/adapters-persistence';
import type { PublishedSigningKey } from '@ets/domain';
import { STORAGE_TARGETS, type ProvisionedTarget } from '@ets/test-support';

const key = (n: number, over: Partial<PublishedSigningKey> = {}): PublishedSigningKey => ({
  keyId: `ed25519-${String(n).padStart(43, 'A')}`,
  alg: 'Ed25519',
  publicKey: `x${n}`,
  provider: 'disk',
  publishedAt: `2026-01-0${n}T00:00:00.000Z`,
  ...over,
});

describe.each(STORAGE_TARGETS)('published signing keys on $name', (factory) => {
  let db: ProvisionedTarget;
  let ds: DataSource;
  let store: TypeOrmPublishedKeyStore;
  beforeEach(async () => {
    db = await factory.provision();
    ds = createDataSource(db.target);
    await ds.initialize();
    await migrate(ds);
    store = new TypeOrmPublishedKeyStore(ds);
  });
  afterEach(async () => {
    await ds.destroy();
    await db.drop();
  });

  it('remembers keys oldest first, keeping the first record of a key published again', async () => {
    await store.remember([key(2, { provider: 'env' })]);
    await store.remember([key(1), key(2, { provider: 'pkcs11', publishedAt: '2026-02-01T00:00:00.000Z' })]);
    await store.remember([]);
    expect(await store.list()).toEqual([key(1), key(2, { provider: 'env' })]);
  });

  it('holds an ML-DSA-65 public key whole', async () => {
    const pq = key(3, { keyId: `mldsa65-${'B'.repeat(43)}`, alg: 'ML-DSA-65', publicKey: 'A'.repeat(2603) });
    await store.remember([pq]);
    expect(await store.list()).toEqual([pq]);
  });

  it('stores a key once when instances starting together publish it at the same moment', async () => {
    const others = [1, 2, 3, 4].map(() => new TypeOrmPublishedKeyStore(ds));
    await Promise.all([store, ...others].map((s, i) => s.remember([key(1, { provider: i % 2 ? 'env' : 'disk' }), key(4)])));
    const listed = await store.list();
    expect(listed.map((k) => k.keyId)).toEqual([key(1).keyId, key(4).keyId]);
  });
});
