import type { DataSource } from 'typeorm';
import { canonicalJsonOf } from '@ets/adapters-crypto';
import { appendToLog, type LoggedRecord } from '../transparency/log-in-transaction.js';
import { SqliteStatements, type Run } from './sqlite-writer.js';
import { storeBulk, storeStatement, storeTransaction, transactionState, type StoreTransactionOptions } from './store-transaction.js';
import { oneByOne, type BulkOutcome, type BulkWork } from './pg-group-commit.js';

/** The execution chain's head as a PostgreSQL batch holds it (see transactionState). */
const CHAIN_HEAD = 'execution-chain-head';
import { AUDIT_EVENT_COLUMNS, auditEventRow, insertAuditRow, type AuditEventRow } from './audit-event-store.js';
import { insertNotices } from './notice-outbox.js';
import { claimedBy, given, inScope, placeholders, toPg, where } from './sql.js';

export { withSqliteWriteLock } from './sqlite-writer.js';
import {
  chainHeadAfter,
  checkPage,
  DuplicateTransactionError,
  INTENT_IN_FLIGHT_LEASE_MS,
  IntentStateConflictError,
  type AuthEvent,
  type ChainHead,
  type ClaimQuery,
  type CompletedRelease,
  type DecidedTransaction,
  type HeldApproval,
  type HeldRefusal,
  type HeldStatus,
  type HeldTransaction,
  type OutboundNotice,
  type Signed,
  type ExecutionStore,
  type IntentResolution,
  type IntentState,
  type IntentStatus,
  type Page,
  type ReadScope,
  type ReleaseContext,
  type ResolveOutcome,
  type SignedIntent,
  type SignedRefusal,
  type SignedTrustRecord,
  type StoredIntent,
  type TextPage,
  type TransactionClaim,
  type TransactionSearch,
} from '@ets/domain';

// A port's error (the in-memory store raises it too); exported here as before.
export { IntentStateConflictError };

/**
 * How many stored records a page of `GET /trust-records` holds in memory at once: the page's ids
 * are read first, then the bodies this many at a time, as the response is written.
 */
const RECORD_TEXT_BATCH = 4;

interface IntentRow {
  state: IntentState;
  intent: string;
  status_detail: string | null;
  updated_at: string;
  in_flight_until: string | null;
}
interface ClaimRow {
  business_transaction_id: string;
  caller_id: string;
  outcome: TransactionClaim['outcome'];
  created_at: string;
}

/** The claim's columns: its four, then the decision kept for the impact preview (null without one). */
const CLAIM_COLUMNS = 'business_transaction_id, caller_id, outcome, created_at, policy_name, policy_version, decision_action, matched_rule_id, decision_input';
const CLAIM_INSERT = `INSERT INTO business_transactions (${CLAIM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`;

/** The values of CLAIM_COLUMNS, in order. */
function claimValues(claim: TransactionClaim): unknown[] {
  const d = claim.decided;
  return [
    claim.businessTransactionId,
    claim.callerId,
    claim.outcome,
    claim.createdAt,
    d?.policyName ?? null,
    d?.policyVersion ?? null,
    d?.action ?? null,
    d?.matchedRuleId ?? null,
    d ? JSON.stringify(d.input) : null,
  ];
}
const RECORD_COLUMNS = '(business_transaction_id, body, created_at)';
const TRUST_RECORD_COLUMNS = '(business_transaction_id, caller_id, body, created_at)';
const INTENT_COLUMNS = '(business_transaction_id, caller_id, state, intent, created_at, updated_at, in_flight_until)';

/**
 * PostgreSQL claims the transactions of a whole batch and stores their records in ONE statement
 * (one round trip, atomic): the rows come in as arrays (`unnest`), the claims skip ids already
 * claimed (waiting for a concurrent claimer of the same id to commit or roll back), and a record,
 * and the request's authentication event if it carries one, is inserted only for a claim made. The
 * ids it returns are the claims made; any other id was already claimed. `extra` names the record's
 * own values after the claim's (CLAIM_COLUMNS), as `select` uses them.
 */
const pgClaimBulk = (table: string, columns: string, select: string, extra: string[]): string => {
  const decision = ['policy_name', 'policy_version', 'decision_action', 'matched_rule_id', 'decision_input'];
  const names = ['id', 'caller_id', 'outcome', 'created_at', ...decision, ...extra, 'ev_id', 'ev_kind', 'ev_caller', 'ev_at', 'ev_body'];
  return `WITH input AS (SELECT * FROM unnest(${names.map((_, i) => `$${i + 1}::text[]`).join(', ')}) AS t(${names.join(', ')})),
    c AS (INSERT INTO business_transactions (${CLAIM_COLUMNS})
          SELECT id, caller_id, outcome, created_at, ${decision.join(', ')} FROM input ON CONFLICT DO NOTHING RETURNING business_transaction_id AS id),
    a AS (INSERT INTO ${AUDIT_EVENT_COLUMNS} SELECT ev_id, ev_kind, ev_caller, ev_at, ev_body FROM input JOIN c USING (id) WHERE ev_id IS NOT NULL)
    INSERT INTO ${table} ${columns} SELECT ${select} FROM input JOIN c USING (id) RETURNING business_transaction_id`;
};

/** One claim of a bulk claim write: the claim, the record (SQLite: its insert; PostgreSQL: its values), its leaf, the request's event. */
interface ClaimItem {
  claim: TransactionClaim;
  sqlite: [sql: string, params: unknown[]];
  values: unknown[];
  logged: LoggedRecord;
  /** The request's authentication event, made a row once for both the insert and the log. */
  audit?: AuditEventRow;
}

/** Claims of one kind of record (refusals, records, intents), written together by a group commit. */
class ClaimWrite implements BulkWork<ClaimItem, void> {
  readonly rank = 'claim' as const;

  constructor(
    readonly key: string,
    private readonly pg: boolean,
    private readonly pgSql: string,
  ) {}

