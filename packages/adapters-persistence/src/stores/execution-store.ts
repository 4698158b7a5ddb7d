import type { DataSource, QueryResult, QueryRunner } from 'typeorm';
import { ignore, SerialQueue, writerOf, type Run } from './sqlite-writer.js';

export { withSqliteWriteLock } from './sqlite-writer.js';
import {
  DuplicateTransactionError,
  type ChainHead,
  type ExecutionStore,
  type IntentResolution,
  type IntentState,
  type IntentStatus,
  type Page,
  type ReleaseContext,
  type SignedIntent,
  type SignedRefusal,
  type SignedTrustRecord,
  type TransactionClaim,
} from '@ets/domain';

/**
 * Raised by markReleased / markErrored when the intent is missing or not in a state the transition
 * starts from: the conditional update moved nothing (a stale actor never moves an intent backwards).
 */
export class IntentStateConflictError extends Error {
  override readonly name = 'IntentStateConflictError';
  constructor(
    readonly businessTransactionId: string,
    readonly transition: 'RELEASED' | 'ERRORED',
  ) {
    super(`Execution intent '${businessTransactionId}' cannot move to ${transition} from its current state.`);
  }
}

/**
 * PostgreSQL: the chain row lock admits one finalize at a time anyway, so a process lines its own
 * finalizes up in memory and lets one at a time wait on the database lock, instead of parking up
 * to a whole pool of connections on it (which would starve every other query of the process).
 */
const pgFinalizeQueues = new WeakMap<DataSource, SerialQueue>();
const finalizeQueueOf = (ds: DataSource): SerialQueue => {
  let queue = pgFinalizeQueues.get(ds);
  if (!queue) pgFinalizeQueues.set(ds, (queue = new SerialQueue()));
  return queue;
};

/** `?` placeholders to PostgreSQL's `$n`. */
const toPg = (sql: string): string => {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
};

interface IntentRow {
  state: IntentState;
  intent: string;
  status_detail: string | null;
  updated_at: string;
}
interface ClaimRow {
  business_transaction_id: string;
  caller_id: string;
  outcome: TransactionClaim['outcome'];
  created_at: string;
}

const CLAIM_INSERT =
  'INSERT INTO business_transactions (business_transaction_id, caller_id, outcome, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING';
const RECORD_COLUMNS = '(business_transaction_id, body, created_at)';
const INTENT_COLUMNS = '(business_transaction_id, caller_id, state, intent, created_at, updated_at)';

/**
 * PostgreSQL claims a transaction and stores its record in ONE statement (one round trip, atomic):
 * the claim insert skips on conflict (waiting for a concurrent claimer of the same id to commit or
 * roll back), and the record is inserted only from the claim it returned; no row affected means
 * the id was already claimed.
 */
const pgClaimAnd = (table: string, columns: string, select: string): string =>
  `WITH c AS (${toPg(CLAIM_INSERT)} RETURNING business_transaction_id) INSERT INTO ${table} ${columns} SELECT ${select} FROM c`;

