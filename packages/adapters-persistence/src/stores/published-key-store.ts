import type { DataSource } from 'typeorm';
import type { PublishedKeyStore, PublishedSigningKey } from '@ets/domain';
import { PublishedSigningKeyEntity } from '../entities/published-signing-key.js';

/**
 * Published signing keys in `published_signing_keys`, keyed by keyId. The insert ignores a key
 * already there atomically (SQLite and PostgreSQL: ON CONFLICT DO NOTHING), so instances that
 * start together with the same key store it once and its first record is kept.
 */
export class TypeOrmPublishedKeyStore implements PublishedKeyStore {
  constructor(private readonly ds: DataSource) {}

  async remember(keys: readonly PublishedSigningKey[]): Promise<void> {
    if (keys.length === 0) return;
    await this.ds
      .createQueryBuilder()
      .insert()
      .into(PublishedSigningKeyEntity)
      .values(keys.map(({ keyId, alg, publicKey, provider, publishedAt }) => ({ keyId, alg, publicKey, provider, publishedAt })))
      .orIgnore()
      .execute();
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
