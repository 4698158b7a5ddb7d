import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';

/** SHA-256 of a byte string. Injectable so a browser or a test can bring its own. */
export type Sha256 = (data: Uint8Array) => Uint8Array;

/** RFC 9162 §2.1.1 hashing: leaves and interior nodes are domain-separated by a prefix byte. */
export interface MerkleHasher {
  /** SHA-256(0x00 ‖ leaf input). */
  leaf(input: Uint8Array): Uint8Array;
  /** SHA-256(0x01 ‖ left ‖ right). */
  node(left: Uint8Array, right: Uint8Array): Uint8Array;
  /** The root of the empty tree: SHA-256 of the empty string. */
  readonly emptyRoot: Uint8Array;
  readonly sha256: Sha256;
}

export const HASH_BYTES = 32;

export function merkleHasher(sha256: Sha256): MerkleHasher {
  return {
    sha256,
    emptyRoot: sha256(new Uint8Array(0)),
    leaf(input) {
      const data = new Uint8Array(1 + input.length);
      data.set(input, 1);
      return sha256(data);
    },
    node(left, right) {
      const data = new Uint8Array(1 + left.length + right.length);
      data[0] = 1;
      data.set(left, 1);
      data.set(right, 1 + left.length);
      return sha256(data);
    },
  };
}

/** @noble/hashes SHA-256: pure JS, so the same code verifies proofs in Node and in a browser. */
export const rfc9162: MerkleHasher = merkleHasher(nobleSha256);