const SQL = {
  sqlite: {
    claim: CLAIM_INSERT,
    refusal: `INSERT INTO refusal_records ${RECORD_COLUMNS} VALUES (?, ?, ?)`,
    record: `INSERT INTO trust_records ${RECORD_COLUMNS} VALUES (?, ?, ?)`,
    intent: `INSERT INTO execution_intents ${INTENT_COLUMNS} VALUES (?, ?, 'PREPARED', ?, ?, ?)`,
    // Under BEGIN IMMEDIATE the write lock is already held: this read is the chain lock.
    finalizeRead:
      'SELECT i.state AS state, c.head_hash AS head_hash FROM execution_intents i, execution_chain c WHERE i.business_transaction_id = ? AND c.id = 1',
    finalizeState:
      "UPDATE execution_intents SET state = 'FINALIZED', release_context = NULL, updated_at = ? WHERE business_transaction_id = ? AND state = 'RELEASED'",
    finalizeHead: 'UPDATE execution_chain SET head_hash = ?, updated_at = ? WHERE id = 1',
    finalizeClaim: "UPDATE business_transactions SET outcome = 'EXECUTED' WHERE business_transaction_id = ?",
    resolveRead: 'SELECT state, status_detail FROM execution_intents WHERE business_transaction_id = ?',
  },
  pg: {
    // params: id, callerId, outcome, createdAt, body
    refusal: pgClaimAnd('refusal_records', RECORD_COLUMNS, 'business_transaction_id, $5, $4'),
    record: pgClaimAnd('trust_records', RECORD_COLUMNS, 'business_transaction_id, $5, $4'),
    // params: id, callerId, outcome, createdAt, intent, at
    intent: pgClaimAnd('execution_intents', INTENT_COLUMNS, "business_transaction_id, $2, 'PREPARED', $5, $6, $6"),
    // The state move is the intent's row lock and the RELEASED check; the chain row is locked
    // after it (always in this order, so finalizers never deadlock) and only when the move happened.
    finalizeLock: `WITH u AS (UPDATE execution_intents SET state = 'FINALIZED', release_context = NULL, updated_at = $2
        WHERE business_transaction_id = $1 AND state = 'RELEASED' RETURNING 1)
      SELECT head_hash FROM execution_chain WHERE id = 1 AND EXISTS (SELECT 1 FROM u) FOR UPDATE`,
    // params: id, body, at, newHead
    finalizeWrite: `WITH r AS (INSERT INTO trust_records ${RECORD_COLUMNS} VALUES ($1, $2, $3)),
        c AS (UPDATE business_transactions SET outcome = 'EXECUTED' WHERE business_transaction_id = $1)
      UPDATE execution_chain SET head_hash = $4, updated_at = $3 WHERE id = 1`,
    resolveRead: 'SELECT state, status_detail FROM execution_intents WHERE business_transaction_id = $1 FOR UPDATE',
  },
};

const COMMON = {
  markReleased:
    "UPDATE execution_intents SET state = 'RELEASED', release_context = ?, updated_at = ? WHERE business_transaction_id = ? AND state = 'PREPARED'",
  markErrored:
    "UPDATE execution_intents SET state = 'ERRORED', status_detail = ?, updated_at = ? WHERE business_transaction_id = ? AND state IN ('PREPARED', 'RELEASED')",
  resolve: "UPDATE execution_intents SET state = 'RESOLVED', status_detail = ?, updated_at = ? WHERE business_transaction_id = ? AND state = ?",
  isClaimed: 'SELECT 1 AS x FROM business_transactions WHERE business_transaction_id = ?',
  getClaim: 'SELECT business_transaction_id, caller_id, outcome, created_at FROM business_transactions WHERE business_transaction_id = ?',
  getIntent: 'SELECT state, intent, status_detail, updated_at FROM execution_intents WHERE business_transaction_id = ?',
  getReleaseContext: 'SELECT release_context FROM execution_intents WHERE business_transaction_id = ?',
  getTrustRecord: 'SELECT body FROM trust_records WHERE business_transaction_id = ?',
  getRefusal: 'SELECT body FROM refusal_records WHERE business_transaction_id = ?',
  pageTrustRecords: 'SELECT body FROM trust_records ORDER BY created_at DESC, business_transaction_id DESC LIMIT ? OFFSET ?',
  countTrustRecords: 'SELECT COUNT(*) AS n FROM trust_records',
  pageClaims:
    'SELECT business_transaction_id, caller_id, outcome, created_at FROM business_transactions ORDER BY created_at DESC, business_transaction_id DESC LIMIT ? OFFSET ?',
  countClaims: 'SELECT COUNT(*) AS n FROM business_transactions',
};
type CommonSql = typeof COMMON;
const COMMON_PG = Object.fromEntries(Object.entries(COMMON).map(([k, v]) => [k, toPg(v)])) as CommonSql;

const RESOLVABLE: readonly IntentState[] = ['PREPARED', 'ERRORED'];

/**
 * The execution pipeline's storage on SQLite or PostgreSQL. Signed objects are stored as
 * `JSON.stringify(record)` and returned as `JSON.parse(text)`, so what was signed comes back
 * unchanged (including `__proto__` keys and null chain fields).
 */
export class TypeOrmExecutionStore implements ExecutionStore {
  private readonly pg: boolean;
  private readonly q: CommonSql;

  constructor(private readonly ds: DataSource) {
    this.pg = ds.options.type === 'postgres';
    this.q = this.pg ? COMMON_PG : COMMON;
  }

