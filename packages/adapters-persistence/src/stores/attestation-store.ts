import type { DataSource } from 'typeorm';
import type {
  ApiCall,
  AttestationStore,
  AuditCounts,
  ConfirmationBinding,
  ConfirmationProofEntry,
  DecisionDetail,
  DecisionEntry,
  DecisionOutcome,
  DecisionQuery,
  DecisionRow,
  OverrideOutcome,
  SecurityEvent,
  SecurityEventQuery,
  SignedAttestation,
  SignedOverrideResolution,
  SignedRuntimeManifest,
  VerificationEntry,
} from '@ets/domain';
import { appendToLog, leafOfBody, type LoggedRecord } from '../transparency/log-in-transaction.js';
import { writerOf, type Run, type RunResult } from './sqlite-writer.js';
import { storeStatement, storeTransaction } from './store-transaction.js';
import { given, toPg, where } from './sql.js';

const DECISION_COLUMNS =
  'execution_id, request_id, variant, caller_id, policy_id, policy_version, action, decision, execution_state, current_state, created_at, updated_at, attestation';
const GUARD_INSERT = 'INSERT INTO attestation_replay_guard (request_id, execution_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING';
const DECISION_INSERT = `INSERT INTO attestation_decisions (${DECISION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
/**
 * PostgreSQL: the guard and the decision in ONE statement (atomic, one round trip); the decision
 * is inserted only from the guard row it returned. Params: requestId, executionId, createdAt, then
 * the decision's columns after the first two and before created_at.
 */
const PG_DECISION = `WITH g AS (${toPg(GUARD_INSERT)} RETURNING request_id)
  INSERT INTO attestation_decisions (${DECISION_COLUMNS})
  SELECT $2, $1, $4, $5, $6, $7, $8, $9, $10, $10, $3, $3, $11 FROM g`;

const OVERRIDE_MOVE =
  "UPDATE attestation_decisions SET current_state = ?, updated_at = ? WHERE execution_id = ? AND current_state = 'pending_override'";
const OVERRIDE_INSERT = 'INSERT INTO attestation_overrides (execution_id, override_id, status, decided_by, resolved_at, resolution) VALUES (?, ?, ?, ?, ?, ?)';
const STATE_READ = 'SELECT execution_state FROM attestation_decisions WHERE execution_id = ?';
/**
 * PostgreSQL: the compare-and-set and the resolution in one statement. A concurrent resolver waits
 * on the row lock, re-reads `current_state` and moves nothing. `execution_state` never changes, so
 * reading it from the statement's snapshot is exact.
 */
const PG_OVERRIDE = `WITH u AS (${toPg(OVERRIDE_MOVE)} RETURNING execution_id),
    i AS (INSERT INTO attestation_overrides (execution_id, override_id, status, decided_by, resolved_at, resolution)
          SELECT execution_id, $4, $1, $5, $2, $6 FROM u RETURNING 1)
  SELECT (SELECT count(*) FROM i) AS moved, (SELECT execution_state FROM attestation_decisions WHERE execution_id = $3) AS execution_state`;

const CONFIRMATION_INSERT = `INSERT INTO attestation_confirmations (execution_id, action_type, action_id, action_timestamp, action_details_hash, confirmed_at)
  VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`;
const CONFIRMATION_READ =
  'SELECT execution_id, action_type, action_id, action_timestamp, action_details_hash, confirmed_at FROM attestation_confirmations WHERE execution_id = ?';

const DETAIL_READ = `SELECT d.execution_id, d.request_id, d.variant, d.caller_id, d.policy_id, d.policy_version, d.decision, d.current_state, d.created_at,
    d.attestation, o.resolution, c.action_type, c.action_id, c.action_timestamp, c.action_details_hash, c.confirmed_at
  FROM attestation_decisions d
  LEFT JOIN attestation_overrides o ON o.execution_id = d.execution_id
  LEFT JOIN attestation_confirmations c ON c.execution_id = d.execution_id
  WHERE d.execution_id = ?`;

const MANIFEST_INSERT = 'INSERT INTO runtime_manifests (manifest_hash, runtime_hash, body, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING';
const PROOF_INSERT =
  'INSERT INTO attestation_confirmation_proofs (proof_id, execution_id, matched, proof, confirmed_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING';

interface DecisionRowSql {
  execution_id: string;
  request_id: string;
  variant: DecisionRow['variant'];
  caller_id: string;
  policy_id: string;
  policy_version: string;
  decision: string;
  current_state: DecisionRow['execution_state'];
  created_at: string;
}

interface ConfirmationSql {
  execution_id: string;
  action_type: string;
  action_id: string;
  action_timestamp: string;
  action_details_hash: string | null;
  confirmed_at: string;
}

export interface AttestationStoreOptions {
  /** Queued API calls are written at the latest this long after the first of a batch (ms). */
  apiCallFlushMs?: number;
  /** …or as soon as this many are queued. */
  apiCallBatch?: number;
}

/** Rows kept when writing API calls fails, so an outage cannot grow the queue without bound. */
const MAX_QUEUED_API_CALLS = 10_000;

/**
 * The attestation profile's storage on SQLite or PostgreSQL. Signed objects are stored as
 * `JSON.stringify` and returned as `JSON.parse`, so what was signed comes back unchanged; each is a
 * leaf of the transparency log, appended in the transaction that stores it. Writes on SQLite go
 * through the DataSource's single writer (group commit with the other stores).
 */
export class TypeOrmAttestationStore implements AttestationStore {
  private readonly pg: boolean;
  private queue: ApiCall[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private readonly flushMs: number;
  private readonly batch: number;

  constructor(
    private readonly ds: DataSource,
    options: AttestationStoreOptions = {},
  ) {
    this.pg = ds.options.type === 'postgres';
    this.flushMs = options.apiCallFlushMs ?? 500;
    this.batch = options.apiCallBatch ?? 200;
  }

  // --- decisions and the replay guard ---------------------------------------------------------------

  async isReplay(requestId: string): Promise<boolean> {
    return (await this.read('SELECT 1 AS x FROM attestation_replay_guard WHERE request_id = ?', [requestId])).length > 0;
  }

  async recordDecision(e: DecisionEntry): Promise<DecisionOutcome> {
    const decision = JSON.stringify(e.decision);
    const body = JSON.stringify(e.attestation);
    return storeTransaction(this.ds, async (run): Promise<DecisionOutcome> => {
      if (this.pg) {
        const res = await run(PG_DECISION, [e.requestId, e.executionId, e.createdAt, e.variant, e.callerId, e.policyId, e.policyVersion, e.decision.action, decision, e.execution_state, body]);
        if (res.affected !== 1) return 'replayed';
      } else {
        const guard = await run(GUARD_INSERT, [e.requestId, e.executionId, e.createdAt]);
        if (guard.affected !== 1) return 'replayed';
        await run(DECISION_INSERT, [
          e.executionId, e.requestId, e.variant, e.callerId, e.policyId, e.policyVersion, e.decision.action, decision,
          e.execution_state, e.execution_state, e.createdAt, e.createdAt, body,
        ]);
      }
      appendToLog(run, [{ kind: 'attestation', id: e.executionId, body }]);
      return 'recorded';
    }, { rank: 'claim' });
  }

  async getDecision(executionId: string): Promise<DecisionDetail | undefined> {
    const [r] = await this.read<DecisionRowSql & ConfirmationSql & { attestation: string; resolution: string | null }>(DETAIL_READ, [executionId]);
    if (!r) return undefined;
    return {
      ...toRow(r),
      attestation: JSON.parse(r.attestation) as SignedAttestation,
      override: r.resolution ? (JSON.parse(r.resolution) as SignedOverrideResolution) : null,
      confirmation: r.action_type !== null && r.action_type !== undefined ? toBinding(r) : null,
    };
  }

  async listDecisions(q: DecisionQuery): Promise<DecisionRow[]> {
    const w = where(given('policy_id = ?', q.policyId), given('action = ?', q.action), given('created_at >= ?', q.from), given('created_at <= ?', q.to), given('caller_id = ?', q.callerId));
    const sql = `SELECT execution_id, request_id, variant, caller_id, policy_id, policy_version, decision, current_state, created_at
      FROM attestation_decisions${w.sql} ORDER BY created_at DESC, execution_id DESC LIMIT ? OFFSET ?`;
    return (await this.read<DecisionRowSql>(sql, [...w.params, q.limit, q.offset])).map(toRow);
  }

  // --- overrides and confirmations --------------------------------------------------------------------

  async resolveOverride(r: SignedOverrideResolution): Promise<OverrideOutcome> {
    const move = [r.status, r.resolvedAt, r.executionId];
    const body = JSON.stringify(r);
    return storeTransaction(this.ds, async (run) => {
      let outcome: OverrideOutcome;
      if (this.pg) {
        const [row] = (await run(PG_OVERRIDE, [...move, r.overrideId, r.decidedBy, body])).records as { moved: string | number; execution_state: string | null }[];
        outcome = classify(Number(row?.moved ?? 0) === 1, row?.execution_state ?? undefined);
      } else if ((await run(OVERRIDE_MOVE, move)).affected === 1) {
        await run(OVERRIDE_INSERT, [r.executionId, r.overrideId, r.status, r.decidedBy, r.resolvedAt, body]);
        outcome = 'resolved';
      } else {
        const [row] = (await run(STATE_READ, [r.executionId])).records as { execution_state: string }[];
        outcome = classify(false, row?.execution_state);
      }
      if (outcome === 'resolved') appendToLog(run, [{ kind: 'override-resolution', id: r.overrideId, body }]);
      return outcome;
    }, { alone: true });
  }

  async bindConfirmation(b: ConfirmationBinding): Promise<ConfirmationBinding> {
    const params = [b.executionId, b.actionType, b.actionId, b.actionTimestamp, b.actionDetailsHash, b.confirmedAt];
    if (this.pg) {
      await this.exec(CONFIRMATION_INSERT, params);
      const [row] = await this.read<ConfirmationSql>(CONFIRMATION_READ, [b.executionId]);
      return toBinding(row!);
    }
    return writerOf(this.ds).transaction(async (run) => {
      await run(CONFIRMATION_INSERT, params);
      const [row] = (await run(CONFIRMATION_READ, [b.executionId])).records as ConfirmationSql[];
      return toBinding(row!);
    });
  }

  // --- audit ------------------------------------------------------------------------------------------

  async recordVerification(v: VerificationEntry): Promise<void> {
    await this.exec(
      'INSERT INTO attestation_verifications (verification_id, execution_id, variant, caller_id, valid, checks, verified_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      [v.verificationId, v.executionId, v.variant, v.callerId, v.valid ? 1 : 0, JSON.stringify(v.checks), v.verifiedAt],
    );
  }

  async recordSecurityEvent(e: SecurityEvent): Promise<void> {
    await this.exec(
      'INSERT INTO attestation_security_events (event_id, kind, occurred_at, caller_id, operation, execution_id, detail) VALUES (?, ?, ?, ?, ?, ?, ?)',
      [e.eventId, e.kind, e.occurredAt, e.callerId, e.operation.slice(0, 320), e.executionId, e.detail],
    );
  }

  async listSecurityEvents(q: SecurityEventQuery): Promise<SecurityEvent[]> {
    const w = where(given('occurred_at >= ?', q.from), given('occurred_at <= ?', q.to), given('caller_id = ?', q.callerId));
    const sql = `SELECT event_id, kind, occurred_at, caller_id, operation, execution_id, detail FROM attestation_security_events${w.sql}
      ORDER BY occurred_at DESC, event_id DESC LIMIT ?`;
    const rows = await this.read<Record<string, string | null>>(sql, [...w.params, q.limit]);
    return rows.map((r) => ({
      eventId: r.event_id!,
      kind: r.kind as SecurityEvent['kind'],
      occurredAt: r.occurred_at!,
      callerId: r.caller_id ?? null,
      operation: r.operation!,
      executionId: r.execution_id ?? null,
      detail: r.detail!,
    }));
  }

  recordApiCall(call: ApiCall): void {
    this.queue.push(call);
    if (this.queue.length >= this.batch) void this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.flushMs);
      this.timer.unref();
    }
  }

  /** Writes every queued API call (one multi-row insert per batch). Resolves when they are stored or put back. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.flushing = this.flushing.then(async () => {
      while (this.queue.length > 0) {
        const rows = this.queue.splice(0, this.batch);
        try {
          await this.insertApiCalls(rows);
        } catch {
          // Kept for the next flush (bounded): losing telemetry beats failing requests over it.
          this.queue = [...rows, ...this.queue].slice(0, MAX_QUEUED_API_CALLS);
          return;
        }
      }
    });
    return this.flushing;
  }

  /** Flushes and stops the timer: call before the DataSource is closed. */
  async close(): Promise<void> {
    await this.flush();
    clearTimeout(this.timer);
  }

  async counts(q: { since: string; callerId?: string }): Promise<AuditCounts> {
    await this.flush();
    const by = q.callerId !== undefined;
    const and = by ? ' AND caller_id = ?' : '';
    const where = by ? ' WHERE caller_id = ?' : '';
    const sql = `SELECT
      (SELECT COUNT(*) FROM attestation_decisions${where}) AS decisions,
      (SELECT COUNT(*) FROM attestation_decisions WHERE created_at >= ?${and}) AS since,
      (SELECT COUNT(*) FROM attestation_verifications${where}) AS verifications,
      (SELECT COUNT(*) FROM attestation_verifications WHERE valid = 1${and}) AS valid,
      (SELECT COUNT(*) FROM attestation_security_events${where}) AS security,
      (SELECT COUNT(*) FROM attestation_api_calls${where}) AS calls`;
    const c = q.callerId;
    const params = by ? [c, q.since, c, c, c, c, c] : [q.since];
    const [r] = await this.read<Record<string, string | number>>(sql, params);
    return {
      totalDecisions: Number(r!.decisions),
      decisionsSince: Number(r!.since),
      totalVerifications: Number(r!.verifications),
      validVerifications: Number(r!.valid),
      totalSecurityEvents: Number(r!.security),
      totalApiCalls: Number(r!.calls),
    };
  }

  // --- runtime manifests ---------------------------------------------------------------------------

  async saveManifest(m: SignedRuntimeManifest): Promise<void> {
    const body = JSON.stringify(m);
    await this.insertLogged(MANIFEST_INSERT, [m.manifestHash, m.manifest.runtimeHash, body, m.manifest.startedAt], { kind: 'runtime-manifest', id: m.manifestHash, body });
  }

  async recordConfirmationProof(p: ConfirmationProofEntry): Promise<void> {
    // The proof is a compact JWS: a JSON string as served, so its leaf is H(C(the string)).
    const body = JSON.stringify(p.proof);
    const id = leafOfBody(body);
    await this.insertLogged(PROOF_INSERT, [id, p.executionId, p.matched ? 1 : 0, p.proof, p.confirmedAt], { kind: 'confirmation-proof', id, body });
  }

  async findManifest(manifestHash: string): Promise<SignedRuntimeManifest | undefined> {
    const [row] = await this.read<{ body: string }>('SELECT body FROM runtime_manifests WHERE manifest_hash = ?', [manifestHash]);
    return row ? (JSON.parse(row.body) as SignedRuntimeManifest) : undefined;
  }

  async manifestsWithRuntimeHash(runtimeHash: string): Promise<SignedRuntimeManifest[]> {
    const rows = await this.read<{ body: string }>('SELECT body FROM runtime_manifests WHERE runtime_hash = ? ORDER BY created_at DESC LIMIT 50', [runtimeHash]);
    return rows.map((r) => JSON.parse(r.body) as SignedRuntimeManifest);
  }

  async isAvailable(): Promise<boolean> {
    try {
      await this.read('SELECT COUNT(*) AS n FROM attestation_decisions WHERE 1 = 0', []);
      return true;
    } catch {
      return false;
    }
  }

  // --- plumbing -----------------------------------------------------------------------------------

  /** An insert that skips a row already stored; the row it did insert becomes a leaf of the log in the same transaction. */
  private insertLogged(sql: string, params: unknown[], logged: LoggedRecord): Promise<void> {
    return storeTransaction(this.ds, async (run: Run) => {
      if ((await run(this.pg ? toPg(sql) : sql, params)).affected === 1) appendToLog(run, [logged]);
    });
  }

  private insertApiCalls(rows: ApiCall[]): Promise<RunResult> {
    const values = rows.map(() => '(?, ?, ?, ?, ?, ?)').join(', ');
    const params = rows.flatMap((r) => [r.method, r.route.slice(0, 320), r.status, r.callerId, Math.max(0, Math.round(r.durationMs)), r.occurredAt]);
    return this.exec(`INSERT INTO attestation_api_calls (method, route, status, caller_id, duration_ms, occurred_at) VALUES ${values}`, params);
  }

  private read<T>(sql: string, params: unknown[]): Promise<T[]> {
    return this.ds.query(this.pg ? toPg(sql) : sql, params) as Promise<T[]>;
  }

  /** One statement on its own (autocommit); on SQLite in the writer's group commit. */
  private exec(sql: string, params: unknown[]): Promise<RunResult> {
    return storeStatement(this.ds, this.pg ? toPg(sql) : sql, params);
  }
}

function classify(moved: boolean, executionState: string | undefined): OverrideOutcome {
  if (moved) return 'resolved';
  return executionState === 'pending_override' ? 'already-resolved' : 'not-pending';
}

function toRow(r: DecisionRowSql): DecisionRow {
  return {
    executionId: r.execution_id,
    requestId: r.request_id,
    variant: r.variant,
    callerId: r.caller_id,
    policyId: r.policy_id,
    policyVersion: r.policy_version,
    decision: JSON.parse(r.decision) as DecisionRow['decision'],
    execution_state: r.current_state,
    createdAt: r.created_at,
  };
}

function toBinding(r: ConfirmationSql): ConfirmationBinding {
  return {
    executionId: r.execution_id,
    actionType: r.action_type,
    actionId: r.action_id,
    actionTimestamp: r.action_timestamp,
    actionDetailsHash: r.action_details_hash ?? null,
    confirmedAt: r.confirmed_at,
  };
}

