import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Held transactions (CONTRACT "Held transactions"): a `requires_override` decision that waits on the
 * server for a human. One row per held transaction, written in the request's commit with its claim
 * (outcome HELD) and its Trust Record without executions:
 * - `decided`: the DecidedTransaction (JSON) it is released from after an approval;
 * - `status`: PENDING, then APPROVED, REJECTED or EXPIRED (a compare-and-set from PENDING: of
 *   concurrent decisions, on any instance, exactly one wins);
 * - `expires_at`: until when a human may approve it;
 * - `decided_by`, `decided_at`, `reason`, `approval` (the signed approval it was released with);
 * - `held_record`: the held decision's Trust Record once decided (it leaves `trust_records`, where the
 *   release's record takes its place; its transparency-log leaf names this table then).
 * Indexes: the expiry sweep's PENDING rows by expiry; the list by status and creation; a caller's own.
 */
export class HeldTransactions1763685000000 implements MigrationInterface {
  name = 'HeldTransactions1763685000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE held_transactions (
      business_transaction_id varchar(64) PRIMARY KEY NOT NULL,
      caller_id varchar(256) NOT NULL,
      status varchar(16) NOT NULL,
      decided text NOT NULL,
      created_at varchar(32) NOT NULL,
      expires_at varchar(32) NOT NULL,
      decided_by varchar(256) NULL,
      decided_at varchar(32) NULL,
      reason text NULL,
      approval text NULL,
      held_record text NULL
    )`);
    await q.query("CREATE INDEX idx_held_transactions_due ON held_transactions (expires_at, business_transaction_id) WHERE status = 'PENDING'");
    await q.query('CREATE INDEX idx_held_transactions_status ON held_transactions (status, created_at, business_transaction_id)');
    await q.query('CREATE INDEX idx_held_transactions_caller ON held_transactions (caller_id, created_at, business_transaction_id)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE held_transactions');
  }
}