  // --- claims -------------------------------------------------------------------------------------

  async isClaimed(businessTransactionId: string): Promise<boolean> {
    return (await this.read(this.q.isClaimed, [businessTransactionId])).length > 0;
  }

  async storeRefusal(claim: TransactionClaim, refusal: SignedRefusal): Promise<void> {
    sameId(claim, refusal.businessTransactionId);
    const body = JSON.stringify(refusal);
    return this.claimWith(claim, [SQL.sqlite.refusal, [claim.businessTransactionId, body, claim.createdAt]], [SQL.pg.refusal, [body]]);
  }

  async storeRecordedTransaction(claim: TransactionClaim, record: SignedTrustRecord): Promise<void> {
    sameId(claim, record.businessTransactionId);
    const body = JSON.stringify(record);
    return this.claimWith(claim, [SQL.sqlite.record, [claim.businessTransactionId, body, claim.createdAt]], [SQL.pg.record, [body]]);
  }

  /** Durable on return: SQLite commits with synchronous=FULL, PostgreSQL commits the statement. */
  async prepareIntent(claim: TransactionClaim, intent: SignedIntent, at: string): Promise<void> {
    sameId(claim, intent.businessTransactionId);
    const body = JSON.stringify(intent);
    return this.claimWith(claim, [SQL.sqlite.intent, [claim.businessTransactionId, claim.callerId, body, at, at]], [SQL.pg.intent, [body, at]]);
  }

  /**
   * Claim + record in one transaction. SQLite: the claim (skipped on conflict), then the record
   * row, under BEGIN IMMEDIATE. PostgreSQL: one statement (see pgClaimAnd) whose parameters after
   * the claim's four ($5...) are `pgExtra`.
   */
  private async claimWith(
    claim: TransactionClaim,
    sqlite: [sql: string, params: unknown[]],
    pg: [sql: string, pgExtra: unknown[]],
  ): Promise<void> {
    const id = claim.businessTransactionId;
    const claimParams = [id, claim.callerId, claim.outcome, claim.createdAt];
    try {
      if (this.pg) {
        const res = await this.pgExec(pg[0], [...claimParams, ...pg[1]]);
        if (res.affected !== 1) throw new DuplicateTransactionError(id);
        return;
      }
      await this.transaction(async (run) => {
        const c = await run(SQL.sqlite.claim, claimParams);
        if (c.affected !== 1) throw new DuplicateTransactionError(id);
        await run(sqlite[0], sqlite[1]);
      });
    } catch (e) {
      // Belt and braces: a unique violation of a record table (a row without its claim) is a duplicate too.
      if (isUniqueViolation(e)) throw new DuplicateTransactionError(id);
      throw e;
    }
  }

  // --- intent state -------------------------------------------------------------------------------

  async markReleased(businessTransactionId: string, context: ReleaseContext, at: string): Promise<void> {
    const res = await this.write(this.q.markReleased, [JSON.stringify(context), at, businessTransactionId]);
    if (res.affected !== 1) throw new IntentStateConflictError(businessTransactionId, 'RELEASED');
  }

  async markErrored(businessTransactionId: string, error: NonNullable<IntentStatus['error']>, at: string): Promise<void> {
    const res = await this.write(this.q.markErrored, [JSON.stringify({ error }), at, businessTransactionId]);
    if (res.affected !== 1) throw new IntentStateConflictError(businessTransactionId, 'ERRORED');
  }

  async resolve(businessTransactionId: string, resolution: IntentResolution, at: string): Promise<boolean> {
    return this.transaction(async (run) => {
      const [row] = (await run(this.pg ? SQL.pg.resolveRead : SQL.sqlite.resolveRead, [businessTransactionId])).records as {
        state: IntentState;
        status_detail: string | null;
      }[];
      if (!row || !RESOLVABLE.includes(row.state)) return false;
      // The error of an ERRORED intent stays beside the resolution.
      const detail = { ...(row.status_detail ? (JSON.parse(row.status_detail) as object) : {}), resolution };
      const res = await run(this.q.resolve, [JSON.stringify(detail), at, businessTransactionId, row.state]);
      return res.affected === 1;
    });
  }

