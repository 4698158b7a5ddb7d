import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Every public signing key the service published, whatever provider held it (CONTRACT "Signed
 * records": keys that signed anything stay published). Rows are only ever added.
 */
export class SigningProviders1763684300000 implements MigrationInterface {
  name = 'SigningProviders1763684300000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'published_signing_keys',
        columns: [
          { name: 'key_id', type: 'varchar', length: '128', isPrimary: true },
          { name: 'alg', type: 'varchar', length: '16' },
          { name: 'public_key', type: 'text' },
          { name: 'provider', type: 'varchar', length: '16' },
          { name: 'published_at', type: 'varchar', length: '32' },
        ],
      }),
    );
    await q.createIndex('published_signing_keys', new TableIndex({ name: 'idx_published_signing_keys_published_at', columnNames: ['published_at', 'key_id'] }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('published_signing_keys');
  }
}
