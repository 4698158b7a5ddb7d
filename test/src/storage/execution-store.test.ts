import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { DataSource } from 'typeorm';
import { createDataSource, migrate, TypeOrmExecutionStore, TypeOrmRecordedDecisions, withSqliteWriteLock } from '@ets/adapters-persistence';
import { canonicalize, InMemoryTransparencyLog, Sha256Hasher } from '@ets/adapters-crypto';
import {
  DuplicateTransactionError,
  ExecutionService,
  EVERY_CALLER as ALL,
  InMemoryExecutionStore,
  INTENT_IN_FLIGHT_LEASE_MS,
  IntentStateConflictError,
  type ChainHead,
  type DecidedInput,
  type DecidedTransaction,
  type HeldApproval,
  type ExecutionEntry,
  type ExecutionStore,
  type IntentResolution,
  type PolicyDecision,
  type ReadScope,
  type RecordedDecisions,
  type ReleaseContext,
  type SignedIntent,
  type SignedRefusal,
  type SignedTrustRecord,
  type TransactionClaim,
} from '@ets/domain';
import { STORAGE_TARGETS, type ProvisionedTarget, type TargetFactory } from '@ets/test-support';

// --- fixtures ---------------------------------------------------------------------------------------

const T0 = Date.UTC(2025, 0, 1);
const at = (seconds: number): string => new Date(T0 + seconds * 1000).toISOString();
/** When the lease of an intent prepared at `at(seconds)` ends. */
const leaseEnd = (seconds: number): string => new Date(T0 + seconds * 1000 + INTENT_IN_FLIGHT_LEASE_MS).toISOString();
/** A time after the lease of every intent these tests prepare: their requests are over. */
const LATER = at(3600);
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

const resolution: Omit<IntentResolution, 'previousState'> = {
  found: 'NOT_EXECUTED',
  note: 'checked at the bank',
  resolvedBy: 'operator@example.com',
  resolvedAt: at(9),
};
/** The resolution as the status keeps it: the store adds the state it moved from. */
const resolutionOf = (previousState: IntentResolution['previousState']): IntentResolution => ({ ...resolution, previousState });

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

/** Every Trust Record a store lists, in its order, 100 a page. */
async function everyRecord(s: ExecutionStore, scope: ReadScope = ALL): Promise<SignedTrustRecord[]> {
  const out: SignedTrustRecord[] = [];
  for (let page = 1; ; page++) {
    const { items } = await s.listTrustRecordTexts(scope, page, 100);
    let n = 0;
    for await (const text of items) {
      out.push(JSON.parse(text) as SignedTrustRecord);
      n++;
    }
    if (n < 100) return out;
  }
}

// --- targets ----------------------------------------------------------------------------------------

type Table = 'business_transactions' | 'refusal_records' | 'trust_records' | 'execution_intents';

/**
 * A fresh store on one target, and what the tests look at beside the port: what the SQL stores keep
 * in their tables (rows, the chain's head and positions, log leaves), the in-memory store in its own.
 */
interface OpenedStore {
  store: ExecutionStore;
  /** A store on the same storage with another in-flight lease. */
  withLease(inFlightLeaseMs: number): ExecutionStore;
  /** The decisions kept with the claims (the impact preview's port). */
  decisions: RecordedDecisions;
  /** How many rows the id has in `table` (what the store keeps of that kind). */
  rows(table: Table, id: string): Promise<number>;
  chainHead(): Promise<string | null>;
  headPosition(): Promise<number>;
  /** Each Trust Record's chain position (null: a record without executions). */
  chainPositions(): Promise<Map<string, number | null>>;
  claimOutcome(id: string): Promise<string>;
  /** The transparency-log leaves of the id's Trust Record. */
  trustRecordLeaves(id: string): Promise<number>;
  /** SQL targets only: the database, for the tests about a DataSource. */
  sql?: SqlStorage;
  close(): Promise<void>;
}

interface SqlStorage {
  ds: DataSource;
  /** Another DataSource on the same database, destroyed with the store. */
  open(): Promise<DataSource>;
}

interface StoreTarget {
  name: 'sqlite' | 'postgres' | 'memory';
  open(): Promise<OpenedStore>;
}

const headOf = async (on: DataSource): Promise<string | null> => {
  const [r] = (await on.query('SELECT head_hash FROM execution_chain WHERE id = 1')) as { head_hash: string | null }[];
  return r!.head_hash;
};

/** TypeOrmExecutionStore on a throwaway SQLite file or PostgreSQL database. */
const sqlTarget = (factory: TargetFactory): StoreTarget => ({
  name: factory.name,
  async open() {
    const db: ProvisionedTarget = await factory.provision();
    const sources: DataSource[] = [];
    const open = async (): Promise<DataSource> => {
      const d = createDataSource(db.target);
      await d.initialize();
      sources.push(d);
      return d;
    };
    const sql: SqlStorage = { ds: await open(), open };
    await migrate(sql.ds);
    const p = (n: number): string => (factory.name === 'postgres' ? `$${n}` : '?');
    const query = async <T>(text: string, params: unknown[] = []): Promise<T[]> => (await sql.ds.query(text, params)) as T[];
    return {
      store: new TypeOrmExecutionStore(sql.ds),
      withLease: (inFlightLeaseMs) => new TypeOrmExecutionStore(sql.ds, { inFlightLeaseMs }),
      decisions: new TypeOrmRecordedDecisions(sql.ds),
      async rows(table, id) {
        const [r] = await query<{ n: string | number }>(`SELECT COUNT(*) AS n FROM ${table} WHERE business_transaction_id = ${p(1)}`, [id]);
        return Number(r!.n);
      },
      chainHead: () => headOf(sql.ds),
      async headPosition() {
        const [head] = await query<{ head_position: string | number }>('SELECT head_position FROM execution_chain WHERE id = 1');
        return Number(head!.head_position);
      },
      async chainPositions() {
        const r = await query<{ business_transaction_id: string; chain_position: string | number | null }>('SELECT business_transaction_id, chain_position FROM trust_records');
        return new Map(r.map((x) => [x.business_transaction_id, x.chain_position === null ? null : Number(x.chain_position)]));
      },
      async claimOutcome(id) {
        const [r] = await query<{ outcome: string }>(`SELECT outcome FROM business_transactions WHERE business_transaction_id = ${p(1)}`, [id]);
        return r!.outcome;
      },
      async trustRecordLeaves(id) {
        const [r] = await query<{ n: string | number }>(`SELECT COUNT(*) AS n FROM transparency_log_leaves WHERE record_kind = 'trust-record' AND record_id = ${p(1)}`, [id]);
        return Number(r!.n);
      },
      sql,
      async close() {
        for (const d of sources) if (d.isInitialized) await d.destroy();
        await db.drop();
      },
    };
  },
});

/**
 * InMemoryExecutionStore, keeping RFC 8785 texts (as the SQL stores do) and appending to an
 * in-memory transparency log. What the SQL targets count in tables it answers from its own state.
 */
