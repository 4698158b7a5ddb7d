import { Worker } from 'node:worker_threads';
import type { CheckedLine, ExportVerifier, JwksLike } from '@ets/adapters-crypto';

/** Lines per message to a thread: enough to make the message's cost small beside the checks. */
const BATCH = 200;
/** Batches in flight per thread: keeps every thread busy while the file is read, memory bounded. */
const AHEAD = 4;

/**
 * Feeds an export's lines to `verifier` in file order, the per-line checks (signatures, hashes,
 * inclusion proofs: most of the work) done by `threads` worker threads in batches. The header and
 * what depends on the lines before (leaf order, the chain, the tallies) stay on this thread, in
 * order, so the summary is the one a single thread makes. One thread: no worker at all.
 */
export async function feedExport(lines: AsyncIterable<string>, verifier: ExportVerifier, jwks: JwksLike, threads: number): Promise<void> {
  const iterator = lines[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done) return;
  verifier.addLine(first.value);
  const rest = { [Symbol.asyncIterator]: () => iterator };
  if (threads <= 1) {
    for await (const line of rest) verifier.addLine(line);
    return;
  }
  const pool = new CheckerPool(jwks, threads);
  try {
    const pending: Promise<CheckedLine[]>[] = [];
    const submit = (batch: string[]) => {
      const checked = pool.check(batch);
      checked.catch(() => {}); // awaited in order below; a thread's failure surfaces there
      pending.push(checked);
    };
    let batch: string[] = [];
    for await (const line of rest) {
      batch.push(line);
      if (batch.length < BATCH) continue;
      submit(batch);
      batch = [];
      while (pending.length >= threads * AHEAD) for (const c of await pending.shift()!) verifier.addChecked(c);
    }
    if (batch.length > 0) submit(batch);
    for (const checked of pending) for (const c of await checked) verifier.addChecked(c);
  } finally {
    await pool.close();
  }
}

/** Worker threads answering batches in the order they were sent (each thread's messages are FIFO; batches go round the threads). */
class CheckerPool {
  private readonly workers: { worker: Worker; waiting: { resolve: (c: CheckedLine[]) => void; reject: (e: Error) => void }[] }[];
  private next = 0;

  constructor(jwks: JwksLike, threads: number) {
    this.workers = Array.from({ length: threads }, () => {
      const entry = { worker: new Worker(new URL('./export-check-worker.js', import.meta.url), { workerData: { jwks } }), waiting: [] as CheckerPool['workers'][number]['waiting'] };
      entry.worker.on('message', (checked: CheckedLine[]) => entry.waiting.shift()?.resolve(checked));
      const failAll = (e: Error) => entry.waiting.splice(0).forEach((w) => w.reject(e));
      entry.worker.on('error', failAll);
      entry.worker.on('exit', (code) => failAll(new Error(`a verification thread stopped (exit code ${code})`)));
      return entry;
    });
  }

  check(lines: string[]): Promise<CheckedLine[]> {
    const entry = this.workers[this.next++ % this.workers.length]!;
    return new Promise((resolve, reject) => {
      entry.waiting.push({ resolve, reject });
      entry.worker.postMessage(lines);
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.worker.terminate()));
  }
}