  async write(run: Run, items: readonly ClaimItem[]): Promise<BulkOutcome<void>[]> {
    if (!this.pg) return oneByOne(items, (item) => this.writeSqlite(run, item));
    // An id twice in one batch: the first is written, the second is a duplicate of it.
    const first = new Map<string, ClaimItem>();
    for (const item of items) if (!first.has(item.claim.businessTransactionId)) first.set(item.claim.businessTransactionId, item);
    // In id order: two batches claiming the same ids (two instances, or two batches in flight)
    // then take the rows' locks in the same order and never wait for each other in a circle.
    const rows = [...first.values()].sort((a, b) => (a.claim.businessTransactionId < b.claim.businessTransactionId ? -1 : 1)).map((item) => {
      const { claim } = item;
      return [...claimValues(claim), ...item.values, ...(item.audit?.params ?? [null, null, null, null, null])];
    });
    const columns = rows[0]!.map((_, c) => rows.map((r) => (r[c] === null || r[c] === undefined ? null : String(r[c]))));
    const claimed = new Set(((await run(this.pgSql, columns)).records as { business_transaction_id: string }[]).map((r) => r.business_transaction_id));
    return items.map((item) => {
      const id = item.claim.businessTransactionId;
      if (first.get(id) !== item || !claimed.has(id)) return { ok: false, error: new DuplicateTransactionError(id) };
      appendToLog(run, item.audit ? [item.audit.logged, item.logged] : [item.logged]);
      return { ok: true, value: undefined };
    });
  }

  /** SQLite: the claim (skipped on conflict), then the record and the event, under BEGIN IMMEDIATE. */
  private async writeSqlite(run: Run, item: ClaimItem): Promise<BulkOutcome<void>> {
    const { claim } = item;
    const c = await run(CLAIM_INSERT, claimValues(claim));
    if (c.affected !== 1) return { ok: false, error: new DuplicateTransactionError(claim.businessTransactionId) };
    await run(item.sqlite[0], item.sqlite[1]);
    const logged = item.audit ? [await insertAuditRow(run, false, item.audit), item.logged] : [item.logged];
    appendToLog(run, logged);
    return { ok: true, value: undefined };
  }
}

const SQL = {
  sqlite: {
    refusal: `INSERT INTO refusal_records ${RECORD_COLUMNS} VALUES (?, ?, ?)`,
    record: `INSERT INTO trust_records ${TRUST_RECORD_COLUMNS} VALUES (?, ?, ?, ?)`,
    intent: `INSERT INTO execution_intents ${INTENT_COLUMNS} VALUES (?, ?, 'PREPARED', ?, ?, ?, ?)`,
    // Under BEGIN IMMEDIATE the write lock is already held: this read is the chain lock.
    finalizeRead:
      'SELECT i.state AS state, c.head_hash AS head_hash, c.head_position AS head_position FROM execution_intents i, execution_chain c WHERE i.business_transaction_id = ? AND c.id = 1',
    finalizeState:
      "UPDATE execution_intents SET state = 'FINALIZED', release_context = NULL, updated_at = ? WHERE business_transaction_id = ? AND state = 'RELEASED'",
    // completeRelease: straight from PREPARED (the request's lease ends with it).
    completeState:
      "UPDATE execution_intents SET state = 'FINALIZED', release_context = NULL, in_flight_until = NULL, updated_at = ? WHERE business_transaction_id = ? AND state = 'PREPARED'",
    // params: body, at, position, id. The record's caller is its claim's.
    finalizeRecord:
      'INSERT INTO trust_records (business_transaction_id, caller_id, body, created_at, chain_position) SELECT business_transaction_id, caller_id, ?, ?, ? FROM business_transactions WHERE business_transaction_id = ?',
    finalizeHead: 'UPDATE execution_chain SET head_hash = ?, head_position = ?, updated_at = ? WHERE id = 1',
    finalizeClaim: "UPDATE business_transactions SET outcome = 'EXECUTED' WHERE business_transaction_id = ?",
    resolveRead: 'SELECT state, status_detail, in_flight_until FROM execution_intents WHERE business_transaction_id = ?',
  },
  pg: {
    // Bulk claims: the claim's nine (CLAIM_COLUMNS), the record's own values, the event's five (see pgClaimBulk).
    refusal: pgClaimBulk('refusal_records', RECORD_COLUMNS, 'id, body, created_at', ['body']),
    record: pgClaimBulk('trust_records', TRUST_RECORD_COLUMNS, 'id, caller_id, body, created_at', ['body']),
    intent: pgClaimBulk('execution_intents', INTENT_COLUMNS, "id, caller_id, 'PREPARED', body, at, at, until", ['body', 'at', 'until']),
    // The state move is the intent's row lock and the RELEASED check; the chain row is locked
    // after it (always in this order, so finalizers never deadlock) and only when the move happened.
    finalizeLock: `WITH u AS (UPDATE execution_intents SET state = 'FINALIZED', release_context = NULL, updated_at = $2
        WHERE business_transaction_id = $1 AND state = 'RELEASED' RETURNING 1)
      SELECT head_hash, head_position FROM execution_chain WHERE id = 1 AND EXISTS (SELECT 1 FROM u) FOR UPDATE`,
    // params: id, body, at, newHead, position. The record's caller is its claim's.
    finalizeWrite: `WITH r AS (INSERT INTO trust_records (business_transaction_id, caller_id, body, created_at, chain_position)
          SELECT business_transaction_id, caller_id, $2, $3, $5 FROM business_transactions WHERE business_transaction_id = $1),
        c AS (UPDATE business_transactions SET outcome = 'EXECUTED' WHERE business_transaction_id = $1)
      UPDATE execution_chain SET head_hash = $4, head_position = $5, updated_at = $3 WHERE id = 1`,
    resolveRead: 'SELECT state, status_detail, in_flight_until FROM execution_intents WHERE business_transaction_id = $1 FOR UPDATE',
    // The chain's lock, taken once per group commit (later jobs of the batch already hold it).
    chainLock: 'SELECT head_hash, head_position FROM execution_chain WHERE id = 1 FOR UPDATE',
    // params: ids, bodies, ats, positions (arrays), then the new head, its position, the time.
    // PREPARED -> FINALIZED, the records, the claims and the chain's head in one statement.
    releaseWrite: `WITH input AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS t(id, body, at, pos)),
        u AS (UPDATE execution_intents i SET state = 'FINALIZED', release_context = NULL, in_flight_until = NULL, updated_at = input.at
          FROM input WHERE i.business_transaction_id = input.id AND i.state = 'PREPARED' RETURNING 1),
        r AS (INSERT INTO trust_records (business_transaction_id, caller_id, body, created_at, chain_position)
          SELECT b.business_transaction_id, b.caller_id, input.body, input.at, input.pos FROM input JOIN business_transactions b ON b.business_transaction_id = input.id),
        c AS (UPDATE business_transactions b SET outcome = 'EXECUTED' FROM input WHERE b.business_transaction_id = input.id),
        h AS (UPDATE execution_chain SET head_hash = $5, head_position = $6, updated_at = $7 WHERE id = 1)
      SELECT COUNT(*) AS moved FROM u`,
  },
};

