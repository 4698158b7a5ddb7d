import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * External connector registrations (spec 2.5). A row is inserted when a register change is
 * approved (`registration_id` = that change's id) and ended, never deleted, when a revoke change
 * is approved. The partial unique index keeps at most one active registration per capability,
 * whoever races, on both databases.
 */
export class ExternalConnectors1763684000000 implements MigrationInterface {
  name = 'ExternalConnectors1763684000000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'external_connectors',
        columns: [
          { name: 'registration_id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'capability', type: 'varchar', length: '128' },
          { name: 'endpoint', type: 'varchar', length: '2048' },
          { name: 'policy_name', type: 'varchar', length: '128' },
          // JSON array of parameter names.
          { name: 'forwarded_parameters', type: 'text' },
          { name: 'timeout_ms', type: 'integer' },
          { name: 'proposer', type: 'varchar', length: '256' },
          { name: 'approved_by', type: 'varchar', length: '256' },
          { name: 'registered_at', type: 'varchar', length: '32' },
          { name: 'revoked_at', type: 'varchar', length: '32', isNullable: true },
          { name: 'revoke_change_id', type: 'varchar', length: '64', isNullable: true },
        ],
      }),
    );
    await q.createIndex(
      'external_connectors',
      new TableIndex({ name: 'uq_external_connectors_active_capability', columnNames: ['capability'], isUnique: true, where: 'revoked_at IS NULL' }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('external_connectors');
  }
}
