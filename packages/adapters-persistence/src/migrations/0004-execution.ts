import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Storage of the execution pipeline (spec 2.3, 2.4, 4.3.1; CONTRACT "Execution chain"):
 * - `business_transactions`: the claim of a businessTransactionId, the only idempotency mechanism;
 *   every stored record is inserted in the same transaction as its claim.
 * - `trust_records`, `refusal_records`: the signed records, as the exact JSON text that was signed.
 * - `execution_chain`: the one head of the deployment's execution chain, locked by every finalize.
 * `execution_intents` (0001) keeps the signed intents and their state.
 */
export class Execution1763683500000 implements MigrationInterface {
  name = 'Execution1763683500000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'business_transactions',
        columns: [
          { name: 'business_transaction_id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'caller_id', type: 'varchar', length: '256' },
          { name: 'outcome', type: 'varchar', length: '16' },
          { name: 'created_at', type: 'varchar', length: '32' },
        ],
      }),
    );
    // GET /transactions pages newest first: (created_at DESC, id DESC).
    await q.createIndex(
      'business_transactions',
      new TableIndex({ name: 'idx_business_transactions_created', columnNames: ['created_at', 'business_transaction_id'] }),
    );

    for (const name of ['trust_records', 'refusal_records']) {
      await q.createTable(
        new Table({
          name,
          columns: [
            { name: 'business_transaction_id', type: 'varchar', length: '64', isPrimary: true },
            // The signed record exactly as signed (JSON text; never re-serialized).
            { name: 'body', type: 'text' },
            { name: 'created_at', type: 'varchar', length: '32' },
          ],
        }),
      );
    }
    // GET /trust-records pages newest first.
    await q.createIndex('trust_records', new TableIndex({ name: 'idx_trust_records_created', columnNames: ['created_at', 'business_transaction_id'] }));

    await q.createTable(
      new Table({
        name: 'execution_chain',
        columns: [
          // Always 1: one chain per deployment.
          { name: 'id', type: 'integer', isPrimary: true },
          // chainHash of the deployment's latest execution; null before the first.
          { name: 'head_hash', type: 'varchar', length: '64', isNullable: true },
          { name: 'updated_at', type: 'varchar', length: '32' },
        ],
      }),
    );
    await q.query(`INSERT INTO execution_chain (id, head_hash, updated_at) VALUES (1, NULL, '${new Date().toISOString()}')`);

    // An intent stored before claims existed still holds its id.
    await q.query(
      `INSERT INTO business_transactions (business_transaction_id, caller_id, outcome, created_at)
       SELECT business_transaction_id, COALESCE(caller_id, ''), 'EXECUTING', created_at FROM execution_intents`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('execution_chain');
    await q.dropTable('refusal_records');
    await q.dropTable('trust_records');
    await q.dropTable('business_transactions');
  }
}