/** SQLite: the Trust Record at its chain position, the new chain head, the claim EXECUTED, the record's log leaf. */
async function writeRecordSqlite(run: Run, id: string, record: SignedTrustRecord, head: ChainHead, position: number, at: string): Promise<void> {
  const newHead = chainHeadAfter(record, head, id);
  const body = canonicalJsonOf(record);
  await run(SQL.sqlite.finalizeRecord, [body, at, position, id]);
  await run(SQL.sqlite.finalizeHead, [newHead, position, at]);
  await run(SQL.sqlite.finalizeClaim, [id]);
  appendToLog(run, [{ kind: 'trust-record', id, body, canonical: true }]);
}

/** One release of a bulk release write (ExecutionStore.completeRelease). */
interface ReleaseItem {
  id: string;
  context: ReleaseContext;
  build: (head: ChainHead) => Promise<SignedTrustRecord>;
  at: string;
}

/**
 * The releases of a batch and their Trust Records, linked one after another into the chain. On
 * PostgreSQL the whole batch costs two round trips however many releases it holds: the chain's
 * head (locked once per batch), and one statement that moves every intent to FINALIZED and stores
 * every record, claim and the new head. The records are built (and signed) one after another in
 * between, each linked to the one before.
 */
class ReleaseWrite implements BulkWork<ReleaseItem, CompletedRelease> {
  readonly key = 'complete-release';
  readonly rank = 'chain' as const;

  constructor(
    private readonly pg: boolean,
    private readonly q: CommonSql,
  ) {}

  /** A record that cannot be built leaves the release recorded with its context (RELEASED). */
  private async keepContext(run: Run, item: ReleaseItem, buildError: unknown): Promise<BulkOutcome<CompletedRelease>> {
    if ((await run(this.q.markReleased, [JSON.stringify(item.context), item.at, item.id])).affected !== 1) {
      return { ok: false, error: new IntentStateConflictError(item.id, 'RELEASED') };
    }
    return { ok: true, value: { record: undefined, buildError } };
  }

  async write(run: Run, items: readonly ReleaseItem[]): Promise<BulkOutcome<CompletedRelease>[]> {
    if (!this.pg) return oneByOne(items, (item) => this.writeSqlite(run, item));
    // The chain's row is locked by the batch's first release and stays locked until COMMIT.
    const state = transactionState(run);
    let head = state.get(CHAIN_HEAD) as { hash: string | null; position: number } | undefined;
    if (!head) {
      const [row] = (await run(SQL.pg.chainLock, [])).records as { head_hash: string | null; head_position: string | number }[];
      head = { hash: row!.head_hash, position: Number(row!.head_position) };
    }
    // No read of the intents' states first (a round trip): each is a request's own intent, PREPARED
    // until this write; the write moves only PREPARED ones and the batch is not committed unless it
    // moved every one (then each is written again alone, and the one not PREPARED fails alone).
    const outcomes: (BulkOutcome<CompletedRelease> | undefined)[] = [];
    const kept: [ReleaseItem, number, unknown][] = [];
    const written: { item: ReleaseItem; record: SignedTrustRecord; body: string; position: number; index: number }[] = [];
    const seen = new Set<string>();
    for (const [index, item] of items.entries()) {
      if (seen.has(item.id)) {
        outcomes[index] = { ok: false, error: new IntentStateConflictError(item.id, 'RELEASED') };
        continue;
      }
      seen.add(item.id);
      let record: SignedTrustRecord;
      let newHead: string;
      try {
        record = await item.build({ chainHash: head.hash });
      } catch (e) {
        kept.push([item, index, e]);
        continue;
      }
      try {
        newHead = chainHeadAfter(record, { chainHash: head.hash }, item.id);
      } catch (e) {
        outcomes[index] = { ok: false, error: e };
        continue;
      }
      head = { hash: newHead, position: head.position + 1 };
      written.push({ item, record, body: canonicalJsonOf(record), position: head.position, index });
    }
    if (written.length > 0) {
      const [row] = (
        await run(SQL.pg.releaseWrite, [
          written.map((w) => w.item.id),
          written.map((w) => w.body),
          written.map((w) => w.item.at),
          written.map((w) => w.position),
          head.hash,
          head.position,
          written.at(-1)!.item.at,
        ])
      ).records as { moved: string | number }[];
      // Every one moves, or nothing of this is committed: one release alone fails as the intent's
      // state conflict; several are then written again one by one, so only that one fails.
      if (Number(row?.moved) !== written.length) {
        if (written.length === 1) throw new IntentStateConflictError(written[0]!.item.id, 'RELEASED');
        throw new Error(`completeRelease: ${String(row?.moved)} of ${written.length} intents were PREPARED`);
      }
      state.set(CHAIN_HEAD, head);
      for (const w of written) {
        appendToLog(run, [{ kind: 'trust-record', id: w.item.id, body: w.body, canonical: true }]);
        outcomes[w.index] = { ok: true, value: { record: w.record } };
      }
    }
    for (const [item, index, e] of kept) outcomes[index] = await this.keepContext(run, item, e);
    return outcomes.map((o) => o!);
  }

