/**
 * What an auditor checks offline, with only the log's public keys (as note verifiers, e.g.
 * `jwksNoteVerifiers(jwks)`): that a leaf is in the tree a signed checkpoint commits to, and that
 * one signed checkpoint extends another. Pure and total: every problem is an error string naming
 * the field, nothing throws.
 */
import { equalBytes, fromHex, toHex } from './bytes.js';
import { openCheckpoint, type Checkpoint } from './checkpoint.js';
import { rfc9162, type MerkleHasher } from './merkle-hasher.js';
import { rootFromInclusionProof, verifyConsistency } from './merkle-verify.js';
import type { NoteVerifier } from './signed-note.js';

export type VerifiedCheckpoint = Checkpoint & { signedBy: string[] };

export type ProofCheck = { ok: true; checkpoint: VerifiedCheckpoint; errors: [] } | { ok: false; checkpoint?: VerifiedCheckpoint; errors: string[] };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const MAX_PROOF_HASHES = 128; // a path in a tree of 2^53 leaves is at most 53 hashes; consistency at most about twice that

/** A verified checkpoint, or the reason it is not one (`field: what`). */
export function checkSignedCheckpoint(note: unknown, verifiers: readonly NoteVerifier[], field = 'checkpoint'): { checkpoint: VerifiedCheckpoint } | { error: string } {
  if (typeof note !== 'string') return { error: `${field}: ${note === undefined ? 'missing' : 'not a signed note (text)'}` };
  try {
    return { checkpoint: openCheckpoint(note, verifiers) };
  } catch (e) {
    return { error: `${field}: ${(e as Error).message}` };
  }
}

/** Hex hashes of a proof as bytes, or undefined with a complaint naming `field`. */
export function parseHashList(value: unknown, field: string, errors: string[]): Uint8Array[] | undefined {
  if (!Array.isArray(value) || value.length > MAX_PROOF_HASHES) {
    errors.push(`${field}: ${value === undefined ? 'missing' : 'not a list of hashes'}`);
    return undefined;
  }
  const hashes = value.map((h) => fromHex(h));
  const bad = hashes.findIndex((h) => h?.length !== 32);
  if (bad >= 0) {
    errors.push(`${field}[${bad}]: not a lower-case hex SHA-256`);
    return undefined;
  }
  return hashes as Uint8Array[];
}

/**
 * Checks a transparency proof (`{ leafIndex, treeSize, hashes, checkpoint }`) for `leaf`, the leaf
 * input (32 bytes, or its hex): the checkpoint is signed by a trusted key, commits to a tree of
 * `treeSize` leaves, and the audit path leads from SHA-256(0x00 ‖ leaf) at `leafIndex` to its root.
 */
export function checkInclusion(
  leaf: Uint8Array | string,
  proof: unknown,
  verifiers: readonly NoteVerifier[],
  options: { field?: string; hasher?: MerkleHasher } = {},
): ProofCheck {
  const field = options.field ?? 'transparency';
  const hasher = options.hasher ?? rfc9162;
  if (!isObject(proof)) return { ok: false, errors: [`${field}: ${proof === undefined ? 'missing' : 'not an object'}`] };
  const errors: string[] = [];
  const leafInput = typeof leaf === 'string' ? fromHex(leaf) : leaf;
  if (leafInput?.length !== 32) errors.push(`${field}: the leaf is not a 32-byte hash`);
  const { leafIndex, treeSize } = proof;
  if (!Number.isSafeInteger(leafIndex) || (leafIndex as number) < 0) errors.push(`${field}.leafIndex: not a non-negative integer`);
  if (!Number.isSafeInteger(treeSize) || (treeSize as number) < 1) errors.push(`${field}.treeSize: not a positive integer`);
  const hashes = parseHashList(proof.hashes, `${field}.hashes`, errors);
  const opened = checkSignedCheckpoint(proof.checkpoint, verifiers, `${field}.checkpoint`);
  if ('error' in opened) return { ok: false, errors: [...errors, opened.error] };
  const { checkpoint } = opened;
  if (errors.length > 0 || !hashes || !leafInput) return { ok: false, checkpoint, errors };

  if (checkpoint.treeSize !== treeSize) {
    return { ok: false, checkpoint, errors: [`${field}.treeSize: ${String(treeSize)}, but the checkpoint is for size ${checkpoint.treeSize}`] };
  }
  const root = rootFromInclusionProof(leafIndex as number, treeSize, hasher.leaf(leafInput), hashes, hasher);
  if (!root || !equalBytes(root, checkpoint.rootHash)) {
    return { ok: false, checkpoint, errors: [`${field}.hashes: the inclusion proof does not lead to the checkpoint's root hash`] };
  }
  return { ok: true, checkpoint, errors: [] };
}

/**
 * Checks that the signed checkpoint `newer` extends the signed checkpoint `older` (same origin, not
 * smaller, consistent by the proof `hashes`). A first checkpoint of size 0 is extended by every
 * tree; equal sizes need equal roots.
 */
export function checkConsistency(
  older: unknown,
  newer: unknown,
  hashes: unknown,
  verifiers: readonly NoteVerifier[],
  options: { hasher?: MerkleHasher } = {},
): { ok: true; older: VerifiedCheckpoint; newer: VerifiedCheckpoint; errors: [] } | { ok: false; errors: string[] } {
  const hasher = options.hasher ?? rfc9162;
  const a = checkSignedCheckpoint(older, verifiers, 'older');
  const b = checkSignedCheckpoint(newer, verifiers, 'newer');
  if ('error' in a || 'error' in b) return { ok: false, errors: [a, b].flatMap((r) => ('error' in r ? [r.error] : [])) };
  const [from, to] = [a.checkpoint, b.checkpoint];
  const errors: string[] = [];
  const proof = parseHashList(hashes, 'hashes', errors);
  if (!proof) return { ok: false, errors };
  if (from.origin !== to.origin) return { ok: false, errors: [`newer: origin ${JSON.stringify(to.origin)} differs from ${JSON.stringify(from.origin)}`] };
  if (to.treeSize < from.treeSize) return { ok: false, errors: [`newer: tree size ${to.treeSize} is smaller than ${from.treeSize} (a rollback)`] };
  const consistent =
    from.treeSize === 0
      ? proof.length === 0 && equalBytes(from.rootHash, hasher.emptyRoot)
      : verifyConsistency(from.treeSize, to.treeSize, from.rootHash, to.rootHash, proof, hasher);
  if (!consistent) {
    return {
      ok: false,
      errors: [`hashes: the tree of size ${to.treeSize} (root ${toHex(to.rootHash)}) does not extend the tree of size ${from.treeSize} (root ${toHex(from.rootHash)})`],
    };
  }
  return { ok: true, older: from, newer: to, errors: [] };
}
