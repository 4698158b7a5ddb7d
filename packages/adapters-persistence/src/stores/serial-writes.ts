import type { DataSource, EntityTarget, ObjectLiteral, QueryDeepPartialEntity } from 'typeorm';
import { autocommitStatement } from './pg-group-commit.js';
import { withSqliteWriteLock, type RunResult } from './sqlite-writer.js';

/**
 * Runs one write. SQLite: in the DataSource's write queue (see `withSqliteWriteLock`: TypeORM has
 * one connection there, and a statement issued while another store's transaction is open would
 * join it, and vanish with it if it rolls back).
 */
function writeSerially<T>(ds: DataSource, fn: () => Promise<T>): Promise<T> {
  return ds.options.type === 'postgres' ? fn() : withSqliteWriteLock(ds, fn);
}

/** One statement on its own, as one write (`writeSerially`), with its affected row count. */
export function executeSerially(ds: DataSource, sql: string, params: unknown[]): Promise<RunResult> {
  return writeSerially(ds, () => autocommitStatement(ds, sql, params));
}

/** An insert of rows that skips each on any conflict with a stored row (`orIgnore`), as one write. */
export async function insertOrIgnore<T extends ObjectLiteral>(
  ds: DataSource,
  entity: EntityTarget<T>,
  values: QueryDeepPartialEntity<T> | QueryDeepPartialEntity<T>[],
): Promise<void> {
  const [sql, params] = ds.createQueryBuilder().insert().into(entity).values(values).orIgnore().getQueryAndParameters();
  await executeSerially(ds, sql, params);
}

/** Marks a registry's row revoked unless it already is (the first revocation stays), as one write. */
export async function revokeOnce<T extends ObjectLiteral>(
  ds: DataSource,
  entity: EntityTarget<T>,
  idColumn: string,
  id: string,
  revocation: { revokedAt: string; revokeChangeId: string },
): Promise<void> {
  const [sql, params] = ds
    .getRepository(entity)
    .createQueryBuilder()
    .update()
    .set(revocation as never)
    .where(`${idColumn} = :id AND revoked_at IS NULL`, { id })
    .getQueryAndParameters();
  await executeSerially(ds, sql, params);
}