  /** SQLite: the state and the chain's head read under the write lock, the record built, everything written. */
  private async writeSqlite(run: Run, item: ReleaseItem): Promise<BulkOutcome<CompletedRelease>> {
    const { id, at } = item;
    const [row] = (await run(SQL.sqlite.finalizeRead, [id])).records as { state: IntentState; head_hash: string | null; head_position: number }[];
    if (!row || row.state !== 'PREPARED') return { ok: false, error: new IntentStateConflictError(id, 'RELEASED') };
    const head: ChainHead = { chainHash: row.head_hash };
    let record: SignedTrustRecord;
    try {
      record = await item.build(head);
    } catch (e) {
      return this.keepContext(run, item, e);
    }
    if ((await run(SQL.sqlite.completeState, [at, id])).affected !== 1) return { ok: false, error: new IntentStateConflictError(id, 'RELEASED') };
    await writeRecordSqlite(run, id, record, head, Number(row.head_position) + 1, at);
    return { ok: true, value: { record } };
  }
}

const COMMON = {
  // Recording the release's outcome ends the request's lease: it is no longer in flight.
  markReleased:
    "UPDATE execution_intents SET state = 'RELEASED', release_context = ?, in_flight_until = NULL, updated_at = ? WHERE business_transaction_id = ? AND state = 'PREPARED'",
  markErrored:
    "UPDATE execution_intents SET state = 'ERRORED', status_detail = ?, in_flight_until = NULL, updated_at = ? WHERE business_transaction_id = ? AND state IN ('PREPARED', 'RELEASED')",
  resolve:
    "UPDATE execution_intents SET state = 'RESOLVED', status_detail = ?, in_flight_until = NULL, updated_at = ? WHERE business_transaction_id = ? AND state = ?",
};
type CommonSql = typeof COMMON;
const COMMON_PG = Object.fromEntries(Object.entries(COMMON).map(([k, v]) => [k, toPg(v)])) as CommonSql;

const RESOLVABLE: readonly IntentState[] = ['PREPARED', 'ERRORED'];

/**
 * Held transactions (migration 0019). A decision is a compare-and-set from PENDING on the held row
 * (PostgreSQL waits for a concurrent decision's row lock and then finds it decided; SQLite runs it
 * under the writer's BEGIN IMMEDIATE), and the claim, the records and the log leaf's locator move in
 * the same transaction.
 */
const HELD = {
  insert: `INSERT INTO held_transactions (business_transaction_id, caller_id, status, decided, created_at, expires_at)
    VALUES (?, ?, 'PENDING', ?, ?, ?)`,
  // params: decidedBy, decidedAt, approval, id (of the record), id, at.
  approve: `UPDATE held_transactions SET status = 'APPROVED', decided_by = ?, decided_at = ?, approval = ?,
      held_record = (SELECT body FROM trust_records WHERE business_transaction_id = ?)
    WHERE business_transaction_id = ? AND status = 'PENDING' AND expires_at > ?`,
  // params: status, decidedBy, decidedAt, reason, id (of the record), id, decidedAt. An expiry needs
  // the time run out, a rejection the time not yet run out.
  reject: `UPDATE held_transactions SET status = ?, decided_by = ?, decided_at = ?, reason = ?,
      held_record = (SELECT body FROM trust_records WHERE business_transaction_id = ?)
    WHERE business_transaction_id = ? AND status = 'PENDING' AND expires_at > ?`,
  expire: `UPDATE held_transactions SET status = ?, decided_by = ?, decided_at = ?, reason = ?,
      held_record = (SELECT body FROM trust_records WHERE business_transaction_id = ?)
    WHERE business_transaction_id = ? AND status = 'PENDING' AND expires_at <= ?`,
  claim: "UPDATE business_transactions SET outcome = ? WHERE business_transaction_id = ? AND outcome = 'HELD'",
  // The held decision's record leaves the records (the release's record takes its place); its leaf now finds it in the held row.
  moveRecord: 'DELETE FROM trust_records WHERE business_transaction_id = ? AND chain_position IS NULL',
  moveLeaf: "UPDATE transparency_log_leaves SET record_kind = 'held-trust-record' WHERE record_kind = 'trust-record' AND record_id = ?",
  nonce: 'INSERT INTO step_up_nonces (nonce, caller_id, change_id, used_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING',
  select: 'SELECT decided, status, created_at, expires_at, decided_by, decided_at, reason FROM held_transactions',
  due: "SELECT business_transaction_id FROM held_transactions WHERE status = 'PENDING' AND expires_at <= ? ORDER BY expires_at ASC, business_transaction_id ASC LIMIT ?",
};

interface HeldRow {
  decided: string;
  status: HeldStatus;
  created_at: string;
  expires_at: string;
  decided_by: string | null;
  decided_at: string | null;
  reason: string | null;
}

/** Thrown inside a held decision's transaction to roll it back: the envelope's nonce was used before. */
class NonceReused extends Error {}

// Reads, with `?` placeholders (read() turns them into PostgreSQL's).
const IS_CLAIMED = 'SELECT 1 AS x FROM business_transactions WHERE business_transaction_id = ?';
const RELEASE_CONTEXT = 'SELECT release_context FROM execution_intents WHERE business_transaction_id = ?';
const CLAIM_SELECT = 'SELECT business_transaction_id, caller_id, outcome, created_at FROM business_transactions';
const INTENT_SELECT = 'SELECT state, intent, status_detail, updated_at, in_flight_until FROM execution_intents';

/**
 * The execution pipeline's storage on SQLite or PostgreSQL. Signed objects are stored as their
 * RFC 8785 canonical text (`canonicalJsonOf`: exactly what was signed, whose SHA-256 is the
 * record's transparency-log leaf) and returned as `JSON.parse(text)` (or as the stored text itself), so
 * what was signed comes back unchanged (including `__proto__` keys and null chain fields).
 *
 * Every read takes a ReadScope: a caller's scope adds the row's caller to the query (the claim's
 * caller, kept on `trust_records` and `execution_intents` for their indexed lists), so another
 * caller's row is not found.
 */
