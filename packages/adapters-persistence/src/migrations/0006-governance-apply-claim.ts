import { TableColumn, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The apply claim of an approved change (maker-checker step b): which request may apply it
 * (`apply_claim`, a token unique per request) and until when its lease lasts (`apply_claim_until`,
 * ISO 8601 UTC, compared as text). Both null: nobody holds it, which is also what changes decided
 * before this migration have, so an approval they left unapplied can still be completed.
 */
export class GovernanceApplyClaim1763683700000 implements MigrationInterface {
  name = 'GovernanceApplyClaim1763683700000';

  async up(q: QueryRunner): Promise<void> {
    await q.addColumns('pending_changes', [
      new TableColumn({ name: 'apply_claim', type: 'varchar', length: '64', isNullable: true }),
      new TableColumn({ name: 'apply_claim_until', type: 'varchar', length: '32', isNullable: true }),
    ]);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropColumn('pending_changes', 'apply_claim_until');
    await q.dropColumn('pending_changes', 'apply_claim');
  }
}
