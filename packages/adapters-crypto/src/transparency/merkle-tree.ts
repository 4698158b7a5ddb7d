/**
 * Proofs for a stored log (RFC 9162 §2.1.3.1 PATH and §2.1.4.1 PROOF), read from the hashes of
 * complete subtrees only. A complete subtree is addressed by (level, index): it covers leaves
 * index·2^level to (index+1)·2^level − 1, and never changes once its last leaf is appended, so a
 * store writes it once (see compact-range.ts) and may cache or tile it freely. A node of the RFC's
 * recursion that is not complete (on the tree's right edge) is folded from the complete subtrees
 * that make it up: every proof needs O(log n) complete nodes, fetched in one `readNodes` call.
 */
import { HASH_BYTES, rfc9162, type MerkleHasher } from './merkle-hasher.js';

/** A complete subtree: leaves [index·2^level, (index+1)·2^level). Level 0 nodes are leaf hashes. */
export interface NodeId {
  level: number;
  index: number;
}

/** Where proofs read node hashes from: returns one 32-byte hash per id, in the same order. */
export interface NodeReader {
  readNodes(ids: readonly NodeId[]): Promise<readonly Uint8Array[]>;
}

/**
 * One hash of a proof, as the complete subtrees it folds from, left to right: a single id for a
 * complete node; several for a node on the right edge, hashed right to left.
 */
export type ProofStep = readonly NodeId[];

/** Thrown for a size or index outside the tree, or a reader that returns something else than asked. */
export class MerkleTreeError extends RangeError {
  constructor(message: string) {
    super(message);
    this.name = 'MerkleTreeError';
  }
}

const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;

/** The largest power of two strictly below n (n ≥ 2): the RFC's split point k. */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/**
 * The complete subtrees covering leaves [start, end), largest first. Ranges of the RFC's
 * recursion start at a multiple of a power of two at least as large as they are, so each piece is
 * aligned.
 */
export function completeSubtrees(start: number, end: number): NodeId[] {
  const ids: NodeId[] = [];
  let at = start;
  let remaining = end - start;
  let size = 1;
  while (size * 2 <= remaining) size *= 2;
  for (let level = Math.log2(size); remaining > 0; level--, size /= 2) {
    if (remaining >= size) {
      ids.push({ level, index: at / size });
      at += size;
      remaining -= size;
    }
  }
  return ids;
}

/** Hashes of complete subtrees, left to right, folded into the root of the range they cover. */
export function foldRight(hashes: readonly Uint8Array[], hasher: MerkleHasher = rfc9162): Uint8Array {
  let root = hashes[hashes.length - 1]!;
  for (let i = hashes.length - 2; i >= 0; i--) root = hasher.node(hashes[i]!, root);
  return root;
}

/** What to read for the root of the tree of `treeSize` leaves (nothing for the empty tree). */
export function treeRootPlan(treeSize: number): ProofStep {
  if (!isCount(treeSize)) throw new MerkleTreeError(`tree size ${String(treeSize)} is not a non-negative safe integer`);
  return completeSubtrees(0, treeSize);
}

/** PATH(m, D[n]) of RFC 9162 §2.1.3.1, as steps from the leaf up to the root. */
export function inclusionProofPlan(leafIndex: number, treeSize: number): ProofStep[] {
  if (!isCount(treeSize) || !isCount(leafIndex) || leafIndex >= treeSize) {
    throw new MerkleTreeError(`leaf ${String(leafIndex)} is not in a tree of size ${String(treeSize)}`);
  }
  const rootFirst: ProofStep[] = [];
  let start = 0;
  let end = treeSize;
  while (end - start > 1) {
    const k = splitPoint(end - start);
    if (leafIndex - start < k) {
      rootFirst.push(completeSubtrees(start + k, end));
      end = start + k;
    } else {
      rootFirst.push(completeSubtrees(start, start + k));
      start += k;
    }
  }
  return rootFirst.reverse();
}

/** PROOF(m, D[n]) of RFC 9162 §2.1.4.1 for 0 < m ≤ n (empty when m = n). */
export function consistencyProofPlan(fromSize: number, toSize: number): ProofStep[] {
  if (!isCount(fromSize) || !isCount(toSize) || fromSize < 1 || fromSize > toSize) {
    throw new MerkleTreeError(`no consistency proof from size ${String(fromSize)} to size ${String(toSize)}`);
  }
  const rootFirst: ProofStep[] = [];
  let start = 0;
  let end = toSize;
  let m = fromSize;
  let complete = true; // the RFC's b: the subtree so far is the whole old tree
  while (m !== end - start) {
    const k = splitPoint(end - start);
    if (m <= k) {
      rootFirst.push(completeSubtrees(start + k, end));
      end = start + k;
    } else {
      rootFirst.push(completeSubtrees(start, start + k));
      start += k;
      m -= k;
      complete = false;
    }
  }
  if (!complete) rootFirst.push(completeSubtrees(start, end));
  return rootFirst.reverse();
}

/** Reads every node the steps need in one call and folds each step into its hash. */
export async function resolveSteps(steps: readonly ProofStep[], reader: NodeReader, hasher: MerkleHasher = rfc9162): Promise<Uint8Array[]> {
  const ids = steps.flat();
  const hashes = ids.length === 0 ? [] : await reader.readNodes(ids);
  if (hashes.length !== ids.length || hashes.some((h) => !(h instanceof Uint8Array) || h.length !== HASH_BYTES)) {
    throw new MerkleTreeError(`the node reader returned ${hashes.length} hash(es) for ${ids.length} node(s), or one of the wrong length`);
  }
  const out: Uint8Array[] = [];
  let at = 0;
  for (const step of steps) {
    out.push(foldRight(hashes.slice(at, at + step.length), hasher));
    at += step.length;
  }
  return out;
}

/** The root hash of the tree of `treeSize` leaves. */
export async function treeRoot(treeSize: number, reader: NodeReader, hasher: MerkleHasher = rfc9162): Promise<Uint8Array> {
  const plan = treeRootPlan(treeSize);
  if (plan.length === 0) return hasher.emptyRoot;
  const [root] = await resolveSteps([plan], reader, hasher);
  return root!;
}

/** The inclusion proof (audit path) of leaf `leafIndex` in the tree of `treeSize` leaves. */
export async function inclusionProof(leafIndex: number, treeSize: number, reader: NodeReader, hasher: MerkleHasher = rfc9162): Promise<Uint8Array[]> {
  return resolveSteps(inclusionProofPlan(leafIndex, treeSize), reader, hasher);
}

/** The consistency proof from the tree of `fromSize` leaves to the tree of `toSize` leaves. */
export async function consistencyProof(fromSize: number, toSize: number, reader: NodeReader, hasher: MerkleHasher = rfc9162): Promise<Uint8Array[]> {
  return resolveSteps(consistencyProofPlan(fromSize, toSize), reader, hasher);
}