export class TypeOrmExecutionStore implements ExecutionStore, TransactionSearch {
  private readonly pg: boolean;
  private readonly q: CommonSql;
  private readonly leaseMs: number;
  private readonly claims: Record<'refusal' | 'record' | 'intent', ClaimWrite>;
  private readonly releases: ReleaseWrite;

  constructor(
    private readonly ds: DataSource,
    options: { inFlightLeaseMs?: number } = {},
  ) {
    this.pg = ds.options.type === 'postgres';
    this.q = this.pg ? COMMON_PG : COMMON;
    this.leaseMs = options.inFlightLeaseMs ?? INTENT_IN_FLIGHT_LEASE_MS;
    this.claims = {
      refusal: new ClaimWrite('claim-refusal', this.pg, SQL.pg.refusal),
      record: new ClaimWrite('claim-record', this.pg, SQL.pg.record),
      intent: new ClaimWrite('claim-intent', this.pg, SQL.pg.intent),
    };
    this.releases = new ReleaseWrite(this.pg, this.q);
  }

  // --- claims -------------------------------------------------------------------------------------

  async isClaimed(businessTransactionId: string): Promise<boolean> {
    return (await this.read(IS_CLAIMED, [businessTransactionId])).length > 0;
  }

  async storeRefusal(claim: TransactionClaim, refusal: SignedRefusal, audit?: Signed<AuthEvent>): Promise<void> {
    sameId(claim, refusal.businessTransactionId);
    const body = canonicalJsonOf(refusal);
    const logged: LoggedRecord = { kind: 'refusal', id: claim.businessTransactionId, body, canonical: true };
    return this.claimWith(this.claims.refusal, { claim, sqlite: [SQL.sqlite.refusal, [claim.businessTransactionId, body, claim.createdAt]], values: [body], logged }, audit);
  }

  /** A record without executions has no chain position: it is listed after the chain. */
  async storeRecordedTransaction(claim: TransactionClaim, record: SignedTrustRecord, audit?: Signed<AuthEvent>): Promise<void> {
    sameId(claim, record.businessTransactionId);
    const body = canonicalJsonOf(record);
    const logged: LoggedRecord = { kind: 'trust-record', id: claim.businessTransactionId, body, canonical: true };
    const sqlite: ClaimItem['sqlite'] = [SQL.sqlite.record, [claim.businessTransactionId, claim.callerId, body, claim.createdAt]];
    return this.claimWith(this.claims.record, { claim, sqlite, values: [body], logged }, audit);
  }

  /**
   * Durable on return (the group commit answers after its COMMIT is durable). The same statement
   * starts the request's lease (in flight until `at` + the lease), so no resolution can slip in
   * between the intent being stored and the request holding it.
   */
  async prepareIntent(claim: TransactionClaim, intent: SignedIntent, at: string, audit?: Signed<AuthEvent>): Promise<void> {
    sameId(claim, intent.businessTransactionId);
    const body = canonicalJsonOf(intent);
    const until = new Date(Date.parse(at) + this.leaseMs).toISOString();
    const logged: LoggedRecord = { kind: 'intent', id: claim.businessTransactionId, body, canonical: true };
    const sqlite: ClaimItem['sqlite'] = [SQL.sqlite.intent, [claim.businessTransactionId, claim.callerId, body, at, at, until]];
    return this.claimWith(this.claims.intent, { claim, sqlite, values: [body, at, until], logged }, audit);
  }

  /** Claim + record (+ the request's authentication event) + their log leaves in one commit (see ClaimWrite). */
  private async claimWith(work: ClaimWrite, item: Omit<ClaimItem, 'audit'>, audit: Signed<AuthEvent> | undefined): Promise<void> {
    try {
      await storeBulk(this.ds, work, { ...item, audit: audit && auditEventRow(audit) });
    } catch (e) {
      // Belt and braces: a unique violation of a record table (a row without its claim) is a duplicate too.
      if (isUniqueViolation(e)) throw new DuplicateTransactionError(item.claim.businessTransactionId);
      throw e;
    }
  }

  // --- held transactions --------------------------------------------------------------------------

  /** One transaction of its own (human-paced, outside the group's lock order on PostgreSQL). */
  async storeHeld(
    claim: TransactionClaim,
    record: SignedTrustRecord,
    held: { decided: DecidedTransaction; expiresAt: string },
    audit?: Signed<AuthEvent>,
    notices: readonly OutboundNotice[] = [],
  ): Promise<void> {
    sameId(claim, record.businessTransactionId);
    const id = claim.businessTransactionId;
    const body = canonicalJsonOf(record);
    try {
      await this.transaction({ alone: true }, async (run) => {
        if ((await run(this.sql(CLAIM_INSERT), claimValues(claim))).affected !== 1) throw new DuplicateTransactionError(id);
        await run(this.sql(SQL.sqlite.record), [id, claim.callerId, body, claim.createdAt]);
        await run(this.sql(HELD.insert), [id, claim.callerId, JSON.stringify(held.decided), claim.createdAt, held.expiresAt]);
        await insertNotices(run, this.pg, notices);
        const logged: LoggedRecord = { kind: 'trust-record', id, body, canonical: true };
        appendToLog(run, audit ? [await insertAuditRow(run, this.pg, auditEventRow(audit)), logged] : [logged]);
      });
    } catch (e) {
      if (isUniqueViolation(e)) throw new DuplicateTransactionError(id);
      throw e;
    }
  }

  async approveHeld(businessTransactionId: string, approval: HeldApproval, intent: SignedIntent, at: string): Promise<boolean> {
    const id = businessTransactionId;
    if (intent.businessTransactionId !== id) throw new Error(`approveHeld: the intent is of '${intent.businessTransactionId}', not '${id}'`);
    const body = canonicalJsonOf(intent);
    const until = new Date(Date.parse(at) + this.leaseMs).toISOString();
    return this.transaction({ alone: true }, async (run) => {
      const moved = await run(this.sql(HELD.approve), [approval.approverId, approval.approvedAt, JSON.stringify(approval.approval), id, id, at]);
      if (moved.affected !== 1) return false;
      await this.moveHeldRecord(run, id, 'EXECUTING');
      await run(this.sql(SQL.sqlite.intent), [id, intent.callerId, body, at, at, until]);
      appendToLog(run, [{ kind: 'intent', id, body, canonical: true }]);
      return true;
    });
  }

