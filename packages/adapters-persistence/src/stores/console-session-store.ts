import type { DataSource } from 'typeorm';
import type { ConsoleSessionRow, ConsoleSessionStore } from '@ets/domain';
import { ConsoleSessionEntity } from '../entities/console-session.js';
import { executeSerially, insertOrIgnore } from './serial-writes.js';
import { toPg } from './sql.js';

/**
 * Console sessions in `console_sessions` (SQLite or PostgreSQL), so every instance on one database
 * knows every session. Times are ISO 8601 UTC (`toISOString`), so they compare as text.
 */
export class TypeOrmConsoleSessionStore implements ConsoleSessionStore {
  private readonly pg: boolean;

  constructor(private readonly ds: DataSource) {
    this.pg = ds.options.type === 'postgres';
  }

  async create(row: ConsoleSessionRow): Promise<void> {
    // The id hash is of 32 fresh random bytes: a conflict cannot happen, and would sign nobody in.
    await insertOrIgnore(this.ds, ConsoleSessionEntity, row);
  }

  async find(idHash: string): Promise<ConsoleSessionRow | undefined> {
    return (await this.ds.getRepository(ConsoleSessionEntity).findOneBy({ idHash })) ?? undefined;
  }

  async extend(idHash: string, expiresAt: string): Promise<void> {
    await this.write('UPDATE console_sessions SET expires_at = ? WHERE id_hash = ? AND expires_at < ?', [expiresAt, idHash, expiresAt]);
  }

  async remove(idHash: string): Promise<void> {
    await this.write('DELETE FROM console_sessions WHERE id_hash = ?', [idHash]);
  }

  async removeExpired(now: string): Promise<number> {
    return (await this.write('DELETE FROM console_sessions WHERE expires_at <= ?', [now])).affected ?? 0;
  }

  private write(sql: string, params: unknown[]) {
    return executeSerially(this.ds, this.pg ? toPg(sql) : sql, params);
  }
}