  async finalize(
    businessTransactionId: string,
    build: (head: ChainHead) => Promise<SignedTrustRecord>,
    at: string,
  ): Promise<SignedTrustRecord | undefined> {
    const id = businessTransactionId;
    if (this.pg) {
      return finalizeQueueOf(this.ds).run(() => this.transaction(async (run) => {
        const locked = (await run(SQL.pg.finalizeLock, [id, at])).records as { head_hash: string | null }[];
        if (locked.length === 0) return undefined; // not RELEASED: nothing was changed
        const head: ChainHead = { chainHash: locked[0]!.head_hash };
        const record = await build(head);
        await run(SQL.pg.finalizeWrite, [id, JSON.stringify(record), at, newHeadOf(record, head, id)]);
        return record;
      }));
    }
    return this.transaction(async (run) => {
      const [row] = (await run(SQL.sqlite.finalizeRead, [id])).records as { state: IntentState; head_hash: string | null }[];
      if (!row || row.state !== 'RELEASED') return undefined;
      const head: ChainHead = { chainHash: row.head_hash };
      const record = await build(head);
      const newHead = newHeadOf(record, head, id);
      const moved = await run(SQL.sqlite.finalizeState, [at, id]);
      if (moved.affected !== 1) throw new Error(`finalize: execution intent '${id}' left RELEASED during finalize`);
      await run(SQL.sqlite.record, [id, JSON.stringify(record), at]);
      await run(SQL.sqlite.finalizeHead, [newHead, at]);
      await run(SQL.sqlite.finalizeClaim, [id]);
      return record;
    });
  }

  // --- reads --------------------------------------------------------------------------------------

  async getIntent(businessTransactionId: string): Promise<{ intent: SignedIntent; status: IntentStatus } | undefined> {
    const [row] = await this.read<IntentRow>(this.q.getIntent, [businessTransactionId]);
    return row ? toIntent(row) : undefined;
  }

  async getReleaseContext(businessTransactionId: string): Promise<ReleaseContext | undefined> {
    const [row] = await this.read<{ release_context: string | null }>(this.q.getReleaseContext, [businessTransactionId]);
    return row?.release_context ? (JSON.parse(row.release_context) as ReleaseContext) : undefined;
  }

  /** Oldest first (reconciliation works through the backlog in order). */
  async listIntents(states: IntentState[], limit: number): Promise<{ intent: SignedIntent; status: IntentStatus }[]> {
    if (states.length === 0 || limit <= 0) return [];
    const sql =
      `SELECT state, intent, status_detail, updated_at FROM execution_intents WHERE state IN (${states.map(() => '?').join(', ')})` +
      ' ORDER BY created_at ASC, business_transaction_id ASC LIMIT ?';
    const rows = await this.read<IntentRow>(this.pg ? toPg(sql) : sql, [...states, Math.min(Math.floor(limit), 2 ** 31 - 1)]);
    return rows.map(toIntent);
  }

  async getTrustRecord(businessTransactionId: string): Promise<SignedTrustRecord | undefined> {
    const [row] = await this.read<{ body: string }>(this.q.getTrustRecord, [businessTransactionId]);
    return row ? (JSON.parse(row.body) as SignedTrustRecord) : undefined;
  }

  async getRefusal(businessTransactionId: string): Promise<SignedRefusal | undefined> {
    const [row] = await this.read<{ body: string }>(this.q.getRefusal, [businessTransactionId]);
    return row ? (JSON.parse(row.body) as SignedRefusal) : undefined;
  }

  async getClaim(businessTransactionId: string): Promise<TransactionClaim | undefined> {
    const [row] = await this.read<ClaimRow>(this.q.getClaim, [businessTransactionId]);
    return row ? toClaim(row) : undefined;
  }

  /** Newest first; pages start at 1. */
  async listTrustRecords(page: number, pageSize: number): Promise<Page<SignedTrustRecord>> {
    checkPage(page, pageSize);
    const [rows, total] = await Promise.all([
      this.read<{ body: string }>(this.q.pageTrustRecords, [pageSize, (page - 1) * pageSize]),
      this.count(this.q.countTrustRecords),
    ]);
    return { items: rows.map((r) => JSON.parse(r.body) as SignedTrustRecord), page, pageSize, total };
  }