const memoryTarget: StoreTarget = {
  name: 'memory',
  async open() {
    const hasher = new Sha256Hasher();
    const log = new InMemoryTransparencyLog();
    const store = new InMemoryExecutionStore({ hasher, log });
    const kept: Record<Table, (id: string) => Promise<boolean>> = {
      business_transactions: (id) => store.isClaimed(id),
      refusal_records: async (id) => (await store.getRefusal(id, ALL)) !== undefined,
      trust_records: (id) => store.hasTrustRecord(id, ALL),
      execution_intents: async (id) => (await store.getIntent(id, ALL)) !== undefined,
    };
    return {
      store,
      withLease: (inFlightLeaseMs) => new InMemoryExecutionStore({ hasher, log, inFlightLeaseMs }),
      decisions: store,
      rows: async (table, id) => Number(await kept[table](id)),
      chainHead: async () => store.chainHead().chainHash,
      headPosition: async () => store.chainHead().position,
      async chainPositions() {
        const ids = (await everyRecord(store)).map((r) => r.businessTransactionId);
        return new Map(ids.map((id) => [id, store.chainPosition(id)!]));
      },
      claimOutcome: async (id) => (await store.getClaim(id, ALL))!.outcome,
      async trustRecordLeaves(id) {
        const text = await store.getTrustRecordText(id, ALL);
        if (text === undefined) return 0;
        const leaves = await log.leaves(0, (await log.treeHead()).treeSize);
        return leaves.filter((leaf) => leaf === sha256(text)).length;
      },
      close: async () => undefined,
    };
  },
};

/** The contract runs on every store: SQLite, PostgreSQL, and the domain's in-memory store for unit tests. */
const TARGETS: StoreTarget[] = [...STORAGE_TARGETS.map(sqlTarget), memoryTarget];

// --- suite ------------------------------------------------------------------------------------------

