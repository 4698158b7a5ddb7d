import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * The thread's code, given as source so that it runs the same from the built package and from the
 * TypeScript sources under test. It copies the write-ahead log into the database file whenever the
 * log has grown past `pages` pages (PASSIVE: it never waits for, nor blocks, the writer or readers),
 * and once more, as far as it can, when told to stop.
 */
const SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { statSync } = require('node:fs');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { timeout: 10000 });
db.pragma('wal_autocheckpoint = 0');
const wal = workerData.file + '-wal';
const threshold = workerData.pages * 4096;
let stopping = false;
const checkpoint = () => { try { db.pragma('wal_checkpoint(PASSIVE)'); } catch (e) { parentPort.postMessage({ error: String(e && e.message || e) }); } };
const tick = () => {
  if (stopping) return;
  try { if (statSync(wal).size >= threshold) checkpoint(); } catch {}
  setTimeout(tick, workerData.intervalMs);
};
parentPort.on('message', (m) => {
  if (m !== 'stop') return;
  stopping = true;
  checkpoint();
  db.close();
  parentPort.postMessage({ stopped: true });
});
tick();
`;

/**
 * Checkpoints of an SQLite database in WAL mode, on a thread of their own. SQLite's automatic
 * checkpoint runs inside the COMMIT that crosses the threshold, on the thread that commits: here
 * that would be the event loop, held for a copy of megabytes and two fsyncs. The writer turns the
 * automatic checkpoint off and this thread does the work beside it.
 */
export class SqliteCheckpointer {
  private readonly worker: Worker;
  private stopped: Promise<void> | undefined;

  constructor(file: string, options: { pages?: number; intervalMs?: number } = {}) {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(SOURCE, {
      eval: true,
      workerData: { file, driver, pages: options.pages ?? 1000, intervalMs: options.intervalMs ?? 100 },
    });
    // A checkpoint that fails (a reader holding an old snapshot, a full disk) is tried again on the
    // next tick; the log only grows meanwhile. Nothing to report from here.
    this.worker.on('message', () => undefined);
    this.worker.on('error', () => undefined);
    this.worker.unref();
  }

  /** A last checkpoint, then the thread ends. */
  close(): Promise<void> {
    this.stopped ??= new Promise<void>((resolve) => {
      // Held open until it has stopped (it is unref'd while it runs, so it never keeps a process up).
      this.worker.ref();
      const done = () => resolve();
      this.worker.once('exit', done);
      this.worker.on('message', (m: { stopped?: boolean }) => {
        if (m.stopped) void this.worker.terminate().then(done, done);
      });
      this.worker.postMessage('stop');
      // Never hold a shutdown for a checkpoint.
      setTimeout(() => void this.worker.terminate().then(done, done), 5000).unref();
    });
    return this.stopped;
  }
}
