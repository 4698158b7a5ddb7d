import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { DataSource } from 'typeorm';
import { createDataSource, IntentStateConflictError, migrate, TypeOrmExecutionStore, withSqliteWriteLock } from '@ets/adapters-persistence';
import {
  DuplicateTransactionError,
  type ChainHead,
  type ExecutionEntry,
  type IntentResolution,
  type PolicyDecision,
  type ReleaseContext,
  type SignedIntent,
  type SignedRefusal,
  type SignedTrustRecord,
  type TransactionClaim,
} from '@ets/domain';
import { STORAGE_TARGETS, type ProvisionedTarget } from '@ets/test-support';

// --- fixtures ---------------------------------------------------------------------------------------

const T0 = Date.UTC(2025, 0, 1);
const at = (seconds: number): string => new Date(T0 + seconds * 1000).toISOString();
const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

const claimOf = (id: string, outcome: TransactionClaim['outcome'] = 'EXECUTING', createdAt = at(0)): TransactionClaim => ({
  businessTransactionId: id,
  callerId: 'caller-1',
  outcome,
  createdAt,
});

const decision: PolicyDecision = { action: 'approve', reason: 'within limits', requires_override: false, matchedRuleId: 'r1' };

/** A metadata object with an own `__proto__` key, as JSON.parse produces it. */
const protoMetadata = (): Record<string, unknown> => JSON.parse('{"__proto__":{"x":1},"tenantId":"t-1"}') as Record<string, unknown>;

const intentOf = (id: string): SignedIntent =>
  ({
    recordType: 'execution-intent',
    businessTransactionId: id,
    businessTransactionHash: sha256(`tx:${id}`),
    action: 'payments.transfer',
    connector: 'bank',
    callerId: 'caller-1',
    principalId: 'agent-7',
    tenantId: 't-1',
    policy: { name: 'payments', version: '1.0.0', contentHash: sha256('policy') },
    decision,
    preparedAt: at(0),
    keyId: 'k1',
    signature: 'c2lnbmF0dXJl',
  }) as unknown as SignedIntent;

const refusalOf = (id: string): SignedRefusal =>
  ({
    recordType: 'refusal-record',
    businessTransactionId: id,
    businessTransactionHash: sha256(`tx:${id}`),
    callerId: 'caller-1',
    principalId: 'agent-7',
    action: 'payments.transfer',
    policy: { name: 'payments', version: '1.0.0' },
    policyContentHash: sha256('policy'),
    decision: { ...decision, action: 'reject', reason: 'amount over limit' },
    matchedRuleId: null,
    reason: 'amount over limit',
    refusedAt: at(0),
    keyId: 'k1',
    signature: 'c2lnbmF0dXJl',
  }) as unknown as SignedRefusal;

const entry = (id: string): Omit<ExecutionEntry, 'previousChainHash' | 'chainHash' | 'chainSignature'> => ({
  executionId: `exec-${id}`,
  connector: 'bank',
  action: 'payments.transfer',
  status: 'SUCCEEDED',
  releasedAt: at(1),
  completedAt: at(2),
  resultHash: sha256(`result:${id}`),
  result: { ok: true, nested: protoMetadata() },
});

const recordOf = (id: string, executions: ExecutionEntry[] = [], recordedAt = at(3)): SignedTrustRecord =>
  ({
    recordType: 'execution-trust-record',
    businessTransactionId: id,
    businessTransactionHash: sha256(`tx:${id}`),
    callerId: 'caller-1',
    transaction: {
      businessTransactionId: id,
      metadata: protoMetadata(),
      authority: { principalId: 'agent-7', authorityId: 'a-1' },
      authorization: { authorityId: 'a-1' },
      intent: { action: 'payments.transfer', parameters: { amount: 10 } },
      policy: { name: 'payments', version: '1.0.0', contentHash: sha256('policy') },
      signals: {},
    },
    decision,
    executions,
    recordedAt,
    keyId: 'k1',
    signature: 'c2lnbmF0dXJl',
  }) as unknown as SignedTrustRecord;

