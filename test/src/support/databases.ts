import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createDataSource, migrate, type StorageTarget } from '@ets/adapters-persistence';
import type { DataSource } from 'typeorm';

/**
 * The storage suites run once per adapter: an SQLite file in a temp dir, and a throwaway PostgreSQL
 * database created for the test file and dropped afterwards. ETS_TEST_PG_URL points at a server
 * (any database on it; we create our own); default: the local trust-auth server.
 */
export const PG_ADMIN_URL = process.env.ETS_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface ProvisionedTarget {
  name: 'sqlite' | 'postgres';
  target: StorageTarget;
  /** Removes the database (and temp files). */
  drop(): Promise<void>;
}

export type TargetFactory = { name: 'sqlite' | 'postgres'; provision(): Promise<ProvisionedTarget> };

export const sqliteTarget: TargetFactory = {
  name: 'sqlite',
  async provision() {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ets-sqlite-'));
    return {
      name: 'sqlite',
      target: { kind: 'sqlite', file: path.join(dir, 'ets.sqlite') },
      async drop() {
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

const withAdmin = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
};

export const postgresTarget: TargetFactory = {
  name: 'postgres',
  async provision() {
    const db = `ets_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
    await withAdmin((c) => c.query(`CREATE DATABASE ${db}`));
    const url = new URL(PG_ADMIN_URL);
    url.pathname = `/${db}`;
    return {
      name: 'postgres',
      target: { kind: 'postgres', url: url.toString() },
      async drop() {
        await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`));
      },
    };
  },
};

/** Every storage adapter the contract suites run against. */
export const STORAGE_TARGETS: TargetFactory[] = [sqliteTarget, postgresTarget];

/**
 * A fresh, migrated database with two connections (two DataSources): what two instances of the
 * service share, for races across connections. `close` destroys both and drops the database.
 */
export async function twoConnections(factory: TargetFactory): Promise<{ sources: [DataSource, DataSource]; close(): Promise<void> }> {
  const db = await factory.provision();
  const sources: DataSource[] = [];
  for (let i = 0; i < 2; i++) {
    const ds = createDataSource(db.target);
    await ds.initialize();
    if (i === 0) await migrate(ds);
    sources.push(ds);
  }
  return {
    sources: sources as [DataSource, DataSource],
    async close() {
      for (const ds of sources) await ds.destroy();
      await db.drop();
    },
  };
}

/**
 * The storage settings of a server process (`spawnServer`) on the target: an SQLite file's folder
 * is its data dir; with PostgreSQL, its URL and a fresh data dir from `tmp` (a `tempDirs` maker).
 */
export function serverStorageEnv(target: StorageTarget, tmp: () => string): Record<string, string> {
  return target.kind === 'postgres' ? { SVC_DATABASE_URL: target.url, SVC_DATA_DIR: tmp() } : { SVC_DATA_DIR: path.dirname(target.file) };
}

/**
 * Runs `fn` on the target's database, migrated, from outside any server (a server process may be
 * running on it), and closes it again: `onDatabase(db.target, publishPolicy)` prepares a database
 * for the servers a test spawns.
 */
export async function onDatabase<T>(target: StorageTarget, fn: (ds: DataSource) => Promise<T>): Promise<T> {
  const ds = createDataSource(target);
  await ds.initialize();
  try {
    await migrate(ds);
    return await fn(ds);
  } finally {
    await ds.destroy();
  }
}
