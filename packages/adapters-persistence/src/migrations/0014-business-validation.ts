import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Business validation (spec 1.7-1.8, 9.8):
 * - `business_signal_sources`: registered sources, one row per approved register change
 *   (`registration_id` = that change's id), ended (never deleted) by an approved revoke; the
 *   partial unique index keeps at most one active source per name, whoever races.
 * - `authority_grants`: one row per approved grant change (`grant_id` = its id); revoking sets
 *   `revoked_at`; expired grants stay (they answer AUTHORITY_EXPIRED). Times are ISO 8601 UTC of one
 *   format, compared as text.
 * - `single_use_ids`: ids accepted once (signed approvals, source nonces): the primary key makes the
 *   insert of an id atomic on both databases, so of concurrent uses exactly one is the first.
 */
export class BusinessValidation1763684500000 implements MigrationInterface {
  name = 'BusinessValidation1763684500000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'business_signal_sources',
        columns: [
          { name: 'registration_id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'name', type: 'varchar', length: '64' },
          { name: 'endpoint', type: 'varchar', length: '2048' },
          { name: 'public_key', type: 'text', isNullable: true },
          { name: 'key_id', type: 'varchar', length: '128', isNullable: true },
          { name: 'proposer', type: 'varchar', length: '256' },
          { name: 'approved_by', type: 'varchar', length: '256' },
          { name: 'registered_at', type: 'varchar', length: '32' },
          { name: 'revoked_at', type: 'varchar', length: '32', isNullable: true },
          { name: 'revoke_change_id', type: 'varchar', length: '64', isNullable: true },
        ],
      }),
    );
    await q.createIndex(
      'business_signal_sources',
      new TableIndex({ name: 'uq_business_signal_sources_active_name', columnNames: ['name'], isUnique: true, where: 'revoked_at IS NULL' }),
    );

    await q.createTable(
      new Table({
        name: 'authority_grants',
        columns: [
          { name: 'grant_id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'grantee', type: 'varchar', length: '256' },
          { name: 'action', type: 'varchar', length: '128' },
          // JSON array of {path, min?, max?, oneOf?}.
          { name: 'limits', type: 'text' },
          { name: 'expires_at', type: 'varchar', length: '32' },
          { name: 'proposer', type: 'varchar', length: '256' },
          { name: 'approved_by', type: 'varchar', length: '256' },
          { name: 'granted_at', type: 'varchar', length: '32' },
          { name: 'revoked_at', type: 'varchar', length: '32', isNullable: true },
          { name: 'revoke_change_id', type: 'varchar', length: '64', isNullable: true },
        ],
      }),
    );
    await q.createIndex('authority_grants', new TableIndex({ name: 'ix_authority_grants_grantee_action', columnNames: ['grantee', 'action'] }));

    await q.createTable(
      new Table({
        name: 'single_use_ids',
        columns: [
          { name: 'scope', type: 'varchar', length: '32', isPrimary: true },
          { name: 'id', type: 'varchar', length: '512', isPrimary: true },
          { name: 'used_at', type: 'varchar', length: '32' },
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('single_use_ids');
    await q.dropTable('authority_grants');
    await q.dropTable('business_signal_sources');
  }
}
