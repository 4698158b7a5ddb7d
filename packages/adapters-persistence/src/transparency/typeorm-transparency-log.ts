import type { DataSource } from 'typeorm';
import {
  consistencyProof,
  fromHex,
  inclusionProof,
  MerkleTreeError,
  toHex,
  treeRoot,
  type NodeId,
  type NodeReader,
} from '@ets/adapters-crypto';
import type { ConsistencyProof, InclusionProof, LogCheckpoint, LogLeaf, TransparencyLog, TreeHead } from '@ets/domain';
import { storeTransaction } from '../stores/store-transaction.js';
import { toPg } from '../stores/sql.js';

/** Refused checkpoints: one that does not fit the stored tree or the checkpoint history. */
export class CheckpointRefusedError extends Error {
  override readonly name = 'CheckpointRefusedError';
}

export interface CheckpointRow {
  tree_size: string | number;
  root_hash: string;
  origin: string;
  key_id: string;
  note: string;
}

const CHECKPOINT_COLUMNS = 'tree_size, root_hash, origin, key_id, note';
/** The log's size and root, and its newest checkpoint (also what an export reads in its snapshot). */
export const TREE_HEAD_SQL = 'SELECT tree_size, root_hash FROM transparency_log_head WHERE id = 1';
export const LATEST_CHECKPOINT_SQL = `SELECT ${CHECKPOINT_COLUMNS} FROM transparency_log_checkpoints ORDER BY tree_size DESC LIMIT 1`;
export const toCheckpoint = (r: CheckpointRow): LogCheckpoint => ({
  treeSize: Number(r.tree_size),
  rootHash: r.root_hash,
  origin: r.origin,
  keyId: r.key_id,
  note: r.note,
});

/** Sessions of PostgreSQL that save a checkpoint take this transaction-level advisory lock ("ETSC"). */
const CHECKPOINT_LOCK = 0x45545343;

/**
 * The transparency log over its tables (migration 0016): the head (size, right border, root), the
 * stored complete subtrees, the leaves with the record each stands for, and every checkpoint.
 * Appending is `appendToLog` inside the stores' transactions; this is the reading side and the
 * checkpoint history. Proofs read O(log n) stored nodes in one query.
 */
export class TypeOrmTransparencyLog implements TransparencyLog {
  private readonly pg: boolean;
  private readonly reader: NodeReader;

  constructor(private readonly ds: DataSource) {
    this.pg = ds.options.type === 'postgres';
    this.reader = this.nodeReader((sql, params) => this.read(sql, params));
  }

  async treeHead(): Promise<TreeHead> {
    const [row] = await this.read<{ tree_size: string | number; root_hash: string }>(TREE_HEAD_SQL, []);
    if (!row) throw new Error('the transparency log head is missing (migration 0016 not applied)');
    return { treeSize: Number(row.tree_size), rootHash: row.root_hash };
  }

  async latestCheckpoint(): Promise<LogCheckpoint | undefined> {
    const [row] = await this.read<CheckpointRow>(LATEST_CHECKPOINT_SQL, []);
    return row ? toCheckpoint(row) : undefined;
  }

  async checkpointAt(treeSize: number): Promise<LogCheckpoint | undefined> {
    const [row] = await this.read<CheckpointRow>(`SELECT ${CHECKPOINT_COLUMNS} FROM transparency_log_checkpoints WHERE tree_size = ?`, [treeSize]);
    return row ? toCheckpoint(row) : undefined;
  }

  /**
   * Keeps a signed checkpoint, in one transaction with the other savers (SQLite: the writer;
   * PostgreSQL: an advisory lock). Refused (CheckpointRefusedError) when it is larger than the
   * tree, smaller than the latest, or when the stored tree's root at its size, or at the latest
   * checkpoint's size, is not what that checkpoint says: then the stored tree is not the one the
   * log committed to, and publishing would sign two inconsistent checkpoints. A checkpoint of a
   * size already kept is not stored again (the first one stays).
   */
  async saveCheckpoint(checkpoint: LogCheckpoint): Promise<void> {
    await storeTransaction(this.ds, async (run) => {
      const q = (sql: string, params: unknown[]) => run(this.pg ? toPg(sql) : sql, params).then((r) => r.records as unknown[]);
      if (this.pg) await run('SELECT pg_advisory_xact_lock($1)', [CHECKPOINT_LOCK]);
      const [head] = (await q(TREE_HEAD_SQL, [])) as { tree_size: string | number }[];
      const [latestRow] = (await q(LATEST_CHECKPOINT_SQL, [])) as CheckpointRow[];
      const size = Number(head?.tree_size ?? 0);
      const latest = latestRow ? toCheckpoint(latestRow) : undefined;
      if (checkpoint.treeSize > size) throw new CheckpointRefusedError(`a checkpoint of size ${checkpoint.treeSize} is larger than the tree (${size} leaves)`);
      if (latest && checkpoint.treeSize < latest.treeSize) {
        throw new CheckpointRefusedError(`a checkpoint of size ${checkpoint.treeSize} is smaller than the latest one (${latest.treeSize})`);
      }
      const reader = this.nodeReader(q);
      for (const c of latest ? [latest, checkpoint] : [checkpoint]) {
        const root = toHex(await treeRoot(c.treeSize, reader));
        if (root !== c.rootHash) {
          throw new CheckpointRefusedError(`the stored tree's root at size ${c.treeSize} is not the root of the checkpoint of that size: the stored log was changed`);
        }
      }
      if (latest?.treeSize === checkpoint.treeSize) return;
      await q(`INSERT INTO transparency_log_checkpoints (${CHECKPOINT_COLUMNS}, created_at) VALUES (?, ?, ?, ?, ?, ?)`, [
        checkpoint.treeSize,
        checkpoint.rootHash,
        checkpoint.origin,
        checkpoint.keyId,
        checkpoint.note,
        new Date().toISOString(),
      ]);
    }, { alone: true });
  }

