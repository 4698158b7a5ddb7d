import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource, migrate, TypeOrmAttestationStore } from '@ets/adapters-persistence';
import type { DecisionEntry, ExecutionState, SignedAttestation, SignedOverrideResolution, SignedRuntimeManifest } from '@ets/domain';
import { STORAGE_TARGETS, type ProvisionedTarget } from '@ets/test-support';

const hex = (n: number) => n.toString(16).padStart(64, '0');
let n = 0;

function entry(over: { state?: ExecutionState; policyId?: string; callerId?: string; createdAt?: string; requestId?: string } = {}): DecisionEntry {
  const executionId = hex(++n * 7919 + Date.now());
  const state = over.state ?? 'completed';
  const decision = { action: state === 'blocked' ? 'reject' : 'approve', requires_override: state === 'pending_override', reason: 'r', matchedRuleId: 'x' } as const;
  // An own `__proto__` key, as JSON.parse makes it: it must come back as data.
  const attestation = JSON.parse(`{"executionId":"${executionId}","execution_state":"${state}","__proto__":{"x":1},"signature":"s"}`) as SignedAttestation;
  return {
    executionId,
    requestId: over.requestId ?? randomUUID(),
    variant: 'attestation',
    callerId: over.callerId ?? 'agent-1',
    policyId: over.policyId ?? 'p',
    policyVersion: '1.0.0',
    decision,
    execution_state: state,
    createdAt: over.createdAt ?? new Date().toISOString(),
    attestation,
  };
}

const resolution = (executionId: string, status: 'executed' | 'rejected' = 'executed'): SignedOverrideResolution => ({
  recordType: 'override-resolution',
  overrideId: randomUUID(),
  executionId,
  status,
  approved: status === 'executed',
  approvedBy: 'ann',
  approverRole: 'risk',
  reason: 'checked',
  decidedBy: 'ops',
  previousFingerprint: hex(1),
  execution_fingerprint: hex(2),
  resolvedAt: new Date().toISOString(),
  keyId: 'k',
  signature: 's',
});

