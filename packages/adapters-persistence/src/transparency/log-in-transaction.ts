import { Sha256Hasher, sha256Hex } from '@ets/adapters-crypto';
import { logLeafOf, type LogLeaf } from '@ets/domain';
import type { Run } from '../stores/run.js';
import type { LogLeaves, LoggedRecordKind } from './log-append.js';

/** A signed record a store writes: its kind, its id, and its body exactly as stored (the JSON text). */
export interface LoggedRecord {
  kind: LoggedRecordKind;
  id: string;
  body: string;
  /** The body is the record's RFC 8785 canonical text (canonicalJsonOf): its leaf is its hash. */
  canonical?: boolean;
}

const hasher = new Sha256Hasher();

/**
 * The leaf input of a stored signed record: H(C(record)) of the record as it is stored and served
 * (CONTRACT "Transparency log"), so it equals what a Verification or Receipt names as
 * `trustRecordHash` and what an auditor computes from the record.
 */
export const leafOfBody = (body: string): LogLeaf => logLeafOf(hasher, JSON.parse(body) as object);

// The leaves of each open store transaction, by the `run` function the transaction hands out.
const open = new WeakMap<Run, LogLeaves>();

/** Called by the code that owns a transaction (the SQLite writer, `storeTransaction`). */
export function attachLogLeaves(run: Run, leaves: LogLeaves): void {
  open.set(run, leaves);
}

/**
 * What every store that writes a signed record calls, inside the transaction that writes it (the
 * `run` of `storeTransaction` or of the SQLite writer): the record becomes a leaf of the
 * transparency log in the same commit, or neither is stored. The leaves are appended just before
 * COMMIT (see `LogLeaves`), once for the whole group commit on SQLite.
 */
export function appendToLog(run: Run, records: readonly LoggedRecord[]): void {
  const leaves = open.get(run);
  if (!leaves) throw new Error('appendToLog must run inside a store transaction (storeTransaction or the SQLite writer)');
  leaves.add(records.map((r) => ({ leaf: r.canonical ? sha256Hex(r.body) : leafOfBody(r.body), kind: r.kind, id: r.id })));
}
