import type { DataSource, QueryRunner } from 'typeorm';
import { LogLeaves } from '../transparency/log-append.js';
import { attachLogLeaves } from '../transparency/log-in-transaction.js';
import { ignore, type Run, type RunResult } from './sqlite-writer.js';

/**
 * Where a job's statements stand in the lock order of a batch: claims of new ids first (they may
 * wait for another instance's uncommitted claim of the same id), then updates of a request's own
 * rows, then the deployment-wide rows (the execution chain's head). The transparency log's head
 * is always taken last, when the batch's leaves are appended just before COMMIT. Every batch of
 * every instance takes its locks in this order, so two batches never wait for each other in a
 * circle.
 */
export type LockRank = 'claim' | 'own-row' | 'chain';
const RANK: Record<LockRank, number> = { claim: 0, 'own-row': 1, chain: 2 };

/** What one item of a bulk write came to: its result, or its failure (having changed nothing). */
export type BulkOutcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

/**
 * Items of one kind that a group commit writes together, with one statement for all of them (one
 * round trip for the batch instead of one per item). `write` gets every item of its kind in the
 * batch (or a single one) and returns each one's outcome in order; an item that fails must have
 * changed nothing. Throwing fails every item (and, if anything was changed, the whole batch, which
 * is then run again item by item).
 */
export interface BulkWork<I, R> {
  readonly key: string;
  readonly rank: LockRank;
  write(run: Run, items: readonly I[]): Promise<BulkOutcome<R>[]>;
}

/** One item's write alone: what a store without group commit, or a batch run again item by item, does. */
export const writeOne = async <I, R>(work: BulkWork<I, R>, run: Run, item: I): Promise<R> => {
  const [outcome] = await work.write(run, [item]);
  if (!outcome) throw new Error(`bulk write ${work.key} answered no outcome`);
  if (!outcome.ok) throw outcome.error;
  return outcome.value;
};

/**
 * The items of a bulk write one after another, each seeing what the one before wrote: SQLite's
 * way (statements cost no round trip there; and releases must link into the chain in turn).
 */
export async function oneByOne<I, R>(items: readonly I[], write: (item: I) => Promise<R>): Promise<R[]> {
  const outcomes: R[] = [];
  for (const item of items) outcomes.push(await write(item));
  return outcomes;
}

interface PgJob {
  work?: (run: Run) => Promise<unknown>;
  bulk?: { work: BulkWork<unknown, unknown>; item: unknown };
  rank: number;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** A job run alone, in a transaction of its own. */
const alone = (ds: DataSource, job: PgJob): Promise<void> =>
  pgTransaction(ds, (run) => (job.bulk ? writeOne(job.bulk.work, run, job.bulk.item) : job.work!(run))).then(job.resolve, job.reject);

const toResult = (r: { records?: unknown[]; affected?: number | null }): RunResult => ({ records: r.records ?? [], affected: r.affected ?? undefined });
const isRead = (sql: string): boolean => /^\s*select\b/i.test(sql);

/** One transaction of its own on a pooled connection: commits what `fn` returns, rolls back when it throws. */
export async function pgTransaction<T>(ds: DataSource, fn: (run: Run) => Promise<T>): Promise<T> {
  const runner = ds.createQueryRunner();
  try {
    await runner.query('BEGIN');
    const run: Run = async (sql, params) => toResult(await runner.query(sql, params, true));
    const leaves = new LogLeaves('postgres');
    attachLogLeaves(run, leaves);
    let result: T;
    try {
      result = await fn(run);
      await leaves.flush(run);
    } catch (e) {
      await runner.query('ROLLBACK').catch(ignore);
      throw e;
    }
    await runner.query('COMMIT');
    return result;
  } finally {
    await runner.release();
  }
}

/**
 * One statement on its own on a query runner of the DataSource (autocommit), outside any group
 * commit: on PostgreSQL a pooled connection.
 */
export async function autocommitStatement(ds: DataSource, sql: string, params: unknown[]): Promise<RunResult> {
  const runner = ds.createQueryRunner();
  try {
    return toResult(await runner.query(sql, params, true));
  } finally {
    await runner.release();
  }
}

/**
 * Group commit on PostgreSQL: the store transactions submitted while a batch is being written go
 * out together in the next one, on one connection, in ONE transaction: one COMMIT (one WAL flush),
 * the transparency log's head locked and its leaves appended once per batch, the execution chain's
 * head locked once per batch however many records it links. Each caller is answered after the
 * COMMIT.
 *
 * A job that fails without having changed anything (a duplicate id: its claim inserted no row;
 * an intent no longer in the state a move starts from) fails alone and the batch goes on. A job
 * that fails otherwise (a database error aborts the whole transaction; a job that had changed rows
 * cannot be undone alone without a savepoint, which would cost two round trips per job) rolls the
 * batch back, and every job of it then runs again in a transaction of its own, so each caller gets
 * its own outcome.
 */
export class PgGroupCommit {
  private queue: PgJob[] = [];
  private scheduled = false;
  private inFlight = 0;

