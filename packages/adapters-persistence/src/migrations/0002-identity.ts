import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/** Signed caller-authentication (and governance) audit events, and handbook leads. */
export class Identity1763683300000 implements MigrationInterface {
  name = 'Identity1763683300000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'audit_events',
        columns: [
          { name: 'event_id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'kind', type: 'varchar', length: '32' },
          { name: 'caller_id', type: 'varchar', length: '256', isNullable: true },
          { name: 'occurred_at', type: 'varchar', length: '32' },
          // The signed event exactly as signed.
          { name: 'body', type: 'text' },
        ],
      }),
    );
    await q.createIndex('audit_events', new TableIndex({ name: 'idx_audit_events_time', columnNames: ['occurred_at', 'event_id'] }));
    await q.createIndex('audit_events', new TableIndex({ name: 'idx_audit_events_caller_time', columnNames: ['caller_id', 'occurred_at'] }));
    await q.createTable(
      new Table({
        name: 'handbook_leads',
        columns: [
          // Lower-cased: one lead per address, case-insensitively.
          { name: 'email_key', type: 'varchar', length: '320', isPrimary: true },
          { name: 'email', type: 'varchar', length: '320' },
          { name: 'created_at', type: 'varchar', length: '32' },
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('handbook_leads');
    await q.dropTable('audit_events');
  }
}
