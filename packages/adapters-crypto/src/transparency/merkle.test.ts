import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { appendToCompactRange, compactRangeRoot, EMPTY_RANGE, type CompactRange, type StoredNode } from './compact-range.js';
import { fromBase64, fromHex, toHex } from './bytes.js';
import { merkleHasher, rfc9162 } from './merkle-hasher.js';
import { consistencyProof, inclusionProof, MerkleTreeError, treeRoot, treeRootPlan, type NodeId, type NodeReader } from './merkle-tree.js';
import { rootFromInclusionProof, verifyConsistency, verifyInclusion } from './merkle-verify.js';

// Test vectors copied (data only) from transparency-dev/merkle: see `source` in the file.
interface Vectors {
  leafInputs: string[];
  nodeHashes: string[][];
  rootHashes: string[];
  // `proof` is null where the Go source had a nil slice.
  inclusion: { file: string; leafIdx: number; treeSize: number; root: string; leafHash: string; proof: string[] | null; wantErr: boolean }[];
  consistency: { file: string; size1: number; size2: number; root1: string; root2: string; proof: string[] | null; wantErr: boolean }[];
}
const vectors = JSON.parse(readFileSync(new URL('./testdata/transparency-dev-merkle.json', import.meta.url), 'utf8')) as Vectors;
const b64 = (s: string): Uint8Array => fromBase64(s) ?? new Uint8Array(Buffer.from(s, 'base64'));

// ---- an independent reference: RFC 9162 §2.1.1, §2.1.3.1, §2.1.4.1 as written, over node:crypto ----

const sha = (...parts: Uint8Array[]): Uint8Array => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
};
const k = (n: number): number => 2 ** Math.ceil(Math.log2(n) - 1); // largest power of two < n, n > 1

/** MTH over D[start:end], memoized by range so that a tree of thousands of leaves stays quick. */
class ReferenceTree {
  readonly #memo = new Map<string, Uint8Array>();
  constructor(readonly leaves: readonly Uint8Array[]) {}

  mth(start = 0, end = this.leaves.length): Uint8Array {
    const n = end - start;
    if (n === 0) return sha();
    if (n === 1) return sha(Uint8Array.of(0), this.leaves[start]!);
    const key = `${start}:${end}`;
    let h = this.#memo.get(key);
    if (!h) {
      const split = start + k(n);
      h = sha(Uint8Array.of(1), this.mth(start, split), this.mth(split, end));
      this.#memo.set(key, h);
    }
    return h;
  }

  /** PATH(m, D[start:end]). */
  path(m: number, start = 0, end = this.leaves.length): Uint8Array[] {
    const n = end - start;
    if (n === 1) return [];
    const split = k(n);
    return m < split
      ? [...this.path(m, start, start + split), this.mth(start + split, end)]
      : [...this.path(m - split, start + split, end), this.mth(start, start + split)];
  }

  /** PROOF(m, D[n]) = SUBPROOF(m, D[n], true). */
  proof(m: number, n = this.leaves.length): Uint8Array[] {
    const sub = (mm: number, start: number, end: number, b: boolean): Uint8Array[] => {
      const size = end - start;
      if (mm === size) return b ? [] : [this.mth(start, end)];
      const split = k(size);
      return mm <= split
        ? [...sub(mm, start, start + split, b), this.mth(start + split, end)]
        : [...sub(mm - split, start + split, end, false), this.mth(start, start + split)];
    };
    return sub(m, 0, n, true);
  }
}

/** A stored tree as a store keeps it: the appender's nodes in a map, read through a counting NodeReader. */
function storedTree(leafInputs: readonly Uint8Array[], batches: number[] = [leafInputs.length]) {
  const nodes = new Map<string, Uint8Array>();
  const written: StoredNode[] = [];
  let range: CompactRange = EMPTY_RANGE;
  let at = 0;
  for (const size of batches) {
    const batch = leafInputs.slice(at, at + size).map((input) => rfc9162.leaf(input));
    at += size;
    const result = appendToCompactRange(range, batch);
    range = result.range;
    for (const node of result.nodes) {
      nodes.set(`${node.level}/${node.index}`, node.hash);
      written.push(node);
    }
    expect(toHex(result.root)).toBe(toHex(compactRangeRoot(range)));
  }
  expect(nodes.size).toBe(written.length); // each complete subtree is written once
  let reads = 0;
  let calls = 0;
  const reader: NodeReader = {
    readNodes: async (ids: readonly NodeId[]) => {
      calls += 1;
      reads += ids.length;
      return ids.map(({ level, index }) => {
        const hash = nodes.get(`${level}/${index}`);
        if (!hash) throw new Error(`node ${level}/${index} was never written`);
        return hash;
      });
    },
  };
  return { range, nodes, written, reader, stats: () => ({ reads, calls }), reset: () => ((reads = 0), (calls = 0)) };
}