describe.each(TARGETS)('execution store on $name', (target) => {
  let opened: OpenedStore;
  let store: ExecutionStore;
  /** The database of an SQL target (for the tests that run on SQL targets only). */
  const sql = (): SqlStorage => opened.sql!;
  const rows = (table: Table, id: string): Promise<number> => opened.rows(table, id);
  const chainHead = (): Promise<string | null> => opened.chainHead();
  /** A page of GET /trust-records with its items parsed. */
  const recordPage = async (page: number, pageSize: number, scope: ReadScope = ALL, s = store) => {
    const texts = await s.listTrustRecordTexts(scope, page, pageSize);
    const items: SignedTrustRecord[] = [];
    for await (const text of texts.items) items.push(JSON.parse(text) as SignedTrustRecord);
    return { ...texts, items };
  };
  const allRecords = (s = store, scope: ReadScope = ALL): Promise<SignedTrustRecord[]> => everyRecord(s, scope);
  const released = async (id: string, s = store): Promise<void> => {
    await s.prepareIntent(claimOf(id), intentOf(id), at(0));
    await s.markReleased(id, contextOf(id), at(2));
  };

  beforeEach(async () => {
    opened = await target.open();
    store = opened.store;
  });
  afterEach(async () => {
    await opened.close();
  });

  describe('claims', () => {
    it('storeRefusal claims the id and stores the refusal; a second call is a duplicate', async () => {
      const id = randomUUID();
      expect(await store.isClaimed(id)).toBe(false);
      await store.storeRefusal(claimOf(id, 'REFUSED'), refusalOf(id));
      expect(await store.isClaimed(id)).toBe(true);
      expect(await store.getClaim(id, ALL)).toEqual(claimOf(id, 'REFUSED'));
      expect(await store.getRefusal(id, ALL)).toEqual(refusalOf(id));
      await expect(store.storeRefusal(claimOf(id, 'REFUSED'), refusalOf(id))).rejects.toBeInstanceOf(DuplicateTransactionError);
      expect(await rows('refusal_records', id)).toBe(1);
    });

    it('storeRecordedTransaction claims the id and stores the record; a second call is a duplicate', async () => {
      const id = randomUUID();
      await store.storeRecordedTransaction(claimOf(id, 'RECORDED'), recordOf(id));
      expect(await store.getClaim(id, ALL)).toEqual(claimOf(id, 'RECORDED'));
      expect(await store.getTrustRecord(id, ALL)).toEqual(recordOf(id));
      const dup = store.storeRecordedTransaction(claimOf(id, 'RECORDED'), recordOf(id));
      await expect(dup).rejects.toThrow(DuplicateTransactionError);
      await expect(dup).rejects.toMatchObject({ businessTransactionId: id, message: `Business Transaction '${id}' already exists.` });
      expect(await rows('trust_records', id)).toBe(1);
    });

    it('prepareIntent claims the id and stores the intent PREPARED, in flight for the lease; a second call is a duplicate', async () => {
      const id = randomUUID();
      await store.prepareIntent(claimOf(id, 'EXECUTING', at(4)), intentOf(id), at(5));
      expect(await store.getClaim(id, ALL)).toEqual(claimOf(id, 'EXECUTING', at(4)));
      expect(await store.getIntent(id, ALL)).toEqual({ intent: intentOf(id), status: { state: 'PREPARED', updatedAt: at(5), inFlightUntil: leaseEnd(5) } });
      await expect(store.prepareIntent(claimOf(id), intentOf(id), at(6))).rejects.toBeInstanceOf(DuplicateTransactionError);
      expect((await store.getIntent(id, ALL))!.status.updatedAt).toBe(at(5));
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
      expect(await store.getIntent(refused, ALL)).toBeUndefined();
      expect((await store.getClaim(refused, ALL))!.outcome).toBe('REFUSED');

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
      expect(await store.getIntent(id, ALL)).toEqual({ intent: intentOf(id), status: { state: 'RELEASED', updatedAt: at(2) } });
      const context = await store.getReleaseContext(id);
      expect(JSON.stringify(context)).toBe(JSON.stringify(contextOf(id)));
      expect((await store.listIntents(['RELEASED'], ALL, 1, 10)).items).toEqual([{ intent: intentOf(id), status: { state: 'RELEASED', updatedAt: at(2) } }]);

      const record = await store.finalize(id, chainedBuild(id), at(3));
      expect(record).toEqual(await chainedBuild(id)({ chainHash: null }));
      expect(await store.getIntent(id, ALL)).toEqual({ intent: intentOf(id), status: { state: 'FINALIZED', updatedAt: at(3) } });
      expect(await store.getTrustRecord(id, ALL)).toEqual(record);
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
      expect(await store.resolve(resolved, resolution, LATER)).toEqual({ outcome: 'resolved' });
      await expect(store.markReleased(resolved, contextOf(resolved), at(5))).rejects.toBeInstanceOf(IntentStateConflictError);
      expect((await store.getIntent(resolved, ALL))!.status.state).toBe('RESOLVED');
    });

    it('markErrored moves a PREPARED or RELEASED intent, nothing else', async () => {
      const fromPrepared = randomUUID();
      await store.prepareIntent(claimOf(fromPrepared), intentOf(fromPrepared), at(0));
      await store.markErrored(fromPrepared, { phase: 'outcome-unknown', message: 'timeout' }, at(1));
      expect((await store.getIntent(fromPrepared, ALL))!.status).toEqual({
        state: 'ERRORED',
        updatedAt: at(1),
        error: { phase: 'outcome-unknown', message: 'timeout' },
      });
      await expect(store.markErrored(fromPrepared, { phase: 'before-send', message: 'again' }, at(2))).rejects.toBeInstanceOf(
        IntentStateConflictError,
      );
      expect((await store.getIntent(fromPrepared, ALL))!.status.error!.message).toBe('timeout');

      const fromReleased = randomUUID();
      await released(fromReleased);
      await store.markErrored(fromReleased, { phase: 'outcome-unknown', message: 'late' }, at(3));
      expect((await store.getIntent(fromReleased, ALL))!.status.state).toBe('ERRORED');

      const finalized = randomUUID();
      await released(finalized);
      await store.finalize(finalized, chainedBuild(finalized), at(3));
      await expect(store.markErrored(finalized, { phase: 'outcome-unknown', message: 'stale' }, at(4))).rejects.toBeInstanceOf(
        IntentStateConflictError,
      );
      expect((await store.getIntent(finalized, ALL))!.status.state).toBe('FINALIZED');

      const resolved = randomUUID();
      await store.prepareIntent(claimOf(resolved), intentOf(resolved), at(0));
      await store.resolve(resolved, resolution, LATER);
      await expect(store.markErrored(resolved, { phase: 'outcome-unknown', message: 'stale' }, at(4))).rejects.toBeInstanceOf(
        IntentStateConflictError,
      );
      await expect(store.markErrored(randomUUID(), { phase: 'outcome-unknown', message: 'missing' }, at(4))).rejects.toBeInstanceOf(
        IntentStateConflictError,
      );
    });

    it('resolve closes a PREPARED (its request over) or ERRORED intent (keeping the error) and refuses the others', async () => {
      const prepared = randomUUID();
      await store.prepareIntent(claimOf(prepared), intentOf(prepared), at(0));
      expect(await store.resolve(prepared, resolution, LATER)).toEqual({ outcome: 'resolved' });
      expect((await store.getIntent(prepared, ALL))!.status).toEqual({ state: 'RESOLVED', updatedAt: LATER, resolution: resolutionOf('PREPARED') });
      expect(await store.resolve(prepared, resolution, LATER)).toEqual({ outcome: 'not-resolvable', state: 'RESOLVED' });

      const errored = randomUUID();
      await store.prepareIntent(claimOf(errored), intentOf(errored), at(0));
      await store.markErrored(errored, { phase: 'outcome-unknown', message: 'timeout' }, at(1));
      expect(await store.resolve(errored, resolution, at(9))).toEqual({ outcome: 'resolved' });
      expect((await store.getIntent(errored, ALL))!.status).toEqual({
        state: 'RESOLVED',
        updatedAt: at(9),
        error: { phase: 'outcome-unknown', message: 'timeout' },
        resolution: resolutionOf('ERRORED'),
      });

      const rel = randomUUID();
      await released(rel);
      expect(await store.resolve(rel, resolution, LATER)).toEqual({ outcome: 'not-resolvable', state: 'RELEASED' });
      expect((await store.getIntent(rel, ALL))!.status.state).toBe('RELEASED');
      await store.finalize(rel, chainedBuild(rel), at(3));
      expect(await store.resolve(rel, resolution, LATER)).toEqual({ outcome: 'not-resolvable', state: 'FINALIZED' });
      expect((await store.getIntent(rel, ALL))!.status.state).toBe('FINALIZED');
      expect(await store.resolve(randomUUID(), resolution, LATER)).toEqual({ outcome: 'not-found' });
    });

    it('finalize returns undefined and never calls build unless the intent is RELEASED', async () => {
      const calls: string[] = [];
      const missing = randomUUID();
      expect(await store.finalize(missing, chainedBuild(missing, { calls }), at(3))).toBeUndefined();

      const prepared = randomUUID();
      await store.prepareIntent(claimOf(prepared), intentOf(prepared), at(0));
      expect(await store.finalize(prepared, chainedBuild(prepared, { calls }), at(3))).toBeUndefined();
      expect((await store.getIntent(prepared, ALL))!.status).toEqual({ state: 'PREPARED', updatedAt: at(0), inFlightUntil: leaseEnd(0) });

      await store.markErrored(prepared, { phase: 'before-send', message: 'x' }, at(1));
      expect(await store.finalize(prepared, chainedBuild(prepared, { calls }), at(3))).toBeUndefined();
      await store.resolve(prepared, resolution, at(2));
      expect(await store.finalize(prepared, chainedBuild(prepared, { calls }), at(3))).toBeUndefined();

      const done = randomUUID();
      await released(done);
      expect(await store.finalize(done, chainedBuild(done), at(3))).toBeDefined();
      expect(await store.finalize(done, chainedBuild(done, { calls }), at(4))).toBeUndefined();

      expect(calls).toEqual([]);
      expect(await rows('trust_records', prepared)).toBe(0);
      expect(await rows('trust_records', done)).toBe(1);
      expect((await store.getIntent(done, ALL))!.status.updatedAt).toBe(at(3));
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
      expect((await store.getIntent(id, ALL))!.status).toEqual({ state: 'RELEASED', updatedAt: at(2) });
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
        expect((await store.getIntent(id, ALL))!.status.state).toBe(i % 3 === 1 ? 'RELEASED' : 'FINALIZED');
      }
      const records = await allRecords();
      expect(records).toHaveLength(8);
      expect(expectSingleChain(records)).toBe(await chainHead());
    });

    // SQLite only: the writer's lock on its DataSource.
    (target.name === 'sqlite' ? it : it.skip)('withSqliteWriteLock runs between write transactions, never inside one', async () => {
      const { ds } = sql();
      const connection = (ds.driver as unknown as { databaseConnection: { inTransaction: boolean } }).databaseConnection;
      const ids = Array.from({ length: 10 }, () => randomUUID());
      const seen: boolean[] = [];
      await Promise.all([
        ...ids.map((id) => released(id)),
        ...ids.map(() => withSqliteWriteLock(ds, async () => void seen.push(connection.inTransaction))),
      ]);
      expect(seen).toEqual(ids.map(() => false));
    });

    // PostgreSQL only: two DataSources (two instances) on one database.
    (target.name === 'postgres' ? it : it.skip)(
      'two DataSources sharing one PostgreSQL extend ONE chain (2 x 25 concurrent finalizes)',
      async () => {
        const other = await sql().open();
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
        expect(await headOf(other)).toBe(tail);
        // And both instances racing on the SAME ids finalize each exactly once.
        const same = Array.from({ length: 10 }, () => randomUUID());
        for (const id of same) await released(id);
        const raced = await Promise.all(same.flatMap((id) => [store, otherStore].map((s) => s.finalize(id, chainedBuild(id, { delayMs: 1 }), at(4)))));
        expect(raced.filter((r) => r !== undefined)).toHaveLength(10);
        expect(expectSingleChain(await allRecords())).toBe(await chainHead());
      },
    );
  });

  describe('completeRelease: the release and its Trust Record in one commit', () => {
    const prepared = async (id: string, s = store): Promise<void> => s.prepareIntent(claimOf(id), intentOf(id), at(0));
    const claimOutcome = (id: string): Promise<string> => opened.claimOutcome(id);
    const leaves = (id: string): Promise<number> => opened.trustRecordLeaves(id);

    it('moves PREPARED to FINALIZED with the record, the claim EXECUTED, the chain head and the log leaf, and ends the lease', async () => {
      const id = randomUUID();
      await prepared(id);
      const done = await store.completeRelease(id, contextOf(id), chainedBuild(id), at(3));
      expect(done.record).toEqual(await chainedBuild(id)({ chainHash: null }));
      expect(await store.getIntent(id, ALL)).toEqual({ intent: intentOf(id), status: { state: 'FINALIZED', updatedAt: at(3) } });
      expect(await store.getTrustRecordText(id, ALL)).toBe(canonicalize(done.record));
      expect(await store.getReleaseContext(id)).toBeUndefined();
      expect(await claimOutcome(id)).toBe('EXECUTED');
      expect(await chainHead()).toBe(done.record!.executions[0]!.chainHash);
      expect(await leaves(id)).toBe(1);
      expect(await store.resolve(id, resolution, at(4))).toEqual({ outcome: 'not-resolvable', state: 'FINALIZED' });
    });

    it('a build that fails keeps the release with its context (RELEASED), which finalize completes later', async () => {
      const first = randomUUID();
      await prepared(first);
      const head = (await store.completeRelease(first, contextOf(first), chainedBuild(first), at(3))).record!.executions[0]!.chainHash!;

      const id = randomUUID();
      await prepared(id);
      const failure = new Error('signer down');
      const done = await store.completeRelease(id, contextOf(id), () => Promise.reject(failure), at(4));
      expect(done).toEqual({ record: undefined, buildError: failure });
      expect((await store.getIntent(id, ALL))!.status).toEqual({ state: 'RELEASED', updatedAt: at(4) });
      expect(JSON.stringify(await store.getReleaseContext(id))).toBe(JSON.stringify(contextOf(id)));
      expect(await rows('trust_records', id)).toBe(0);
      expect(await leaves(id)).toBe(0);
      expect(await chainHead()).toBe(head);

      const record = await store.finalize(id, chainedBuild(id), at(5));
      expect(record!.executions[0]!.previousChainHash).toBe(head);
      expect((await store.getIntent(id, ALL))!.status.state).toBe('FINALIZED');
    });

    it('refuses an intent that is not PREPARED, and a record that does not link to the head, changing nothing', async () => {
      const missing = randomUUID();
      await expect(store.completeRelease(missing, contextOf(missing), chainedBuild(missing), at(3))).rejects.toBeInstanceOf(IntentStateConflictError);
      expect(await rows('trust_records', missing)).toBe(0);

      const rel = randomUUID();
      await released(rel);
      await expect(store.completeRelease(rel, contextOf(rel), chainedBuild(rel), at(3))).rejects.toBeInstanceOf(IntentStateConflictError);
      expect((await store.getIntent(rel, ALL))!.status.state).toBe('RELEASED');

      const errored = randomUUID();
      await prepared(errored);
      await store.markErrored(errored, { phase: 'outcome-unknown', message: 'x' }, at(1));
      await expect(store.completeRelease(errored, contextOf(errored), chainedBuild(errored), at(3))).rejects.toBeInstanceOf(IntentStateConflictError);
      expect((await store.getIntent(errored, ALL))!.status.state).toBe('ERRORED');

      const forked = randomUUID();
      await prepared(forked);
      const headBefore = await chainHead();
      await expect(store.completeRelease(forked, contextOf(forked), () => chainedBuild(forked)({ chainHash: 'f'.repeat(64) }), at(3))).rejects.toThrow(/does not link/);
      expect((await store.getIntent(forked, ALL))!.status.state).toBe('PREPARED');
      expect(await rows('trust_records', forked)).toBe(0);
      expect(await chainHead()).toBe(headBefore);
      expect(await claimOutcome(forked)).toBe('EXECUTING');
    });

    it('links 60 concurrent releases (some of whose builds fail) into one chain at positions 1..n', async () => {
      const ids = Array.from({ length: 60 }, () => randomUUID());
      await Promise.all(ids.map((id) => prepared(id)));
      const results = await Promise.all(
        ids.map((id, i) =>
          store.completeRelease(id, contextOf(id), i % 7 === 3 ? () => Promise.reject(new Error('no')) : chainedBuild(id, { delayMs: i % 3 }), at(3)),
        ),
      );
      const finalized = results.filter((r) => r.record !== undefined).length;
      expect(finalized).toBe(ids.filter((_, i) => i % 7 !== 3).length);
      const records = await allRecords();
      expect(records).toHaveLength(finalized);
      expect(expectSingleChain(records)).toBe(await chainHead());
      const positions = [...(await opened.chainPositions()).values()];
      expect([Math.min(...(positions as number[])), Math.max(...(positions as number[])), positions.length]).toEqual([1, finalized, finalized]);
      expect((await store.listIntents(['RELEASED'], ALL, 1, 100)).total).toBe(ids.length - finalized);
    });

    it('restart finalizes and new releases committed together still form one chain', async () => {
      const recovering = Array.from({ length: 15 }, () => randomUUID());
      const releasing = Array.from({ length: 15 }, () => randomUUID());
      for (const id of recovering) await released(id);
      await Promise.all(releasing.map((id) => prepared(id)));
      const all = await Promise.all([
        ...recovering.map((id) => store.finalize(id, chainedBuild(id), at(3))),
        ...releasing.map((id) => store.completeRelease(id, contextOf(id), chainedBuild(id), at(3)).then((r) => r.record)),
      ]);
      expect(all.every((r) => r !== undefined)).toBe(true);
      const records = await allRecords();
      expect(records).toHaveLength(30);
      expect(expectSingleChain(records)).toBe(await chainHead());
    });

    // PostgreSQL only: two DataSources (two instances) on one database.
    (target.name === 'postgres' ? it : it.skip)('two DataSources sharing one PostgreSQL extend ONE chain with concurrent releases', async () => {
      const other = await sql().open();
      const otherStore = new TypeOrmExecutionStore(other);
      const ids = Array.from({ length: 50 }, () => randomUUID());
      await Promise.all(ids.map((id, i) => prepared(id, i % 2 === 0 ? store : otherStore)));
      const results = await Promise.all(ids.map((id, i) => (i % 2 === 0 ? otherStore : store).completeRelease(id, contextOf(id), chainedBuild(id, { delayMs: i % 4 }), at(3))));
      expect(results.every((r) => r.record !== undefined)).toBe(true);
      expect(expectSingleChain(await allRecords(otherStore))).toBe(await headOf(other));
    });
  });

  describe('held transactions (CONTRACT "Held transactions")', () => {
    const decidedOf = (id: string): DecidedTransaction =>
      ({
        tx: recordOf(id).transaction,
        callerId: 'caller-1',
        btxHash: sha256(`tx:${id}`),
        decidedAt: at(0),
        policy: { name: 'payments', version: '1.0.0', contentHash: sha256('policy') },
        connector: 'bank',
        decision: { ...decision, requires_override: true },
        byRules: true,
        signals: {},
        assessment: { authority: { status: 'VERIFIED', callerId: 'caller-1', principalId: 'agent-7', grant: null }, businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] } },
        conditions: [],
      }) as unknown as DecidedTransaction;
    const hold = (id: string, expiresAt = at(600)) => store.storeHeld(claimOf(id, 'HELD'), recordOf(id), { decided: decidedOf(id), expiresAt });
    const approval = (approverId = 'bob'): HeldApproval => ({ approverId, approvedAt: at(10), approval: { payload: { approverId }, signature: 'c2ln' } });

    it('storeHeld claims the id with the held decision\'s record and the held transaction, PENDING until its expiry; a second is a duplicate', async () => {
      const id = randomUUID();
      await hold(id);
      expect(await store.getClaim(id, ALL)).toEqual(claimOf(id, 'HELD'));
      expect(await store.getTrustRecord(id, ALL)).toEqual(recordOf(id));
      expect(await store.getHeld(id, ALL)).toEqual({ decided: decidedOf(id), status: 'PENDING', createdAt: at(0), expiresAt: at(600) });
      await expect(hold(id)).rejects.toBeInstanceOf(DuplicateTransactionError);
      expect(await store.getHeld(id, { callerId: 'someone-else' })).toBeUndefined();
      expect(await store.getHeld(id, { callerId: 'caller-1' })).toBeDefined();
    });

    it('of 20 concurrent approvals exactly one stores the intent; the claim moves to EXECUTING and the held record out of the records', async () => {
      const id = randomUUID();
      await hold(id);
      const wins = await Promise.all(Array.from({ length: 20 }, (_, i) => store.approveHeld(id, approval(`human-${i}`), intentOf(id), at(10))));
      expect(wins.filter(Boolean)).toHaveLength(1);
      const held = await store.getHeld(id, ALL);
      expect(held).toMatchObject({ status: 'APPROVED', decidedAt: at(10), decidedBy: expect.stringMatching(/^human-/) });
      expect((await store.getIntent(id, ALL))?.status).toMatchObject({ state: 'PREPARED', inFlightUntil: leaseEnd(10) });
      expect((await store.getClaim(id, ALL))?.outcome).toBe('EXECUTING');
      expect(await store.getTrustRecord(id, ALL)).toBeUndefined();
      // The release then records its own Trust Record in the record's place.
      await store.completeRelease(id, contextOf(id), chainedBuild(id), at(11));
      expect((await store.getClaim(id, ALL))?.outcome).toBe('EXECUTED');
      expect((await store.getTrustRecord(id, ALL))?.executions).toHaveLength(1);
      // Decided: nothing moves it again.
      expect(await store.approveHeld(id, approval(), intentOf(id), at(12))).toBe(false);
      expect(await store.refuseHeld(id, { status: 'REJECTED', decidedBy: 'ann', decidedAt: at(12), reason: 'no', nonce: randomUUID() }, refusalOf(id))).toBe('not-pending');
    });

    it('an approval at or after the expiry changes nothing; the expiry refuses it once, with its refusal', async () => {
      const id = randomUUID();
      await hold(id, at(60));
      expect(await store.approveHeld(id, approval(), intentOf(id), at(60))).toBe(false);
      expect(await store.listExpiredHeld(at(59), 10)).not.toContain(id);
      expect(await store.listExpiredHeld(at(60), 1000)).toContain(id);
      // Not yet due: an expiry is refused.
      expect(await store.refuseHeld(id, { status: 'EXPIRED', decidedAt: at(59), reason: 'late' }, refusalOf(id))).toBe('not-pending');
      const outcomes = await Promise.all([1, 2, 3].map(() => store.refuseHeld(id, { status: 'EXPIRED', decidedAt: at(61), reason: 'nobody decided' }, refusalOf(id))));
      expect(outcomes.filter((o) => o === 'refused')).toHaveLength(1);
      expect(await store.getHeld(id, ALL)).toMatchObject({ status: 'EXPIRED', decidedAt: at(61), reason: 'nobody decided' });
      expect((await store.getHeld(id, ALL))?.decidedBy).toBeUndefined();
      expect(await store.getRefusal(id, ALL)).toEqual(refusalOf(id));
      expect((await store.getClaim(id, ALL))?.outcome).toBe('REFUSED');
      expect(await store.getTrustRecord(id, ALL)).toBeUndefined();
      expect(await store.getIntent(id, ALL)).toBeUndefined();
      expect(await store.listExpiredHeld(at(600), 1000)).not.toContain(id);
    });

    it('a rejection spends its step-up nonce in its own commit: the same nonce refused for another, which stays PENDING', async () => {
      const [first, second] = [randomUUID(), randomUUID()];
      await hold(first);
      await hold(second);
      const nonce = randomBytes(32).toString('base64url');
      expect(await store.refuseHeld(first, { status: 'REJECTED', decidedBy: 'ann', decidedAt: at(5), reason: 'not this payee', nonce }, refusalOf(first))).toBe('refused');
      expect(await store.getHeld(first, ALL)).toMatchObject({ status: 'REJECTED', decidedBy: 'ann', reason: 'not this payee' });
      expect(await store.refuseHeld(second, { status: 'REJECTED', decidedBy: 'ann', decidedAt: at(5), reason: 'again', nonce }, refusalOf(second))).toBe('nonce-reused');
      expect((await store.getHeld(second, ALL))?.status).toBe('PENDING');
      expect(await store.getRefusal(second, ALL)).toBeUndefined();
      expect((await store.getClaim(second, ALL))?.outcome).toBe('HELD');
      // A rejection after the expiry is the expiry's to make.
      const late = randomUUID();
      await hold(late, at(1));
      expect(await store.refuseHeld(late, { status: 'REJECTED', decidedBy: 'ann', decidedAt: at(5), reason: 'x', nonce: randomUUID() }, refusalOf(late))).toBe('not-pending');
    });

    it('lists newest first, by status, in the read scope', async () => {
      const ids: string[] = [randomUUID(), randomUUID(), randomUUID()];
      for (const [i, id] of ids.entries()) await store.storeHeld(claimOf(id, 'HELD', at(100 + i)), recordOf(id), { decided: decidedOf(id), expiresAt: at(900) });
      await store.refuseHeld(ids[0]!, { status: 'REJECTED', decidedBy: 'ann', decidedAt: at(200), reason: 'no', nonce: randomUUID() }, refusalOf(ids[0]!));
      const pending = await store.listHeld('PENDING', ALL, 1, 100);
      expect(pending.items.map((h) => h.decided.tx.businessTransactionId).filter((id) => ids.includes(id))).toEqual([ids[2], ids[1]]);
      const all = await store.listHeld(undefined, { callerId: 'caller-1' }, 1, 100);
      expect(all.items.map((h) => h.decided.tx.businessTransactionId).filter((id) => ids.includes(id))).toEqual([ids[2], ids[1], ids[0]]);
      expect((await store.listHeld(undefined, { callerId: 'someone-else' }, 1, 100)).total).toBe(0);
    });
  });

  describe('listing', () => {
    it('pages intents by state, oldest first, with the total', async () => {
      const ids = Array.from({ length: 4 }, () => randomUUID());
      // Prepared in reverse time order so insertion order is not the answer.
      for (const [i, id] of ids.entries()) await store.prepareIntent(claimOf(id), intentOf(id), at(10 - i));
      await store.markErrored(ids[1]!, { phase: 'outcome-unknown', message: 'x' }, at(20));
      await store.markReleased(ids[2]!, contextOf(ids[2]!), at(20));
      const open = await store.listIntents(['PREPARED', 'ERRORED'], ALL, 1, 10);
      expect(open).toMatchObject({ page: 1, pageSize: 10, total: 3 });
      expect(open.items.map((x) => x.intent.businessTransactionId)).toEqual([ids[3], ids[1], ids[0]]);
      expect(open.items[1]!.status).toMatchObject({ state: 'ERRORED', error: { message: 'x' } });
      expect(open.items[1]!.status.inFlightUntil).toBeUndefined(); // its request recorded the outcome
      expect(open.items[0]!.status.inFlightUntil).toBe(leaseEnd(7));
      const second = await store.listIntents(['PREPARED', 'ERRORED'], ALL, 2, 2);
      expect(second).toMatchObject({ page: 2, pageSize: 2, total: 3 });
      expect(second.items.map((x) => x.intent.businessTransactionId)).toEqual([ids[0]]);
      expect(await store.listIntents([], ALL, 1, 10)).toEqual({ items: [], page: 1, pageSize: 10, total: 0 });
      expect(await store.listIntents(['FINALIZED'], ALL, 1, 10)).toEqual({ items: [], page: 1, pageSize: 10, total: 0 });
      await expect(store.listIntents(['PREPARED'], ALL, 0, 10)).rejects.toThrow(RangeError);
    });

    it('pages every one of 1,100 open intents (no cap): each exactly once, the total right', async () => {
      const ids = Array.from({ length: 1100 }, () => randomUUID());
      // In rounds of 50: this is about paging, not about a pool's queue under 1,100 writers at once.
      for (let start = 0; start < ids.length; start += 50) {
        await Promise.all(ids.slice(start, start + 50).map((id, j) => store.prepareIntent(claimOf(id), intentOf(id), at((start + j) % 50))));
      }
      const seen: string[] = [];
      for (let page = 1; ; page++) {
        const listed = await store.listIntents(['PREPARED', 'ERRORED'], ALL, page, 100);
        expect(listed.total).toBe(1100);
        seen.push(...listed.items.map((x) => x.intent.businessTransactionId));
        if (listed.items.length < 100) break;
      }
      expect(seen).toHaveLength(1100);
      expect(new Set(seen)).toEqual(new Set(ids));
    }, 60_000);

    it('pages claims newest first with the total; created_at ties by id, descending', async () => {
      const ids = Array.from({ length: 5 }, () => randomUUID());
      for (const [i, id] of ids.entries()) await store.storeRecordedTransaction(claimOf(id, 'RECORDED', at(i)), recordOf(id));
      const refused = randomUUID();
      await store.storeRefusal(claimOf(refused, 'REFUSED', at(100)), refusalOf(refused));
      const claims = await store.listClaims(ALL, 1, 3);
      expect(claims).toMatchObject({ page: 1, pageSize: 3, total: 6 });
      expect(claims.items).toEqual([claimOf(refused, 'REFUSED', at(100)), claimOf(ids[4]!, 'RECORDED', at(4)), claimOf(ids[3]!, 'RECORDED', at(3))]);
      expect((await store.listClaims(ALL, 2, 3)).items.map((c) => c.businessTransactionId)).toEqual([ids[2], ids[1], ids[0]]);
      await expect(store.listClaims(ALL, 0, 3)).rejects.toThrow(RangeError);

      const tied = Array.from({ length: 4 }, () => randomUUID());
      for (const id of tied) await store.storeRecordedTransaction(claimOf(id, 'RECORDED', at(1000)), recordOf(id));
      expect((await store.listClaims(ALL, 1, 4)).items.map((c) => c.businessTransactionId)).toEqual([...tied].sort().reverse());
    });
  });

  describe('decision inputs kept with the claims (impact preview)', () => {
    const decided = (policyName: string, i: number): DecidedInput => ({
      policyName,
      policyVersion: '1.0.0',
      action: (['approve', 'reject', 'requires_override'] as const)[i % 3]!,
      matchedRuleId: i % 4 === 0 ? null : `rule-${i % 4}`,
      input: { signals: { amount: i, note: JSON.parse('{"__proto__":{"x":1}}') as unknown }, intent: { action: 'payments:transfer', parameters: { i } } },
    });

    it('reads back the latest decisions of one policy, newest first (time, then id), across batches, whichever record the claim came with', async () => {
      // 130 decisions of `p` (more than two read batches), in 40 distinct times (ties in each), written
      // concurrently (PostgreSQL: bulk claims in the group commit) with the three kinds of record;
      // beside them a policy `q`, and claims without a decision (refused before evaluation).
      const mine: { id: string; at: string; d: DecidedInput }[] = [];
      const writes: Promise<void>[] = [];
      for (let i = 0; i < 130; i++) {
        const id = randomUUID();
        const claim: TransactionClaim = { ...claimOf(id, 'REFUSED', at(i % 40)), decided: decided('p', i) };
        mine.push({ id, at: claim.createdAt, d: claim.decided! });
        writes.push(
          i % 3 === 0
            ? store.storeRefusal(claim, refusalOf(id))
            : i % 3 === 1
              ? store.storeRecordedTransaction({ ...claim, outcome: 'RECORDED' }, recordOf(id))
              : store.prepareIntent({ ...claim, outcome: 'EXECUTING' }, intentOf(id), at(0)),
        );
        const other = randomUUID();
        writes.push(store.storeRefusal({ ...claimOf(other, 'REFUSED', at(100 + i)), decided: decided('q', i) }, refusalOf(other)));
        const bare = randomUUID();
        writes.push(store.storeRefusal(claimOf(bare, 'REFUSED', at(200 + i)), refusalOf(bare)));
      }
      await Promise.all(writes);
      const newest = [...mine].sort((a, b) => (a.at === b.at ? (a.id < b.id ? 1 : -1) : a.at < b.at ? 1 : -1));
      const decisions = opened.decisions;
      for (const limit of [1, 49, 50, 51, 100, 130, 1000]) {
        const read = [];
        for await (const d of decisions.latest('p', limit)) read.push(d);
        expect(read.map((d) => d.businessTransactionId)).toEqual(newest.slice(0, limit).map((m) => m.id));
      }
      const all = [];
      for await (const d of decisions.latest('p', 1000)) all.push(d);
      expect(all).toEqual(newest.map((m) => ({ businessTransactionId: m.id, decidedAt: m.at, ...m.d })));
      // The claim reads as before: the decision is kept for the preview only.
      expect(await store.getClaim(mine[0]!.id, ALL)).toEqual(claimOf(mine[0]!.id, 'REFUSED', mine[0]!.at));
      const none = [];
      for await (const d of decisions.latest('nobody', 10)) none.push(d);
      expect(none).toEqual([]);
    }, 60_000);
  });

  describe('chain order (GET /trust-records)', () => {
    const chainPositions = (): Promise<Map<string, number | null>> => opened.chainPositions();

    /** Every neighbour links: each record's first previousChainHash is the chainHash of the record before it. */
    const expectLinkedInOrder = (records: SignedTrustRecord[]): void => {
      let previous: string | null = null;
      for (const r of records) {
        expect(r.executions[0]!.previousChainHash).toBe(previous);
        previous = r.executions.at(-1)!.chainHash!;
      }
    };

    it('lists records in chain order, not by creation time; records without executions follow the chain by creation', async () => {
      const ids = Array.from({ length: 7 }, () => randomUUID());
      for (const id of ids) await released(id);
      // Finalized with creation times running backwards, as clocks of several instances may.
      for (const [i, id] of ids.entries()) await store.finalize(id, chainedBuild(id), at(100 - i));
      const unchained = [randomUUID(), randomUUID()];
      await store.storeRecordedTransaction(claimOf(unchained[0]!, 'RECORDED', at(500)), recordOf(unchained[0]!));
      await store.storeRecordedTransaction(claimOf(unchained[1]!, 'RECORDED', at(1)), recordOf(unchained[1]!));

      const all = await allRecords();
      expect(all.map((r) => r.businessTransactionId)).toEqual([...ids, unchained[1], unchained[0]]);
      expectLinkedInOrder(all.slice(0, 7));
      const positions = await chainPositions();
      expect(ids.map((id) => positions.get(id))).toEqual([1, 2, 3, 4, 5, 6, 7]);
      expect(unchained.map((id) => positions.get(id))).toEqual([null, null]);

      // Page by page: the chain part of each page continues the one before.
      const page1 = await recordPage(1, 3);
      expect(page1).toMatchObject({ page: 1, pageSize: 3, total: 9 });
      expect(page1.items.map((r) => r.businessTransactionId)).toEqual(ids.slice(0, 3));
      expect((await recordPage(3, 3)).items.map((r) => r.businessTransactionId)).toEqual([ids[6], unchained[1], unchained[0]]);
      expect((await recordPage(2, 4)).items.map((r) => r.businessTransactionId)).toEqual([...ids.slice(4, 7), unchained[1]]);
      expect((await recordPage(4, 3)).items).toEqual([]);
      await expect(store.listTrustRecordTexts(ALL, 1, 0)).rejects.toThrow(RangeError);
    });

    it('positions concurrent finalizes 1..n under the chain lock, with the head at n', async () => {
      const ids = Array.from({ length: 25 }, () => randomUUID());
      for (const id of ids) await released(id);
      await Promise.all(ids.map((id, i) => store.finalize(id, chainedBuild(id, { delayMs: i % 3 }), at(i % 5))));
      const listed = await allRecords();
      expectLinkedInOrder(listed);
      const positions = await chainPositions();
      expect(listed.map((r) => positions.get(r.businessTransactionId))).toEqual(ids.map((_, i) => i + 1));
      expect(await opened.headPosition()).toBe(25);
    });

    it('serves the stored texts exactly, a few at a time', async () => {
      const ids = Array.from({ length: 9 }, () => randomUUID());
      const built: SignedTrustRecord[] = [];
      for (const id of ids) {
        await released(id);
        built.push((await store.finalize(id, chainedBuild(id), at(3)))!);
      }
      const page = await store.listTrustRecordTexts(ALL, 1, 10);
      const texts: string[] = [];
      for await (const text of page.items) texts.push(text);
      // Stored as their canonical text: exactly what was signed.
      expect(texts).toEqual(built.map((r) => canonicalize(r)));
      expect(await store.getTrustRecordText(ids[0]!, ALL)).toBe(canonicalize(built[0]));
    });
  });

  describe('read scope (CONTRACT "Requests, reads and lists")', () => {
    const mine: ReadScope = { callerId: 'caller-1' };
    const theirs: ReadScope = { callerId: 'caller-2' };
    const claimBy = (id: string, callerId: string, outcome: TransactionClaim['outcome'] = 'EXECUTING', createdAt = at(0)): TransactionClaim => ({ ...claimOf(id, outcome, createdAt), callerId });

    it('a caller reads its own claims, records, refusals and intents; another caller finds none of them', async () => {
      const recorded = randomUUID();
      await store.storeRecordedTransaction(claimBy(recorded, 'caller-1', 'RECORDED'), recordOf(recorded));
      const refused = randomUUID();
      await store.storeRefusal(claimBy(refused, 'caller-1', 'REFUSED'), refusalOf(refused));
      const executed = randomUUID();
      await store.prepareIntent(claimBy(executed, 'caller-1'), intentOf(executed), at(0));
      await store.markReleased(executed, contextOf(executed), at(1));
      await store.finalize(executed, chainedBuild(executed), at(2));

      for (const scope of [ALL, mine]) {
        expect(await store.getClaim(recorded, scope)).toBeDefined();
        expect(await store.getTrustRecord(recorded, scope)).toEqual(recordOf(recorded));
        expect(await store.getTrustRecordText(executed, scope)).toBeDefined();
        expect([await store.hasTrustRecord(recorded, scope), await store.hasTrustRecord(executed, scope)]).toEqual([true, true]);
        // A refusal claims the id but holds no Trust Record.
        expect([await store.hasTrustRecord(refused, scope), await store.hasTrustRecord(randomUUID(), scope)]).toEqual([false, false]);
        expect(await store.getRefusal(refused, scope)).toEqual(refusalOf(refused));
        expect(await store.getIntent(executed, scope)).toBeDefined();
      }
      expect(await store.getClaim(recorded, theirs)).toBeUndefined();
      expect(await store.getTrustRecord(recorded, theirs)).toBeUndefined();
      expect(await store.getTrustRecordText(executed, theirs)).toBeUndefined();
      expect([await store.hasTrustRecord(recorded, theirs), await store.hasTrustRecord(executed, theirs)]).toEqual([false, false]);
      expect(await store.getRefusal(refused, theirs)).toBeUndefined();
      expect(await store.getIntent(executed, theirs)).toBeUndefined();
    });

    it('lists only the caller\'s own, with its own total, in the same orders', async () => {
      const ids = Array.from({ length: 8 }, () => randomUUID());
      const owner = (i: number) => (i % 3 === 0 ? 'caller-2' : 'caller-1');
      for (const [i, id] of ids.entries()) {
        await store.prepareIntent(claimBy(id, owner(i), 'EXECUTING', at(i)), intentOf(id), at(i));
        if (i % 2 === 0) {
          await store.markReleased(id, contextOf(id), at(i));
          await store.finalize(id, chainedBuild(id), at(i));
        }
      }
      const recorded = randomUUID();
      await store.storeRecordedTransaction(claimBy(recorded, 'caller-2', 'RECORDED', at(50)), recordOf(recorded));
      const own = (callerId: string) => ids.filter((_, i) => owner(i) === callerId);

      for (const callerId of ['caller-1', 'caller-2']) {
        const scope = { callerId };
        const claims = await store.listClaims(scope, 1, 20);
        expect(claims.items.every((c) => c.callerId === callerId)).toBe(true);
        expect(claims.total).toBe(own(callerId).length + (callerId === 'caller-2' ? 1 : 0));
        const intents = await store.listIntents(['PREPARED', 'FINALIZED'], scope, 1, 20);
        expect(intents.items.map((x) => x.intent.businessTransactionId)).toEqual(own(callerId));
        expect(intents.total).toBe(own(callerId).length);
        const records = await allRecords(store, scope);
        const chained = ids.filter((id, i) => i % 2 === 0 && owner(i) === callerId);
        expect(records.map((r) => r.businessTransactionId)).toEqual(callerId === 'caller-2' ? [...chained, recorded] : chained);
        expect((await recordPage(1, 1, scope)).total).toBe(records.length);
      }
      expect((await recordPage(1, 20)).total).toBe(5);
    });
  });

  describe('in flight: a request and a resolution exclude each other', () => {
    it('a PREPARED intent is not resolvable while its request may still run; it is once the request recorded the outcome or the lease ended', async () => {
      const running = randomUUID();
      await store.prepareIntent(claimOf(running), intentOf(running), at(0));
      expect(await store.resolve(running, resolution, at(1))).toEqual({ outcome: 'in-flight', until: leaseEnd(0) });
      expect(await store.resolve(running, resolution, new Date(Date.parse(leaseEnd(0)) - 1).toISOString())).toMatchObject({ outcome: 'in-flight' });
      expect((await store.getIntent(running, ALL))!.status).toEqual({ state: 'PREPARED', updatedAt: at(0), inFlightUntil: leaseEnd(0) });
      // The request goes on as if nothing happened.
      await store.markReleased(running, contextOf(running), at(2));
      expect((await store.getIntent(running, ALL))!.status).toEqual({ state: 'RELEASED', updatedAt: at(2) });

      const failed = randomUUID();
      await store.prepareIntent(claimOf(failed), intentOf(failed), at(0));
      await store.markErrored(failed, { phase: 'outcome-unknown', message: 'timeout' }, at(2));
      expect(await store.resolve(failed, resolution, at(3))).toEqual({ outcome: 'resolved' });

      // A process that died leaves its intent PREPARED: resolvable once the lease has ended.
      const abandoned = randomUUID();
      await store.prepareIntent(claimOf(abandoned), intentOf(abandoned), at(0));
      expect(await store.resolve(abandoned, resolution, leaseEnd(0))).toEqual({ outcome: 'resolved' });
      expect((await store.getIntent(abandoned, ALL))!.status).toEqual({ state: 'RESOLVED', updatedAt: leaseEnd(0), resolution: resolutionOf('PREPARED') });
      await expect(store.markReleased(abandoned, contextOf(abandoned), at(5))).rejects.toBeInstanceOf(IntentStateConflictError);
    });

    it('takes the lease length it is given', async () => {
      const short = opened.withLease(1000);
      const id = randomUUID();
      await short.prepareIntent(claimOf(id), intentOf(id), at(0));
      expect(await short.resolve(id, resolution, at(0.5))).toEqual({ outcome: 'in-flight', until: at(1) });
      expect(await short.resolve(id, resolution, at(1))).toEqual({ outcome: 'resolved' });
    });

    it('of a request\'s outcome and a concurrent resolution exactly one wins, whoever comes first', async () => {
      // With the lease held, every resolution is refused and every request records its outcome.
      const held = Array.from({ length: 20 }, () => randomUUID());
      for (const id of held) await store.prepareIntent(claimOf(id), intentOf(id), at(0));
      const raced = await Promise.allSettled(held.flatMap((id) => [store.markReleased(id, contextOf(id), at(1)), store.resolve(id, resolution, at(1))]));
      expect(raced.filter((r) => r.status === 'rejected')).toEqual([]);
      for (const [i, id] of held.entries()) {
        // Before the outcome: in flight; after it: RELEASED, which is not resolvable.
        expect((raced[2 * i + 1] as PromiseFulfilledResult<{ outcome: string }>).value.outcome).toMatch(/^(in-flight|not-resolvable)$/);
        expect((await store.getIntent(id, ALL))!.status.state).toBe('RELEASED');
      }

      // Past the lease (a request slower than its bound): the two still exclude each other.
      const late = Array.from({ length: 20 }, () => randomUUID());
      for (const id of late) await store.prepareIntent(claimOf(id), intentOf(id), at(0));
      const outcomes = await Promise.all(
        late.map(async (id) => {
          const [request, resolved] = await Promise.allSettled([store.markReleased(id, contextOf(id), LATER), store.resolve(id, resolution, LATER)]);
          return { released: request.status === 'fulfilled', resolved: resolved.status === 'fulfilled' && resolved.value.outcome === 'resolved' };
        }),
      );
      for (const [i, o] of outcomes.entries()) {
        expect(o.released !== o.resolved).toBe(true);
        expect((await store.getIntent(late[i]!, ALL))!.status.state).toBe(o.released ? 'RELEASED' : 'RESOLVED');
      }
    });

    // PostgreSQL only: two DataSources (two instances) on one database.
    (target.name === 'postgres' ? it : it.skip)('excludes each other across two DataSources on one PostgreSQL', async () => {
      const other = await sql().open();
      const otherStore = new TypeOrmExecutionStore(other);
      const ids = Array.from({ length: 20 }, () => randomUUID());
      for (const id of ids) await store.prepareIntent(claimOf(id), intentOf(id), at(0));
      const held = await Promise.all(ids.map((id) => otherStore.resolve(id, resolution, at(1))));
      expect(held.every((r) => r.outcome === 'in-flight')).toBe(true);
      const outcomes = await Promise.all(
        ids.map(async (id, i) => {
          const mover = i % 2 ? store : otherStore;
          const resolver = i % 2 ? otherStore : store;
          const [request, resolved] = await Promise.allSettled([mover.markReleased(id, contextOf(id), LATER), resolver.resolve(id, resolution, LATER)]);
          return { released: request.status === 'fulfilled', resolved: resolved.status === 'fulfilled' && resolved.value.outcome === 'resolved' };
        }),
      );
      for (const o of outcomes) expect(o.released !== o.resolved).toBe(true);
    });
  });

  describe('recovery at start', () => {
    it('finalizes every intent left RELEASED, however many, in chain order', async () => {
      const ids = Array.from({ length: 230 }, () => randomUUID());
      for (const id of ids) await released(id);
      const service = new ExecutionService({
        store,
        signer: { sign: async (r) => ({ ...r, keyId: 'k1', signature: 'c2ln' }), signText: async () => ({ keyId: 'k1', signature: 'c2ln' }) },
        hasher: new Sha256Hasher(),
        clock: { now: () => new Date(T0 + 5000) },
        ids: { uuid: randomUUID },
        policies: { find: async () => undefined },
        connectors: { find: async () => undefined },
        sources: { askAll: async () => { throw new Error('recovery asks no one'); } },
        grants: { forGrantee: async () => { throw new Error('recovery asks no one'); }, get: async () => { throw new Error('recovery asks no one'); } },
        approvals: { accept: async () => { throw new Error('recovery asks no one'); } },
        holds: { ttlSeconds: 60, notifier: { noticesOf: () => [] } },
      });
      expect(await service.recoverReleased()).toBe(230);
      expect((await store.listIntents(['RELEASED'], ALL, 1, 1)).total).toBe(0);
      expect((await store.listIntents(['FINALIZED'], ALL, 1, 1)).total).toBe(230);
      const records = await allRecords();
      expect(new Set(records.map((r) => r.businessTransactionId))).toEqual(new Set(ids));
      expect(expectSingleChain(records)).toBe(await chainHead());
      expect(await service.recoverReleased()).toBe(0);
    }, 60_000);
  });

  describe('signed bytes', () => {
    // Stored as canonical text (members in RFC 8785 order): what comes back is the same object,
    // member for member, so its canonical form (what a signature covers) is unchanged.
    it('returns every signed object exactly as stored, __proto__ keys and null previousChainHash included', async () => {
      const recorded = randomUUID();
      const withNull = recordOf(recorded, [{ ...entry(recorded), previousChainHash: null, chainHash: sha256('x'), chainSignature: 's' }]);
      await store.storeRecordedTransaction(claimOf(recorded, 'RECORDED'), withNull);
      const back = (await store.getTrustRecord(recorded, ALL))!;
      expect(canonicalize(back)).toBe(canonicalize(withNull));
      expect(await store.getTrustRecordText(recorded, ALL)).toBe(canonicalize(withNull));
      expect(Object.keys(back.transaction.metadata)).toEqual(['__proto__', 'tenantId']);
      expect(Object.getPrototypeOf(back.transaction.metadata)).toBe(Object.prototype);
      expect(back.executions[0]).toHaveProperty('previousChainHash', null);

      const executed = randomUUID();
      await released(executed);
      const finalized = (await store.finalize(executed, chainedBuild(executed), at(3)))!;
      expect(finalized.executions[0]!.previousChainHash).toBeNull();
      expect(canonicalize(await store.getTrustRecord(executed, ALL))).toBe(canonicalize(finalized));
      expect(canonicalize((await recordPage(1, 10)).items.find((r) => r.businessTransactionId === executed))).toBe(canonicalize(finalized));

      const intentId = randomUUID();
      const intent = { ...intentOf(intentId), extra: protoMetadata() } as SignedIntent;
      await store.prepareIntent(claimOf(intentId), intent, at(0));
      expect(canonicalize((await store.getIntent(intentId, ALL))!.intent)).toBe(canonicalize(intent));
      await store.markReleased(intentId, contextOf(intentId), at(1));
      expect(JSON.stringify(await store.getReleaseContext(intentId))).toBe(JSON.stringify(contextOf(intentId)));

      const refusedId = randomUUID();
      const refusal = { ...refusalOf(refusedId), decision: { ...decision, detail: protoMetadata() } } as unknown as SignedRefusal;
      await store.storeRefusal(claimOf(refusedId, 'REFUSED'), refusal);
      expect(canonicalize(await store.getRefusal(refusedId, ALL))).toBe(canonicalize(refusal));
    });

    // SQL targets only: closing and reopening the DataSource.
    (target.name === 'memory' ? it.skip : it)('keeps everything across closing and reopening the DataSource', async () => {
      const storage = sql();
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
      await storage.ds.destroy();

      storage.ds = await storage.open();
      expect(await migrate(storage.ds)).toEqual([]);
      store = new TypeOrmExecutionStore(storage.ds);
      expect(await allRecords()).toEqual(before);
      expect(await chainHead()).toBe(head);
      expect(expectSingleChain(before)).toBe(head);
      expect((await store.getIntent(pending, ALL))!.status.state).toBe('PREPARED');
      expect(await store.getRefusal(refused, ALL)).toEqual(refusalOf(refused));
      expect((await store.listClaims(ALL, 1, 10)).total).toBe(5);
      // The chain continues from the persisted head.
      const next = randomUUID();
      await released(next);
      expect((await store.finalize(next, chainedBuild(next), at(5)))!.executions[0]!.previousChainHash).toBe(head);
    });
  });
});
