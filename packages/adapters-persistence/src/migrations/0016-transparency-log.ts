import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';
import { rfc9162, toHex } from '@ets/adapters-crypto';
import { appendLeaves, type LogEntry, type LoggedRecordKind } from '../transparency/log-append.js';
import { leafOfBody } from '../transparency/log-in-transaction.js';

/**
 * The transparency log (CONTRACT "Transparency log"): one append-only RFC 9162 Merkle tree per
 * deployment over every signed record.
 * - `transparency_log_head`: one row, locked by every append: the tree size, its right border
 *   (the hex hashes of the complete subtrees covering it, largest first; enough to append and to
 *   compute the root) and its root.
 * - `transparency_log_nodes`: every complete subtree (level, index), leaf hashes at level 0;
 *   written once, never changed: proofs read O(log n) of them.
 * - `transparency_log_leaves`: each leaf input (H(C(signed record)), hex) at its index, with the
 *   record it stands for (kind, id), so completeness can be checked and a record's leaf found.
 * - `transparency_log_checkpoints`: every signed checkpoint (C2SP signed note), by tree size.
 * - `attestation_confirmation_proofs`: profile A's signed confirmation proofs (compact JWS), which
 *   are signed records too and so leaves of the log.
 * Records stored before this migration become the first leaves, table by table in insertion
 * order, so that every signed record of the deployment is in the log.
 */
export class TransparencyLog1763684700000 implements MigrationInterface {
  name = 'TransparencyLog1763684700000';

  async up(q: QueryRunner): Promise<void> {
    const hex = (name: string) => ({ name, type: 'varchar', length: '64' });
    await q.createTable(
      new Table({
        name: 'transparency_log_head',
        columns: [
          // Always 1: one tree per deployment.
          { name: 'id', type: 'integer', isPrimary: true },
          { name: 'tree_size', type: 'bigint' },
          { name: 'border', type: 'text' },
          hex('root_hash'),
          { name: 'updated_at', type: 'varchar', length: '32' },
        ],
      }),
    );
    await q.query(
      `INSERT INTO transparency_log_head (id, tree_size, border, root_hash, updated_at) VALUES (1, 0, '', '${toHex(rfc9162.emptyRoot)}', '${new Date().toISOString()}')`,
    );
    await q.createTable(
      new Table({
        name: 'transparency_log_nodes',
        columns: [
          { name: 'level', type: 'integer', isPrimary: true },
          { name: 'node_index', type: 'bigint', isPrimary: true },
          hex('hash'),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'transparency_log_leaves',
        columns: [
          { name: 'leaf_index', type: 'bigint', isPrimary: true },
          hex('leaf'),
          { name: 'record_kind', type: 'varchar', length: '32' },
          { name: 'record_id', type: 'varchar', length: '256' },
        ],
      }),
    );
    await q.createIndex('transparency_log_leaves', new TableIndex({ name: 'idx_transparency_log_leaves_leaf', columnNames: ['leaf'] }));
    await q.createIndex('transparency_log_leaves', new TableIndex({ name: 'idx_transparency_log_leaves_record', columnNames: ['record_kind', 'record_id'] }));
    await q.createTable(
      new Table({
        name: 'transparency_log_checkpoints',
        columns: [
          { name: 'tree_size', type: 'bigint', isPrimary: true },
          hex('root_hash'),
          { name: 'origin', type: 'varchar', length: '256' },
          { name: 'key_id', type: 'varchar', length: '128' },
          { name: 'note', type: 'text' },
          { name: 'created_at', type: 'varchar', length: '32' },
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'attestation_confirmation_proofs',
        columns: [
          // H(C(proof)): the proof's leaf input.
          { ...hex('proof_id'), isPrimary: true },
          hex('execution_id'),
          { name: 'matched', type: 'integer' },
          { name: 'proof', type: 'text' },
          { name: 'confirmed_at', type: 'varchar', length: '32' },
        ],
      }),
    );
    await q.createIndex('attestation_confirmation_proofs', new TableIndex({ name: 'idx_attestation_confirmation_proofs_execution', columnNames: ['execution_id', 'confirmed_at'] }));

    await backfill(q);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ['attestation_confirmation_proofs', 'transparency_log_checkpoints', 'transparency_log_leaves', 'transparency_log_nodes', 'transparency_log_head']) {
      await q.dropTable(t);
    }
  }
}

/** The signed records stored before this migration: where they are and in which order they were written. */
const EXISTING: { kind: LoggedRecordKind; table: string; id: string; body: string; order: string }[] = [
  { kind: 'runtime-manifest', table: 'runtime_manifests', id: 'manifest_hash', body: 'body', order: 'created_at, manifest_hash' },
  { kind: 'audit-event', table: 'audit_events', id: 'event_id', body: 'body', order: 'occurred_at, event_id' },
  { kind: 'intent', table: 'execution_intents', id: 'business_transaction_id', body: 'intent', order: 'created_at, business_transaction_id' },
  { kind: 'refusal', table: 'refusal_records', id: 'business_transaction_id', body: 'body', order: 'created_at, business_transaction_id' },
  { kind: 'trust-record', table: 'trust_records', id: 'business_transaction_id', body: 'body', order: 'created_at, business_transaction_id' },
  { kind: 'verification', table: 'verifications', id: 'id', body: 'body', order: 'seq' },
  { kind: 'receipt', table: 'receipts', id: 'id', body: 'body', order: 'seq' },
  { kind: 'attestation', table: 'attestation_decisions', id: 'execution_id', body: 'attestation', order: 'created_at, execution_id' },
  { kind: 'override-resolution', table: 'attestation_overrides', id: 'override_id', body: 'resolution', order: 'resolved_at, override_id' },
];

async function backfill(q: QueryRunner): Promise<void> {
  const dialect = q.connection.options.type === 'postgres' ? 'postgres' : 'sqlite';
  const run = (sql: string, params: unknown[]) => q.query(sql, params, true);
  const page = 1000;
  for (const t of EXISTING) {
    for (let offset = 0; ; offset += page) {
      const rows = (await q.query(`SELECT ${t.id} AS id, ${t.body} AS body FROM ${t.table} ORDER BY ${t.order} LIMIT ${page} OFFSET ${offset}`)) as { id: string; body: string }[];
      const entries: LogEntry[] = rows.map((r) => ({ leaf: leafOfBody(r.body), kind: t.kind, id: r.id }));
      await appendLeaves(run, dialect, entries);
      if (rows.length < page) break;
    }
  }
}
