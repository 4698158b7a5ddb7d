import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The outbox of notifications (CONTRACT "Notifications"): one row per announcement of a new pending
 * item and webhook endpoint, inserted in the same transaction as the item, removed once delivered.
 * - `message_id`: the `webhook-id` (the same for every endpoint and every retry);
 * - `body`: the JSON payload, as sent and signed;
 * - `attempts`, `next_attempt_at` (null: given up, kept with `last_error` for the operator);
 * - `lease_token`, `lease_until`: the worker that took it, until when (one worker at a time, across
 *   processes).
 * The partial index serves the workers' "due now" claim and holds only the rows still to deliver.
 */
export class PendingItemNotices1763684900000 implements MigrationInterface {
  name = 'PendingItemNotices1763684900000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE pending_item_notices (
      delivery_id varchar(64) PRIMARY KEY NOT NULL,
      message_id varchar(64) NOT NULL,
      endpoint varchar(2048) NOT NULL,
      body text NOT NULL,
      created_at varchar(32) NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      next_attempt_at varchar(32) NULL,
      lease_token varchar(64) NULL,
      lease_until varchar(32) NULL,
      last_error text NULL
    )`);
    await q.query('CREATE INDEX idx_pending_item_notices_due ON pending_item_notices (next_attempt_at, delivery_id) WHERE next_attempt_at IS NOT NULL');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE pending_item_notices');
  }
}
