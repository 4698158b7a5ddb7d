import { TableColumn, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The step-up key a change's proposer held when proposing (`proposer_step_up_key`: the raw
 * Ed25519 public key, base64url; null when the proposer had none). One step-up key is one person
 * (review round 2): a checker holding the proposer's key is the proposer under another caller id,
 * even after the key file gave that key to another caller. Changes proposed before this migration
 * have none; their checkers are still compared with the step-up keys the proposer holds now.
 */
export class ProposerStepUpKey1763685400000 implements MigrationInterface {
  name = 'ProposerStepUpKey1763685400000';

  async up(q: QueryRunner): Promise<void> {
    await q.addColumn('pending_changes', new TableColumn({ name: 'proposer_step_up_key', type: 'varchar', length: '64', isNullable: true }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropColumn('pending_changes', 'proposer_step_up_key');
  }
}
