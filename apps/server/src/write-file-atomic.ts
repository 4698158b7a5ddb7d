// Only node: modules: the runtime measurement's worker thread loads this (through file-digests.ts)
// at every start, and should not pay for more.
import { closeSync, fchmodSync, fsyncSync, openSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface WriteFileAtomicOptions {
  /** The file's permissions, whatever the umask and whatever a leftover temporary file had. */
  mode?: number;
  /** Also survive a power loss: the bytes reach the disk before the rename, and the rename too. */
  fsync?: boolean;
}

/**
 * Replaces `file` with `text` by writing a temporary file beside it and renaming it over `file`,
 * so a reader or a crash sees the old contents or the new ones, never half of either. The
 * temporary name carries the process id: two processes writing the same file never write into,
 * or rename, each other's half-written temporary.
 */
export function writeFileAtomic(file: string, text: string, options: WriteFileAtomicOptions = {}): void {
  const temporary = `${file}.${process.pid}.tmp`;
  const fd = openSync(temporary, 'w', options.mode ?? 0o666);
  try {
    // The mode of openSync applies only to a file it creates, and then less the umask.
    if (options.mode !== undefined) fchmodSync(fd, options.mode);
    writeFileSync(fd, text);
    if (options.fsync) fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, file);
  if (options.fsync) syncDirectory(path.dirname(file));
}

/** Makes a rename in `dir` durable: the new directory entry is on disk once this returns. */
function syncDirectory(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