  async refuseHeld(businessTransactionId: string, refusal: HeldRefusal, record: SignedRefusal): Promise<'refused' | 'not-pending' | 'nonce-reused'> {
    const id = businessTransactionId;
    sameId({ businessTransactionId: id } as TransactionClaim, record.businessTransactionId);
    const body = canonicalJsonOf(record);
    const decidedBy = refusal.status === 'REJECTED' ? refusal.decidedBy : null;
    try {
      return await this.transaction({ alone: true }, async (run) => {
        const cas = refusal.status === 'REJECTED' ? HELD.reject : HELD.expire;
        const moved = await run(this.sql(cas), [refusal.status, decidedBy, refusal.decidedAt, refusal.reason, id, id, refusal.decidedAt]);
        if (moved.affected !== 1) return 'not-pending' as const;
        if (refusal.status === 'REJECTED' && (await run(this.sql(HELD.nonce), [refusal.nonce, refusal.decidedBy, id, refusal.decidedAt])).affected !== 1) {
          throw new NonceReused();
        }
        await this.moveHeldRecord(run, id, 'REFUSED');
        await run(this.sql(SQL.sqlite.refusal), [id, body, refusal.decidedAt]);
        appendToLog(run, [{ kind: 'refusal', id, body, canonical: true }]);
        return 'refused' as const;
      });
    } catch (e) {
      if (e instanceof NonceReused) return 'nonce-reused';
      throw e;
    }
  }

  /** The claim out of HELD, and the held decision's record out of the records (its leaf follows it to the held row). */
  private async moveHeldRecord(run: Run, id: string, outcome: TransactionClaim['outcome']): Promise<void> {
    await run(this.sql(HELD.claim), [outcome, id]);
    await run(this.sql(HELD.moveRecord), [id]);
    await run(this.sql(HELD.moveLeaf), [id]);
  }

  async getHeld(businessTransactionId: string, scope: ReadScope): Promise<HeldTransaction | undefined> {
    const w = where(['business_transaction_id = ?', businessTransactionId], inScope(scope, 'caller_id'));
    const [row] = await this.read<HeldRow>(HELD.select + w.sql, w.params);
    return row ? toHeld(row) : undefined;
  }

  async listHeld(status: HeldStatus | undefined, scope: ReadScope, page: number, pageSize: number): Promise<Page<HeldTransaction>> {
    checkPage(page, pageSize);
    const w = where(given('status = ?', status), inScope(scope, 'caller_id'));
    const [rows, total] = await Promise.all([
      this.read<HeldRow>(`${HELD.select}${w.sql} ORDER BY created_at DESC, business_transaction_id DESC LIMIT ? OFFSET ?`, [...w.params, ...limitOffset(page, pageSize)]),
      this.count('held_transactions', w),
    ]);
    return { items: rows.map(toHeld), page, pageSize, total };
  }

  async listExpiredHeld(at: string, limit: number): Promise<string[]> {
    return (await this.read<{ business_transaction_id: string }>(HELD.due, [at, limit])).map((r) => r.business_transaction_id);
  }

  /** `sql` with `?` placeholders in the database's own. */
  private sql(sql: string): string {
    return this.pg ? toPg(sql) : sql;
  }

  // --- intent state -------------------------------------------------------------------------------

  async markReleased(businessTransactionId: string, context: ReleaseContext, at: string): Promise<void> {
    const res = await storeStatement(this.ds, this.q.markReleased, [JSON.stringify(context), at, businessTransactionId]);
    if (res.affected !== 1) throw new IntentStateConflictError(businessTransactionId, 'RELEASED');
  }

  async markErrored(businessTransactionId: string, error: NonNullable<IntentStatus['error']>, at: string): Promise<void> {
    const res = await storeStatement(this.ds, this.q.markErrored, [JSON.stringify({ error }), at, businessTransactionId]);
    if (res.affected !== 1) throw new IntentStateConflictError(businessTransactionId, 'ERRORED');
  }

  /**
   * One transaction on the intent's row (PostgreSQL: locked FOR UPDATE, so markReleased and
   * markErrored of the running request wait for it or it for them; SQLite: the database write
   * lock of BEGIN IMMEDIATE, across processes too): the state and the lease are read and the move
   * is made under the same lock.
   */
  async resolve(businessTransactionId: string, resolution: Omit<IntentResolution, 'previousState'>, at: string): Promise<ResolveOutcome> {
    // PostgreSQL: alone, outside the group commit (a human's rare write that locks an intent's row).
    return this.transaction({ alone: true }, async (run): Promise<ResolveOutcome> => {
      const [row] = (await run(this.pg ? SQL.pg.resolveRead : SQL.sqlite.resolveRead, [businessTransactionId])).records as {
        state: IntentState;
        status_detail: string | null;
        in_flight_until: string | null;
      }[];
      if (!row) return { outcome: 'not-found' };
      if (!RESOLVABLE.includes(row.state)) return { outcome: 'not-resolvable', state: row.state };
      if (row.in_flight_until !== null && Date.parse(row.in_flight_until) > Date.parse(at)) return { outcome: 'in-flight', until: row.in_flight_until };
      // The error of an ERRORED intent stays beside the resolution.
      const previousState = row.state as IntentResolution['previousState'];
      const detail = { ...(row.status_detail ? (JSON.parse(row.status_detail) as object) : {}), resolution: { ...resolution, previousState } };
      const res = await run(this.q.resolve, [JSON.stringify(detail), at, businessTransactionId, row.state]);
      return res.affected === 1 ? { outcome: 'resolved' } : { outcome: 'not-resolvable', state: row.state };
    });
  }

