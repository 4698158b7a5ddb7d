import { DataSource } from 'typeorm';
import { MIGRATIONS } from './migrations/index.js';
import { ENTITY_SCHEMAS } from './entities/index.js';
import { reportUnobtainableConnections } from './storage-unavailable.js';

export type StorageTarget =
  | { kind: 'sqlite'; file: string }
  | { kind: 'postgres'; url: string };

export const describeTarget = (t: StorageTarget): string =>
  t.kind === 'sqlite' ? `sqlite:${t.file}` : `postgres:${redactUrl(t.url)}`;

/** A database URL may carry a password; logs and errors only ever see it redacted. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'postgres://(unparseable url)';
  }
}

/**
 * One migration list and one set of entity schemas serve both databases. SQLite runs in WAL mode
 * with synchronous=FULL so that a commit is durable when it returns (the evidence guarantees of the
 * execution pipeline depend on it). `readOnly` opens it for reading only (SQLite read-only, PostgreSQL
 * read-only transactions), for tools that run beside the server. On PostgreSQL a connection that
 * cannot be had in time is a typed error (storage-unavailable.ts).
 */
export function createDataSource(target: StorageTarget, options: { readOnly?: boolean } = {}): DataSource {
  const common = {
    entities: ENTITY_SCHEMAS,
    migrations: MIGRATIONS,
    migrationsTransactionMode: 'each' as const,
    migrationsRun: false,
    synchronize: false,
    logging: false,
  };
  if (target.kind === 'sqlite' && options.readOnly) {
    // A reader beside a running server (`ets export`): no journal-mode switch, nothing written.
    return new DataSource({ ...common, type: 'better-sqlite3', database: target.file, readonly: true, fileMustExist: true, timeout: 10000 });
  }
  if (target.kind === 'postgres' && options.readOnly) {
    return reportUnobtainableConnections(new DataSource({
      ...common,
      type: 'postgres',
      url: target.url,
      poolSize: 2,
      extra: { connectionTimeoutMillis: 5000, options: '-c default_transaction_read_only=on' },
    }));
  }
  if (target.kind === 'sqlite') {
    return new DataSource({
      ...common,
      type: 'better-sqlite3',
      database: target.file,
      enableWAL: true,
      timeout: 10000,
      prepareDatabase: (db: { pragma(s: string): unknown }) => {
        db.pragma('synchronous = FULL');
        db.pragma('foreign_keys = ON');
      },
    });
  }
  // A connection not had within 5 s is 503 STORAGE_UNAVAILABLE (storage-unavailable.ts).
  return reportUnobtainableConnections(new DataSource({
    ...common,
    type: 'postgres',
    url: target.url,
    poolSize: 20,
    extra: { connectionTimeoutMillis: 5000 },
  }));
}

/** Advisory-lock key that serialises migration runs of several instances sharing one PostgreSQL. */
const MIGRATION_LOCK = 0x45545331; // "ETS1"

/**
 * Applies pending migrations in order, each in its own transaction; applied ones are skipped
 * (TypeORM's migrations table). Returns the names it applied.
 */
export async function migrate(ds: DataSource): Promise<string[]> {
  const pg = ds.options.type === 'postgres';
  const runner = pg ? ds.createQueryRunner() : undefined;
  try {
    if (runner) {
      await runner.connect();
      await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    }
    const applied = await ds.runMigrations({ transaction: 'each' });
    return applied.map((m) => m.name);
  } finally {
    if (runner) {
      await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
      await runner.release();
    }
  }
}
