import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * The attestation profile (spec 2.9, 3, 6):
 * - `attestation_replay_guard`: every request id (the caller's `executionId`) ever attested; its
 *   primary key makes an execution attestable once. Inserted with the decision, in one transaction.
 * - `attestation_decisions`: each decision with its signed attestation (JSON text exactly as
 *   signed) and its current state; an override is a compare-and-set on `current_state`.
 * - `attestation_overrides`: the signed resolution of each override.
 * - `attestation_confirmations`: the action bound to an execution by its first matching confirmation.
 * - `attestation_verifications`, `attestation_security_events`, `attestation_api_calls`: the audit.
 * - `runtime_manifests`: every runtime manifest the deployment signed at a start, so attestations of
 *   earlier starts keep verifying.
 */
export class Attestation1763683900000 implements MigrationInterface {
  name = 'Attestation1763683900000';

  async up(q: QueryRunner): Promise<void> {
    const time = (name: string, nullable = false) => ({ name, type: 'varchar', length: '32', isNullable: nullable });
    const id = (name: string, nullable = false) => ({ name, type: 'varchar', length: '256', isNullable: nullable });
    const hash = (name: string) => ({ name, type: 'varchar', length: '64' });

    await q.createTable(
      new Table({
        name: 'attestation_replay_guard',
        columns: [{ ...id('request_id'), isPrimary: true }, hash('execution_id'), time('created_at')],
      }),
    );
    await q.createTable(
      new Table({
        name: 'attestation_decisions',
        columns: [
          { ...hash('execution_id'), isPrimary: true },
          id('request_id'),
          { name: 'variant', type: 'varchar', length: '32' },
          id('caller_id'),
          { name: 'policy_id', type: 'varchar', length: '128' },
          { name: 'policy_version', type: 'varchar', length: '64' },
          { name: 'action', type: 'varchar', length: '16' },
          // The decision object as attested (JSON).
          { name: 'decision', type: 'text' },
          { name: 'execution_state', type: 'varchar', length: '32' },
          { name: 'current_state', type: 'varchar', length: '32' },
          time('created_at'),
          time('updated_at'),
          { name: 'attestation', type: 'text' },
        ],
      }),
    );
    await q.createIndex('attestation_decisions', new TableIndex({ name: 'idx_attestation_decisions_created', columnNames: ['created_at', 'execution_id'] }));
    await q.createIndex('attestation_decisions', new TableIndex({ name: 'idx_attestation_decisions_policy', columnNames: ['policy_id', 'created_at'] }));
    await q.createIndex('attestation_decisions', new TableIndex({ name: 'idx_attestation_decisions_caller', columnNames: ['caller_id', 'created_at'] }));

    await q.createTable(
      new Table({
        name: 'attestation_overrides',
        columns: [
          { ...hash('execution_id'), isPrimary: true },
          { name: 'override_id', type: 'varchar', length: '64', isUnique: true },
          { name: 'status', type: 'varchar', length: '16' },
          id('decided_by'),
          time('resolved_at'),
          { name: 'resolution', type: 'text' },
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'attestation_confirmations',
        columns: [
          { ...hash('execution_id'), isPrimary: true },
          id('action_type'),
          id('action_id'),
          { name: 'action_timestamp', type: 'varchar', length: '64' },
          { name: 'action_details_hash', type: 'varchar', length: '64', isNullable: true },
          time('confirmed_at'),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'attestation_verifications',
        columns: [
          { name: 'verification_id', type: 'varchar', length: '64', isPrimary: true },
          id('execution_id', true),
          { name: 'variant', type: 'varchar', length: '32' },
          id('caller_id'),
          { name: 'valid', type: 'integer' },
          { name: 'checks', type: 'text' },
          time('verified_at'),
        ],
      }),
    );
    await q.createIndex('attestation_verifications', new TableIndex({ name: 'idx_attestation_verifications_caller', columnNames: ['caller_id', 'verified_at'] }));
    await q.createTable(
      new Table({
        name: 'attestation_security_events',
        columns: [
          { name: 'event_id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'kind', type: 'varchar', length: '64' },
          time('occurred_at'),
          id('caller_id', true),
          { name: 'operation', type: 'varchar', length: '320' },
          id('execution_id', true),
          { name: 'detail', type: 'text' },
        ],
      }),
    );
    await q.createIndex('attestation_security_events', new TableIndex({ name: 'idx_attestation_security_events_time', columnNames: ['occurred_at', 'event_id'] }));
    await q.createTable(
      new Table({
        name: 'attestation_api_calls',
        columns: [
          { name: 'seq', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'method', type: 'varchar', length: '16' },
          { name: 'route', type: 'varchar', length: '320' },
          { name: 'status', type: 'integer' },
          id('caller_id', true),
          { name: 'duration_ms', type: 'integer' },
          time('occurred_at'),
        ],
      }),
    );
    await q.createIndex('attestation_api_calls', new TableIndex({ name: 'idx_attestation_api_calls_caller', columnNames: ['caller_id', 'occurred_at'] }));
    await q.createTable(
      new Table({
        name: 'runtime_manifests',
        columns: [
          { ...hash('manifest_hash'), isPrimary: true },
          hash('runtime_hash'),
          // The signed manifest (JSON: {manifest, manifestHash, manifestSignature}).
          { name: 'body', type: 'text' },
          time('created_at'),
        ],
      }),
    );
    await q.createIndex('runtime_manifests', new TableIndex({ name: 'idx_runtime_manifests_runtime', columnNames: ['runtime_hash', 'created_at'] }));
  }

  async down(q: QueryRunner): Promise<void> {
    for (const name of [
      'runtime_manifests',
      'attestation_api_calls',
      'attestation_security_events',
      'attestation_verifications',
      'attestation_confirmations',
      'attestation_overrides',
      'attestation_decisions',
      'attestation_replay_guard',
    ]) {
      await q.dropTable(name);
    }
  }
}
