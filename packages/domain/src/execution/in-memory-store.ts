/**
 * The execution pipeline's storage in memory: the reference behaviour of ExecutionStore (the
 * storage contract suite, test/src/storage/execution-store.test.ts, holds this store, SQLite and
 * PostgreSQL to the same rules), for unit tests of the pipeline and of every door that uses it.
 *
 * It keeps what the SQL stores keep, table by table: the claims (with the decision input the
 * impact preview reads back: it is RecordedDecisions too), refusals, Trust Records with their
 * chain position, intents with their state, lease and release context, and the chain's head.
 * Signed records are kept as text and parsed on every read, so a caller never holds the stored
 * object and what was signed comes back member for member (own `__proto__` keys included).
 *
 * Every write runs alone (one queue, as one database write lock): its checks, the awaits in it
 * (building a Trust Record, appending to the log) and then all its changes at once, synchronously.
 * So a claim and its record are stored together or not at all, and concurrent finalizes never
 * fork the chain. A new method of the port is a read, or a `write` that checks and then changes.
 */
import type { AuthEvent } from '../ports/audit.js';
import type { Hasher, Signed } from '../ports/crypto.js';
import type { Page } from '../ports/page.js';
import type { DecidedInput, RecordedDecision, RecordedDecisions } from '../policy/impact.js';
import type { PolicyInput } from '../policy/evaluate.js';
import { logLeafOf, type LogLeaf } from '../transparency/records.js';
import { chainHeadAfter } from './chain.js';
import type { DecidedTransaction } from './decided.js';
import type { HeldRefusal, HeldStatus, HeldTransaction } from './held.js';
import type { OutboundNotice } from '../notifications/pending-items.js';
import {
  checkPage,
  DuplicateTransactionError,
  INTENT_IN_FLIGHT_LEASE_MS,
  IntentStateConflictError,
  scopedCaller,
  type CompletedRelease,
  type ExecutionStore,
  type ReadScope,
  type ResolveOutcome,
  type StoredIntent,
  type TextPage,
  type TransactionClaim,
} from './ports.js';
import type {
  ChainHead,
  HeldApproval,
  IntentResolution,
  IntentState,
  IntentStatus,
  ReleaseContext,
  SignedIntent,
  SignedRefusal,
  SignedTrustRecord,
} from './records.js';

/** The part of the transparency log a store writes to: InMemoryTransparencyLog (adapters-crypto) has this shape. */
export interface LeafLog {
  append(leaves: readonly LogLeaf[]): Promise<unknown>;
}

export type InMemoryExecutionStoreOptions = {
  /** How long a stored intent is in flight (default INTENT_IN_FLIGHT_LEASE_MS), as for the TypeORM store. */
  inFlightLeaseMs?: number;
} & (
  | { hasher?: undefined; log?: undefined }
  | {
      /**
       * Signed records are kept as `hasher.canonicalize` text (RFC 8785 with the real hasher: the
       * same bytes the SQL stores keep); without a hasher, as JSON.stringify text.
       */
      hasher: Pick<Hasher, 'canonicalize' | 'contentHash'>;
      /** Each signed record (and a request's authentication event) becomes a leaf (logLeafOf) in the write that stores it. */
      log?: LeafLog;
    }
);

interface ClaimRow {
  claim: Omit<TransactionClaim, 'decided'>;
  /** The decision input as JSON text, as the SQL column keeps it. */
  decided?: Omit<DecidedInput, 'input'> & { input: string };
}
interface RecordRow {
  callerId: string;
  text: string;
  createdAt: string;
  /** Position in the deployment's chain (1..n); null for a record without executions. */
  position: number | null;
}
interface IntentRow {
  callerId: string;
  text: string;
  createdAt: string;
  state: IntentState;
  updatedAt: string;
  inFlightUntil: string | null;
  /** What the status adds to state and time: the error, the resolution (as JSON text). */
  detail: string | null;
  /** The saved release context of a RELEASED intent (JSON text). */
  context: string | null;
}