  async leafIndex(leaf: LogLeaf): Promise<number | undefined> {
    const [row] = await this.read<{ leaf_index: string | number }>('SELECT leaf_index FROM transparency_log_leaves WHERE leaf = ? ORDER BY leaf_index LIMIT 1', [leaf]);
    return row ? Number(row.leaf_index) : undefined;
  }

  async inclusionProof(leaf: LogLeaf, treeSize: number): Promise<InclusionProof | undefined> {
    const [leafIndex, head] = await Promise.all([this.leafIndex(leaf), this.treeHead()]);
    if (leafIndex === undefined || leafIndex >= treeSize || treeSize > head.treeSize) return undefined;
    const hashes = await inclusionProof(leafIndex, treeSize, this.reader);
    return { leafIndex, treeSize, hashes: hashes.map(toHex) };
  }

  /** The inclusion proof of the leaf at `leafIndex` in the tree of `treeSize` leaves (the export knows its leaves' indices). */
  async inclusionProofAt(leafIndex: number, treeSize: number): Promise<InclusionProof> {
    const hashes = await inclusionProof(leafIndex, treeSize, this.reader);
    return { leafIndex, treeSize, hashes: hashes.map(toHex) };
  }

  async rootAt(treeSize: number): Promise<string> {
    const head = await this.treeHead();
    if (treeSize > head.treeSize) throw new MerkleTreeError(`the tree has ${head.treeSize} leaves, not ${treeSize}`);
    return treeSize === head.treeSize ? head.rootHash : toHex(await treeRoot(treeSize, this.reader));
  }

  async consistencyProof(from: number, to: number): Promise<ConsistencyProof> {
    const head = await this.treeHead();
    if (to > head.treeSize) throw new MerkleTreeError(`the tree has ${head.treeSize} leaves, not ${to}`);
    return { hashes: (await consistencyProof(from, to, this.reader)).map(toHex) };
  }

  async leaves(start: number, count: number): Promise<LogLeaf[]> {
    if (count <= 0) return [];
    const rows = await this.read<{ leaf: string }>(
      'SELECT leaf FROM transparency_log_leaves WHERE leaf_index >= ? AND leaf_index < ? ORDER BY leaf_index',
      [start, start + count],
    );
    return rows.map((r) => r.leaf);
  }

  /**
   * Stored node hashes, all in one query; a missing node is an error (the tree is incomplete).
   * `query` takes `?` placeholders (it converts them for PostgreSQL).
   */
  private nodeReader(query: (sql: string, params: unknown[]) => Promise<unknown[]>): NodeReader {
    return {
      readNodes: async (ids: readonly NodeId[]) => {
        const where = ids.map(() => '(level = ? AND node_index = ?)').join(' OR ');
        const sql = `SELECT level, node_index, hash FROM transparency_log_nodes WHERE ${where}`;
        const rows = (await query(sql, ids.flatMap((id) => [id.level, id.index]))) as { level: number | string; node_index: number | string; hash: string }[];
        const byId = new Map(rows.map((r) => [`${Number(r.level)}/${Number(r.node_index)}`, r.hash]));
        return ids.map(({ level, index }) => {
          const hash = fromHex(byId.get(`${level}/${index}`));
          if (hash?.length !== 32) throw new MerkleTreeError(`node ${level}/${index} of the transparency log is not stored`);
          return hash;
        });
      },
    };
  }

  private read<T>(sql: string, params: unknown[]): Promise<T[]> {
    return this.ds.query(this.pg ? toPg(sql) : sql, params) as Promise<T[]>;
  }
}

