import type { DataSource } from 'typeorm';
import { canonicalJsonOf } from '@ets/adapters-crypto';
import type { AuditEvent, AuditEventQuery, AuditEventStore, Signed } from '@ets/domain';
import { appendToLog, type LoggedRecord } from '../transparency/log-in-transaction.js';
import type { Run } from './sqlite-writer.js';
import { storeBulk } from './store-transaction.js';
import type { BulkWork } from './pg-group-commit.js';
import { toPg } from './sql.js';
import { AuditEventEntity } from '../entities/index.js';

export const AUDIT_EVENT_COLUMNS = 'audit_events (event_id, kind, caller_id, occurred_at, body)';
const INSERT = `INSERT INTO ${AUDIT_EVENT_COLUMNS} VALUES (?, ?, ?, ?, ?)`;
const INSERT_PG = toPg(INSERT);

/** An audit event as a row (the parameters of AUDIT_EVENT_COLUMNS, in order) and as a log leaf. */
export interface AuditEventRow {
  params: unknown[];
  logged: LoggedRecord;
}

export function auditEventRow(event: Signed<AuditEvent>): AuditEventRow {
  const body = canonicalJsonOf(event);
  return {
    params: [event.eventId, event.kind, event.callerId, event.occurredAt, body],
    logged: { kind: 'audit-event', id: event.eventId, body, canonical: true },
  };
}

/** Inside another store's transaction (the record a request writes carries its authentication event). */
export async function insertAuditEvent(run: Run, pg: boolean, event: Signed<AuditEvent>): Promise<LoggedRecord> {
  return insertAuditRow(run, pg, auditEventRow(event));
}

/** The same, for an event already made a row (its canonical text is made once). */
export async function insertAuditRow(run: Run, pg: boolean, row: AuditEventRow): Promise<LoggedRecord> {
  await run(pg ? INSERT_PG : INSERT, row.params);
  return row.logged;
}

/** Audit events written by a group commit: on PostgreSQL one statement for the batch's events. */
const eventsWrite = (pg: boolean): BulkWork<Signed<AuditEvent>, void> => ({
  key: 'audit-events',
  rank: 'claim',
  async write(run, events) {
    const rows = events.map(auditEventRow);
    if (pg) {
      await run(`INSERT INTO ${AUDIT_EVENT_COLUMNS} SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])`, [0, 1, 2, 3, 4].map((c) => rows.map((r) => r.params[c] as string | null)));
    } else {
      for (const r of rows) await run(INSERT, r.params);
    }
    appendToLog(run, rows.map((r) => r.logged));
    return events.map(() => ({ ok: true, value: undefined }));
  },
});
const PG_EVENTS = eventsWrite(true);
const SQLITE_EVENTS = eventsWrite(false);

/**
 * Audit events (authentication is audited on every keyed request), each a leaf of the
 * transparency log appended in the same commit, written by the store's group commit together with
 * the pipeline's intents and records (on PostgreSQL one statement for all the events of a batch).
 * The authentication event of an execution is usually not written here at all: the commit of the
 * request's first record carries it (ExecutionStore).
 */
export class TypeOrmAuditEventStore implements AuditEventStore {
  private readonly pg: boolean;

  constructor(private readonly ds: DataSource) {
    this.pg = ds.options.type === 'postgres';
  }

  append(event: Signed<AuditEvent>): Promise<void> {
    return storeBulk(this.ds, this.pg ? PG_EVENTS : SQLITE_EVENTS, event);
  }

  async list(query: AuditEventQuery): Promise<Signed<AuditEvent>[]> {
    const qb = this.ds.getRepository(AuditEventEntity).createQueryBuilder('e').select('e.body', 'body');
    if (query.kind) qb.andWhere('e.kind = :kind', { kind: query.kind });
    if (query.callerId !== undefined) qb.andWhere('e.caller_id = :callerId', { callerId: query.callerId });
    if (query.before && query.beforeEventId !== undefined) {
      qb.andWhere('(e.occurred_at < :before OR (e.occurred_at = :before AND e.event_id < :beforeEventId))', { before: query.before, beforeEventId: query.beforeEventId });
    } else if (query.before) {
      qb.andWhere('e.occurred_at < :before', { before: query.before });
    }
    qb.orderBy('e.occurred_at', 'DESC').addOrderBy('e.event_id', 'DESC').limit(query.limit);
    const rows = await qb.getRawMany<{ body: string }>();
    return rows.map((r) => JSON.parse(r.body) as Signed<AuditEvent>);
  }
}