const hex = (list: readonly Uint8Array[]): string[] => list.map(toHex);
const randomLeaves = (n: number, seed: number): Uint8Array[] =>
  Array.from({ length: n }, (_, i) => sha(Uint8Array.of(seed & 0xff, (seed >> 8) & 0xff), new Uint8Array(new Uint32Array([i]).buffer)));

describe('Merkle tree: transparency-dev/merkle test vectors (RFC 6962 hashing)', () => {
  const inputs = vectors.leafInputs.map((h) => fromHex(h)!);

  it('computes the root of every tree size 0 to 8', async () => {
    const { reader } = storedTree(inputs);
    for (let size = 0; size <= inputs.length; size++) {
      expect(toHex(await treeRoot(size, reader))).toBe(vectors.rootHashes[size]);
      expect(toHex(compactRangeRoot(storedTree(inputs.slice(0, size)).range))).toBe(vectors.rootHashes[size]);
    }
  });

  it('stores exactly the complete subtrees of the vectors (level, index)', () => {
    const { nodes } = storedTree(inputs, [3, 1, 4]);
    const expected = vectors.nodeHashes.flatMap((level, l) => level.map((h, i) => [`${l}/${i}`, h] as const));
    expect([...nodes.entries()].map(([key, h]) => [key, toHex(h)]).sort()).toEqual([...expected].sort());
  });

  it.each(vectors.inclusion.map((p) => [p.file, p] as const))('inclusion probe %s', (_file, p) => {
    const ok = verifyInclusion(p.leafIdx, p.treeSize, b64(p.leafHash), (p.proof ?? []).map(b64), b64(p.root));
    expect(ok).toBe(!p.wantErr);
  });

  it.each(vectors.consistency.map((p) => [p.file, p] as const))('consistency probe %s', (_file, p) => {
    const ok = verifyConsistency(p.size1, p.size2, b64(p.root1), b64(p.root2), (p.proof ?? []).map(b64));
    expect(ok).toBe(!p.wantErr);
  });

  it('generates the happy-path proofs of the probes from stored nodes', async () => {
    const { reader } = storedTree(inputs);
    for (const p of vectors.inclusion.filter((q) => !q.wantErr && q.treeSize <= inputs.length)) {
      expect(hex(await inclusionProof(p.leafIdx, p.treeSize, reader))).toEqual((p.proof ?? []).map((h) => toHex(b64(h))));
    }
    for (const p of vectors.consistency.filter((q) => !q.wantErr && q.size1 > 0 && q.size2 <= inputs.length)) {
      expect(hex(await consistencyProof(p.size1, p.size2, reader))).toEqual((p.proof ?? []).map((h) => toHex(b64(h))));
    }
  });
});

describe('Merkle tree: against the reference implementation of the RFC definitions', () => {
  it('roots, inclusion and consistency proofs match for random sizes, indices and batchings', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3000 }),
        fc.nat(),
        fc.nat(),
        fc.array(fc.integer({ min: 1, max: 700 }), { maxLength: 6 }),
        async (n, i, j, cuts) => {
          const leaves = randomLeaves(n, n ^ i);
          const ref = new ReferenceTree(leaves);
          const batches = [...cuts.filter((c) => c < n), n].reduce<number[]>((acc, end) => {
            const start = acc.reduce((s, x) => s + x, 0);
            return end > start ? [...acc, end - start] : acc;
          }, []);
          const { reader, range, written } = storedTree(leaves, batches);

          expect(toHex(compactRangeRoot(range))).toBe(toHex(ref.mth()));
          expect(written.length).toBeLessThan(2 * n); // O(1) amortized nodes per leaf

          const m = (i % n) + 1; // a prefix size 1..n
          const index = j % m;
          const path = await inclusionProof(index, m, reader);
          expect(hex(path)).toEqual(hex(ref.path(index, 0, m)));
          expect(verifyInclusion(index, m, rfc9162.leaf(leaves[index]!), path, ref.mth(0, m))).toBe(true);

          const proof = await consistencyProof(m, n, reader);
          expect(hex(proof)).toEqual(hex(ref.proof(m)));
          expect(verifyConsistency(m, n, ref.mth(0, m), ref.mth(), proof)).toBe(true);
          expect(toHex(await treeRoot(m, reader))).toBe(toHex(ref.mth(0, m)));
        },
      ),
      { numRuns: 40 },
    );
  });

  it('a proof reads O(log n) stored nodes, in one call', async () => {
    const n = 5000;
    const { reader, stats, reset } = storedTree(randomLeaves(n, 7), [1234, 1, 3765]);
    for (const [index, size] of [[0, n], [n - 1, n], [2047, 4097], [4095, 4999]] as const) {
      reset();
      await inclusionProof(index, size, reader);
      expect(stats()).toEqual({ calls: 1, reads: expect.any(Number) });
      expect(stats().reads).toBeLessThanOrEqual(2 * Math.ceil(Math.log2(size)));
      reset();
      await consistencyProof(index + 1, size, reader);
      expect(stats().reads).toBeLessThanOrEqual(2 * Math.ceil(Math.log2(size)) + 1);
    }
  });

  it('a border rebuilt from stored nodes continues the tree identically', async () => {
    const leaves = randomLeaves(300, 3);
    const whole = storedTree(leaves);
    const head = storedTree(leaves.slice(0, 123));
    const ids = treeRootPlan(123);
    const border = await head.reader.readNodes(ids);
    const rest = appendToCompactRange({ size: 123, border }, leaves.slice(123).map((l) => rfc9162.leaf(l)));
    expect(toHex(rest.root)).toBe(toHex(compactRangeRoot(whole.range)));
  });
});

