import type { DataSource } from 'typeorm';
import type { ApplyClaimRequest, ChangeStatus, DecisionRequest, DecisionResult, GovernanceEvent, OutboundNotice, Page, PendingChange, PendingChangeStore, Signed } from '@ets/domain';
import { PendingChangeEntity, type PendingChangeRow } from '../entities/governance.js';
import { appendToLog } from '../transparency/log-in-transaction.js';
import { insertAuditEvent } from './audit-event-store.js';
import { insertNotices } from './notice-outbox.js';
import { executeSerially } from './serial-writes.js';
import type { Run } from './sqlite-writer.js';
import { toPg } from './sql.js';
import { storeTransaction } from './store-transaction.js';

/** A pending change of the same (kind, subject) makes the partial unique index refuse it: nothing is inserted. */
const CREATE = `INSERT INTO pending_changes (id, kind, subject, status, payload, proposer, proposer_step_up_key, reason, created_at, decider, decided_at, rejection_reason, applied_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`;
/** A nonce used before inserts nothing (on PostgreSQL a concurrent insert of it waits for the first to end, then inserts nothing). */
const CONSUME_NONCE = 'INSERT INTO step_up_nonces (nonce, caller_id, change_id, used_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING';
/**
 * The compare-and-set: PostgreSQL waits for a concurrent decision's row lock, re-reads the status
 * and updates nothing; SQLite runs it under the writer's BEGIN IMMEDIATE.
 */
const DECIDE = `UPDATE pending_changes SET status = ?, decider = ?, decided_at = ?, rejection_reason = ?, apply_claim = ?, apply_claim_until = ?
  WHERE id = ? AND kind = ? AND status = 'PENDING_APPROVAL'`;
/** ISO 8601 UTC times of one format compare as text. */
const CLAIM_APPLY = `UPDATE pending_changes SET apply_claim = ?, apply_claim_until = ?
  WHERE id = ? AND kind = ? AND status = 'APPROVED' AND decider = ? AND applied_at IS NULL
    AND (apply_claim IS NULL OR apply_claim_until < ?)`;
const RELEASE_APPLY = `UPDATE pending_changes SET apply_claim = NULL, apply_claim_until = NULL WHERE id = :id AND apply_claim = :token`;
const MARK_APPLIED = `UPDATE pending_changes SET applied_at = :at, apply_claim = NULL, apply_claim_until = NULL
  WHERE id = :id AND applied_at IS NULL AND apply_claim = :token`;

function toChange(r: PendingChangeRow): PendingChange {
  return {
    id: r.id,
    kind: r.kind,
    ...(r.subject !== null ? { subject: r.subject } : {}),
    payload: JSON.parse(r.payload) as unknown,
    status: r.status as ChangeStatus,
    proposer: r.proposer,
    ...(r.proposerStepUpKey !== null ? { proposerStepUpKey: r.proposerStepUpKey } : {}),
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
 * `step_up_nonces`. A proposal, a decision and the completion of an approval are each one
 * transaction (`storeTransaction`: SQLite's single writer, or BEGIN … COMMIT on PostgreSQL) that
 * also stores the signed governance event in `audit_events` and appends it to the transparency
 * log: the event and its leaf exist if and only if the change they record does. A proposal's
 * notices (the notifications outbox) are written in its transaction too.
 */
export class TypeOrmPendingChangeStore implements PendingChangeStore {
  private readonly pg: boolean;

  constructor(private readonly ds: DataSource) {
    this.pg = ds.options.type === 'postgres';
  }

  private get repo() {
    return this.ds.getRepository(PendingChangeEntity);
  }

  create(change: PendingChange, event: Signed<GovernanceEvent>, notices: readonly OutboundNotice[] = []): Promise<boolean> {
    return storeTransaction(this.ds, async (run) => {
      const inserted = await this.run(run, CREATE, [
        change.id,
        change.kind,
        change.subject ?? null,
        change.status,
        JSON.stringify(change.payload),
        change.proposer,
        change.proposerStepUpKey ?? null,
        change.reason ?? null,
        change.createdAt,
        change.decider ?? null,
        change.decidedAt ?? null,
        change.rejectionReason ?? null,
        change.appliedAt ?? null,
      ]);
      if (inserted.affected !== 1) return false;
      await this.storeEvent(run, event);
      await insertNotices(run, this.pg, notices);
      return true;
    });
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

  async page(query: { kind: string; status?: ChangeStatus }, page: number, pageSize: number): Promise<Page<PendingChange>> {
    const qb = this.repo.createQueryBuilder('c').where('c.kind = :kind', { kind: query.kind });
    if (query.status !== undefined) qb.andWhere('c.status = :status', { status: query.status });
    const [rows, total] = await qb
      .orderBy('c.created_at', 'ASC')
      .addOrderBy('c.id', 'ASC')
      .skip((page - 1) * pageSize)
      .take(pageSize)
      .getManyAndCount();
    return { items: rows.map(toChange), page, pageSize, total };
  }

  async decide(r: DecisionRequest): Promise<DecisionResult> {
    const { nonceFresh, decided } = await storeTransaction(this.ds, async (run) => {
      if ((await this.run(run, CONSUME_NONCE, [r.nonce, r.decider, r.id, r.decidedAt])).affected !== 1) return { nonceFresh: false, decided: false };
      const claim = [r.applyClaim?.token ?? null, r.applyClaim?.until ?? null];
      const updated = await this.run(run, DECIDE, [r.decision, r.decider, r.decidedAt, r.rejectionReason ?? null, ...claim, r.id, r.kind]);
      if (updated.affected !== 1) return { nonceFresh: true, decided: false };
      await this.storeEvent(run, r.event);
      return { nonceFresh: true, decided: true };
    });
    if (!nonceFresh) return { nonceFresh, decided };
    const row = await this.repo.findOneBy({ id: r.id, kind: r.kind });
    return { nonceFresh, decided, change: row ? toChange(row) : undefined };
  }

  claimApply(r: ApplyClaimRequest): Promise<boolean> {
    return storeTransaction(this.ds, async (run) => {
      if ((await this.run(run, CLAIM_APPLY, [r.claim.token, r.claim.until, r.id, r.kind, r.decider, r.now])).affected !== 1) return false;
      await this.storeEvent(run, r.event);
      return true;
    });
  }

  async releaseApply(id: string, token: string): Promise<void> {
    await this.update(RELEASE_APPLY, { id, token });
  }

  async markApplied(id: string, at: string, token: string): Promise<boolean> {
    return (await this.update(MARK_APPLIED, { id, at, token })) === 1;
  }

  /** The signed governance event, and its leaf of the transparency log, in the caller's transaction. */
  private async storeEvent(run: Run, event: Signed<GovernanceEvent>): Promise<void> {
    appendToLog(run, [await insertAuditEvent(run, this.pg, event)]);
  }

  private run(run: Run, sql: string, params: unknown[]) {
    return run(this.pg ? toPg(sql) : sql, params);
  }

  /** One conditional UPDATE with named parameters; returns the number of rows it changed. */
  private async update(sql: string, params: Record<string, string>): Promise<number> {
    const [query, values] = this.ds.driver.escapeQueryWithParameters(sql, params);
    const result = await executeSerially(this.ds, query, values);
    return result.affected ?? 0;
  }
}