  /**
   * `concurrency`: batches in flight at once. A batch is a few round trips in a row, each waiting
   * for this process's event loop as much as for the database; while one batch waits, the next
   * one's statements (its claims, up to the locks the first holds) are already on their way.
   */
  constructor(
    private readonly ds: DataSource,
    private readonly maxBatch = 256,
    private readonly concurrency = 2,
  ) {}

  transaction<T>(work: (run: Run) => Promise<T>, rank: LockRank = 'own-row'): Promise<T> {
    return this.enqueue({ work, rank: RANK[rank] });
  }

  /** One item of a bulk write: written with the other items of its kind in the batch. */
  bulk<I, R>(work: BulkWork<I, R>, item: I): Promise<R> {
    return this.enqueue({ bulk: { work: work as BulkWork<unknown, unknown>, item }, rank: RANK[work.rank] });
  }

  private enqueue<T>(job: Omit<PgJob, 'resolve' | 'reject'>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ ...job, resolve: resolve as (value: unknown) => void, reject });
      this.schedule();
    });
  }

  /** The next batch starts on the next turn of the event loop, with every job queued until then. */
  private schedule(): void {
    if (this.scheduled || this.queue.length === 0 || this.inFlight >= this.concurrency) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const batch = this.queue.splice(0, this.maxBatch);
      if (batch.length === 0) return;
      this.inFlight++;
      void this.commit(batch).finally(() => {
        this.inFlight--;
        this.schedule();
      });
      this.schedule();
    });
  }

  private async commit(batch: PgJob[]): Promise<void> {
    if (batch.length === 1) return alone(this.ds, batch[0]!);
    batch.sort((a, b) => a.rank - b.rank);
    const runner = this.ds.createQueryRunner();
    const outcomes = new Map<PgJob, BulkOutcome<unknown>>();
    let redo = false;
    try {
      try {
        redo = !(await this.runBatch(runner, batch, outcomes));
      } catch {
        // The batch failed before its COMMIT was sent (its connection, an append to the log):
        // each job runs again alone, and fails alone if it must.
        await runner.query('ROLLBACK').catch(ignore);
        redo = true;
      }
      if (!redo) {
        try {
          await runner.query('COMMIT');
        } catch (e) {
          // Whether a COMMIT that failed took effect is not known to this side (a lost connection):
          // running the jobs again could store them twice, so every caller gets the failure.
          for (const job of batch) job.reject(e);
          return;
        }
      }
    } finally {
      await runner.release().catch(ignore);
    }
    if (redo) {
      for (const job of batch) await alone(this.ds, job);
      return;
    }
    for (const job of batch) {
      const outcome = outcomes.get(job)!;
      if (outcome.ok) job.resolve(outcome.value);
      else job.reject(outcome.error);
    }
  }

  /**
   * BEGIN, every job, the log's leaves; true when the batch can be committed, false when it was
   * rolled back because a job failed after changing something (or with a database error).
   */
  private async runBatch(runner: QueryRunner, batch: PgJob[], outcomes: Map<PgJob, BulkOutcome<unknown>>): Promise<boolean> {
    await runner.query('BEGIN');
    const leaves = new LogLeaves('postgres');
    let changed = false;
    let failed = false;
    const run: Run = async (sql, params) => {
      try {
        const result = toResult(await runner.query(sql, params, true));
        if (!isRead(sql) && (result.affected === undefined || result.affected > 0)) changed = true;
        return result;
      } catch (e) {
        failed = true;
        throw e;
      }
    };
    attachLogLeaves(run, leaves);
    for (const job of batch) {
      if (outcomes.has(job)) continue; // written with its kind's first item
      // The items of a bulk kind, the job's and every later one's of the batch, in one call.
      const group = job.bulk ? batch.filter((j) => j.bulk?.work.key === job.bulk!.work.key) : [job];
      changed = false;
      failed = false;
      try {
        if (job.bulk) {
          const written = await job.bulk.work.write(run, group.map((j) => j.bulk!.item));
          if (written.length !== group.length) throw new Error(`bulk write ${job.bulk.work.key} answered ${written.length} outcomes for ${group.length} items`);
          group.forEach((j, i) => outcomes.set(j, written[i]!));
        } else {
          outcomes.set(job, { ok: true, value: await job.work!(run) });
        }
        leaves.endJob(true);
      } catch (error) {
        leaves.endJob(false);
        if (failed || changed) {
          await runner.query('ROLLBACK');
          return false;
        }
        for (const j of group) outcomes.set(j, { ok: false, error });
      }
    }
    await leaves.flush(run);
    return true;
  }
}

const groups = new WeakMap<DataSource, PgGroupCommit>();
export const pgGroupOf = (ds: DataSource): PgGroupCommit => {
  let group = groups.get(ds);
  if (!group) groups.set(ds, (group = new PgGroupCommit(ds)));
  return group;
};
