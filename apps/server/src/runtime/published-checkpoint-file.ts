import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { LogCheckpoint, PublishedCheckpoints } from '@ets/domain';
import { writeFileAtomic } from '../write-file-atomic.js';

/** The folder of the data dir that holds them; never restore it from a backup (see the guide, Backups). */
export const PUBLISHED_CHECKPOINTS_DIR = 'transparency-log';

/**
 * The latest checkpoint this instance published, per origin, in `<data dir>/transparency-log/`:
 * one small JSON file per origin (named by the SHA-256 of the origin), replaced atomically (write,
 * fsync, rename, fsync the folder) each time a larger checkpoint is published, so a crash leaves
 * the old one or the new one, never half of either. The data dir is not what a database restore
 * rolls back, so after a restore the file still holds what the witnesses saw.
 */
export class PublishedCheckpointFile implements PublishedCheckpoints {
  readonly location: string;
  readonly #kept = new Map<string, LogCheckpoint | undefined>();

  constructor(dataDir: string) {
    this.location = path.join(dataDir, PUBLISHED_CHECKPOINTS_DIR);
  }

  async latest(origin: string): Promise<LogCheckpoint | undefined> {
    if (!this.#kept.has(origin)) this.#kept.set(origin, this.#read(origin));
    return this.#kept.get(origin);
  }

  async remember(checkpoint: LogCheckpoint): Promise<void> {
    const kept = await this.latest(checkpoint.origin);
    if (kept && kept.treeSize >= checkpoint.treeSize) return;
    mkdirSync(this.location, { recursive: true, mode: 0o700 });
    const { origin, treeSize, rootHash, keyId, note } = checkpoint;
    writeFileAtomic(this.#file(origin), `${JSON.stringify({ origin, treeSize, rootHash, keyId, note }, null, 2)}\n`, { mode: 0o600, fsync: true });
    this.#kept.set(origin, checkpoint);
  }

  #file(origin: string): string {
    return path.join(this.location, `${createHash('sha256').update(origin).digest('hex').slice(0, 32)}.json`);
  }

  /** The kept checkpoint; a file that is there but unreadable fails closed (nothing is signed). */
  #read(origin: string): LogCheckpoint | undefined {
    const file = this.#file(origin);
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
    const c = JSON.parse(text) as Partial<LogCheckpoint>;
    if (c.origin !== origin || !Number.isSafeInteger(c.treeSize) || typeof c.rootHash !== 'string' || typeof c.note !== 'string') {
      throw new Error(`${file} is not a published checkpoint of ${origin}`);
    }
    return c as LogCheckpoint;
  }
}