interface HeldRow {
  callerId: string;
  held: Omit<HeldTransaction, 'decided'>;
  /** The DecidedTransaction as JSON text. */
  decided: string;
  approval: string | null;
  /** The held decision's Trust Record once decided (it leaves the records). */
  heldRecord: string | null;
}

const RESOLVABLE: readonly IntentState[] = ['PREPARED', 'ERRORED'];

export class InMemoryExecutionStore implements ExecutionStore, RecordedDecisions {
  private readonly claims = new Map<string, ClaimRow>();
  private readonly refusals = new Map<string, string>();
  private readonly records = new Map<string, RecordRow>();
  private readonly intents = new Map<string, IntentRow>();
  private readonly held = new Map<string, HeldRow>();
  /** Step-up nonces spent by held transactions' rejections. */
  private readonly nonces = new Set<string>();
  /** The notices written with new held transactions (the outbox's rows). */
  readonly notices: OutboundNotice[] = [];
  private head: { chainHash: string | null; position: number } = { chainHash: null, position: 0 };
  /** The request authentication events stored with the claims, in order. */
  readonly authEvents: Signed<AuthEvent>[] = [];

  private readonly leaseMs: number;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: InMemoryExecutionStoreOptions = {}) {
    this.leaseMs = options.inFlightLeaseMs ?? INTENT_IN_FLIGHT_LEASE_MS;
  }

  /** The chain's head and its position (what the SQL stores keep in `execution_chain`). */
  chainHead(): { chainHash: string | null; position: number } {
    return { ...this.head };
  }

  /** A Trust Record's position in the chain: null without executions, undefined when there is no record. */
  chainPosition(businessTransactionId: string): number | null | undefined {
    return this.records.get(businessTransactionId)?.position;
  }

  // --- claims -------------------------------------------------------------------------------------

  async isClaimed(businessTransactionId: string): Promise<boolean> {
    return this.claims.has(businessTransactionId);
  }

  storeRefusal(claim: TransactionClaim, refusal: SignedRefusal, audit?: Signed<AuthEvent>): Promise<void> {
    return this.claim(claim, refusal, audit, (text) => this.refusals.set(claim.businessTransactionId, text));
  }

  /** A record without executions has no chain position: it is listed after the chain. */
  storeRecordedTransaction(claim: TransactionClaim, record: SignedTrustRecord, audit?: Signed<AuthEvent>): Promise<void> {
    return this.claim(claim, record, audit, (text) =>
      this.records.set(claim.businessTransactionId, { callerId: claim.callerId, text, createdAt: claim.createdAt, position: null }),
    );
  }

  prepareIntent(claim: TransactionClaim, intent: SignedIntent, at: string, audit?: Signed<AuthEvent>): Promise<void> {
    const inFlightUntil = new Date(Date.parse(at) + this.leaseMs).toISOString();
    return this.claim(claim, intent, audit, (text) =>
      this.intents.set(claim.businessTransactionId, {
        callerId: claim.callerId,
        text,
        createdAt: at,
        state: 'PREPARED',
        updatedAt: at,
        inFlightUntil,
        detail: null,
        context: null,
      }),
    );
  }

  /** The claim, the signed record and the request's event, with their log leaves, in one write. */
  private claim(claim: TransactionClaim, signed: { businessTransactionId: string }, audit: Signed<AuthEvent> | undefined, keep: (text: string) => void): Promise<void> {
    const id = claim.businessTransactionId;
    if (signed.businessTransactionId !== id) {
      return Promise.reject(new Error(`claim '${id}' does not match the record's businessTransactionId '${signed.businessTransactionId}'`));
    }
    return this.write(async () => {
      if (this.claims.has(id)) throw new DuplicateTransactionError(id);
      const text = this.textOf(signed);
      await this.log(audit ? [audit, signed] : [signed]);
      const { decided, ...rest } = claim;
      this.claims.set(id, { claim: { ...rest }, ...(decided ? { decided: { ...decided, input: JSON.stringify(decided.input) } } : {}) });
      if (audit) this.authEvents.push(structuredClone(audit));
      keep(text);
    });
  }

  // --- held transactions --------------------------------------------------------------------------

  storeHeld(
    claim: TransactionClaim,
    record: SignedTrustRecord,
    held: { decided: DecidedTransaction; expiresAt: string },
    audit?: Signed<AuthEvent>,
    notices: readonly OutboundNotice[] = [],
  ): Promise<void> {
    const id = claim.businessTransactionId;
    return this.claim(claim, record, audit, (text) => {
      this.records.set(id, { callerId: claim.callerId, text, createdAt: claim.createdAt, position: null });
      this.held.set(id, {
        callerId: claim.callerId,
        held: { status: 'PENDING', createdAt: claim.createdAt, expiresAt: held.expiresAt },
        decided: JSON.stringify(held.decided),
        approval: null,
        heldRecord: null,
      });
      this.notices.push(...structuredClone(notices));
    });
  }

  approveHeld(businessTransactionId: string, approval: HeldApproval, intent: SignedIntent, at: string): Promise<boolean> {
    const id = businessTransactionId;
    if (intent.businessTransactionId !== id) return Promise.reject(new Error(`approveHeld: the intent is of '${intent.businessTransactionId}', not '${id}'`));
    return this.write(async () => {
      const row = this.held.get(id);
      if (row?.held.status !== 'PENDING' || !(row.held.expiresAt > at)) return false;
      const text = this.textOf(intent);
      await this.log([intent]);
      this.decideHeld(row, id, 'EXECUTING', { status: 'APPROVED', decidedBy: approval.approverId, decidedAt: approval.approvedAt });
      row.approval = JSON.stringify(approval.approval);
      const inFlightUntil = new Date(Date.parse(at) + this.leaseMs).toISOString();
      this.intents.set(id, { callerId: intent.callerId, text, createdAt: at, state: 'PREPARED', updatedAt: at, inFlightUntil, detail: null, context: null });
      return true;
    });
  }

  refuseHeld(businessTransactionId: string, refusal: HeldRefusal, record: SignedRefusal): Promise<'refused' | 'not-pending' | 'nonce-reused'> {
    const id = businessTransactionId;
    return this.write(async () => {
      const row = this.held.get(id);
      const due = row !== undefined && row.held.expiresAt <= refusal.decidedAt;
      if (row?.held.status !== 'PENDING' || due !== (refusal.status === 'EXPIRED')) return 'not-pending' as const;
      if (refusal.status === 'REJECTED' && this.nonces.has(refusal.nonce)) return 'nonce-reused' as const;
      const text = this.textOf(record);
      await this.log([record]);
      if (refusal.status === 'REJECTED') this.nonces.add(refusal.nonce);
      this.decideHeld(row, id, 'REFUSED', {
        status: refusal.status,
        ...(refusal.status === 'REJECTED' ? { decidedBy: refusal.decidedBy } : {}),
        decidedAt: refusal.decidedAt,
        reason: refusal.reason,
      });
      this.refusals.set(id, text);
      return 'refused' as const;
    });
  }

  /** A held transaction decided: its status, the claim out of HELD, and the held decision's record out of the records. */
  private decideHeld(row: HeldRow, id: string, outcome: TransactionClaim['outcome'], decision: Partial<HeldTransaction>): void {
    Object.assign(row.held, decision);
    row.heldRecord = this.records.get(id)?.text ?? null;
    this.records.delete(id);
    const claim = this.claims.get(id)?.claim;
    if (claim?.outcome === 'HELD') claim.outcome = outcome;
  }

  async getHeld(businessTransactionId: string, scope: ReadScope): Promise<HeldTransaction | undefined> {
    const row = inScope(this.held.get(businessTransactionId), scope);
    return row && toHeld(row);
  }

  /** Newest first (by creation, then id, descending); pages start at 1. */
  async listHeld(status: HeldStatus | undefined, scope: ReadScope, page: number, pageSize: number): Promise<Page<HeldTransaction>> {
    checkPage(page, pageSize);
    const rows = [...this.held.entries()]
      .filter(([, row]) => (status === undefined || row.held.status === status) && inScope(row, scope))
      .sort(([a, x], [b, y]) => compare(y.held.createdAt, x.held.createdAt) || compare(b, a));
    return { items: pageOf(rows, page, pageSize).map(([, row]) => toHeld(row)), page, pageSize, total: rows.length };
  }

  async listExpiredHeld(at: string, limit: number): Promise<string[]> {
    return [...this.held.entries()]
      .filter(([, row]) => row.held.status === 'PENDING' && row.held.expiresAt <= at)
      .sort(([a, x], [b, y]) => compare(x.held.expiresAt, y.held.expiresAt) || compare(a, b))
      .slice(0, limit)
      .map(([id]) => id);
  }

  // --- intent state -------------------------------------------------------------------------------

  markReleased(businessTransactionId: string, context: ReleaseContext, at: string): Promise<void> {
    return this.write(async () => this.release(businessTransactionId, context, at));
  }

  /** PREPARED -> RELEASED with the context; the request's lease ends with it. */
  private release(id: string, context: ReleaseContext, at: string): void {
    const row = this.intents.get(id);
    if (row?.state !== 'PREPARED') throw new IntentStateConflictError(id, 'RELEASED');
    Object.assign(row, { state: 'RELEASED', context: JSON.stringify(context), inFlightUntil: null, updatedAt: at } satisfies Partial<IntentRow>);
  }

  markErrored(businessTransactionId: string, error: NonNullable<IntentStatus['error']>, at: string): Promise<void> {
    return this.write(async () => {
      const row = this.intents.get(businessTransactionId);
      if (row?.state !== 'PREPARED' && row?.state !== 'RELEASED') throw new IntentStateConflictError(businessTransactionId, 'ERRORED');
      Object.assign(row, { state: 'ERRORED', detail: JSON.stringify({ error }), inFlightUntil: null, updatedAt: at } satisfies Partial<IntentRow>);
    });
  }

  resolve(businessTransactionId: string, resolution: Omit<IntentResolution, 'previousState'>, at: string): Promise<ResolveOutcome> {
    return this.write(async (): Promise<ResolveOutcome> => {
      const row = this.intents.get(businessTransactionId);
      if (!row) return { outcome: 'not-found' };
      if (!RESOLVABLE.includes(row.state)) return { outcome: 'not-resolvable', state: row.state };
      if (row.inFlightUntil !== null && Date.parse(row.inFlightUntil) > Date.parse(at)) return { outcome: 'in-flight', until: row.inFlightUntil };
      // The error of an ERRORED intent stays beside the resolution.
      const previousState = row.state as IntentResolution['previousState'];
      const detail = { ...(row.detail ? (JSON.parse(row.detail) as object) : {}), resolution: { ...resolution, previousState } };
      Object.assign(row, { state: 'RESOLVED', detail: JSON.stringify(detail), inFlightUntil: null, updatedAt: at } satisfies Partial<IntentRow>);
      return { outcome: 'resolved' };
    });
  }

  finalize(businessTransactionId: string, build: (head: ChainHead) => Promise<SignedTrustRecord>, at: string): Promise<SignedTrustRecord | undefined> {
    return this.write(async () => {
      const row = this.intents.get(businessTransactionId);
      if (row?.state !== 'RELEASED') return undefined;
      const record = await build({ chainHash: this.head.chainHash });
      await this.chain(businessTransactionId, row, record, at);
      return record;
    });
  }

  completeRelease(
    businessTransactionId: string,
    context: ReleaseContext,
    build: (head: ChainHead) => Promise<SignedTrustRecord>,
    at: string,
  ): Promise<CompletedRelease> {
    return this.write(async (): Promise<CompletedRelease> => {
      const row = this.intents.get(businessTransactionId);
      if (row?.state !== 'PREPARED') throw new IntentStateConflictError(businessTransactionId, 'RELEASED');
      let record: SignedTrustRecord;
      try {
        record = await build({ chainHash: this.head.chainHash });
      } catch (buildError) {
        this.release(businessTransactionId, context, at);
        return { record: undefined, buildError };
      }
      await this.chain(businessTransactionId, row, record, at);
      return { record };
    });
  }

  /**
   * The record linked at the next position, the intent FINALIZED (its context and lease gone), the
   * claim EXECUTED, the new head, the record's leaf. A record that does not link to the head stores nothing.
   */
  private async chain(id: string, row: IntentRow, record: SignedTrustRecord, at: string): Promise<void> {
    const chainHash = chainHeadAfter(record, this.head, id);
    const text = this.textOf(record);
    await this.log([record]);
    const position = this.head.position + 1;
    const claim = this.claims.get(id)!;
    this.records.set(id, { callerId: claim.claim.callerId, text, createdAt: at, position });
    Object.assign(row, { state: 'FINALIZED', context: null, inFlightUntil: null, updatedAt: at } satisfies Partial<IntentRow>);
    claim.claim.outcome = 'EXECUTED';
    this.head = { chainHash, position };
  }

  // --- reads --------------------------------------------------------------------------------------

  async getIntent(businessTransactionId: string, scope: ReadScope): Promise<StoredIntent | undefined> {
    const row = inScope(this.intents.get(businessTransactionId), scope);
    return row && toIntent(row);
  }

  async getReleaseContext(businessTransactionId: string): Promise<ReleaseContext | undefined> {
    const context = this.intents.get(businessTransactionId)?.context;
    return context ? (JSON.parse(context) as ReleaseContext) : undefined;
  }

  /** Oldest first (by when the intent was stored, then id); pages start at 1. */
  async listIntents(states: readonly IntentState[], scope: ReadScope, page: number, pageSize: number): Promise<Page<StoredIntent>> {
    checkPage(page, pageSize);
    const rows = [...this.intents.entries()]
      .filter(([, row]) => states.includes(row.state) && inScope(row, scope))
      .sort(([a, x], [b, y]) => compare(x.createdAt, y.createdAt) || compare(a, b));
    return { items: pageOf(rows, page, pageSize).map(([, row]) => toIntent(row)), page, pageSize, total: rows.length };
  }

  async getTrustRecord(businessTransactionId: string, scope: ReadScope): Promise<SignedTrustRecord | undefined> {
    const text = await this.getTrustRecordText(businessTransactionId, scope);
    return text === undefined ? undefined : (JSON.parse(text) as SignedTrustRecord);
  }

  async hasTrustRecord(businessTransactionId: string, scope: ReadScope): Promise<boolean> {
    return inScope(this.records.get(businessTransactionId), scope) !== undefined;
  }

  async getTrustRecordText(businessTransactionId: string, scope: ReadScope): Promise<string | undefined> {
    return inScope(this.records.get(businessTransactionId), scope)?.text;
  }

  async getRefusal(businessTransactionId: string, scope: ReadScope): Promise<SignedRefusal | undefined> {
    const text = this.refusals.get(businessTransactionId);
    // A refusal's caller is its claim's.
    return text !== undefined && inScope(this.claims.get(businessTransactionId)?.claim, scope) ? (JSON.parse(text) as SignedRefusal) : undefined;
  }

  async getClaim(businessTransactionId: string, scope: ReadScope): Promise<TransactionClaim | undefined> {
    const claim = inScope(this.claims.get(businessTransactionId)?.claim, scope);
    return claim && { ...claim };
  }

  /** The chained records by position, then the records without executions by creation (then id). */
  async listTrustRecordTexts(scope: ReadScope, page: number, pageSize: number): Promise<TextPage> {
    checkPage(page, pageSize);
    const rows = [...this.records.entries()].filter(([, row]) => inScope(row, scope));
    const chained = rows.filter(([, r]) => r.position !== null).sort(([, x], [, y]) => x.position! - y.position!);
    const unchained = rows.filter(([, r]) => r.position === null).sort(([a, x], [b, y]) => compare(x.createdAt, y.createdAt) || compare(a, b));
    const texts = pageOf([...chained, ...unchained], page, pageSize).map(([, r]) => r.text);
    return { items: iterate(texts), page, pageSize, total: rows.length };
  }

  /** Newest first (by creation, then id, descending); pages start at 1. */
  async listClaims(scope: ReadScope, page: number, pageSize: number): Promise<Page<TransactionClaim>> {
    checkPage(page, pageSize);
    const rows = [...this.claims.values()].filter((row) => inScope(row.claim, scope)).sort(newestFirst);
    return { items: pageOf(rows, page, pageSize).map((row) => ({ ...row.claim })), page, pageSize, total: rows.length };
  }

  /** RecordedDecisions: the decisions kept with the claims of `policyName`, newest first. */
  async *latest(policyName: string, limit: number): AsyncGenerator<RecordedDecision> {
    const rows = [...this.claims.values()].filter((row) => row.decided?.policyName === policyName).sort(newestFirst).slice(0, Math.max(0, limit));
    for (const { claim, decided } of rows) {
      const { input, ...rest } = decided!;
      yield { businessTransactionId: claim.businessTransactionId, decidedAt: claim.createdAt, ...rest, input: JSON.parse(input) as PolicyInput };
    }
  }

  // --- plumbing -----------------------------------------------------------------------------------

  /** Runs `work` alone: writes queue up, as they would for a database's write lock. */
  private write<T>(work: () => Promise<T>): Promise<T> {
    const done = this.queue.then(work);
    this.queue = done.catch(() => undefined);
    return done;
  }

  private textOf(signed: object): string {
    return this.options.hasher ? this.options.hasher.canonicalize(signed) : JSON.stringify(signed);
  }

  /** Appends the records' leaves; a failure stops the write before it changes anything. */
  private async log(signed: readonly object[]): Promise<void> {
    const { hasher, log } = this.options;
    if (hasher && log) await log.append(signed.map((s) => logLeafOf(hasher, s)));
  }
}

