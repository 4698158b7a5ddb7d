/**
 * C2SP tlog-checkpoint (https://c2sp.org/tlog-checkpoint): the text of a signed note made of the
 * log's origin, its tree size in decimal and its base64 root hash, one per line, then optional
 * non-empty extension lines (this service writes none).
 */
import { fromBase64, toBase64 } from './bytes.js';
import { HASH_BYTES } from './merkle-hasher.js';
import { NoteError, openSignedNote, type NoteVerifier } from './signed-note.js';

export interface Checkpoint {
  origin: string;
  treeSize: number;
  rootHash: Uint8Array;
  /** Lines after the root, opaque (not auditable by monitors: C2SP recommends against them). */
  extensions: string[];
}

export class CheckpointError extends NoteError {
  constructor(message: string) {
    super(message);
    this.name = 'CheckpointError';
  }
}

const SIZE = /^(0|[1-9][0-9]*)$/;
const CONTROL = /[\u0000-\u001f]/;

/** The checkpoint's note text: `<origin>\n<tree size>\n<base64 root>\n`. */
export function formatCheckpoint(checkpoint: Pick<Checkpoint, 'origin' | 'treeSize' | 'rootHash'>): string {
  const { origin, treeSize, rootHash } = checkpoint;
  if (typeof origin !== 'string' || origin.length === 0 || CONTROL.test(origin)) throw new CheckpointError('the origin must be one non-empty line');
  if (!Number.isSafeInteger(treeSize) || treeSize < 0) throw new CheckpointError('the tree size must be a non-negative safe integer');
  if (!(rootHash instanceof Uint8Array) || rootHash.length !== HASH_BYTES) throw new CheckpointError('the root hash must be 32 bytes');
  return `${origin}\n${treeSize}\n${toBase64(rootHash)}\n`;
}

/** Parses a checkpoint's note text (not the signed note: see `openCheckpoint`). */
export function parseCheckpoint(text: string): Checkpoint {
  if (typeof text !== 'string' || !text.endsWith('\n')) throw new CheckpointError('a checkpoint ends with a newline');
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3) throw new CheckpointError('a checkpoint has an origin, a tree size and a root hash line');
  const [origin, size, root, ...extensions] = lines as [string, string, string, ...string[]];
  if (origin.length === 0) throw new CheckpointError('the origin line is empty');
  const treeSize = SIZE.test(size) ? Number(size) : NaN;
  if (!Number.isSafeInteger(treeSize)) throw new CheckpointError('the tree size is not a decimal number without leading zeros (up to 2^53 - 1)');
  const rootHash = fromBase64(root);
  if (!rootHash || rootHash.length !== HASH_BYTES) throw new CheckpointError('the root hash is not the standard base64 of 32 bytes');
  if (extensions.some((line) => line.length === 0)) throw new CheckpointError('an extension line is empty');
  return { origin, treeSize, rootHash, extensions };
}

/**
 * Verifies a signed checkpoint with trusted keys and parses it: a signature by one of `verifiers`
 * must verify (C2SP signed-note rules), and the text must be a checkpoint, of `origin` when given.
 * Throws NoteError/CheckpointError saying what is wrong.
 */
export function openCheckpoint(
  note: string,
  verifiers: readonly NoteVerifier[],
  expected: { origin?: string } = {},
): Checkpoint & { signedBy: string[] } {
  const { text, verifiedBy } = openSignedNote(note, verifiers);
  const checkpoint = parseCheckpoint(text);
  if (expected.origin !== undefined && checkpoint.origin !== expected.origin) {
    throw new CheckpointError(`the checkpoint is for origin ${JSON.stringify(checkpoint.origin)}, not ${JSON.stringify(expected.origin)}`);
  }
  return { ...checkpoint, signedBy: verifiedBy };
}
