import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { ReleaseRequest } from '@ets/domain';

export const SANDBOX_JOURNAL_FILE = 'sandbox-releases.jsonl';

/**
 * Sandbox mode keeps a durable journal of every release that reached the sandbox connector
 * (id and time, never the parameters), so that crash tests can prove no action was ever released
 * without a stored, signed Execution Intent.
 */
export function sandboxJournal(dataDir: string): (request: ReleaseRequest) => void {
  const file = path.join(dataDir, SANDBOX_JOURNAL_FILE);
  return (request) => {
    const fd = openSync(file, 'a', 0o600);
    try {
      writeSync(fd, JSON.stringify({ businessTransactionId: request.businessTransactionId, at: new Date().toISOString() }) + '\n');
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  };
}
