import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The impact preview of a policy change (CONTRACT "Approvers' console and impact preview") replays
 * recorded decisions, so a decision keeps what it was made on, in the claim row every outcome
 * already writes in its one commit (no statement more per request):
 * - `policy_name`, `policy_version`: the policy that decided;
 * - `decision_action` (`approve`, `reject`, `requires_override`) and `matched_rule_id` (null for
 *   the "no matching rule" outcome): what it decided;
 * - `decision_input`: JSON of exactly what the policy's evaluation decided on (`signals`, `intent`).
 * All null for a refusal made before the policy's rules were evaluated, and for every claim
 * written before this migration: those are not replayed.
 * The partial index serves "the latest N decisions of one policy name" and costs nothing for the
 * rows without a decision.
 */
export class DecisionInputs1763684800000 implements MigrationInterface {
  name = 'DecisionInputs1763684800000';

  async up(q: QueryRunner): Promise<void> {
    // Plain ALTER TABLE (valid on both databases): SQLite adds a column without copying the table.
    await q.query('ALTER TABLE business_transactions ADD COLUMN policy_name varchar(128) NULL');
    await q.query('ALTER TABLE business_transactions ADD COLUMN policy_version varchar(64) NULL');
    await q.query('ALTER TABLE business_transactions ADD COLUMN decision_action varchar(32) NULL');
    await q.query('ALTER TABLE business_transactions ADD COLUMN matched_rule_id varchar(128) NULL');
    await q.query('ALTER TABLE business_transactions ADD COLUMN decision_input text NULL');
    await q.query(
      'CREATE INDEX idx_business_transactions_policy_decisions ON business_transactions (policy_name, created_at, business_transaction_id) WHERE policy_name IS NOT NULL',
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX idx_business_transactions_policy_decisions');
    for (const column of ['decision_input', 'matched_rule_id', 'decision_action', 'policy_version', 'policy_name']) {
      await q.query(`ALTER TABLE business_transactions DROP COLUMN ${column}`);
    }
  }
}
