import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readFileSync, readlinkSync } from 'node:fs';
import { writeFileAtomic } from '../write-file-atomic.js';

const FORMAT = 'ets-runtime-digests-2';

/**
 * SHA-256 of files' bytes, reusing a digest recorded earlier (by `npm run build`) for a file whose
 * size, mtime and ctime are all unchanged. mtime alone can be set back by anyone who can write the
 * file; ctime cannot (the kernel sets it on every change, including of mtime), so a changed file is
 * hashed again unless someone also turned the system clock back. The digests file is only a cache:
 * which files are hashed is decided by the caller every time, and a missing or unreadable cache
 * means every file is hashed.
 */
export class FileDigests {
  /**
   * As parsed, `"<size>:<mtimeMs>:<ctimeMs>:<sha256>"` by path: a plain object of strings, because
   * building ~15 000 entries of anything richer at every start costs more than the lookups.
   */
  readonly #known: Record<string, string>;
  readonly #now = new Map<string, string>();
  /** Files read and hashed (not found unchanged in the cache). */
  hashed = 0;

  private constructor(known: Record<string, string>) {
    this.#known = known;
  }

  static empty(): FileDigests {
    return new FileDigests({});
  }

  /** The digests recorded in `file`; none when it is missing, unreadable or of another format. */
  static load(file: string): FileDigests {
    try {
      if (!existsSync(file)) return FileDigests.empty();
      const parsed = JSON.parse(readFileSync(file, 'utf8')) as { format?: unknown; files?: unknown };
      if (parsed.format !== FORMAT || typeof parsed.files !== 'object' || parsed.files === null) return FileDigests.empty();
      return new FileDigests(parsed.files as Record<string, string>);
    } catch {
      return FileDigests.empty();
    }
  }

  /** The SHA-256 of the regular file at `abs`; `key` names it in the cache (its path from the install root). */
  file(abs: string, key: string): string {
    const s = lstatSync(abs);
    const stamp = `${s.size}:${s.mtimeMs}:${s.ctimeMs}:`;
    const cached = this.#now.get(key) ?? (Object.hasOwn(this.#known, key) ? this.#known[key] : undefined);
    if (typeof cached === 'string' && cached.length === stamp.length + 64 && cached.startsWith(stamp)) {
      this.#now.set(key, cached);
      return cached.slice(stamp.length);
    }
    const digest = createHash('sha256').update(readFileSync(abs)).digest('hex');
    this.hashed++;
    this.#now.set(key, stamp + digest);
    return digest;
  }

  /** A symbolic link inside a package is its target path, not what it points at. */
  symlink(abs: string): string {
    return createHash('sha256').update(`symlink:${readlinkSync(abs)}`).digest('hex');
  }

  /** Records the digests of the files asked for since this was opened (and only those), atomically. */
  save(file: string): void {
    writeFileAtomic(file, JSON.stringify({ format: FORMAT, files: Object.fromEntries(this.#now) }));
  }
}
