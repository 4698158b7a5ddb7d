import type { DataSource } from 'typeorm';
import { withSqliteWriteLock } from './sqlite-writer.js';

/**
 * Runs one write. SQLite: in the DataSource's write queue (see `withSqliteWriteLock`: TypeORM has
 * one connection there, and a statement issued while another store's transaction is open would
 * join it, and vanish with it if it rolls back).
 */
export function writeSerially<T>(ds: DataSource, fn: () => Promise<T>): Promise<T> {
  return ds.options.type === 'postgres' ? fn() : withSqliteWriteLock(ds, fn);
}

/** A statement with its affected row count (InsertResult does not carry it on every driver). */
export async function execute(ds: DataSource, sql: string, params: unknown[]): Promise<{ affected?: number }> {
  const runner = ds.createQueryRunner();
  try {
    return await runner.query(sql, params, true);
  } finally {
    await runner.release();
  }
}
