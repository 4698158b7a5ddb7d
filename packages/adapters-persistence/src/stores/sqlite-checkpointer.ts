import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** What `pages` counts in: SQLite's default page size. */
const PAGE_BYTES = 4096;

/**
 * The thread's code, given as source so that it runs the same from the built package and from the
 * TypeScript sources under test. It copies the write-ahead log into the database file whenever the
 * log has grown past `pages` pages (PASSIVE: it never waits for, nor blocks, the writer or readers),
 * and once more, as far as it can, when told to stop.
 *
 * The log's size is that of its file, which SQLite does not shrink after a checkpoint: a file that
 * was all copied stays past the threshold until the next write. So a checkpoint that copied all of
 * the log remembers the file's size and mtime, and the file is not checkpointed again until it
 * changed; one that copied only part (a reader on an old snapshot, another checkpoint running) is
 * tried again on the next tick.
 */
const SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { statSync } = require('node:fs');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { timeout: 10000 });
db.pragma('wal_autocheckpoint = 0');
const wal = workerData.file + '-wal';
const threshold = workerData.pages * ${PAGE_BYTES};
let stopping = false;
let copied;
const checkpoint = () => {
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage({ checkpoint: true });
    return r.busy === 0 && r.log >= 0 && r.checkpointed === r.log;
  } catch (e) {
    parentPort.postMessage({ error: String(e && e.message || e) });
    return false;
  }
};
const tick = () => {
  if (stopping) return;
  try {
    const { size, mtimeMs } = statSync(wal);
    if (size >= threshold && !(copied && copied.size === size && copied.mtimeMs === mtimeMs)) {
      copied = checkpoint() ? { size, mtimeMs } : undefined;
    }
  } catch {}
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
  /**
   * For `PRAGMA journal_size_limit` on the writer's connection, in bytes. When the writer starts
   * the log again from its beginning (its first write after a checkpoint copied all of it), SQLite
   * truncates the file to this size; otherwise the file keeps the largest size it ever had, and a
   * log that once grew past the threshold would look full to the size test from then on. Half the
   * threshold: below it, so a file just truncated is not taken for a full log, and large enough
   * that the next frames mostly overwrite the file's bytes rather than grow it again.
   */
  readonly walSizeLimit: number;
  private readonly worker: Worker;
  private stopped: Promise<void> | undefined;
  private checkpointsRun = 0;

  constructor(file: string, options: { pages?: number; intervalMs?: number } = {}) {
    const pages = options.pages ?? 1000;
    this.walSizeLimit = (pages * PAGE_BYTES) / 2;
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(SOURCE, {
      eval: true,
      workerData: { file, driver, pages, intervalMs: options.intervalMs ?? 100 },
    });
    // A checkpoint that fails (a reader holding an old snapshot, a full disk) is tried again on the
    // next tick; the log only grows meanwhile. Nothing to report from here.
    this.worker.on('message', (m: { checkpoint?: boolean }) => {
      if (m.checkpoint) this.checkpointsRun++;
    });
    this.worker.on('error', () => undefined);
    this.worker.unref();
  }

  /** The checkpoints run so far (those that raised no error), the last one on close included. */
  get checkpoints(): number {
    return this.checkpointsRun;
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
