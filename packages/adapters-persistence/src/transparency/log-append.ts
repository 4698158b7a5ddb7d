import { appendToCompactRange, fromHex, nodeRfc9162, toHex, type CompactRange } from '@ets/adapters-crypto';
import type { TreeHead } from '@ets/domain';
import type { Run } from '../stores/run.js';
import { placeholders, toPg } from '../stores/sql.js';

export type Dialect = 'sqlite' | 'postgres';

/**
 * The kinds of signed record that are leaves of the transparency log. A leaf row names its record
 * (kind and id) so that completeness can be checked (every stored record has exactly one leaf) and
 * a record's leaf found. A store of a new kind of signed record adds its kind here.
 */
export type LoggedRecordKind =
  | 'trust-record'
  /** A held transaction's Trust Record without executions, once the transaction was decided (held_transactions.held_record). */
  | 'held-trust-record'
  | 'refusal'
  | 'intent'
  | 'verification'
  | 'receipt'
  | 'audit-event'
  | 'attestation'
  | 'override-resolution'
  | 'runtime-manifest'
  | 'confirmation-proof';

/** One leaf to append: the leaf input (lower-case hex) and the record it stands for. */
export interface LogEntry {
  leaf: string;
  kind: LoggedRecordKind;
  id: string;
}

const HEAD_READ = 'SELECT tree_size, border FROM transparency_log_head WHERE id = 1';
const HEAD_WRITE = 'UPDATE transparency_log_head SET tree_size = ?, border = ?, root_hash = ?, updated_at = ? WHERE id = 1';
const LEAF_COLUMNS = 'transparency_log_leaves (leaf_index, leaf, record_kind, record_id)';
const NODE_COLUMNS = 'transparency_log_nodes (level, node_index, hash)';
/** Leaves per statement: 4 parameters each, plus about 2 nodes of 3, stays far below both databases' limits. */
const CHUNK = 1000;

const values = (rows: number, columns: number): string => Array.from({ length: rows }, () => placeholders(columns)).join(', ');

/** The right border as stored: the hex of each hash, concatenated, largest subtree first. */
const parseBorder = (text: string | null): Uint8Array[] => (text ? (text.match(/.{64}/g) ?? []).map((h) => fromHex(h)!) : []);

/**
 * Appends leaves to the deployment's tree inside the caller's transaction: reads the head (its
 * size and right border; on PostgreSQL with the row locked FOR UPDATE, so several instances append
 * to one tree without forks; on SQLite the writer's BEGIN IMMEDIATE already holds the write
 * lock), then writes the leaf rows, every node the batch completes, and the new head. The caller
 * commits. Takes the log lock, so it must be the last lock of the transaction (store transactions
 * call it just before COMMIT: see `LogLeaves`).
 */
export async function appendLeaves(run: Run, dialect: Dialect, entries: readonly LogEntry[]): Promise<TreeHead | undefined> {
  if (entries.length === 0) return undefined;
  const pg = dialect === 'postgres';
  const [row] = (await run(pg ? `${HEAD_READ} FOR UPDATE` : HEAD_READ, [])).records as { tree_size: string | number; border: string | null }[];
  if (!row) throw new Error('the transparency log head is missing (migration 0016 not applied)');
  let range: CompactRange = { size: Number(row.tree_size), border: parseBorder(row.border) };
  let root = '';
  const at = new Date().toISOString();
  for (let start = 0; start < entries.length; start += CHUNK) {
    const chunk = entries.slice(start, start + CHUNK);
    const leafHashes = chunk.map((e) => {
      const input = fromHex(e.leaf);
      if (!input) throw new Error(`a log leaf is not lower-case hex: ${e.leaf.slice(0, 80)}`);
      return nodeRfc9162.leaf(input);
    });
    const first = range.size;
    const appended = appendToCompactRange(range, leafHashes, nodeRfc9162);
    const leafParams = chunk.flatMap((e, i) => [first + i, e.leaf, e.kind, e.id]);
    const nodeParams = appended.nodes.flatMap((n) => [n.level, n.index, toHex(n.hash)]);
    range = appended.range;
    root = toHex(appended.root);
    const head = [range.size, range.border.map(toHex).join(''), root, at];
    const leafInsert = `INSERT INTO ${LEAF_COLUMNS} VALUES ${values(chunk.length, 4)}`;
    const nodeInsert = `INSERT INTO ${NODE_COLUMNS} VALUES ${values(appended.nodes.length, 3)}`;
    if (pg) {
      // One round trip while the head row is locked.
      await run(toPg(`WITH l AS (${leafInsert}), n AS (${nodeInsert}) ${HEAD_WRITE}`), [...leafParams, ...nodeParams, ...head]);
    } else {
      await run(leafInsert, leafParams);
      await run(nodeInsert, nodeParams);
      await run(HEAD_WRITE, head);
    }
  }
  return { treeSize: range.size, rootHash: root };
}

/**
 * The leaves a transaction will append, kept until just before its COMMIT. On SQLite the writer's
 * group commit gives every job its own SAVEPOINT: a job's leaves are kept only when the job is
 * (`endJob`), and the whole batch is appended once, so a rolled-back job leaves no leaf and the
 * indices stay dense. Appending last also takes the log lock last, after any lock the job took
 * (the execution chain's, a decision's row), so lock order is the same everywhere.
 */
export class LogLeaves {
  #job: LogEntry[] = [];
  #kept: LogEntry[] = [];

  constructor(readonly dialect: Dialect) {}

  add(entries: readonly LogEntry[]): void {
    this.#job.push(...entries);
  }

  /** The running job succeeded (its leaves are kept) or was rolled back (they are dropped). */
  endJob(succeeded: boolean): void {
    if (succeeded) this.#kept.push(...this.#job);
    this.#job = [];
  }

  /** Appends every kept leaf (and those of a job not ended, which succeeded) in the transaction of `run`. */
  async flush(run: Run): Promise<void> {
    this.endJob(true);
    const entries = this.#kept;
    this.#kept = [];
    await appendLeaves(run, this.dialect, entries);
  }
}