describe('Merkle tree: tampering and bad input', () => {
  const leaves = randomLeaves(77, 11);
  const ref = new ReferenceTree(leaves);

  it('rejects every single-bit change, dropped, added or reordered hash of an inclusion proof', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 76 }), fc.nat(), fc.nat(), (index, which, bit) => {
        const path = ref.path(index);
        const root = ref.mth();
        const leaf = rfc9162.leaf(leaves[index]!);
        expect(verifyInclusion(index, 77, leaf, path, root)).toBe(true);
        const flipped = path.map((h) => Uint8Array.from(h));
        flipped[which % path.length]![bit % 32]! ^= 1 << (bit % 8);
        expect(verifyInclusion(index, 77, leaf, flipped, root)).toBe(false);
        expect(verifyInclusion(index, 77, leaf, path.slice(1), root)).toBe(false);
        expect(verifyInclusion(index, 77, leaf, [...path, root], root)).toBe(false);
        if (path.length > 1) expect(verifyInclusion(index, 77, leaf, [path[1]!, path[0]!, ...path.slice(2)], root)).toBe(false);
        expect(verifyInclusion((index + 1) % 77, 77, leaf, path, root)).toBe(false);
        // (A size with a path of the same shape gives the same root: the signed checkpoint binds the size.)
        expect(verifyInclusion(index, 1000, leaf, path, root)).toBe(false);
        expect(verifyInclusion(index, 77, rfc9162.leaf(leaves[(index + 1) % 77]!), path, root)).toBe(false);
        // A leaf hash passed as an interior node (second-preimage attempt) is not a leaf.
        expect(verifyInclusion(index, 77, leaves[index]!, path, root)).toBe(false);
      }),
      { numRuns: 100 },
    );
  });

  it('rejects a tampered consistency proof, swapped roots and wrong sizes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 76 }), fc.nat(), fc.nat(), (m, which, bit) => {
        const proof = ref.proof(m);
        const [r1, r2] = [ref.mth(0, m), ref.mth()];
        expect(verifyConsistency(m, 77, r1, r2, proof)).toBe(true);
        const flipped = proof.map((h) => Uint8Array.from(h));
        flipped[which % proof.length]![bit % 32]! ^= 1 << (bit % 8);
        expect(verifyConsistency(m, 77, r1, r2, flipped)).toBe(false);
        expect(verifyConsistency(m, 77, r2, r1, proof)).toBe(false);
        expect(verifyConsistency(m, 77, r1, r2, proof.slice(0, -1))).toBe(false);
        expect(verifyConsistency(m, 77, r1, r2, [...proof, r1])).toBe(false);
        expect(verifyConsistency(m + 1, 77, r1, r2, proof)).toBe(false);
        expect(verifyConsistency(m, 1000, r1, r2, proof)).toBe(false);
        expect(verifyConsistency(77, m, r2, r1, proof)).toBe(false);
      }),
      { numRuns: 100 },
    );
  });

  it('refuses sizes and indices outside the tree, and non-integers, without throwing in verification', async () => {
    const { reader } = storedTree(leaves);
    await expect(inclusionProof(77, 77, reader)).rejects.toThrow(MerkleTreeError);
    await expect(inclusionProof(0, 0, reader)).rejects.toThrow(MerkleTreeError);
    await expect(consistencyProof(0, 5, reader)).rejects.toThrow(MerkleTreeError);
    await expect(consistencyProof(6, 5, reader)).rejects.toThrow(MerkleTreeError);
    await expect(treeRoot(-1, reader)).rejects.toThrow(MerkleTreeError);
    for (const bad of [-1, 0.5, NaN, Infinity, 2 ** 53]) {
      expect(rootFromInclusionProof(bad, 77, rfc9162.leaf(leaves[0]!), [])).toBeUndefined();
      expect(verifyConsistency(bad, 77, ref.mth(), ref.mth(), [])).toBe(false);
    }
    expect(() => appendToCompactRange({ size: 3, border: [] }, [])).toThrow(MerkleTreeError);
    expect(() => appendToCompactRange(EMPTY_RANGE, [new Uint8Array(31)])).toThrow(MerkleTreeError);
  });

  it('takes an injected SHA-256 (what a browser build would pass)', () => {
    const hasher = merkleHasher((data) => sha(data));
    const { range } = storedTree(leaves);
    expect(toHex(compactRangeRoot(range, hasher))).toBe(toHex(ref.mth()));
    expect(toHex(hasher.emptyRoot)).toBe(vectors.rootHashes[0]);
  });
});