describe.each(STORAGE_TARGETS)('attestation store on $name', (factory) => {
  let db: ProvisionedTarget;
  let ds: DataSource;
  /**
   * PostgreSQL: a second connection pool to the same database, another process as far as the
   * database can tell. SQLite: the same store (two connections of one process to one file would
   * wait on each other's write lock while blocking the event loop; processes are tested end to end).
   */
  let ds2: DataSource | undefined;
  let store: TypeOrmAttestationStore;
  let store2: TypeOrmAttestationStore;

  beforeAll(async () => {
    db = await factory.provision();
    ds = createDataSource(db.target);
    await ds.initialize();
    await migrate(ds);
    store = new TypeOrmAttestationStore(ds, { apiCallFlushMs: 60_000, apiCallBatch: 3 });
    if (db.target.kind === 'postgres') {
      ds2 = createDataSource(db.target);
      await ds2.initialize();
      store2 = new TypeOrmAttestationStore(ds2);
    } else {
      store2 = store;
    }
  });
  afterAll(async () => {
    await store?.close();
    await ds2?.destroy();
    await ds?.destroy();
    await db?.drop();
  });

  it('stores a decision with its attestation exactly as signed, and refuses its request id a second time', async () => {
    const e = entry();
    expect(await store.isReplay(e.requestId)).toBe(false);
    expect(await store.recordDecision(e)).toBe('recorded');
    expect(await store.isReplay(e.requestId)).toBe(true);
    const found = await store.getDecision(e.executionId);
    expect(found).toMatchObject({ executionId: e.executionId, requestId: e.requestId, callerId: 'agent-1', execution_state: 'completed', override: null, confirmation: null });
    expect(JSON.stringify(found!.attestation)).toBe(JSON.stringify(e.attestation));
    expect(Object.prototype.hasOwnProperty.call(found!.attestation, '__proto__')).toBe(true);

    const replay = { ...entry({ requestId: e.requestId }) };
    expect(await store.recordDecision(replay)).toBe('replayed');
    expect(await store.getDecision(replay.executionId)).toBeUndefined();
    expect(await store.getDecision(hex(0))).toBeUndefined();
  });

  it('of simultaneous decisions with one request id (from two connections on PostgreSQL), exactly one is stored', async () => {
    const requestId = randomUUID();
    const attempts = Array.from({ length: 10 }, (_, i) => entry({ requestId, callerId: `c${i}` }));
    const results = await Promise.all(attempts.map((e, i) => (i % 2 ? store : store2).recordDecision(e)));
    expect(results.sort()).toEqual(['recorded', ...Array<string>(9).fill('replayed')]);
    const rows: { n: string | number }[] = await ds.query(
      db.target.kind === 'postgres' ? 'SELECT COUNT(*) AS n FROM attestation_replay_guard WHERE request_id = $1' : 'SELECT COUNT(*) AS n FROM attestation_replay_guard WHERE request_id = ?',
      [requestId],
    );
    expect(Number(rows[0]!.n)).toBe(1);
  });

  it('resolves a pending override once: not-pending, resolved, already-resolved', async () => {
    const completed = entry();
    await store.recordDecision(completed);
    expect(await store.resolveOverride(resolution(completed.executionId))).toBe('not-pending');
    expect(await store.resolveOverride(resolution(hex(3)))).toBe('not-pending');

    const pending = entry({ state: 'pending_override' });
    await store.recordDecision(pending);
    const r = resolution(pending.executionId, 'rejected');
    expect(await store.resolveOverride(r)).toBe('resolved');
    expect(await store.resolveOverride(resolution(pending.executionId))).toBe('already-resolved');
    const found = await store.getDecision(pending.executionId);
    expect(found).toMatchObject({ execution_state: 'rejected', override: r });
    expect(found!.attestation.execution_state).toBe('pending_override');
  });

  it('of simultaneous overrides (from two connections on PostgreSQL) exactly one resolves (compare-and-set)', async () => {
    for (let round = 0; round < 3; round++) {
      const pending = entry({ state: 'pending_override' });
      await store.recordDecision(pending);
      const attempts = Array.from({ length: 8 }, (_, i) => resolution(pending.executionId, i % 2 ? 'executed' : 'rejected'));
      const outcomes = await Promise.all(attempts.map((a, i) => (i % 2 ? store : store2).resolveOverride(a)));
      expect(outcomes.filter((o) => o === 'resolved')).toHaveLength(1);
      expect(outcomes.filter((o) => o === 'already-resolved')).toHaveLength(7);
      const winner = attempts[outcomes.indexOf('resolved')]!;
      expect(await store.getDecision(pending.executionId)).toMatchObject({ execution_state: winner.status, override: { overrideId: winner.overrideId } });
    }
  });

  it('lists decisions newest first with filters, limit and offset', async () => {
    const policyId = `list-${randomUUID().slice(0, 8)}`;
    const base = Date.parse('2030-01-01T00:00:00.000Z');
    const made = [];
    for (let i = 0; i < 5; i++) {
      const e = entry({ policyId, state: i === 2 ? 'blocked' : 'completed', callerId: i === 4 ? 'other' : 'agent-1', createdAt: new Date(base + i * 1000).toISOString() });
      await store.recordDecision(e);
      made.push(e);
    }
    const ids = (rows: { executionId: string }[]) => rows.map((r) => r.executionId);
    const newest = [...made].reverse().map((e) => e.executionId);
    expect(ids(await store.listDecisions({ limit: 10, offset: 0, policyId }))).toEqual(newest);
    expect(ids(await store.listDecisions({ limit: 2, offset: 1, policyId }))).toEqual(newest.slice(1, 3));
    expect(ids(await store.listDecisions({ limit: 10, offset: 0, policyId, action: 'reject' }))).toEqual([made[2]!.executionId]);
    expect(ids(await store.listDecisions({ limit: 10, offset: 0, policyId, callerId: 'other' }))).toEqual([made[4]!.executionId]);
    const window = await store.listDecisions({ limit: 10, offset: 0, policyId, from: made[1]!.createdAt, to: made[3]!.createdAt });
    expect(ids(window)).toEqual([made[3]!.executionId, made[2]!.executionId, made[1]!.executionId]);
    expect(window[0]).toEqual({
      executionId: made[3]!.executionId,
      requestId: made[3]!.requestId,
      variant: 'attestation',
      callerId: 'agent-1',
      policyId,
      policyVersion: '1.0.0',
      decision: made[3]!.decision,
      execution_state: 'completed',
      createdAt: made[3]!.createdAt,
    });
  });

  it('binds the first confirmed action and keeps it', async () => {
    const e = entry();
    await store.recordDecision(e);
    const first = { executionId: e.executionId, actionType: 'payment', actionId: 'p-1', actionTimestamp: '2030-01-01T00:00:01Z', actionDetailsHash: null, confirmedAt: new Date().toISOString() };
    expect(await store.bindConfirmation(first)).toEqual(first);
    expect(await store2.bindConfirmation({ ...first, actionId: 'p-2', actionDetailsHash: hex(9) })).toEqual(first);
    expect((await store.getDecision(e.executionId))!.confirmation).toEqual(first);
  });

  it('records verifications, security events and API calls (batched) and counts them, per caller too', async () => {
    const callerId = `auditor-${randomUUID().slice(0, 8)}`;
    const since = new Date(Date.now() - 1000).toISOString();
    const before = await store.counts({ since, callerId });
    expect(before).toEqual({ totalDecisions: 0, decisionsSince: 0, totalVerifications: 0, validVerifications: 0, totalSecurityEvents: 0, totalApiCalls: 0 });
    await store.recordDecision(entry({ callerId }));
    await store.recordDecision(entry({ callerId, createdAt: '2001-01-01T00:00:00.000Z' }));
    for (const valid of [true, false, true]) {
      await store.recordVerification({ verificationId: randomUUID(), executionId: null, variant: 'attestation', callerId, valid, checks: { signature: 'verified' }, verifiedAt: new Date().toISOString() });
    }
    const events = ['2030-01-01T00:00:01.000Z', '2030-01-01T00:00:02.000Z'].map((occurredAt) => ({
      eventId: randomUUID(),
      kind: 'execution_replayed' as const,
      occurredAt,
      callerId,
      operation: 'execute',
      executionId: null,
      detail: 'd',
    }));
    for (const e of events) await store.recordSecurityEvent(e);
    // Batch of 3: the first three go out on their own, the last two wait for counts() to flush them.
    for (let i = 0; i < 5; i++) store.recordApiCall({ method: 'POST', route: '/execute', status: 200, callerId, durationMs: 1.6, occurredAt: new Date().toISOString() });
    expect(await store.counts({ since, callerId })).toEqual({ totalDecisions: 2, decisionsSince: 1, totalVerifications: 3, validVerifications: 2, totalSecurityEvents: 2, totalApiCalls: 5 });
    const all = await store.counts({ since });
    expect(all.totalApiCalls).toBeGreaterThanOrEqual(5);
    expect(all.totalDecisions).toBeGreaterThan(2);

    expect(await store.listSecurityEvents({ limit: 10, callerId })).toEqual([...events].reverse());
    expect(await store.listSecurityEvents({ limit: 1, callerId })).toEqual([events[1]]);
    expect(await store.listSecurityEvents({ limit: 10, callerId, to: '2030-01-01T00:00:01.500Z' })).toEqual([events[0]]);
    expect(await store.listSecurityEvents({ limit: 10, callerId, from: '2030-01-01T00:00:01.500Z' })).toEqual([events[1]]);
  });

  it('keeps every runtime manifest it is given, found by hash and by runtime hash', async () => {
    const runtimeHash = hex(++n + 1e6);
    const manifest = (startedAt: string): SignedRuntimeManifest => ({
      manifest: { manifestType: 'runtime-manifest', version: 'b', runtimeHash, evaluatorHash: hex(5), evaluatorSemanticHash: hex(6), capabilities: ['x'], supportedSchemaVersions: ['1'], releaseManifestHash: hex(7), trustRootVersion: hex(8), signerKeyId: 'k', platform: 'node', startedAt },
      manifestHash: hex(Date.parse(startedAt)),
      manifestSignature: 'sig',
    });
    const older = manifest('2030-01-01T00:00:00.000Z');
    const newer = manifest('2030-01-02T00:00:00.000Z');
    await store.saveManifest(older);
    await store.saveManifest(newer);
    await store2.saveManifest(older);
    expect(await store2.findManifest(older.manifestHash)).toEqual(older);
    expect(await store.findManifest(hex(4))).toBeUndefined();
    expect(await store.manifestsWithRuntimeHash(runtimeHash)).toEqual([newer, older]);
    expect(await store.manifestsWithRuntimeHash(hex(4))).toEqual([]);
    expect(await store.isAvailable()).toBe(true);
  });
});
