import type { DataSource } from 'typeorm';
import { autocommitStatement, pgGroupOf, pgTransaction, writeOne, type BulkWork, type LockRank } from './pg-group-commit.js';
import { writerOf, type Run, type RunResult } from './sqlite-writer.js';

export interface StoreTransactionOptions {
  /** PostgreSQL: where the job's locks stand in a batch's lock order (see LockRank). Default 'own-row'. */
  rank?: LockRank;
  /**
   * PostgreSQL: a transaction of its own, outside the group commit: for rare writes that lock rows
   * outside the batch lock order (a human's resolution, a checkpoint) or that must not wait for a
   * batch.
   */
  alone?: boolean;
}

const states = new WeakMap<Run, Map<string, unknown>>();

/**
 * What the jobs of one database transaction share (found by the `run` the transaction hands them:
 * one per group commit): e.g. the execution chain's head, read and locked by the batch's first
 * job that needs it and kept up to date by each job that moves it, so later jobs of the batch do
 * not ask again. Only successful jobs may update it (a failing job must leave it as it found it).
 */
export function transactionState(run: Run): Map<string, unknown> {
  let state = states.get(run);
  if (!state) states.set(run, (state = new Map()));
  return state;
}

/**
 * One transaction of a store: commits what `fn` returns, rolls back when it throws. Both
 * databases commit it in a group with the other store transactions of the moment (one durable
 * commit for many requests): SQLite in the DataSource's single writer (BEGIN IMMEDIATE, a savepoint
 * per job), PostgreSQL in its group commit (one transaction per batch). Either way the leaves `fn`
 * gives `appendToLog` are appended to the transparency log in the same commit, just before it.
 */
export function storeTransaction<T>(ds: DataSource, fn: (run: Run) => Promise<T>, options: StoreTransactionOptions = {}): Promise<T> {
  if (ds.options.type !== 'postgres') return writerOf(ds).transaction(fn);
  if (options.alone) return pgTransaction(ds, fn);
  return pgGroupOf(ds).transaction(fn, options.rank);
}

/**
 * One item of a bulk write (see BulkWork): on PostgreSQL written with the other items of its kind
 * in the group commit, one statement for all; on SQLite a store transaction of its own in the
 * writer's group commit (statements there cost no round trip).
 */
export function storeBulk<I, R>(ds: DataSource, work: BulkWork<I, R>, item: I): Promise<R> {
  if (ds.options.type !== 'postgres') return writerOf(ds).transaction((run) => writeOne(work, run, item));
  return pgGroupOf(ds).bulk(work, item);
}

/**
 * One statement on its own, in the database's own placeholders: on SQLite a job of the writer's
 * group commit, on PostgreSQL autocommit on a pooled connection.
 */
export function storeStatement(ds: DataSource, sql: string, params: unknown[]): Promise<RunResult> {
  if (ds.options.type !== 'postgres') return writerOf(ds).statement(sql, params);
  return autocommitStatement(ds, sql, params);
}