  async finalize(
    businessTransactionId: string,
    build: (head: ChainHead) => Promise<SignedTrustRecord>,
    at: string,
  ): Promise<SignedTrustRecord | undefined> {
    const id = businessTransactionId;
    if (this.pg) {
      return this.transaction({ rank: 'chain' }, async (run) => {
        const locked = (await run(SQL.pg.finalizeLock, [id, at])).records as { head_hash: string | null; head_position: string | number }[];
        if (locked.length === 0) return undefined; // not RELEASED: nothing was changed
        const head: ChainHead = { chainHash: locked[0]!.head_hash };
        const record = await build(head);
        const position = Number(locked[0]!.head_position) + 1;
        const body = canonicalJsonOf(record);
        const newHead = chainHeadAfter(record, head, id);
        await run(SQL.pg.finalizeWrite, [id, body, at, newHead, position]);
        // A release later in the same batch links to this record (see completeRelease).
        transactionState(run).set(CHAIN_HEAD, { hash: newHead, position });
        // Appended at COMMIT, so the log lock comes after the chain lock (the one lock order).
        appendToLog(run, [{ kind: 'trust-record', id, body, canonical: true }]);
        return record;
      });
    }
    return this.transaction({}, async (run) => {
      const [row] = (await run(SQL.sqlite.finalizeRead, [id])).records as { state: IntentState; head_hash: string | null; head_position: number }[];
      if (!row || row.state !== 'RELEASED') return undefined;
      const head: ChainHead = { chainHash: row.head_hash };
      const record = await build(head);
      const moved = await run(SQL.sqlite.finalizeState, [at, id]);
      if (moved.affected !== 1) throw new Error(`finalize: execution intent '${id}' left RELEASED during finalize`);
      await writeRecordSqlite(run, id, record, head, Number(row.head_position) + 1, at);
      return record;
    });
  }

  async completeRelease(
    businessTransactionId: string,
    context: ReleaseContext,
    build: (head: ChainHead) => Promise<SignedTrustRecord>,
    at: string,
  ): Promise<CompletedRelease> {
    return storeBulk(this.ds, this.releases, { id: businessTransactionId, context, build, at });
  }

  // --- reads --------------------------------------------------------------------------------------

  async getIntent(businessTransactionId: string, scope: ReadScope): Promise<StoredIntent | undefined> {
    const w = where(['business_transaction_id = ?', businessTransactionId], inScope(scope, 'caller_id'));
    const [row] = await this.read<IntentRow>(INTENT_SELECT + w.sql, w.params);
    return row ? toIntent(row) : undefined;
  }

  async getReleaseContext(businessTransactionId: string): Promise<ReleaseContext | undefined> {
    const [row] = await this.read<{ release_context: string | null }>(RELEASE_CONTEXT, [businessTransactionId]);
    return row?.release_context ? (JSON.parse(row.release_context) as ReleaseContext) : undefined;
  }

  /** Oldest first (reconciliation works through the backlog in order); pages start at 1. */
  async listIntents(states: readonly IntentState[], scope: ReadScope, page: number, pageSize: number): Promise<Page<StoredIntent>> {
    checkPage(page, pageSize);
    if (states.length === 0) return { items: [], page, pageSize, total: 0 };
    const w = where([`state IN ${placeholders(states.length)}`, ...states], inScope(scope, 'caller_id'));
    const [rows, total] = await Promise.all([
      this.read<IntentRow>(`${INTENT_SELECT}${w.sql} ORDER BY created_at ASC, business_transaction_id ASC LIMIT ? OFFSET ?`, [...w.params, ...limitOffset(page, pageSize)]),
      this.count('execution_intents', w),
    ]);
    return { items: rows.map(toIntent), page, pageSize, total };
  }

  async getTrustRecord(businessTransactionId: string, scope: ReadScope): Promise<SignedTrustRecord | undefined> {
    const text = await this.getTrustRecordText(businessTransactionId, scope);
    return text === undefined ? undefined : (JSON.parse(text) as SignedTrustRecord);
  }

  async hasTrustRecord(businessTransactionId: string, scope: ReadScope): Promise<boolean> {
    const w = where(['business_transaction_id = ?', businessTransactionId], inScope(scope, 'caller_id'));
    return (await this.read<{ one: number }>(`SELECT 1 AS one FROM trust_records${w.sql}`, w.params)).length > 0;
  }

  async getTrustRecordText(businessTransactionId: string, scope: ReadScope): Promise<string | undefined> {
    const w = where(['business_transaction_id = ?', businessTransactionId], inScope(scope, 'caller_id'));
    const [row] = await this.read<{ body: string }>(`SELECT body FROM trust_records${w.sql}`, w.params);
    return row?.body;
  }

  async getRefusal(businessTransactionId: string, scope: ReadScope): Promise<SignedRefusal | undefined> {
    const w = where(['business_transaction_id = ?', businessTransactionId], inScope(scope, claimedBy('refusal_records')));
    const [row] = await this.read<{ body: string }>(`SELECT body FROM refusal_records${w.sql}`, w.params);
    return row ? (JSON.parse(row.body) as SignedRefusal) : undefined;
  }

  async getClaim(businessTransactionId: string, scope: ReadScope): Promise<TransactionClaim | undefined> {
    const w = where(['business_transaction_id = ?', businessTransactionId], inScope(scope, 'caller_id'));
    const [row] = await this.read<ClaimRow>(CLAIM_SELECT + w.sql, w.params);
    return row ? toClaim(row) : undefined;
  }

