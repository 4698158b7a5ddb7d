import { EntitySchema } from 'typeorm';

export interface AuditEventRow {
  eventId: string;
  kind: string;
  callerId: string | null;
  occurredAt: string;
  body: string;
}

export const AuditEventEntity = new EntitySchema<AuditEventRow>({
  name: 'AuditEvent',
  tableName: 'audit_events',
  columns: {
    eventId: { name: 'event_id', type: 'varchar', length: 64, primary: true },
    kind: { name: 'kind', type: 'varchar', length: 32 },
    callerId: { name: 'caller_id', type: 'varchar', length: 256, nullable: true },
    occurredAt: { name: 'occurred_at', type: 'varchar', length: 32 },
    body: { name: 'body', type: 'text' },
  },
});
