import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The first migration: the execution intent table exists from the very start (spec 4.1 /ready),
 * because no action may ever be released without a stored intent.
 */
export class Platform1763683200000 implements MigrationInterface {
  name = 'Platform1763683200000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'execution_intents',
        columns: [
          { name: 'business_transaction_id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'caller_id', type: 'varchar', length: '256', isNullable: true },
          { name: 'state', type: 'varchar', length: '16' },
          // The signed intent exactly as signed (text keeps the bytes the signature covers).
          { name: 'intent', type: 'text' },
          { name: 'status_detail', type: 'text', isNullable: true },
          // Internal release context used to rebuild a Trust Record; never returned.
          { name: 'release_context', type: 'text', isNullable: true },
          { name: 'created_at', type: 'varchar', length: '32' },
          { name: 'updated_at', type: 'varchar', length: '32' },
        ],
      }),
    );
    await q.createIndex('execution_intents', new TableIndex({ name: 'idx_execution_intents_state', columnNames: ['state'] }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('execution_intents');
  }
}
