/**
 * Proof verification exactly as RFC 9162 §2.1.3.2 (inclusion) and §2.1.4.2 (consistency) state
 * it, step for step (fn, sn, r / fr, sr). Sizes are JS numbers up to 2^53 − 1, so shifts are
 * divisions: the bitwise operators would truncate to 32 bits. Pure; nothing here throws on odd
 * input: a proof that does not hold is `undefined` or `false`.
 */
import { equalBytes } from './bytes.js';
import { HASH_BYTES, rfc9162, type MerkleHasher } from './merkle-hasher.js';

const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
const isHash = (h: unknown): h is Uint8Array => h instanceof Uint8Array && h.length === HASH_BYTES;
const odd = (n: number): boolean => n % 2 === 1;
const half = (n: number): number => Math.floor(n / 2);

function isPowerOfTwo(n: number): boolean {
  let p = 1;
  while (p < n) p *= 2;
  return p === n;
}

/**
 * The root an inclusion proof leads to from `leafHash` (SHA-256(0x00 ‖ leaf input)) at
 * `leafIndex` in a tree of `treeSize`, or undefined when the proof cannot be one for that
 * position (wrong length, index outside the tree, a hash not 32 bytes).
 */
export function rootFromInclusionProof(
  leafIndex: number,
  treeSize: number,
  leafHash: Uint8Array,
  proof: readonly Uint8Array[],
  hasher: MerkleHasher = rfc9162,
): Uint8Array | undefined {
  if (!isCount(leafIndex) || !isCount(treeSize) || leafIndex >= treeSize || !isHash(leafHash)) return undefined;
  let fn = leafIndex;
  let sn = treeSize - 1;
  let r = leafHash;
  for (const p of proof) {
    if (!isHash(p) || sn === 0) return undefined;
    if (odd(fn) || fn === sn) {
      r = hasher.node(p, r);
      while (!odd(fn) && fn !== 0) {
        fn = half(fn);
        sn = half(sn);
      }
    } else {
      r = hasher.node(r, p);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 ? r : undefined;
}

/** RFC 9162 §2.1.3.2: the leaf is at `leafIndex` in the tree of `treeSize` whose root is `rootHash`. */
export function verifyInclusion(
  leafIndex: number,
  treeSize: number,
  leafHash: Uint8Array,
  proof: readonly Uint8Array[],
  rootHash: Uint8Array,
  hasher: MerkleHasher = rfc9162,
): boolean {
  const root = rootFromInclusionProof(leafIndex, treeSize, leafHash, proof, hasher);
  return root !== undefined && equalBytes(root, rootHash);
}

/**
 * RFC 9162 §2.1.4.2: the tree of `secondSize` with root `secondHash` extends the tree of
 * `firstSize` with root `firstHash`. Equal sizes need an empty proof and equal roots. A first
 * size of 0 is refused: every tree extends the empty one, so there is nothing to prove (a monitor
 * that saw the empty tree only checks that its root was the empty root).
 */
export function verifyConsistency(
  firstSize: number,
  secondSize: number,
  firstHash: Uint8Array,
  secondHash: Uint8Array,
  proof: readonly Uint8Array[],
  hasher: MerkleHasher = rfc9162,
): boolean {
  if (!isCount(firstSize) || !isCount(secondSize) || firstSize === 0 || firstSize > secondSize) return false;
  if (firstSize === secondSize) return proof.length === 0 && equalBytes(firstHash, secondHash);
  if (proof.length === 0 || !proof.every(isHash) || !isHash(firstHash)) return false;

  // 2. When the first tree is a complete subtree, its root is the first node of the path.
  const path = isPowerOfTwo(firstSize) ? [firstHash, ...proof] : proof;
  let fn = firstSize - 1;
  let sn = secondSize - 1;
  while (odd(fn)) {
    fn = half(fn);
    sn = half(sn);
  }
  let fr = path[0]!;
  let sr = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      fr = hasher.node(c, fr);
      sr = hasher.node(c, sr);
      while (!odd(fn) && fn !== 0) {
        fn = half(fn);
        sn = half(sn);
      }
    } else {
      sr = hasher.node(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 && equalBytes(fr, firstHash) && equalBytes(sr, secondHash);
}
