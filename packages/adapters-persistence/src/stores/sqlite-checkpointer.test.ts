import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createDataSource } from '../data-source.js';
import { SqliteCheckpointer } from './sqlite-checkpointer.js';
import { writerOf } from './sqlite-writer.js';

/** Polls `done` until it holds; fails after `ms` (a bound, not a speed requirement). */
async function until(what: string, done: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > end) throw new Error(`still not ${what} after ${ms} ms`);
    await sleep(10);
  }
}

describe('SqliteCheckpointer', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'ets-checkpointer-'));
    file = path.join(dir, 'db.sqlite');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('checkpoints a log past the threshold once, not again while it is idle, and again once it was written', async () => {
    const db = new Database(file);
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('wal_autocheckpoint = 0');
      db.exec('CREATE TABLE filler (b BLOB)');
      const insert = db.prepare('INSERT INTO filler VALUES (randomblob(?))');
      db.transaction(() => {
        for (let i = 0; i < 32; i++) insert.run(4096);
      })();
      expect(statSync(`${file}-wal`).size).toBeGreaterThan(8 * 4096);
      // Started once the commit is written, so that no tick reads the file while it grows.
      // 8 pages (32 KiB), every 10 ms: the file stays larger than that after the checkpoint.
      const checkpointer = new SqliteCheckpointer(file, { pages: 8, intervalMs: 10 });
      try {
        await until('checkpointed', () => checkpointer.checkpoints >= 1);
        const once = checkpointer.checkpoints;
        // 30 ticks of an idle log that was all copied: none checkpoints it again.
        await sleep(300);
        expect(checkpointer.checkpoints).toBe(once);
        expect(statSync(`${file}-wal`).size).toBeGreaterThan(8 * 4096);

        insert.run(16);
        await until('checkpointed again after a write', () => checkpointer.checkpoints > once);
      } finally {
        await checkpointer.close();
      }
    } finally {
      db.close();
    }
  });

  it('through the writer: once the log was copied, the next write truncates its file below the threshold', async () => {
    const ds = createDataSource({ kind: 'sqlite', file });
    await ds.initialize();
    try {
      const writer = writerOf(ds);
      await writer.statement('CREATE TABLE filler (b BLOB)', []);
      // Past the writer's threshold of 1000 pages of 4 KiB.
      const threshold = 1000 * 4096;
      await Promise.all(Array.from({ length: 40 }, () => writer.statement('INSERT INTO filler VALUES (randomblob(131072))', [])));
      const wal = `${file}-wal`;
      expect(statSync(wal).size).toBeGreaterThan(threshold);
      // The checkpointer copies the log on one of its ticks; the first write after that starts the
      // log again from its beginning, which is when SQLite truncates the file.
      await until('truncated', async () => {
        await writer.statement('INSERT INTO filler VALUES (randomblob(16))', []);
        return statSync(wal).size < threshold;
      });
      expect(statSync(wal).size).toBeLessThanOrEqual(threshold / 2);
    } finally {
      await ds.destroy();
    }
  });
});
