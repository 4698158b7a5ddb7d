/**
 * Appending to a stored tree. The tree's right border (its compact range [0, size)) is the list of
 * complete subtrees that cover every leaf, one per set bit of the size, largest first: enough to
 * compute the root and to append, so the group commit of a batch reads one row (the border) and
 * writes each new leaf hash and each complete subtree the batch finishes (2 nodes per leaf,
 * amortized). Pure: no I/O, the store persists what comes back in the records' transaction.
 */
import { HASH_BYTES, rfc9162, type MerkleHasher } from './merkle-hasher.js';
import { completeSubtrees, foldRight, MerkleTreeError, type NodeId } from './merkle-tree.js';

export interface CompactRange {
  /** Number of leaves. */
  size: number;
  /** Hashes of the complete subtrees covering [0, size), largest (leftmost) first. */
  border: readonly Uint8Array[];
}

/** A node hash to store: a leaf hash (level 0) or a complete subtree this batch finished. */
export interface StoredNode extends NodeId {
  hash: Uint8Array;
}

export const EMPTY_RANGE: CompactRange = Object.freeze({ size: 0, border: Object.freeze([]) as readonly Uint8Array[] });

/** The root hash of the tree the range covers. */
export function compactRangeRoot(range: CompactRange, hasher: MerkleHasher = rfc9162): Uint8Array {
  checkRange(range);
  return range.size === 0 ? hasher.emptyRoot : foldRight(range.border, hasher);
}

/**
 * Appends leaf hashes (each SHA-256(0x00 ‖ leaf input), see `MerkleHasher.leaf`) in order. Returns
 * the new range, its root, and the nodes to store: every new leaf hash and every complete
 * subtree the batch finishes, each exactly once.
 */
export function appendToCompactRange(
  range: CompactRange,
  leafHashes: readonly Uint8Array[],
  hasher: MerkleHasher = rfc9162,
): { range: CompactRange; root: Uint8Array; nodes: StoredNode[] } {
  checkRange(range);
  if (!Number.isSafeInteger(range.size + leafHashes.length)) throw new MerkleTreeError('the tree would outgrow a safe integer size');
  const border = [...range.border];
  const nodes: StoredNode[] = [];
  let size = range.size;
  for (const leafHash of leafHashes) {
    if (!(leafHash instanceof Uint8Array) || leafHash.length !== HASH_BYTES) throw new MerkleTreeError('a leaf hash is not 32 bytes');
    let hash = leafHash;
    let level = 0;
    let index = size;
    nodes.push({ level, index, hash });
    // A right child completes its parent: the left sibling is the border's last subtree.
    while (index % 2 === 1) {
      hash = hasher.node(border.pop()!, hash);
      level += 1;
      index = (index - 1) / 2;
      nodes.push({ level, index, hash });
    }
    border.push(hash);
    size += 1;
  }
  const next: CompactRange = { size, border };
  return { range: next, root: compactRangeRoot(next, hasher), nodes };
}

function checkRange(range: CompactRange): void {
  const expected = Number.isSafeInteger(range.size) && range.size >= 0 ? completeSubtrees(0, range.size).length : -1;
  if (expected !== range.border.length || range.border.some((h) => !(h instanceof Uint8Array) || h.length !== HASH_BYTES)) {
    throw new MerkleTreeError(`a border for size ${String(range.size)} must hold ${expected} hash(es) of 32 bytes`);
  }
}
