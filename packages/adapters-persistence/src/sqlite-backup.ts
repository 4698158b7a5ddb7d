import Database from 'better-sqlite3';

export interface SqliteBackupReport {
  /** Pages copied. */
  pages: number;
  /** `PRAGMA integrity_check` of the copy: `ok`, or what is wrong. */
  integrity: string;
  /** Rows of the signed-record tables in the copy. */
  rows: Record<string, number>;
}

const COUNTED = ['trust_records', 'refusal_records', 'execution_intents', 'audit_events', 'verifications', 'receipts'] as const;

/**
 * Copies a live SQLite database with SQLite's online backup API (through better-sqlite3): the copy
 * is one consistent state of the database even while the server writes (WAL: the server is not
 * blocked; a step that sees a change made meanwhile starts over). After the first small step the
 * rest is copied in one step, so a busy server cannot keep the copy from finishing. The copy is
 * then opened and checked.
 */
export async function backupSqliteDatabase(source: string, destination: string): Promise<SqliteBackupReport> {
  const db = new Database(source, { readonly: true, fileMustExist: true, timeout: 10000 });
  let pages: number;
  try {
    ({ totalPages: pages } = await db.backup(destination, { progress: ({ totalPages }) => Math.max(totalPages, 100) }));
  } finally {
    db.close();
  }
  const copy = new Database(destination, { readonly: true, fileMustExist: true });
  try {
    const integrity = (copy.pragma('integrity_check') as { integrity_check: string }[]).map((r) => r.integrity_check).join('; ');
    const rows: Record<string, number> = {};
    for (const t of COUNTED) {
      const exists = copy.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(t);
      if (exists) rows[t] = (copy.prepare(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n;
    }
    return { pages, integrity, rows };
  } finally {
    copy.close();
  }
}