/** The row if it is in the scope: another caller's row is simply not found. */
function inScope<T extends { callerId: string }>(row: T | undefined, scope: ReadScope): T | undefined {
  const caller = scopedCaller(scope);
  return row && (caller === undefined || row.callerId === caller) ? row : undefined;
}

function toHeld(row: HeldRow): HeldTransaction {
  return { ...row.held, decided: JSON.parse(row.decided) as DecidedTransaction };
}

function toIntent(row: IntentRow): StoredIntent {
  const extras = row.detail ? (JSON.parse(row.detail) as Omit<IntentStatus, 'state' | 'updatedAt'>) : {};
  const lease = row.inFlightUntil !== null ? { inFlightUntil: row.inFlightUntil } : {};
  return { intent: JSON.parse(row.text) as SignedIntent, status: { state: row.state, updatedAt: row.updatedAt, ...lease, ...extras } };
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const newestFirst = (x: ClaimRow, y: ClaimRow): number =>
  compare(y.claim.createdAt, x.claim.createdAt) || compare(y.claim.businessTransactionId, x.claim.businessTransactionId);
const pageOf = <T>(rows: readonly T[], page: number, pageSize: number): T[] => rows.slice((page - 1) * pageSize, page * pageSize);

async function* iterate(texts: readonly string[]): AsyncGenerator<string> {
  yield* texts;
}
