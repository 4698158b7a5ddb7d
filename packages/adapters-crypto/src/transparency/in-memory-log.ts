import type { ConsistencyProof, InclusionProof, LogCheckpoint, LogLeaf, TransparencyLog, TreeHead } from '@ets/domain';
import { fromHex, toHex } from './bytes.js';
import { appendToCompactRange, compactRangeRoot, EMPTY_RANGE, type CompactRange } from './compact-range.js';
import { rfc9162, type MerkleHasher } from './merkle-hasher.js';
import { consistencyProof, inclusionProof, MerkleTreeError, treeRoot, type NodeId, type NodeReader } from './merkle-tree.js';

/**
 * The transparency log port over memory, with `append`: the reference for a store's
 * implementation (same append arithmetic, same node reads), and the log behind tests and monitors'
 * test servers. Not durable.
 */
export class InMemoryTransparencyLog implements TransparencyLog {
  readonly #leaves: LogLeaf[] = [];
  readonly #indexOf = new Map<LogLeaf, number>();
  readonly #nodes = new Map<string, Uint8Array>();
  readonly #checkpoints: LogCheckpoint[] = [];
  readonly #reader: NodeReader;
  #range: CompactRange = EMPTY_RANGE;

  constructor(private readonly hasher: MerkleHasher = rfc9162) {
    this.#reader = {
      readNodes: async (ids: readonly NodeId[]) =>
        ids.map(({ level, index }) => {
          const hash = this.#nodes.get(`${level}/${index}`);
          if (!hash) throw new MerkleTreeError(`node ${level}/${index} is not stored`);
          return hash;
        }),
    };
  }

  /** Node hashes of complete subtrees, for code that proves from storage (e.g. a test server). */
  get nodeReader(): NodeReader {
    return this.#reader;
  }

  async append(leaves: readonly LogLeaf[]): Promise<{ firstIndex: number; head: TreeHead }> {
    const inputs = leaves.map((leaf) => {
      const bytes = fromHex(leaf);
      if (bytes?.length !== 32) throw new MerkleTreeError('a leaf is the lower-case hex of 32 bytes');
      return bytes;
    });
    const firstIndex = this.#leaves.length;
    const { range, root, nodes } = appendToCompactRange(this.#range, inputs.map((i) => this.hasher.leaf(i)), this.hasher);
    for (const node of nodes) this.#nodes.set(`${node.level}/${node.index}`, node.hash);
    leaves.forEach((leaf, i) => {
      this.#leaves.push(leaf);
      if (!this.#indexOf.has(leaf)) this.#indexOf.set(leaf, firstIndex + i);
    });
    this.#range = range;
    return { firstIndex, head: { treeSize: range.size, rootHash: toHex(root) } };
  }

  async treeHead(): Promise<TreeHead> {
    return { treeSize: this.#range.size, rootHash: toHex(compactRangeRoot(this.#range, this.hasher)) };
  }

  async latestCheckpoint(): Promise<LogCheckpoint | undefined> {
    return this.#checkpoints[this.#checkpoints.length - 1];
  }

  async checkpointAt(treeSize: number): Promise<LogCheckpoint | undefined> {
    return this.#checkpoints.find((c) => c.treeSize === treeSize);
  }

  async saveCheckpoint(checkpoint: LogCheckpoint): Promise<void> {
    const latest = await this.latestCheckpoint();
    if (checkpoint.treeSize > this.#range.size || (latest && checkpoint.treeSize < latest.treeSize)) {
      throw new MerkleTreeError(`a checkpoint of size ${checkpoint.treeSize} does not fit a tree of ${this.#range.size} leaves after one of ${latest?.treeSize ?? 0}`);
    }
    const root = toHex(await treeRoot(checkpoint.treeSize, this.#reader, this.hasher));
    if (root !== checkpoint.rootHash) throw new MerkleTreeError(`the checkpoint's root is not the tree's root at size ${checkpoint.treeSize}`);
    if (latest?.treeSize !== checkpoint.treeSize) this.#checkpoints.push(checkpoint);
  }

  async leafIndex(leaf: LogLeaf): Promise<number | undefined> {
    return this.#indexOf.get(leaf);
  }

  async inclusionProof(leaf: LogLeaf, treeSize: number): Promise<InclusionProof | undefined> {
    const leafIndex = this.#indexOf.get(leaf);
    if (leafIndex === undefined || leafIndex >= treeSize || treeSize > this.#range.size) return undefined;
    const hashes = await inclusionProof(leafIndex, treeSize, this.#reader, this.hasher);
    return { leafIndex, treeSize, hashes: hashes.map(toHex) };
  }

  async rootAt(treeSize: number): Promise<string> {
    if (treeSize > this.#range.size) throw new MerkleTreeError(`the tree has ${this.#range.size} leaves, not ${treeSize}`);
    return toHex(await treeRoot(treeSize, this.#reader, this.hasher));
  }

  async consistencyProof(from: number, to: number): Promise<ConsistencyProof> {
    if (to > this.#range.size) throw new MerkleTreeError(`the tree has ${this.#range.size} leaves, not ${to}`);
    return { hashes: (await consistencyProof(from, to, this.#reader, this.hasher)).map(toHex) };
  }

  async leaves(start: number, count: number): Promise<LogLeaf[]> {
    return this.#leaves.slice(start, start + count);
  }
}