  /**
   * Chain order, oldest first: the records with a chain position by it, then those without (no
   * executions) by creation. Each part is counted and read through its own (partial) index; the
   * page's ids are read at once, the bodies RECORD_TEXT_BATCH at a time as `items` is iterated.
   */
  async listTrustRecordTexts(scope: ReadScope, page: number, pageSize: number): Promise<TextPage> {
    checkPage(page, pageSize);
    const caller = inScope(scope, 'caller_id');
    const c = where(['chain_position IS NOT NULL'], caller);
    const u = where(['chain_position IS NULL'], caller);
    const [chained, unchained] = await Promise.all([this.count('trust_records', c), this.count('trust_records', u)]);
    const offset = (page - 1) * pageSize;
    const ids: string[] = [];
    if (offset < chained) {
      ids.push(...(await this.ids(`${c.sql} ORDER BY chain_position ASC`, c.params, Math.min(pageSize, chained - offset), offset)));
    }
    if (ids.length < pageSize && offset + ids.length < chained + unchained) {
      ids.push(...(await this.ids(`${u.sql} ORDER BY created_at ASC, business_transaction_id ASC`, u.params, pageSize - ids.length, Math.max(0, offset - chained))));
    }
    return { items: this.recordTexts(ids), page, pageSize, total: chained + unchained };
  }

  /** Newest first; pages start at 1. */
  async listClaims(scope: ReadScope, page: number, pageSize: number): Promise<Page<TransactionClaim>> {
    return this.findClaims({}, scope, page, pageSize);
  }

  /**
   * Newest first, of the given caller, outcome and creation times (both bounds included); the
   * caller condition uses the (caller_id, created_at) index, the others narrow its rows.
   */
  async findClaims(query: ClaimQuery, scope: ReadScope, page: number, pageSize: number): Promise<Page<TransactionClaim>> {
    checkPage(page, pageSize);
    const w = where(
      inScope(scope, 'caller_id'),
      given('caller_id = ?', query.callerId),
      given('outcome = ?', query.outcome),
      given('created_at >= ?', query.from),
      given('created_at <= ?', query.to),
    );
    const [rows, total] = await Promise.all([
      this.read<ClaimRow>(`${CLAIM_SELECT}${w.sql} ORDER BY created_at DESC, business_transaction_id DESC LIMIT ? OFFSET ?`, [...w.params, ...limitOffset(page, pageSize)]),
      this.count('business_transactions', w),
    ]);
    return { items: rows.map(toClaim), page, pageSize, total };
  }

  private async ids(whereAndOrder: string, params: unknown[], limit: number, offset: number): Promise<string[]> {
    const rows = await this.read<{ business_transaction_id: string }>(
      `SELECT business_transaction_id FROM trust_records${whereAndOrder} LIMIT ? OFFSET ?`,
      [...params, limit, offset],
    );
    return rows.map((r) => r.business_transaction_id);
  }

  /** The stored texts of `ids`, in that order, RECORD_TEXT_BATCH rows per query. */
  private async *recordTexts(ids: string[]): AsyncGenerator<string> {
    for (let i = 0; i < ids.length; i += RECORD_TEXT_BATCH) {
      const batch = ids.slice(i, i + RECORD_TEXT_BATCH);
      // Each body is let go as soon as it is handed on.
      const byId = new Map(
        (
          await this.read<{ business_transaction_id: string; body: string }>(
            `SELECT business_transaction_id, body FROM trust_records WHERE business_transaction_id IN ${placeholders(batch.length)}`,
            batch,
          )
        ).map((r) => [r.business_transaction_id, r.body]),
      );
      for (const id of batch) {
        const body = byId.get(id);
        byId.delete(id);
        if (body !== undefined) yield body;
      }
    }
  }

  // --- plumbing -----------------------------------------------------------------------------------

  /**
   * `sql` with `?` placeholders (turned into `$n` on PostgreSQL). SQLite: a prepared statement on the
   * connection (no ORM in between: these reads are on the execution pipeline's path).
   */
  private async read<T>(sql: string, params: unknown[]): Promise<T[]> {
    if (this.pg) return (await this.ds.query(toPg(sql), params)) as T[];
    return SqliteStatements.of(this.ds).runSync(sql, params).records as T[];
  }

  private async count(table: string, w: { sql: string; params: unknown[] }): Promise<number> {
    const [row] = await this.read<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${table}${w.sql}`, w.params);
    return Number(row?.n ?? 0);
  }

  /**
   * One transaction on one query runner: commits what `fn` returns, rolls back when it throws.
   * PostgreSQL: a pooled connection. SQLite: the writer (BEGIN IMMEDIATE, group commit).
   */
  private transaction<T>(options: StoreTransactionOptions, fn: (run: Run) => Promise<T>): Promise<T> {
    return storeTransaction(this.ds, fn, options);
  }
}

function toIntent(row: IntentRow): StoredIntent {
  const extras = row.status_detail ? (JSON.parse(row.status_detail) as Omit<IntentStatus, 'state' | 'updatedAt'>) : {};
  const lease = row.in_flight_until !== null ? { inFlightUntil: row.in_flight_until } : {};
  return { intent: JSON.parse(row.intent) as SignedIntent, status: { state: row.state, updatedAt: row.updated_at, ...lease, ...extras } };
}

function toHeld(row: HeldRow): HeldTransaction {
  return {
    decided: JSON.parse(row.decided) as DecidedTransaction,
    status: row.status,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    ...(row.decided_by !== null ? { decidedBy: row.decided_by } : {}),
    ...(row.decided_at !== null ? { decidedAt: row.decided_at } : {}),
    ...(row.reason !== null ? { reason: row.reason } : {}),
  };
}

function toClaim(row: ClaimRow): TransactionClaim {
  return { businessTransactionId: row.business_transaction_id, callerId: row.caller_id, outcome: row.outcome, createdAt: row.created_at };
}

function sameId(claim: TransactionClaim, recordId: string): void {
  if (claim.businessTransactionId !== recordId) {
    throw new Error(`claim '${claim.businessTransactionId}' does not match the record's businessTransactionId '${recordId}'`);
  }
}

/** LIMIT and OFFSET of a page. */
const limitOffset = (page: number, pageSize: number): [number, number] => [pageSize, (page - 1) * pageSize];

/** SQLite SQLITE_CONSTRAINT_PRIMARYKEY / _UNIQUE, PostgreSQL 23505. */
function isUniqueViolation(e: unknown): boolean {
  const driverError = (e as { driverError?: { code?: unknown } } | undefined)?.driverError;
  const code = driverError?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}
