import { closeSync, fsync, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { DataSource } from 'typeorm';
import { QueryFailedError } from 'typeorm';
import { SqliteCheckpointer } from './sqlite-checkpointer.js';
import { LogLeaves } from '../transparency/log-append.js';
import { attachLogLeaves } from '../transparency/log-in-transaction.js';
import type { Run, RunResult } from './run.js';

export type { Run, RunResult };
export const ignore = (): void => undefined;

interface Statement {
  readonly reader: boolean;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number };
}
interface RawDatabase {
  prepare(sql: string): Statement;
  pragma(sql: string): unknown;
  close(): void;
}
type OpenDatabase = new (file: string, options: { timeout: number }) => RawDatabase;

/** better-sqlite3 binds no booleans (TypeORM turns them into 0/1 too). */
const bindable = (p: unknown): unknown => (typeof p === 'boolean' ? (p ? 1 : 0) : p);

/**
 * Statements on the DataSource's own better-sqlite3 connection, prepared once and kept: the write
 * path and the execution pipeline's reads run here instead of through TypeORM's query runner, whose
 * per-statement bookkeeping (logging and event hooks, a promise per hop) cost more than the
 * statements themselves. Failures are TypeORM's QueryFailedError, as the ORM would raise them, so
 * the stores classify them one way.
 */
export class SqliteStatements {
  private readonly cache = new Map<string, Statement>();

  constructor(readonly db: RawDatabase) {}

  /** On the DataSource's own (TypeORM's) connection: reads see committed data only. */
  static of(ds: DataSource): SqliteStatements {
    const db = (ds.driver as unknown as { databaseConnection?: RawDatabase }).databaseConnection;
    if (!db) throw new Error('the SQLite DataSource is not initialized');
    let cached = readers.get(ds);
    // A DataSource destroyed and initialized again has a new connection.
    if (cached?.db !== db) readers.set(ds, (cached = new SqliteStatements(db)));
    return cached;
  }

  runSync(sql: string, params: readonly unknown[]): RunResult {
    const values = params.map(bindable);
    try {
      const stmt = this.prepared(sql);
      if (stmt.reader) return { records: stmt.all(...values) };
      return { records: [], affected: stmt.run(...values).changes };
    } catch (e) {
      throw new QueryFailedError(sql, values, e as Error);
    }
  }

  readonly run: Run = (sql, params) => {
    try {
      return Promise.resolve(this.runSync(sql, params));
    } catch (e) {
      return Promise.reject(e);
    }
  };

  private prepared(sql: string): Statement {
    let stmt = this.cache.get(sql);
    if (!stmt) {
      // Batched inserts vary in their number of rows, so the set of texts is open-ended: a bounded
      // cache, emptied when full (the hot statements are prepared again on their next use).
      if (this.cache.size >= 512) this.cache.clear();
      stmt = this.db.prepare(sql);
      this.cache.set(sql, stmt);
    }
    return stmt;
  }
}

const readers = new WeakMap<DataSource, SqliteStatements>();

