import type { DataSource } from 'typeorm';
import type { ChangeStatus, DecisionRequest, DecisionResult, PendingChange, PendingChangeStore } from '@ets/domain';
import { PendingChangeEntity, type PendingChangeRow } from '../entities/governance.js';
import { execute, writeSerially } from './serial-writes.js';

/** The part of a better-sqlite3 connection used here (TypeORM's driver holds one). */
interface SqliteConnection {
  prepare(sql: string): { run(...params: unknown[]): { changes: number } };
  transaction<T>(fn: () => T): { immediate(): T };
}

const NONCE_INSERT_SQLITE = 'INSERT INTO step_up_nonces (nonce, caller_id, change_id, used_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING';
const DECIDE_SQLITE = `UPDATE pending_changes SET status = ?, decider = ?, decided_at = ?, rejection_reason = ?
  WHERE id = ? AND kind = ? AND status = 'PENDING_APPROVAL'`;

/**
 * One statement on PostgreSQL, so it is one transaction: the nonce insert (a duplicate inserts
 * nothing) and, only when it inserted, the conditional update. A concurrent insert of the same
 * nonce waits for this one and then inserts nothing; a concurrent update of the same change waits
 * for this one, re-reads the status and updates nothing.
 */
const DECIDE_POSTGRES = `WITH consumed AS (
    INSERT INTO step_up_nonces (nonce, caller_id, change_id, used_at) VALUES ($1, $2, $3, $4)
    ON CONFLICT DO NOTHING RETURNING nonce
  ), decided AS (
    UPDATE pending_changes SET status = $5, decider = $2, decided_at = $4, rejection_reason = $6
    WHERE id = $3 AND kind = $7 AND status = 'PENDING_APPROVAL' AND EXISTS (SELECT 1 FROM consumed)
    RETURNING id
  )
  SELECT (SELECT count(*) FROM consumed) AS consumed, (SELECT count(*) FROM decided) AS decided`;

function toChange(r: PendingChangeRow): PendingChange {
  return {
    id: r.id,
    kind: r.kind,
    ...(r.subject !== null ? { subject: r.subject } : {}),
    payload: JSON.parse(r.payload) as unknown,
    status: r.status as ChangeStatus,
    proposer: r.proposer,
    ...(r.reason !== null ? { reason: r.reason } : {}),
    createdAt: r.createdAt,
    ...(r.decider !== null ? { decider: r.decider } : {}),
    ...(r.decidedAt !== null ? { decidedAt: r.decidedAt } : {}),
    ...(r.rejectionReason !== null ? { rejectionReason: r.rejectionReason } : {}),
    ...(r.appliedAt !== null ? { appliedAt: r.appliedAt } : {}),
  };
}

/**
 * Pending changes of every kind in `pending_changes`, and the used step-up nonces in
 * `step_up_nonces`. A decision is one atomic step on both databases (see `decide`): one statement
 * on PostgreSQL; on SQLite a synchronous transaction in the write queue, so no other query of this
 * process can interleave with it.
 */
export class TypeOrmPendingChangeStore implements PendingChangeStore {
  constructor(private readonly ds: DataSource) {}

  private get repo() {
    return this.ds.getRepository(PendingChangeEntity);
  }

  async create(change: PendingChange): Promise<boolean> {
    const [sql, params] = this.ds
      .createQueryBuilder()
      .insert()
      .into(PendingChangeEntity)
      .values({
        id: change.id,
        kind: change.kind,
        subject: change.subject ?? null,
        status: change.status,
        payload: JSON.stringify(change.payload),
        proposer: change.proposer,
        reason: change.reason ?? null,
        createdAt: change.createdAt,
        decider: change.decider ?? null,
        decidedAt: change.decidedAt ?? null,
        rejectionReason: change.rejectionReason ?? null,
        appliedAt: change.appliedAt ?? null,
      })
      // A pending change of the same (kind, subject) makes the partial unique index refuse it.
      .orIgnore()
      .getQueryAndParameters();
    const result = await writeSerially(this.ds, () => execute(this.ds, sql, params));
    return result.affected === 1;
  }

  async get(id: string): Promise<PendingChange | undefined> {
    const row = await this.repo.findOneBy({ id });
    return row ? toChange(row) : undefined;
  }

  async list(query: { kind: string; status?: ChangeStatus; subject?: string }): Promise<PendingChange[]> {
    const qb = this.repo.createQueryBuilder('c').where('c.kind = :kind', { kind: query.kind });
    if (query.status !== undefined) qb.andWhere('c.status = :status', { status: query.status });
    if (query.subject !== undefined) qb.andWhere('c.subject = :subject', { subject: query.subject });
    const rows = await qb.orderBy('c.created_at', 'ASC').addOrderBy('c.id', 'ASC').getMany();
    return rows.map(toChange);
  }

  async decide(r: DecisionRequest): Promise<DecisionResult> {
    const { nonceFresh, decided } =
      this.ds.options.type === 'postgres' ? await this.decidePostgres(r) : await writeSerially(this.ds, async () => this.decideSqlite(r));
    if (!nonceFresh) return { nonceFresh, decided };
    const row = await this.repo.findOneBy({ id: r.id, kind: r.kind });
    return { nonceFresh, decided, change: row ? toChange(row) : undefined };
  }

  private async decidePostgres(r: DecisionRequest): Promise<{ nonceFresh: boolean; decided: boolean }> {
    const rows = (await this.ds.query(DECIDE_POSTGRES, [r.nonce, r.decider, r.id, r.decidedAt, r.decision, r.rejectionReason ?? null, r.kind])) as {
      consumed: string | number;
      decided: string | number;
    }[];
    return { nonceFresh: Number(rows[0]!.consumed) === 1, decided: Number(rows[0]!.decided) === 1 };
  }

  private decideSqlite(r: DecisionRequest): { nonceFresh: boolean; decided: boolean } {
    const db = (this.ds.driver as unknown as { databaseConnection: SqliteConnection }).databaseConnection;
    return db
      .transaction(() => {
        if (db.prepare(NONCE_INSERT_SQLITE).run(r.nonce, r.decider, r.id, r.decidedAt).changes !== 1) return { nonceFresh: false, decided: false };
        const updated = db.prepare(DECIDE_SQLITE).run(r.decision, r.decider, r.decidedAt, r.rejectionReason ?? null, r.id, r.kind).changes;
        return { nonceFresh: true, decided: updated === 1 };
      })
      .immediate();
  }

  async markApplied(id: string, at: string): Promise<void> {
    const [sql, params] = this.repo.createQueryBuilder().update().set({ appliedAt: at }).where('id = :id AND applied_at IS NULL', { id }).getQueryAndParameters();
    await writeSerially(this.ds, () => execute(this.ds, sql, params));
  }
}