  /** Newest first; pages start at 1. */
  async listClaims(page: number, pageSize: number): Promise<Page<TransactionClaim>> {
    checkPage(page, pageSize);
    const [rows, total] = await Promise.all([
      this.read<ClaimRow>(this.q.pageClaims, [pageSize, (page - 1) * pageSize]),
      this.count(this.q.countClaims),
    ]);
    return { items: rows.map(toClaim), page, pageSize, total };
  }

  // --- plumbing -----------------------------------------------------------------------------------

  private read<T>(sql: string, params: unknown[]): Promise<T[]> {
    return this.ds.query(sql, params) as Promise<T[]>;
  }

  private async count(sql: string): Promise<number> {
    const [row] = await this.read<{ n: number | string }>(sql, []);
    return Number(row?.n ?? 0);
  }

  /** One statement on its own (autocommit); on SQLite in the write queue. */
  private write(sql: string, params: unknown[]): Promise<QueryResult> {
    if (this.pg) return this.pgExec(sql, params);
    return writerOf(this.ds).statement(sql, params);
  }

  private async pgExec(sql: string, params: unknown[]): Promise<QueryResult> {
    const runner = this.ds.createQueryRunner();
    try {
      return await runner.query(sql, params, true);
    } finally {
      await runner.release();
    }
  }

  /**
   * One transaction on one query runner: commits what `fn` returns, rolls back when it throws.
   * PostgreSQL: a pooled connection. SQLite: the writer (BEGIN IMMEDIATE, group commit).
   */
  private transaction<T>(fn: (run: Run) => Promise<T>): Promise<T> {
    if (!this.pg) return writerOf(this.ds).transaction(fn);
    return this.pgTransaction(fn);
  }

  private async pgTransaction<T>(fn: (run: Run) => Promise<T>): Promise<T> {
    const runner: QueryRunner = this.ds.createQueryRunner();
    try {
      await runner.query('BEGIN');
      let result: T;
      try {
        result = await fn((sql, params) => runner.query(sql, params, true));
      } catch (e) {
        await runner.query('ROLLBACK').catch(ignore);
        throw e;
      }
      await runner.query('COMMIT');
      return result;
    } finally {
      await runner.release();
    }
  }
}

function toIntent(row: IntentRow): { intent: SignedIntent; status: IntentStatus } {
  const extras = row.status_detail ? (JSON.parse(row.status_detail) as Omit<IntentStatus, 'state' | 'updatedAt'>) : {};
  return { intent: JSON.parse(row.intent) as SignedIntent, status: { state: row.state, updatedAt: row.updated_at, ...extras } };
}

function toClaim(row: ClaimRow): TransactionClaim {
  return { businessTransactionId: row.business_transaction_id, callerId: row.caller_id, outcome: row.outcome, createdAt: row.created_at };
}

function sameId(claim: TransactionClaim, recordId: string): void {
  if (claim.businessTransactionId !== recordId) {
    throw new Error(`claim '${claim.businessTransactionId}' does not match the record's businessTransactionId '${recordId}'`);
  }
}

function checkPage(page: number, pageSize: number): void {
  if (!Number.isInteger(page) || page < 1 || !Number.isInteger(pageSize) || pageSize < 1) {
    throw new RangeError('page and pageSize must be whole numbers from 1');
  }
}

/**
 * The chain head after `record`: its last execution's chainHash. The record must link to the head
 * it was built from, or the chain would fork: nothing is stored then.
 */
function newHeadOf(record: SignedTrustRecord, head: ChainHead, id: string): string {
  if (record.businessTransactionId !== id) throw new Error(`finalize: built a record for '${record.businessTransactionId}', not '${id}'`);
  const chained = record.executions.filter((e) => e.chainHash !== undefined);
  const last = record.executions.at(-1);
  if (chained.length === 0 || typeof last?.chainHash !== 'string') {
    throw new Error(`finalize: the record of '${id}' carries no chained execution`);
  }
  if (chained[0]!.previousChainHash !== head.chainHash) {
    throw new Error(`finalize: the record of '${id}' does not link to the chain head`);
  }
  return last.chainHash;
}

/** SQLite SQLITE_CONSTRAINT_PRIMARYKEY / _UNIQUE, PostgreSQL 23505. */
function isUniqueViolation(e: unknown): boolean {
  const driverError = (e as { driverError?: { code?: unknown } } | undefined)?.driverError;
  const code = driverError?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}
