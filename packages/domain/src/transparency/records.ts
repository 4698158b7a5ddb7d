import type { Hasher } from '../ports/crypto.js';

/**
 * The transparency log (CONTRACT "Transparency log"): one append-only Merkle tree per deployment
 * over every signed record, hashed as RFC 9162 §2.1. Hashes here are lower-case hex, as
 * everywhere else in the records; the signed note of a checkpoint carries the root in base64 as
 * C2SP tlog-checkpoint requires.
 */

/** A leaf input: the 32 bytes of H(C(signed record)), in lower-case hex. */
export type LogLeaf = string;

/** The leaf input of a signed record. It equals a Verification's or Receipt's `trustRecordHash` for a Trust Record. */
export function logLeafOf(hasher: Pick<Hasher, 'contentHash'>, signedRecord: object): LogLeaf {
  return hasher.contentHash(signedRecord);
}

/** The tree at one size: its number of leaves and its root (MTH, RFC 9162 §2.1.1). */
export interface TreeHead {
  treeSize: number;
  /** Lower-case hex root hash; the SHA-256 of the empty string for the empty tree. */
  rootHash: string;
}

/**
 * A signed checkpoint (C2SP tlog-checkpoint, a C2SP signed note): what `GET /log/checkpoint`
 * serves as `note`, with its parts for the service's own use.
 */
export interface LogCheckpoint extends TreeHead {
  /** The log's identity, first line of the note. */
  origin: string;
  /** `keyId` (JWKS `kid`) of the Ed25519 key that signed; it is the note's key name. */
  keyId: string;
  /** The whole signed note, exactly as published: `<origin>\n<size>\n<base64 root>\n\n— <kid> <sig>\n`. */
  note: string;
}

/** `GET /log/proof/inclusion` (RFC 9162 §2.1.3): the audit path of one leaf in a tree of `treeSize`. */
export interface InclusionProof {
  leafIndex: number;
  treeSize: number;
  /** Lower-case hex node hashes, leaf to root. */
  hashes: string[];
}

/** `GET /log/proof/consistency` (RFC 9162 §2.1.4): the tree of size `to` extends the one of size `from`. */
export interface ConsistencyProof {
  hashes: string[];
}

/**
 * An inclusion proof together with the signed checkpoint it is proved against, as it travels
 * with evidence: a Receipt's `transparency` member proves the inclusion of its Trust Record (the
 * leaf is the Receipt's `trustRecordHash`); a record served or exported with a `transparency`
 * member beside it (`{ "<record kind>": {…}, "transparency": {…} }`) is proved itself, its leaf
 * being H(C(the record)). Anyone checks it with only the JWKS: the checkpoint's signature, that its
 * tree size is `treeSize`, and that the path leads from the leaf to its root.
 */
export interface TransparencyProof extends InclusionProof {
  /** The C2SP signed note of the checkpoint (`LogCheckpoint.note`). */
  checkpoint: string;
}