const contextOf = (id: string): ReleaseContext =>
  ({
    transaction: recordOf(id).transaction,
    decision,
    policy: { name: 'payments', version: '1.0.0', contentHash: sha256('policy') },
    assessment: {
      authority: { status: 'VERIFIED', callerId: 'caller-1', principalId: 'agent-7', grant: null },
      businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] },
      execution: { status: 'EXECUTED' },
    },
    execution: entry(id),
  }) as unknown as ReleaseContext;

/** What the domain's buildTrustRecord does, with a fake hash: links the record to the head it is given. */
const chainedBuild =
  (id: string, opts: { delayMs?: number; calls?: string[] } = {}) =>
  async (head: ChainHead): Promise<SignedTrustRecord> => {
    opts.calls?.push(id);
    if (opts.delayMs !== undefined) await sleep(opts.delayMs);
    const chainHash = sha256(`${head.chainHash ?? ''}:${id}`);
    return recordOf(id, [{ ...entry(id), previousChainHash: head.chainHash, chainHash, chainSignature: `sig:${chainHash}` }]);
  };

const resolutionOf = (previousState: IntentResolution['previousState']): IntentResolution => ({
  found: 'NOT_EXECUTED',
  note: 'checked at the bank',
  resolvedBy: 'operator@example.com',
  resolvedAt: at(9),
  previousState,
});

/**
 * The executions of all records form ONE linked list: one null start, distinct chain hashes, no two
 * records with the same previousChainHash, every other previousChainHash naming another record.
 * Returns the tail's chainHash.
 */
function expectSingleChain(records: SignedTrustRecord[]): string | null {
  const entries = records.map((r) => r.executions[0]!);
  const hashes = new Set(entries.map((e) => e.chainHash));
  expect(hashes.size).toBe(entries.length);
  expect(entries.filter((e) => e.previousChainHash === null)).toHaveLength(1);
  const byPrevious = new Map<string | null, ExecutionEntry>();
  for (const e of entries) {
    expect(e.previousChainHash === null || hashes.has(e.previousChainHash!)).toBe(true);
    expect(byPrevious.has(e.previousChainHash!)).toBe(false); // a fork
    byPrevious.set(e.previousChainHash!, e);
  }
  let cursor: string | null = null;
  let walked = 0;
  for (let e = byPrevious.get(null); e; e = byPrevious.get(e.chainHash!)) {
    cursor = e.chainHash!;
    walked++;
  }
  expect(walked).toBe(entries.length);
  return cursor;
}

// --- suite ------------------------------------------------------------------------------------------