interface WriterJob {
  work: (run: Run) => Promise<unknown>;
  /** Runs alone, outside the writer's transactions, on the DataSource's own connection. */
  exclusive: boolean;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * The SQLite write path: one writer per DataSource, with a better-sqlite3 connection of its own,
 * running transactions one after another, each opened with `BEGIN IMMEDIATE` (the database's write
 * lock is taken up front, which also serialises other connections and processes on the file).
 *
 * Group commit: jobs are not started at once but on the next turn of the event loop, so that every
 * job submitted by the requests handled in this turn shares the next `BEGIN IMMEDIATE ... COMMIT`,
 * each in its own SAVEPOINT, so a failing one (a duplicate, a failed build) rolls back alone.
 *
 * Durability without blocking: the connection commits with synchronous=NORMAL (no fsync inside
 * COMMIT, which would hold the event loop for the whole disk flush) and the writer then fsyncs the
 * write-ahead log on libuv's thread pool; the callers of a batch are answered only once that sync
 * is done, success or failure alike, which is the guarantee of synchronous=FULL. The next batch may
 * run meanwhile: its sync covers the earlier batch's frames too, and SQLite recovers a log only up
 * to its first damaged frame, so a later batch never survives a crash without an earlier one.
 * Checkpoints (copying the log into the database file) run on a thread of their own
 * (SqliteCheckpointer), not inside a COMMIT.
 *
 * Exclusive jobs (stores that use the ORM's own transactions) run alone, between batches, on the
 * DataSource's own connection, whose commits are synchronous=FULL.
 *
 * The transparency log: the leaves of the batch's committed jobs (`appendToLog`) are appended
 * once, just before the COMMIT; a job rolled back to its savepoint leaves none.
 */
class SqliteWriter {
  private readonly queue: WriterJob[] = [];
  private scheduled = false;
  private closed = false;
  private readonly db: RawDatabase;
  private readonly sql: SqliteStatements;
  private readonly walFd: number;
  private readonly checkpointer: SqliteCheckpointer;

  constructor(
    private readonly file: string,
    private readonly maxBatch = 256,
  ) {
    const Database = createRequire(import.meta.url)('better-sqlite3') as OpenDatabase;
    this.db = new Database(file, { timeout: 10_000 });
    this.db.pragma('journal_mode = WAL');
    // No fsync at COMMIT (syncWal does it off the event loop), no checkpoint at COMMIT (the
    // checkpointer does it on its own thread).
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('wal_autocheckpoint = 0');
    this.db.pragma('foreign_keys = ON');
    this.sql = new SqliteStatements(this.db);
    this.walFd = openSync(`${file}-wal`, 'r+');
    this.checkpointer = new SqliteCheckpointer(file);
    // SQLite truncates the log when this connection starts it again; see walSizeLimit.
    this.db.pragma(`journal_size_limit = ${this.checkpointer.walSizeLimit}`);
  }

  /** Waits for the queued jobs, then closes the writer's connection and its checkpointer. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.enqueue(async () => undefined, true).catch(() => undefined);
    this.closed = true;
    await this.checkpointer.close();
    closeSync(this.walFd);
    this.db.close();
  }

  /**
   * Makes every transaction committed so far durable: an fsync of the write-ahead log, on libuv's
   * thread pool, so the event loop serves other requests meanwhile (SQLite's own fsync at COMMIT
   * would block it). The writer commits its batches with synchronous=NORMAL (no fsync at COMMIT)
   * and answers a batch's callers only after this resolves, which is what synchronous=FULL gives.
   */
  private syncWal(): Promise<void> {
    return new Promise((resolve, reject) => fsync(this.walFd, (e) => (e ? reject(e) : resolve())));
  }

  /** `work` runs inside a write transaction (or a savepoint of one); it must not call the writer again. */
  transaction<T>(work: (run: Run) => Promise<T>): Promise<T> {
    return this.enqueue(work, false);
  }

  /** One statement, in a batch like a transaction. */
  statement(sql: string, params: unknown[]): Promise<RunResult> {
    return this.enqueue((run) => run(sql, params), false);
  }

  /** Runs `fn` alone, with no transaction of this writer open. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.enqueue(() => fn(), true);
  }

  private enqueue<T>(work: (run: Run) => Promise<T>, exclusive: boolean): Promise<T> {
    if (this.closed) return Promise.reject(new Error('the SQLite writer is closed (its DataSource was destroyed)'));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, exclusive, resolve: resolve as (value: unknown) => void, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(() => void this.drainOnce());
  }

  /** One batch (or one exclusive job), then the next on a later turn, after the answers went out. */
  private async drainOnce(): Promise<void> {
    try {
      const first = this.queue[0];
      if (!first) return;
      if (first.exclusive) {
        // Runs on the DataSource's own connection (TypeORM), whose commits are synchronous=FULL.
        this.queue.shift();
        await Promise.resolve()
          .then(() => first.work(this.sql.run))
          .then(first.resolve, first.reject);
        return;
      }
      let n = 1;
      while (n < this.queue.length && n < this.maxBatch && !this.queue[n]!.exclusive) n++;
      await this.commit(this.queue.splice(0, n));
    } finally {
      this.scheduled = false;
      this.schedule();
    }
  }

  private async commit(batch: WriterJob[]): Promise<void> {
    const sql = this.sql;
    const leaves = new LogLeaves('sqlite');
    const run: Run = sql.run;
    // The log's leaves of this transaction are found by the `run` it hands out: one per batch.
    const batchRun: Run = (text, params) => run(text, params);
    attachLogLeaves(batchRun, leaves);
    const single = batch.length === 1;
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      sql.runSync('BEGIN IMMEDIATE', []);
      try {
        for (const job of batch) {
          if (!single) sql.runSync('SAVEPOINT job', []);
          try {
            const value = await job.work(batchRun);
            if (!single) sql.runSync('RELEASE job', []);
            leaves.endJob(true);
            outcomes.push({ ok: true, value });
          } catch (error) {
            leaves.endJob(false);
            // If SQLite already rolled the whole transaction back, the batch fails with this error.
            if (!single) {
              try {
                sql.runSync('ROLLBACK TO job', []);
                sql.runSync('RELEASE job', []);
              } catch {
                throw error;
              }
            }
            outcomes.push({ ok: false, error });
          }
        }
        if (single && !outcomes[0]!.ok) {
          sql.runSync('ROLLBACK', []);
          batch[0]!.reject((outcomes[0] as { error: unknown }).error);
          return;
        }
        await leaves.flush(batchRun);
        sql.runSync('COMMIT', []);
      } catch (e) {
        try {
          sql.runSync('ROLLBACK', []);
        } catch {
          // already rolled back
        }
        throw e;
      }
    } catch (e) {
      for (const job of batch) job.reject(e);
      return;
    }
    // Durable before anyone is answered; the next batch may run meanwhile (its own sync covers
    // this one's frames too, and SQLite recovers a log only up to its first damaged frame, so a
    // later batch can never survive a crash without an earlier one).
    void this.syncWal().then(
      () =>
        batch.forEach((job, i) => {
          const outcome = outcomes[i]!;
          if (outcome.ok) job.resolve(outcome.value);
          else job.reject(outcome.error);
        }),
      (e: unknown) => {
        for (const job of batch) job.reject(e);
      },
    );
  }
}

const sqliteWriters = new WeakMap<DataSource, SqliteWriter>();

/**
 * The writer of an SQLite DataSource: its own connection to the database file, opened on first use
 * and closed when the DataSource is destroyed.
 */
export const writerOf = (ds: DataSource): SqliteWriter => {
  let writer = sqliteWriters.get(ds);
  if (!writer) {
    if (!ds.isInitialized) throw new Error('the SQLite DataSource is not initialized');
    const created = new SqliteWriter(String(ds.options.database));
    const destroy = ds.destroy.bind(ds);
    ds.destroy = async () => {
      sqliteWriters.delete(ds);
      await created.close();
      return destroy();
    };
    sqliteWriters.set(ds, (writer = created));
  }
  return writer;
};

/**
 * For other stores sharing an SQLite DataSource: runs `fn` while no transaction of this store is
 * open, so a multi-statement transaction of theirs neither nests into nor absorbs one of ours.
 */
export function withSqliteWriteLock<T>(ds: DataSource, fn: () => Promise<T>): Promise<T> {
  return writerOf(ds).exclusive(fn);
}
