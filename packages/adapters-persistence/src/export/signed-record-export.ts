import type { DataSource, QueryRunner } from 'typeorm';
import type { LogCheckpoint } from '@ets/domain';
import { given, placeholders, toPg, where } from '../stores/sql.js';
import type { LoggedRecordKind } from '../transparency/log-append.js';
import { LATEST_CHECKPOINT_SQL, toCheckpoint, TREE_HEAD_SQL, type CheckpointRow } from '../transparency/typeorm-transparency-log.js';

/**
 * Reads a run of the transparency log with the signed record of each leaf, for an auditor
 * (`ets export`), in leaf order, page by page (keyset on the leaf index: constant memory, no row
 * read twice), inside one read-only snapshot of the database, so that a running server's writes
 * during the export neither tear it nor show up half.
 *
 * The run is of the tree of the newest signed checkpoint: every leaf of it, or, for a period, the
 * leaves from the first to the last of a record stamped in the period, with every leaf in between
 * (records of other times included: leaves and times interleave, since a record is stamped when
 * it is made and logged when it commits). So the file is one stretch of the log, each leaf once,
 * in order, which `ets verify --all` can check is complete; and leaf order is chain order for the
 * Trust Records (a chained record's leaf is appended under the chain lock).
 *
 * A record comes out as the JSON text that was signed, never re-serialized: the text whose
 * H(C(·)) is its leaf. A confirmation proof is stored as the compact JWS itself and logged, served
 * and exported as a JSON string.
 */

/** The kinds of record `ets export` writes (`verifyOffline`'s names), in the order its summary counts them. */
export const EXPORT_KINDS = [
  'execution-trust-record',
  'execution-intent',
  'refusal-record',
  'verification',
  'receipt',
  'audit-event',
  'attestation',
  'override-resolution',
  'runtime-manifest',
  'confirmation-proof',
] as const;
export type ExportKind = (typeof EXPORT_KINDS)[number];

/** A period: `since` included, `until` excluded; ISO 8601 UTC as the service stores times (`Date.toISOString`). */
export interface ExportPeriod {
  since?: string;
  until?: string;
}

/** A run of leaves, both ends included. */
export interface LeafRun {
  first: number;
  last: number;
}

export interface ExportedLeaf {
  leafIndex: number;
  /** The leaf input, lower-case hex. */
  leaf: string;
  kind: ExportKind;
  /** The record's id as the leaf row names it. */
  id: string;
  /** The signed record, JSON text exactly as stored; undefined when the database no longer holds it. */
  body?: string;
}

interface Source {
  kind: ExportKind;
  table: string;
  /** The column the leaf row's `record_id` names. */
  id: string;
  body: string;
  /** The record's time (the period filter). */
  time: string;
  /** The column holds a string that was signed and logged as a JSON string (a compact JWS). */
  asString?: true;
}

/** Where the record of each kind of leaf is stored (the stores' `appendToLog` calls and migration 0016's backfill). */
const SOURCES: Readonly<Record<LoggedRecordKind, Source>> = {
  'trust-record': { kind: 'execution-trust-record', table: 'trust_records', id: 'business_transaction_id', body: 'body', time: 'created_at' },
  'held-trust-record': { kind: 'execution-trust-record', table: 'held_transactions', id: 'business_transaction_id', body: 'held_record', time: 'created_at' },
  intent: { kind: 'execution-intent', table: 'execution_intents', id: 'business_transaction_id', body: 'intent', time: 'created_at' },
  refusal: { kind: 'refusal-record', table: 'refusal_records', id: 'business_transaction_id', body: 'body', time: 'created_at' },
  verification: { kind: 'verification', table: 'verifications', id: 'id', body: 'body', time: 'created_at' },
  receipt: { kind: 'receipt', table: 'receipts', id: 'id', body: 'body', time: 'created_at' },
  'audit-event': { kind: 'audit-event', table: 'audit_events', id: 'event_id', body: 'body', time: 'occurred_at' },
  attestation: { kind: 'attestation', table: 'attestation_decisions', id: 'execution_id', body: 'attestation', time: 'created_at' },
  'override-resolution': { kind: 'override-resolution', table: 'attestation_overrides', id: 'override_id', body: 'resolution', time: 'resolved_at' },
  // Signed at every start (created_at = manifest.startedAt); the first one is leaf 0.
  'runtime-manifest': { kind: 'runtime-manifest', table: 'runtime_manifests', id: 'manifest_hash', body: 'body', time: 'created_at' },
  // proof_id = H(C(proof)), the leaf input.
  'confirmation-proof': { kind: 'confirmation-proof', table: 'attestation_confirmation_proofs', id: 'proof_id', body: 'proof', time: 'confirmed_at', asString: true },
};
const LOGGED_KINDS = Object.keys(SOURCES) as LoggedRecordKind[];

type Row = Record<string, unknown>;

export class SignedRecordExport {
  private constructor(
    private readonly runner: QueryRunner,
    private readonly pg: boolean,
    private readonly pageSize: number,
  ) {}