describe.each(STORAGE_TARGETS)('execution store on $name', (factory) => {
  let db: ProvisionedTarget;
  let ds: DataSource;
  let store: TypeOrmExecutionStore;
  const extra: DataSource[] = [];

  const open = async (): Promise<DataSource> => {
    const d = createDataSource(db.target);
    await d.initialize();
    return d;
  };
  const p = (n: number): string => (factory.name === 'postgres' ? `$${n}` : '?');
  const rows = async (table: string, id: string, on = ds): Promise<number> => {
    const [r] = (await on.query(`SELECT COUNT(*) AS n FROM ${table} WHERE business_transaction_id = ${p(1)}`, [id])) as { n: string | number }[];
    return Number(r!.n);
  };
  const chainHead = async (on = ds): Promise<string | null> => {
    const [r] = (await on.query('SELECT head_hash FROM execution_chain WHERE id = 1')) as { head_hash: string | null }[];
    return r!.head_hash;
  };
  const allRecords = async (s = store): Promise<SignedTrustRecord[]> => {
    const out: SignedTrustRecord[] = [];
    for (let page = 1; ; page++) {
      const { items } = await s.listTrustRecords(page, 100);
      out.push(...items);
      if (items.length < 100) return out;
    }
  };
  const released = async (id: string, s = store): Promise<void> => {
    await s.prepareIntent(claimOf(id), intentOf(id), at(0));
    await s.markReleased(id, contextOf(id), at(2));
  };

  beforeEach(async () => {
    db = await factory.provision();
    ds = await open();
    await migrate(ds);
    store = new TypeOrmExecutionStore(ds);
  });
  afterEach(async () => {
    for (const d of [ds, ...extra.splice(0)]) if (d.isInitialized) await d.destroy();
    await db.drop();
  });

  describe('claims', () => {
    it('storeRefusal claims the id and stores the refusal; a second call is a duplicate', async () => {
      const id = randomUUID();
      expect(await store.isClaimed(id)).toBe(false);
      await store.storeRefusal(claimOf(id, 'REFUSED'), refusalOf(id));
      expect(await store.isClaimed(id)).toBe(true);
      expect(await store.getClaim(id)).toEqual(claimOf(id, 'REFUSED'));
      expect(await store.getRefusal(id)).toEqual(refusalOf(id));
      await expect(store.storeRefusal(claimOf(id, 'REFUSED'), refusalOf(id))).rejects.toBeInstanceOf(DuplicateTransactionError);
      expect(await rows('refusal_records', id)).toBe(1);
    });

    it('storeRecordedTransaction claims the id and stores the record; a second call is a duplicate', async () => {
      const id = randomUUID();
      await store.storeRecordedTransaction(claimOf(id, 'RECORDED'), recordOf(id));
      expect(await store.getClaim(id)).toEqual(claimOf(id, 'RECORDED'));
      expect(await store.getTrustRecord(id)).toEqual(recordOf(id));
      const dup = store.storeRecordedTransaction(claimOf(id, 'RECORDED'), recordOf(id));
      await expect(dup).rejects.toThrow(DuplicateTransactionError);
      await expect(dup).rejects.toMatchObject({ businessTransactionId: id, message: `Business Transaction '${id}' already exists.` });
      expect(await rows('trust_records', id)).toBe(1);
    });

    it('prepareIntent claims the id and stores the intent PREPARED; a second call is a duplicate', async () => {
      const id = randomUUID();
      await store.prepareIntent(claimOf(id, 'EXECUTING', at(4)), intentOf(id), at(5));
      expect(await store.getClaim(id)).toEqual(claimOf(id, 'EXECUTING', at(4)));
      expect(await store.getIntent(id)).toEqual({ intent: intentOf(id), status: { state: 'PREPARED', updatedAt: at(5) } });
      await expect(store.prepareIntent(claimOf(id), intentOf(id), at(6))).rejects.toBeInstanceOf(DuplicateTransactionError);
      expect((await store.getIntent(id))!.status.updatedAt).toBe(at(5));
    });

    it('a claim is a claim across kinds, and a duplicate leaves nothing half-written', async () => {
      const refused = randomUUID();
      await store.storeRefusal(claimOf(refused, 'REFUSED'), refusalOf(refused));
      await expect(store.prepareIntent(claimOf(refused), intentOf(refused), at(1))).rejects.toBeInstanceOf(DuplicateTransactionError);
      await expect(store.storeRecordedTransaction(claimOf(refused, 'RECORDED'), recordOf(refused))).rejects.toBeInstanceOf(
        DuplicateTransactionError,
      );
      expect(await rows('execution_intents', refused)).toBe(0);
      expect(await rows('trust_records', refused)).toBe(0);
      expect(await store.getIntent(refused)).toBeUndefined();
      expect((await store.getClaim(refused))!.outcome).toBe('REFUSED');

      const prepared = randomUUID();
      await store.prepareIntent(claimOf(prepared), intentOf(prepared), at(1));
      await expect(store.storeRefusal(claimOf(prepared, 'REFUSED'), refusalOf(prepared))).rejects.toBeInstanceOf(DuplicateTransactionError);
      await expect(store.storeRecordedTransaction(claimOf(prepared, 'RECORDED'), recordOf(prepared))).rejects.toBeInstanceOf(
        DuplicateTransactionError,
      );
      expect(await rows('refusal_records', prepared)).toBe(0);
      expect(await rows('trust_records', prepared)).toBe(0);
      expect(await rows('business_transactions', prepared)).toBe(1);
    });

    it('of 20 concurrent prepareIntent with one id exactly one wins', async () => {
      const id = randomUUID();
      const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => store.prepareIntent(claimOf(id), intentOf(id), at(i))));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(rejected).toHaveLength(19);
      for (const r of rejected) expect(r.reason).toBeInstanceOf(DuplicateTransactionError);
      expect(await rows('business_transactions', id)).toBe(1);
      expect(await rows('execution_intents', id)).toBe(1);
    });

    it('of concurrent claims of different kinds with one id exactly one wins, with its own record only', async () => {
      const id = randomUUID();
      const results = await Promise.allSettled([
        ...Array.from({ length: 5 }, () => store.storeRefusal(claimOf(id, 'REFUSED'), refusalOf(id))),
        ...Array.from({ length: 5 }, () => store.storeRecordedTransaction(claimOf(id, 'RECORDED'), recordOf(id))),
        ...Array.from({ length: 5 }, () => store.prepareIntent(claimOf(id), intentOf(id), at(0))),
      ]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(DuplicateTransactionError);
      const stored = (await rows('refusal_records', id)) + (await rows('trust_records', id)) + (await rows('execution_intents', id));
      expect(stored).toBe(1);
    });

    it('refuses a record whose id is not the claim', async () => {
      const id = randomUUID();
      await expect(store.prepareIntent(claimOf(id), intentOf(randomUUID()), at(0))).rejects.toThrow(/does not match/);
      expect(await store.isClaimed(id)).toBe(false);
    });
  });

  describe('intent state', () => {
    it('PREPARED -> RELEASED saves the release context; RELEASED -> FINALIZED stores the record and clears it', async () => {
      const id = randomUUID();
      await store.prepareIntent(claimOf(id), intentOf(id), at(0));
      expect(await store.getReleaseContext(id)).toBeUndefined();
      await store.markReleased(id, contextOf(id), at(2));
      expect(await store.getIntent(id)).toEqual({ intent: intentOf(id), status: { state: 'RELEASED', updatedAt: at(2) } });
      const context = await store.getReleaseContext(id);
      expect(JSON.stringify(context)).toBe(JSON.stringify(contextOf(id)));
      expect(await store.listIntents(['RELEASED'], 10)).toEqual([{ intent: intentOf(id), status: { state: 'RELEASED', updatedAt: at(2) } }]);

      const record = await store.finalize(id, chainedBuild(id), at(3));
      expect(record).toEqual(await chainedBuild(id)({ chainHash: null }));
      expect(await store.getIntent(id)).toEqual({ intent: intentOf(id), status: { state: 'FINALIZED', updatedAt: at(3) } });
      expect(await store.getTrustRecord(id)).toEqual(record);
      expect(await store.getReleaseContext(id)).toBeUndefined();
      expect(await chainHead()).toBe(record!.executions[0]!.chainHash);
    });

    it('markReleased moves only a PREPARED intent', async () => {
      const id = randomUUID();
      await expect(store.markReleased(id, contextOf(id), at(1))).rejects.toBeInstanceOf(IntentStateConflictError); // missing
      await released(id);
      await expect(store.markReleased(id, contextOf(id), at(5))).rejects.toBeInstanceOf(IntentStateConflictError); // RELEASED
      await store.finalize(id, chainedBuild(id), at(3));
      await expect(store.markReleased(id, contextOf(id), at(5))).rejects.toBeInstanceOf(IntentStateConflictError); // FINALIZED

      const errored = randomUUID();
      await store.prepareIntent(claimOf(errored), intentOf(errored), at(0));
      await store.markErrored(errored, { phase: 'before-send', message: 'refused' }, at(1));
      await expect(store.markReleased(errored, contextOf(errored), at(5))).rejects.toBeInstanceOf(IntentStateConflictError);

      const resolved = randomUUID();
      await store.prepareIntent(claimOf(resolved), intentOf(resolved), at(0));
      expect(await store.resolve(resolved, resolutionOf('PREPARED'), at(1))).toBe(true);
      await expect(store.markReleased(resolved, contextOf(resolved), at(5))).rejects.toBeInstanceOf(IntentStateConflictError);
      expect((await store.getIntent(resolved))!.status.state).toBe('RESOLVED');
    });

    it('markErrored moves a PREPARED or RELEASED intent, nothing else', async () => {
      const fromPrepared = randomUUID();
      await store.prepareIntent(claimOf(fromPrepared), intentOf(fromPrepared), at(0));
      await store.markErrored(fromPrepared, { phase: 'outcome-unknown', message: 'timeout' }, at(1));
      expect((await store.getIntent(fromPrepared))!.status).toEqual({
        state: 'ERRORED',
        updatedAt: at(1),
        error: { phase: 'outcome-unknown', message: 'timeout' },
      });
      await expect(store.markErrored(fromPrepared, { phase: 'before-send', message: 'again' }, at(2))).rejects.toBeInstanceOf(
        IntentStateConflictError,
      );
      expect((await store.getIntent(fromPrepared))!.status.error!.message).toBe('timeout');

      const fromReleased = randomUUID();
      await released(fromReleased);
      await store.markErrored(fromReleased, { phase: 'outcome-unknown', message: 'late' }, at(3));
      expect((await store.getIntent(fromReleased))!.status.state).toBe('ERRORED');

      const finalized = randomUUID();
      await released(finalized);
      await store.finalize(finalized, chainedBuild(finalized), at(3));
      await expect(store.markErrored(finalized, { phase: 'outcome-unknown', message: 'stale' }, at(4))).rejects.toBeInstanceOf(
        IntentStateConflictError,
      );
      expect((await store.getIntent(finalized))!.status.state).toBe('FINALIZED');

      const resolved = randomUUID();
      await store.prepareIntent(claimOf(resolved), intentOf(resolved), at(0));
      await store.resolve(resolved, resolutionOf('PREPARED'), at(1));
      await expect(store.markErrored(resolved, { phase: 'outcome-unknown', message: 'stale' }, at(4))).rejects.toBeInstanceOf(
        IntentStateConflictError,
      );
      await expect(store.markErrored(randomUUID(), { phase: 'outcome-unknown', message: 'missing' }, at(4))).rejects.toBeInstanceOf(
        IntentStateConflictError,
      );
    });

    it('resolve closes a PREPARED or ERRORED intent (keeping the error) and refuses the others', async () => {
      const prepared = randomUUID();
      await store.prepareIntent(claimOf(prepared), intentOf(prepared), at(0));
      expect(await store.resolve(prepared, resolutionOf('PREPARED'), at(9))).toBe(true);
      expect((await store.getIntent(prepared))!.status).toEqual({ state: 'RESOLVED', updatedAt: at(9), resolution: resolutionOf('PREPARED') });
      expect(await store.resolve(prepared, resolutionOf('PREPARED'), at(10))).toBe(false); // RESOLVED

      const errored = randomUUID();
      await store.prepareIntent(claimOf(errored), intentOf(errored), at(0));
      await store.markErrored(errored, { phase: 'outcome-unknown', message: 'timeout' }, at(1));
      expect(await store.resolve(errored, resolutionOf('ERRORED'), at(9))).toBe(true);
      expect((await store.getIntent(errored))!.status).toEqual({
        state: 'RESOLVED',
        updatedAt: at(9),
        error: { phase: 'outcome-unknown', message: 'timeout' },
        resolution: resolutionOf('ERRORED'),
      });

      const rel = randomUUID();
      await released(rel);
      expect(await store.resolve(rel, resolutionOf('PREPARED'), at(9))).toBe(false);
      expect((await store.getIntent(rel))!.status.state).toBe('RELEASED');
      await store.finalize(rel, chainedBuild(rel), at(3));
      expect(await store.resolve(rel, resolutionOf('PREPARED'), at(9))).toBe(false);
      expect((await store.getIntent(rel))!.status.state).toBe('FINALIZED');
      expect(await store.resolve(randomUUID(), resolutionOf('PREPARED'), at(9))).toBe(false);
    });

    it('finalize returns undefined and never calls build unless the intent is RELEASED', async () => {
      const calls: string[] = [];
      const missing = randomUUID();
      expect(await store.finalize(missing, chainedBuild(missing, { calls }), at(3))).toBeUndefined();

      const prepared = randomUUID();
      await store.prepareIntent(claimOf(prepared), intentOf(prepared), at(0));
      expect(await store.finalize(prepared, chainedBuild(prepared, { calls }), at(3))).toBeUndefined();
      expect((await store.getIntent(prepared))!.status).toEqual({ state: 'PREPARED', updatedAt: at(0) });

      await store.markErrored(prepared, { phase: 'before-send', message: 'x' }, at(1));
      expect(await store.finalize(prepared, chainedBuild(prepared, { calls }), at(3))).toBeUndefined();
      await store.resolve(prepared, resolutionOf('ERRORED'), at(2));
      expect(await store.finalize(prepared, chainedBuild(prepared, { calls }), at(3))).toBeUndefined();

      const done = randomUUID();
      await released(done);
      expect(await store.finalize(done, chainedBuild(done), at(3))).toBeDefined();
      expect(await store.finalize(done, chainedBuild(done, { calls }), at(4))).toBeUndefined();

      expect(calls).toEqual([]);
      expect(await rows('trust_records', prepared)).toBe(0);
      expect(await rows('trust_records', done)).toBe(1);
      expect((await store.getIntent(done))!.status.updatedAt).toBe(at(3));
    });

    it('a failing build, or a record that does not link to the head, stores nothing and leaves the intent RELEASED', async () => {
      const first = randomUUID();
      await released(first);
      const head = (await store.finalize(first, chainedBuild(first), at(3)))!.executions[0]!.chainHash!;

      const id = randomUUID();
      await released(id);
      await expect(store.finalize(id, () => Promise.reject(new Error('signer down')), at(4))).rejects.toThrow('signer down');
      await expect(store.finalize(id, () => chainedBuild(id)({ chainHash: null }), at(4))).rejects.toThrow(/does not link/);
      await expect(store.finalize(id, async () => recordOf(id, []), at(4))).rejects.toThrow(/no chained execution/);
      expect((await store.getIntent(id))!.status).toEqual({ state: 'RELEASED', updatedAt: at(2) });
      expect(await store.getReleaseContext(id)).toBeDefined();
      expect(await rows('trust_records', id)).toBe(0);
      expect(await chainHead()).toBe(head);

      const record = await store.finalize(id, chainedBuild(id), at(5));
      expect(record!.executions[0]!.previousChainHash).toBe(head);
    });
  });

  describe('execution chain', () => {
    it('links sequential finalizes into one chain', async () => {
      const ids = Array.from({ length: 5 }, () => randomUUID());
      let previous: string | null = null;
      for (const id of ids) {
        await released(id);
        const record = (await store.finalize(id, chainedBuild(id), at(3)))!;
        expect(record.executions[0]!.previousChainHash).toBe(previous);
        previous = record.executions[0]!.chainHash!;
      }
      expect(expectSingleChain(await allRecords())).toBe(previous);
      expect(await chainHead()).toBe(previous);
    });

    it('never forks under concurrent finalizes on one DataSource (builds that yield cannot interleave)', async () => {
      const ids = Array.from({ length: 30 }, () => randomUUID());
      for (const id of ids) await released(id);
      const records = await Promise.all(ids.map((id, i) => store.finalize(id, chainedBuild(id, { delayMs: i % 3 }), at(3))));
      expect(records.every((r) => r !== undefined)).toBe(true);
      const tail = expectSingleChain(await allRecords());
      expect(await chainHead()).toBe(tail);
    });

    it('finalizes one intent once when finalize races itself', async () => {
      const id = randomUUID();
      await released(id);
      const calls: string[] = [];
      const results = await Promise.all(Array.from({ length: 10 }, () => store.finalize(id, chainedBuild(id, { calls, delayMs: 1 }), at(3))));
      expect(results.filter((r) => r !== undefined)).toHaveLength(1);
      expect(calls).toHaveLength(1);
      expect(await rows('trust_records', id)).toBe(1);
    });

    it('concurrent finalizes whose builds fail store nothing for those and still form one chain', async () => {
      const ids = Array.from({ length: 12 }, () => randomUUID());
      for (const id of ids) await released(id);
      const results = await Promise.allSettled(
        ids.map((id, i) =>
          store.finalize(id, i % 3 === 1 ? async () => Promise.reject(new Error(`no signer for ${i}`)) : chainedBuild(id, { delayMs: i % 2 }), at(3)),
        ),
      );
      ids.forEach((id, i) => expect(results[i]!.status).toBe(i % 3 === 1 ? 'rejected' : 'fulfilled'));
      for (const [i, id] of ids.entries()) {
        expect((await store.getIntent(id))!.status.state).toBe(i % 3 === 1 ? 'RELEASED' : 'FINALIZED');
      }
      const records = await allRecords();
      expect(records).toHaveLength(8);
      expect(expectSingleChain(records)).toBe(await chainHead());
    });

    (factory.name === 'sqlite' ? it : it.skip)('withSqliteWriteLock runs between write transactions, never inside one', async () => {
      const connection = (ds.driver as unknown as { databaseConnection: { inTransaction: boolean } }).databaseConnection;
      const ids = Array.from({ length: 10 }, () => randomUUID());
      const seen: boolean[] = [];
      await Promise.all([
        ...ids.map((id) => released(id)),
        ...ids.map(() => withSqliteWriteLock(ds, async () => void seen.push(connection.inTransaction))),
      ]);
      expect(seen).toEqual(ids.map(() => false));
    });

    (factory.name === 'postgres' ? it : it.skip)(
      'two DataSources sharing one PostgreSQL extend ONE chain (2 x 25 concurrent finalizes)',
      async () => {
        const other = await open();
        extra.push(other);
        const otherStore = new TypeOrmExecutionStore(other);
        const ids = Array.from({ length: 50 }, () => randomUUID());
        await Promise.all(ids.map((id, i) => released(id, i % 2 === 0 ? store : otherStore)));
        const results = await Promise.all(
          ids.map((id, i) => (i % 2 === 0 ? otherStore : store).finalize(id, chainedBuild(id, { delayMs: i % 4 }), at(3))),
        );
        expect(results.every((r) => r !== undefined)).toBe(true);
        const records = await allRecords(otherStore);
        expect(records).toHaveLength(50);
        const tail = expectSingleChain(records);
        expect(await chainHead(other)).toBe(tail);
        // And both instances racing on the SAME ids finalize each exactly once.
        const same = Array.from({ length: 10 }, () => randomUUID());
        for (const id of same) await released(id);
        const raced = await Promise.all(same.flatMap((id) => [store, otherStore].map((s) => s.finalize(id, chainedBuild(id, { delayMs: 1 }), at(4)))));
        expect(raced.filter((r) => r !== undefined)).toHaveLength(10);
        expect(expectSingleChain(await allRecords())).toBe(await chainHead());
      },
    );
  });

  describe('listing', () => {
    it('lists intents by state, oldest first, up to the limit', async () => {
      const ids = Array.from({ length: 4 }, () => randomUUID());
      // Prepared in reverse time order so insertion order is not the answer.
      for (const [i, id] of ids.entries()) await store.prepareIntent(claimOf(id), intentOf(id), at(10 - i));
      await store.markErrored(ids[1]!, { phase: 'outcome-unknown', message: 'x' }, at(20));
      await store.markReleased(ids[2]!, contextOf(ids[2]!), at(20));
      const open = await store.listIntents(['PREPARED', 'ERRORED'], 10);
      expect(open.map((x) => x.intent.businessTransactionId)).toEqual([ids[3], ids[1], ids[0]]);
      expect(open[1]!.status).toMatchObject({ state: 'ERRORED', error: { message: 'x' } });
      expect((await store.listIntents(['PREPARED', 'ERRORED'], 2)).map((x) => x.intent.businessTransactionId)).toEqual([ids[3], ids[1]]);
      expect(await store.listIntents([], 10)).toEqual([]);
      expect(await store.listIntents(['FINALIZED'], 10)).toEqual([]);
    });

    it('pages trust records and claims newest first with the total', async () => {
      const ids = Array.from({ length: 5 }, () => randomUUID());
      for (const [i, id] of ids.entries()) await store.storeRecordedTransaction(claimOf(id, 'RECORDED', at(i)), recordOf(id));
      const refused = randomUUID();
      await store.storeRefusal(claimOf(refused, 'REFUSED', at(100)), refusalOf(refused));

      const page1 = await store.listTrustRecords(1, 2);
      expect(page1).toMatchObject({ page: 1, pageSize: 2, total: 5 });
      expect(page1.items.map((r) => r.businessTransactionId)).toEqual([ids[4], ids[3]]);
      expect((await store.listTrustRecords(3, 2)).items.map((r) => r.businessTransactionId)).toEqual([ids[0]]);
      expect(await store.listTrustRecords(4, 2)).toEqual({ items: [], page: 4, pageSize: 2, total: 5 });

      const claims = await store.listClaims(1, 3);
      expect(claims).toMatchObject({ page: 1, pageSize: 3, total: 6 });
      expect(claims.items).toEqual([claimOf(refused, 'REFUSED', at(100)), claimOf(ids[4]!, 'RECORDED', at(4)), claimOf(ids[3]!, 'RECORDED', at(3))]);
      expect((await store.listClaims(2, 3)).items.map((c) => c.businessTransactionId)).toEqual([ids[2], ids[1], ids[0]]);
      await expect(store.listClaims(0, 3)).rejects.toThrow(RangeError);
    });

    it('breaks created_at ties by id, descending', async () => {
      const ids = Array.from({ length: 4 }, () => randomUUID());
      for (const id of ids) await store.storeRecordedTransaction(claimOf(id, 'RECORDED', at(1)), recordOf(id));
      const sorted = [...ids].sort().reverse();
      expect((await store.listTrustRecords(1, 10)).items.map((r) => r.businessTransactionId)).toEqual(sorted);
      expect((await store.listClaims(1, 10)).items.map((c) => c.businessTransactionId)).toEqual(sorted);
    });
  });

  describe('signed bytes', () => {
    it('returns every signed object exactly as stored, __proto__ keys and null previousChainHash included', async () => {
      const recorded = randomUUID();
      const withNull = recordOf(recorded, [{ ...entry(recorded), previousChainHash: null, chainHash: sha256('x'), chainSignature: 's' }]);
      await store.storeRecordedTransaction(claimOf(recorded, 'RECORDED'), withNull);
      const back = (await store.getTrustRecord(recorded))!;
      expect(JSON.stringify(back)).toBe(JSON.stringify(withNull));
      expect(Object.keys(back.transaction.metadata)).toEqual(['__proto__', 'tenantId']);
      expect(Object.getPrototypeOf(back.transaction.metadata)).toBe(Object.prototype);
      expect(back.executions[0]).toHaveProperty('previousChainHash', null);

      const executed = randomUUID();
      await released(executed);
      const finalized = (await store.finalize(executed, chainedBuild(executed), at(3)))!;
      expect(finalized.executions[0]!.previousChainHash).toBeNull();
      expect(JSON.stringify(await store.getTrustRecord(executed))).toBe(JSON.stringify(finalized));
      expect(JSON.stringify((await store.listTrustRecords(1, 10)).items.find((r) => r.businessTransactionId === executed))).toBe(
        JSON.stringify(finalized),
      );

      const intentId = randomUUID();
      const intent = { ...intentOf(intentId), extra: protoMetadata() } as SignedIntent;
      await store.prepareIntent(claimOf(intentId), intent, at(0));
      expect(JSON.stringify((await store.getIntent(intentId))!.intent)).toBe(JSON.stringify(intent));
      await store.markReleased(intentId, contextOf(intentId), at(1));
      expect(JSON.stringify(await store.getReleaseContext(intentId))).toBe(JSON.stringify(contextOf(intentId)));

      const refusedId = randomUUID();
      const refusal = { ...refusalOf(refusedId), decision: { ...decision, detail: protoMetadata() } } as unknown as SignedRefusal;
      await store.storeRefusal(claimOf(refusedId, 'REFUSED'), refusal);
      expect(JSON.stringify(await store.getRefusal(refusedId))).toBe(JSON.stringify(refusal));
    });

    it('keeps everything across closing and reopening the DataSource', async () => {
      const ids = Array.from({ length: 3 }, () => randomUUID());
      for (const id of ids) {
        await released(id);
        await store.finalize(id, chainedBuild(id), at(3));
      }
      const pending = randomUUID();
      await store.prepareIntent(claimOf(pending), intentOf(pending), at(4));
      const refused = randomUUID();
      await store.storeRefusal(claimOf(refused, 'REFUSED'), refusalOf(refused));
      const before = await allRecords();
      const head = await chainHead();
      await ds.destroy();

      ds = await open();
      expect(await migrate(ds)).toEqual([]);
      store = new TypeOrmExecutionStore(ds);
      expect(await allRecords()).toEqual(before);
      expect(await chainHead()).toBe(head);
      expect(expectSingleChain(before)).toBe(head);
      expect((await store.getIntent(pending))!.status.state).toBe('PREPARED');
      expect(await store.getRefusal(refused)).toEqual(refusalOf(refused));
      expect((await store.listClaims(1, 10)).total).toBe(5);
      // The chain continues from the persisted head.
      const next = randomUUID();
      await released(next);
      expect((await store.finalize(next, chainedBuild(next), at(5)))!.executions[0]!.previousChainHash).toBe(head);
    });
  });
});
