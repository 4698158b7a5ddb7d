import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Verifications and Receipts (spec 2.3, 4.1): appended, never changed. `body` is the signed object
 * as JSON text (never re-serialized). `seq` orders rows inserted at the same `created_at`, so
 * "the latest" (newest `created_at`, then the later insert) is deterministic on both databases.
 */
export class Verification1763683600000 implements MigrationInterface {
  name = 'Verification1763683600000';

  async up(q: QueryRunner): Promise<void> {
    for (const name of ['verifications', 'receipts']) {
      await q.createTable(
        new Table({
          name,
          columns: [
            { name: 'seq', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
            // verificationId / receiptId
            { name: 'id', type: 'varchar', length: '64' },
            { name: 'business_transaction_id', type: 'varchar', length: '64' },
            // verifiedAt / issuedAt
            { name: 'created_at', type: 'varchar', length: '32' },
            { name: 'body', type: 'text' },
          ],
        }),
      );
      await q.createIndex(name, new TableIndex({ name: `uq_${name}_id`, columnNames: ['id'], isUnique: true }));
      await q.createIndex(name, new TableIndex({ name: `idx_${name}_latest`, columnNames: ['business_transaction_id', 'created_at', 'seq'] }));
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('receipts');
    await q.dropTable('verifications');
  }
}
