import type { DataSource } from 'typeorm';
import type { ClaimedNotice, NoticeOutbox, OutboundNotice } from '@ets/domain';
import type { Run } from './sqlite-writer.js';
import { toPg } from './sql.js';
import { storeStatement } from './store-transaction.js';

const INSERT = `INSERT INTO pending_item_notices (delivery_id, message_id, endpoint, body, created_at, attempts, next_attempt_at)
  VALUES (?, ?, ?, ?, ?, 0, ?)`;
const INSERT_PG = toPg(INSERT);

/**
 * Writes the notices announcing a new pending item, in the caller's store transaction (`run` of
 * `storeTransaction`): they commit with the item, or not at all. One line in any store that
 * creates pending items: `await insertNotices(run, pg, notices)`.
 */
export async function insertNotices(run: Run, pg: boolean, notices: readonly OutboundNotice[]): Promise<void> {
  for (const n of notices) {
    await run(pg ? INSERT_PG : INSERT, [n.deliveryId, n.messageId, n.endpoint, JSON.stringify(n.body), n.createdAt, n.createdAt]);
  }
}

const COLUMNS = 'delivery_id, message_id, endpoint, body, created_at, attempts';
/**
 * The claim, one statement: PostgreSQL skips the rows another claimer has locked (so concurrent
 * claimers take disjoint rows without waiting), and a row claimed and committed meanwhile no longer
 * matches; SQLite runs it under the writer's BEGIN IMMEDIATE, which excludes other writers, other
 * processes included. Times are ISO 8601 UTC of one format: they compare as text.
 */
const CLAIM = {
  sqlite: `UPDATE pending_item_notices SET lease_token = ?, lease_until = ?
    WHERE delivery_id IN (SELECT delivery_id FROM pending_item_notices
      WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?)
      ORDER BY next_attempt_at, delivery_id LIMIT ?)
    RETURNING ${COLUMNS}`,
  pg: `UPDATE pending_item_notices SET lease_token = $1, lease_until = $2
    WHERE delivery_id IN (SELECT delivery_id FROM pending_item_notices
      WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= $3 AND (lease_until IS NULL OR lease_until < $4)
      ORDER BY next_attempt_at, delivery_id LIMIT $5 FOR UPDATE SKIP LOCKED)
    RETURNING ${COLUMNS}`,
};
const DELIVERED = 'DELETE FROM pending_item_notices WHERE delivery_id = ? AND lease_token = ?';
const FAILED = `UPDATE pending_item_notices SET attempts = ?, next_attempt_at = ?, last_error = ?, lease_token = NULL, lease_until = NULL
  WHERE delivery_id = ? AND lease_token = ?`;

interface NoticeRow {
  delivery_id: string;
  message_id: string;
  endpoint: string;
  body: string;
  created_at: string;
  attempts: number | string;
}

/** The outbox of notifications on SQLite or PostgreSQL (migration 0018). */
export class TypeOrmNoticeOutbox implements NoticeOutbox {
  private readonly pg: boolean;

  constructor(private readonly ds: DataSource) {
    this.pg = ds.options.type === 'postgres';
  }

  async claimDue(r: { now: string; leaseUntil: string; token: string; limit: number }): Promise<ClaimedNotice[]> {
    const result = await storeStatement(this.ds, this.pg ? CLAIM.pg : CLAIM.sqlite, [r.token, r.leaseUntil, r.now, r.now, r.limit]);
    return (result.records as NoticeRow[])
      .map((row) => ({
        deliveryId: row.delivery_id,
        messageId: row.message_id,
        endpoint: row.endpoint,
        body: JSON.parse(row.body) as unknown,
        createdAt: row.created_at,
        attempts: Number(row.attempts),
      }))
      .sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.deliveryId < b.deliveryId ? -1 : 1));
  }

  async delivered(deliveryId: string, token: string): Promise<void> {
    await this.statement(DELIVERED, [deliveryId, token]);
  }

  async failed(deliveryId: string, token: string, o: { attempts: number; nextAttemptAt: string | null; error: string }): Promise<void> {
    await this.statement(FAILED, [o.attempts, o.nextAttemptAt, o.error.slice(0, 2000), deliveryId, token]);
  }

  private statement(sql: string, params: unknown[]) {
    return storeStatement(this.ds, this.pg ? toPg(sql) : sql, params);
  }
}
