import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Maker-checker governance and the policy store:
 * - `pending_changes`: proposed changes of every kind (policy, and later connectors, grants,
 *   signal sources), with their decision. At most one PENDING_APPROVAL change per (kind, subject),
 *   enforced by a partial unique index so simultaneous proposals cannot both be stored.
 * - `step_up_nonces`: every step-up envelope nonce ever accepted, across all kinds of change; the
 *   primary key makes a nonce single use, and it is inserted in the same transaction as the
 *   decision it authorizes.
 * - `policy_versions`: published policy versions. Rows are only ever inserted (a published version
 *   never changes); `seq` orders versions approved at the same instant.
 */
export class Governance1763683400000 implements MigrationInterface {
  name = 'Governance1763683400000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'pending_changes',
        columns: [
          { name: 'id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'kind', type: 'varchar', length: '64' },
          { name: 'subject', type: 'varchar', length: '256', isNullable: true },
          { name: 'status', type: 'varchar', length: '32' },
          // The kind-specific proposal (JSON).
          { name: 'payload', type: 'text' },
          { name: 'proposer', type: 'varchar', length: '256' },
          { name: 'reason', type: 'text', isNullable: true },
          { name: 'created_at', type: 'varchar', length: '32' },
          { name: 'decider', type: 'varchar', length: '256', isNullable: true },
          { name: 'decided_at', type: 'varchar', length: '32', isNullable: true },
          { name: 'rejection_reason', type: 'text', isNullable: true },
          // Set once an approved change took effect; null on an approval not (yet) applied.
          { name: 'applied_at', type: 'varchar', length: '32', isNullable: true },
        ],
      }),
    );
    await q.createIndex('pending_changes', new TableIndex({ name: 'idx_pending_changes_kind_status', columnNames: ['kind', 'status', 'created_at'] }));
    await q.createIndex(
      'pending_changes',
      new TableIndex({
        name: 'uq_pending_changes_pending_subject',
        columnNames: ['kind', 'subject'],
        isUnique: true,
        where: "status = 'PENDING_APPROVAL'",
      }),
    );

    await q.createTable(
      new Table({
        name: 'step_up_nonces',
        columns: [
          { name: 'nonce', type: 'varchar', length: '512', isPrimary: true },
          { name: 'caller_id', type: 'varchar', length: '256' },
          { name: 'change_id', type: 'varchar', length: '64' },
          { name: 'used_at', type: 'varchar', length: '32' },
        ],
      }),
    );

    await q.createTable(
      new Table({
        name: 'policy_versions',
        columns: [
          { name: 'seq', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'name', type: 'varchar', length: '128' },
          { name: 'version', type: 'varchar', length: '64' },
          // The document as proposed and approved (JSON).
          { name: 'content', type: 'text' },
          { name: 'content_hash', type: 'varchar', length: '64' },
          { name: 'change_id', type: 'varchar', length: '64' },
          { name: 'proposer', type: 'varchar', length: '256' },
          { name: 'approved_by', type: 'varchar', length: '256' },
          { name: 'approved_at', type: 'varchar', length: '32' },
        ],
      }),
    );
    await q.createIndex('policy_versions', new TableIndex({ name: 'uq_policy_versions_name_version', columnNames: ['name', 'version'], isUnique: true }));
    await q.createIndex('policy_versions', new TableIndex({ name: 'idx_policy_versions_name_approved', columnNames: ['name', 'approved_at', 'seq'] }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('policy_versions');
    await q.dropTable('step_up_nonces');
    await q.dropTable('pending_changes');
  }
}
