import type { ConsistencyProof, InclusionProof, LogCheckpoint, LogLeaf, TreeHead } from './records.js';

/**
 * Reading the log and keeping its checkpoints (CONTRACT "Transparency log" routes). Proofs are
 * computed from stored node hashes of complete subtrees (`inclusionProof`/`consistencyProof` of
 * adapters-crypto over a `NodeReader`): O(log n) reads each.
 *
 * Appending is not a port: a leaf must be written in the very transaction that stores its signed
 * record, so each store appends inside its own transaction (adapters-persistence `appendToLog`,
 * with `appendToCompactRange` of adapters-crypto: the head row keeps the tree's right border, and
 * each commit writes the O(1) amortized new nodes). The log never lags the records and never holds
 * a leaf without its record.
 */
export interface TransparencyLog {
  /** The current tree: every leaf committed so far (possibly ahead of the latest checkpoint). */
  treeHead(): Promise<TreeHead>;

  /** The newest saved checkpoint, or undefined before the first one. */
  latestCheckpoint(): Promise<LogCheckpoint | undefined>;

  /** The saved checkpoint of exactly that size (history), or undefined. */
  checkpointAt(treeSize: number): Promise<LogCheckpoint | undefined>;

  /**
   * Keeps a newly signed checkpoint in the history. Checkpoints only grow: one smaller than the
   * latest, or one whose root differs from the tree's root at its size, is refused (throws), as
   * C2SP tlog-checkpoint forbids signing two inconsistent checkpoints.
   */
  saveCheckpoint(checkpoint: LogCheckpoint): Promise<void>;

  /** Index of a leaf (the first occurrence), or undefined when it is not in the tree. */
  leafIndex(leaf: LogLeaf): Promise<number | undefined>;

  /** Inclusion of `leaf` in the tree of `treeSize` leaves; undefined when it is not among them. */
  inclusionProof(leaf: LogLeaf, treeSize: number): Promise<InclusionProof | undefined>;

  /** The root (lower-case hex) of the tree of the first `treeSize` leaves (treeSize ≤ tree size). */
  rootAt(treeSize: number): Promise<string>;

  /** Consistency of the tree of `from` leaves with the tree of `to` leaves (0 < from ≤ to ≤ tree size). */
  consistencyProof(from: number, to: number): Promise<ConsistencyProof>;

  /** Leaf inputs `start` to `start + count - 1` (fewer at the end of the tree). */
  leaves(start: number, count: number): Promise<LogLeaf[]>;
}

/**
 * Signs a tree head as a C2SP checkpoint with the service's active Ed25519 key (the note's key
 * name is the key's JWKS `kid`). Implemented in adapters-crypto over the `Signer` port.
 */
export interface CheckpointSigner {
  /** The log's origin, the first line of every checkpoint it signs (SVC_LOG_ORIGIN). */
  readonly origin: string;
  sign(head: TreeHead): Promise<LogCheckpoint>;
}

/**
 * The latest checkpoint of each origin that this instance has published (signed, or handed out
 * from the store), kept where a restore of the database does not roll it back: a file of the
 * instance's data dir, written and synced before the checkpoint is stored and served. C2SP
 * tlog-checkpoint: a log must never sign two inconsistent checkpoints; after a restore from a
 * backup the stored tree no longer extends what was published, and this record is how the
 * service knows.
 */
export interface PublishedCheckpoints {
  /** Where it is kept, for the operator (a path). */
  readonly location: string;
  /** The latest one kept for `origin`, if any. */
  latest(origin: string): Promise<LogCheckpoint | undefined>;
  /** Keeps `checkpoint` if it is larger than the one kept for its origin; durable on return. */
  remember(checkpoint: LogCheckpoint): Promise<void>;
}
