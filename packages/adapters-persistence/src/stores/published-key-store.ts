import type { DataSource } from 'typeorm';
import type { PublishedKeyStore, PublishedSigningKey } from '@ets/domain';
import { PublishedSigningKeyEntity } from '../entities/published-signing-key.js';
import { insertOrIgnore } from './serial-writes.js';

/**
 * Published signing keys in `published_signing_keys`, keyed by keyId. The insert ignores a key
 * already there atomically (SQLite and PostgreSQL: ON CONFLICT DO NOTHING), so instances that
 * start together with the same key store it once and its first record is kept. On SQLite the
 * insert waits its turn in the writer's queue (`insertOrIgnore`), as every other write does.
 */
export class TypeOrmPublishedKeyStore implements PublishedKeyStore {
  constructor(private readonly ds: DataSource) {}

  async remember(keys: readonly PublishedSigningKey[]): Promise<void> {
    if (keys.length === 0) return;
    await insertOrIgnore(
      this.ds,
      PublishedSigningKeyEntity,
      keys.map(({ keyId, alg, publicKey, provider, publishedAt }) => ({ keyId, alg, publicKey, provider, publishedAt })),
    );
  }

  async list(): Promise<PublishedSigningKey[]> {
    const rows = await this.ds.getRepository(PublishedSigningKeyEntity).find({ order: { publishedAt: 'ASC', keyId: 'ASC' } });
    return rows.map((row) => ({
      keyId: row.keyId,
      alg: row.alg as PublishedSigningKey['alg'],
      publicKey: row.publicKey,
      provider: row.provider as PublishedSigningKey['provider'],
      publishedAt: row.publishedAt,
    }));
  }
}