  /**
   * Runs `fn` over one snapshot of the database: PostgreSQL `REPEATABLE READ READ ONLY`, SQLite a
   * read transaction (WAL keeps it while the server writes).
   */
  static async snapshot<T>(ds: DataSource, fn: (reader: SignedRecordExport) => Promise<T>, pageSize = 500): Promise<T> {
    const pg = ds.options.type === 'postgres';
    const runner = ds.createQueryRunner();
    try {
      await runner.query(pg ? 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY' : 'BEGIN');
      try {
        return await fn(new SignedRecordExport(runner, pg, pageSize));
      } finally {
        await runner.query(pg ? 'ROLLBACK' : 'COMMIT').catch(() => undefined);
      }
    } finally {
      await runner.release();
    }
  }

  /** The newest signed checkpoint of the snapshot: an export is a run of its tree. */
  async checkpoint(): Promise<LogCheckpoint | undefined> {
    const [row] = await this.query(LATEST_CHECKPOINT_SQL, []);
    return row ? toCheckpoint(row as unknown as CheckpointRow) : undefined;
  }

  /** Leaves committed after the checkpoint of `treeSize` (not in the export: the next checkpoint holds them). */
  async newerThan(treeSize: number): Promise<number> {
    const [row] = await this.query(TREE_HEAD_SQL, []);
    return Math.max(0, Number(row?.tree_size ?? 0) - treeSize);
  }

  /**
   * The run of the tree of `treeSize` leaves that `period` selects: all of it without a period;
   * else from the first to the last leaf of a record stamped in the period. Null when it is empty.
   */
  async run(treeSize: number, period: ExportPeriod): Promise<LeafRun | null> {
    if (treeSize === 0) return null;
    if (period.since === undefined && period.until === undefined) return { first: 0, last: treeSize - 1 };
    let first = Number.POSITIVE_INFINITY;
    let last = -1;
    for (const kind of LOGGED_KINDS) {
      const s = SOURCES[kind];
      const w = where(['l.record_kind = ?', kind], ['l.leaf_index < ?', treeSize], given(`t.${s.time} >= ?`, period.since), given(`t.${s.time} < ?`, period.until));
      const [row] = await this.query(`SELECT MIN(l.leaf_index) AS first, MAX(l.leaf_index) AS last FROM transparency_log_leaves l JOIN ${s.table} t ON t.${s.id} = l.record_id${w.sql}`, w.params);
      if (row?.first === null || row?.first === undefined) continue;
      first = Math.min(first, Number(row.first));
      last = Math.max(last, Number(row.last));
    }
    return last < 0 ? null : { first, last };
  }

  /** How many leaves of each kind the run holds. */
  async counts(run: LeafRun): Promise<Partial<Record<ExportKind, number>>> {
    const rows = await this.query('SELECT record_kind, COUNT(*) AS n FROM transparency_log_leaves WHERE leaf_index >= ? AND leaf_index <= ? GROUP BY record_kind', [run.first, run.last]);
    const counts: Partial<Record<ExportKind, number>> = {};
    for (const r of rows) {
      const source = SOURCES[r.record_kind as LoggedRecordKind];
      if (source) counts[source.kind] = Number(r.n);
    }
    return counts;
  }

  /** Every leaf of the run in order, each with its record. */
  async *leaves(run: LeafRun): AsyncGenerator<ExportedLeaf> {
    for (let from = run.first; from <= run.last; ) {
      const rows = await this.query(
        `SELECT leaf_index, leaf, record_kind, record_id FROM transparency_log_leaves WHERE leaf_index >= ? AND leaf_index <= ? ORDER BY leaf_index LIMIT ${this.pageSize}`,
        [from, run.last],
      );
      if (rows.length === 0) return;
      const bodies = await this.bodies(rows);
      for (const r of rows) {
        const kind = r.record_kind as LoggedRecordKind;
        const id = String(r.record_id);
        const source = SOURCES[kind];
        if (!source) throw new Error(`leaf ${String(r.leaf_index)} is of an unknown kind of record: ${String(r.record_kind)}`);
        const body = bodies.get(`${kind}\n${id}`);
        yield { leafIndex: Number(r.leaf_index), leaf: String(r.leaf), kind: source.kind, id, ...(body !== undefined ? { body } : {}) };
      }
      from = Number(rows[rows.length - 1]!.leaf_index) + 1;
    }
  }

  /** The records a page of leaves names, by `kind\nid`: one query per kind. */
  private async bodies(leaves: Row[]): Promise<Map<string, string>> {
    const ids = new Map<LoggedRecordKind, string[]>();
    for (const r of leaves) {
      const kind = r.record_kind as LoggedRecordKind;
      if (SOURCES[kind]) (ids.get(kind) ?? ids.set(kind, []).get(kind)!).push(String(r.record_id));
    }
    const found = new Map<string, string>();
    for (const [kind, list] of ids) {
      const s = SOURCES[kind];
      const rows = await this.query(`SELECT ${s.id} AS id, ${s.body} AS body FROM ${s.table} WHERE ${s.id} IN ${placeholders(list.length)}`, list);
      // The same text the store logged (`JSON.stringify(proof)` for a JWS; base64url needs no escape).
      for (const row of rows) found.set(`${kind}\n${String(row.id)}`, s.asString ? JSON.stringify(String(row.body)) : String(row.body));
    }
    return found;
  }

  private query(sql: string, params: unknown[]): Promise<Row[]> {
    return this.runner.query(this.pg ? toPg(sql) : sql, params) as Promise<Row[]>;
  }
}
