import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Sessions of the approvers' console (CONTRACT "Approvers' console"), in the database so that a
 * session made on one instance works on every instance behind a load balancer. A row holds a hash
 * of the session id only; `expires_at` (indexed) lets expired sessions be removed in one statement.
 */
export class ConsoleSessions1763685200000 implements MigrationInterface {
  name = 'ConsoleSessions1763685200000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'console_sessions',
        columns: [
          { name: 'id_hash', type: 'varchar', length: '64', isPrimary: true },
          { name: 'caller_id', type: 'varchar', length: '256' },
          { name: 'key_ref', type: 'varchar', length: '64' },
          { name: 'created_at', type: 'varchar', length: '32' },
          { name: 'expires_at', type: 'varchar', length: '32' },
          { name: 'ends_at', type: 'varchar', length: '32' },
        ],
      }),
    );
    await q.createIndex('console_sessions', new TableIndex({ name: 'idx_console_sessions_expires', columnNames: ['expires_at'] }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('console_sessions');
  }
}
