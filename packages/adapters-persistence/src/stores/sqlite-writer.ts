import type { DataSource, QueryResult } from 'typeorm';

export type Run = (sql: string, params: unknown[]) => Promise<QueryResult>;
export const ignore = (): void => undefined;

interface WriterJob {
  work: (run: Run) => Promise<unknown>;
  exclusive: boolean;
  /** A single statement: run alone, it needs no BEGIN/COMMIT of its own (autocommit). */
  statement: boolean;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * The SQLite write path. better-sqlite3 through TypeORM has ONE connection per DataSource and
 * TypeORM hands the same query runner to everyone: a second `startTransaction` while one is open
 * only nests a SAVEPOINT into it, and any statement issued meanwhile joins the open transaction.
 * So every write of this store on SQLite goes through this per-DataSource writer, which runs
 * transactions one after another, each opened with `BEGIN IMMEDIATE` (the database write lock is
 * taken up front, which also serialises other processes on the same file).
 *
 * Group commit: the transactions queued while one runs share the next `BEGIN IMMEDIATE ... COMMIT`
 * (one fsync), each in its own SAVEPOINT, so a failing one (a duplicate, a failed build) rolls back
 * alone. Every caller is answered only after the COMMIT, success or failure alike; if the COMMIT
 * fails, every caller of the batch gets that error and nothing of the batch is stored.
 */
class SqliteWriter {
  private readonly queue: WriterJob[] = [];
  private draining = false;

  constructor(
    private readonly ds: DataSource,
    private readonly maxBatch = 64,
  ) {}

  /** `work` runs inside a write transaction (or a savepoint of one); it must not call the writer again. */
  transaction<T>(work: (run: Run) => Promise<T>): Promise<T> {
    return this.enqueue(work, false, false);
  }

  /** One statement, in a batch like a transaction. */
  statement(sql: string, params: unknown[]): Promise<QueryResult> {
    return this.enqueue((run) => run(sql, params), false, true);
  }

  /** Runs `fn` alone, with no transaction of this writer open. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.enqueue(() => fn(), true, false);
  }

  private enqueue<T>(work: (run: Run) => Promise<T>, exclusive: boolean, statement: boolean): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, exclusive, statement, resolve: resolve as (value: unknown) => void, reject });
      if (!this.draining) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.queue.length > 0) {
        const first = this.queue[0]!;
        if (first.exclusive || (first.statement && (this.queue.length === 1 || this.queue[1]!.exclusive))) {
          this.queue.shift();
          const runner = this.ds.createQueryRunner();
          await Promise.resolve()
            .then(() => first.work((sql, params) => runner.query(sql, params, true)))
            .then(first.resolve, first.reject);
          continue;
        }
        let n = 1;
        while (n < this.queue.length && n < this.maxBatch && !this.queue[n]!.exclusive) n++;
        await this.commit(this.queue.splice(0, n));
      }
    } finally {
      this.draining = false;
    }
  }

  private async commit(batch: WriterJob[]): Promise<void> {
    const runner = this.ds.createQueryRunner();
    const run: Run = (sql, params) => runner.query(sql, params, true);
    const single = batch.length === 1;
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      await runner.query('BEGIN IMMEDIATE');
      try {
        for (const job of batch) {
          if (!single) await runner.query('SAVEPOINT job');
          try {
            const value = await job.work(run);
            if (!single) await runner.query('RELEASE job');
            outcomes.push({ ok: true, value });
          } catch (error) {
            // If SQLite already rolled the whole transaction back, the batch fails with this error.
            if (!single) await runner.query('ROLLBACK TO job').then(() => runner.query('RELEASE job')).catch(() => Promise.reject(error));
            outcomes.push({ ok: false, error });
          }
        }
        await runner.query(single && !outcomes[0]!.ok ? 'ROLLBACK' : 'COMMIT');
      } catch (e) {
        await runner.query('ROLLBACK').catch(ignore);
        throw e;
      }
    } catch (e) {
      for (const job of batch) job.reject(e);
      return;
    } finally {
      await runner.release().catch(ignore);
    }
    batch.forEach((job, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) job.resolve(outcome.value);
      else job.reject(outcome.error);
    });
  }
}

const sqliteWriters = new WeakMap<DataSource, SqliteWriter>();
export const writerOf = (ds: DataSource): SqliteWriter => {
  let writer = sqliteWriters.get(ds);
  if (!writer) sqliteWriters.set(ds, (writer = new SqliteWriter(ds)));
  return writer;
};

/**
 * For other stores sharing an SQLite DataSource: runs `fn` while no transaction of this store is
 * open, so a multi-statement transaction of theirs neither nests into nor absorbs one of ours.
 */
export function withSqliteWriteLock<T>(ds: DataSource, fn: () => Promise<T>): Promise<T> {
  return writerOf(ds).exclusive(fn);
}

/** Admits one task at a time, in arrival order. */
export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.then(ignore, ignore);
    return result;
  }
}
