import type { DataSource } from 'typeorm';
import type { AuditEvent, AuditEventStore, Signed } from '@ets/domain';
import { BatchWriter } from '../batch-writer.js';
import { writerOf } from './sqlite-writer.js';
import { AuditEventEntity, type AuditEventRow } from '../entities/index.js';

/** Audit events, appended with group commit (authentication is audited on every keyed request). */
export class TypeOrmAuditEventStore implements AuditEventStore {
  private readonly writer: BatchWriter<AuditEventRow>;

  constructor(private readonly ds: DataSource) {
    // 200 rows x 5 parameters stays well under SQLite's and PostgreSQL's bind-parameter limits.
    this.writer = new BatchWriter((rows) => this.insert(rows), 200);
  }

  append(event: Signed<AuditEvent>): Promise<void> {
    return this.writer.add({
      eventId: event.eventId,
      kind: event.kind,
      callerId: event.callerId,
      occurredAt: event.occurredAt,
      body: JSON.stringify(event),
    });
  }

  private async insert(rows: AuditEventRow[]): Promise<void> {
    if (this.ds.options.type === 'postgres') {
      await this.ds.createQueryBuilder().insert().into(AuditEventEntity).values(rows).execute();
      return;
    }
    // SQLite: through the single writer, never as a bare statement (on the shared connection it
    // would join another store's open transaction and vanish with its rollback). As an ordinary
    // job it shares the group commit (one fsync) with the execution pipeline's transactions.
    const values = rows.map(() => '(?, ?, ?, ?, ?)').join(', ');
    const params = rows.flatMap((r) => [r.eventId, r.kind, r.callerId, r.occurredAt, r.body]);
    await writerOf(this.ds).statement(`INSERT INTO audit_events (event_id, kind, caller_id, occurred_at, body) VALUES ${values}`, params);
  }

  async list(query: { callerId?: string; limit: number; before?: string; kind?: AuditEvent['kind'] }): Promise<Signed<AuditEvent>[]> {
    const qb = this.ds.getRepository(AuditEventEntity).createQueryBuilder('e').select('e.body', 'body');
    if (query.kind) qb.andWhere('e.kind = :kind', { kind: query.kind });
    if (query.callerId !== undefined) qb.andWhere('e.caller_id = :callerId', { callerId: query.callerId });
    if (query.before) qb.andWhere('e.occurred_at < :before', { before: query.before });
    qb.orderBy('e.occurred_at', 'DESC').addOrderBy('e.event_id', 'DESC').limit(query.limit);
    const rows = await qb.getRawMany<{ body: string }>();
    return rows.map((r) => JSON.parse(r.body) as Signed<AuditEvent>);
  }
}
