import {
  canonicalHasher,
  checkConsistency,
  checkInclusion,
  checkSignedCheckpoint,
  noteVerifiersFromJwks,
  unwrapServedRecord,
  verifyOfflineWith,
  type JwksLike,
  type OfflineReport,
  type ProofCheck,
  type VerifiedCheckpoint,
  type VerifyCrypto,
} from '@ets/adapters-crypto/portable';

export type { JwksLike, OfflineCheck, OfflineRecordKind, OfflineReport, ProofCheck, VerifiedCheckpoint } from '@ets/adapters-crypto/portable';

export interface RecordReport extends OfflineReport {
  /** The member of a served response the record was taken from (`trustRecord`, `intent`, …), when it was wrapped. */
  from?: string;
}

export interface VerifyRecordOptions {
  /** An inclusion proof of the record itself (`{ leafIndex, treeSize, hashes, checkpoint }`); default: a wrapper's `transparency`. */
  transparency?: unknown;
}

/** An inclusion proof as a Receipt carries it; from the log's routes, `{ ...GET /log/proof/inclusion, checkpoint: GET /log/checkpoint }`. */
export interface InclusionProof {
  leafIndex: number;
  treeSize: number;
  hashes: string[];
  /** The signed note of the tree of `treeSize` leaves. */
  checkpoint: string;
}

export type ConsistencyCheck = { ok: true; older: VerifiedCheckpoint; newer: VerifiedCheckpoint; errors: [] } | { ok: false; errors: string[] };
export type CheckpointCheck = { ok: true; checkpoint: VerifiedCheckpoint; errors: [] } | { ok: false; errors: string[] };

/** What an auditor checks offline, with only the service's JWKS; every function is total and never throws. */
export interface OfflineVerifier {
  verifyRecord(value: unknown, jwks: JwksLike, options?: VerifyRecordOptions): RecordReport;
  logLeafOf(record: unknown): string;
  verifyLogInclusion(leaf: string, proof: unknown, jwks: JwksLike): ProofCheck;
  verifyLogCheckpoint(note: unknown, jwks: JwksLike): CheckpointCheck;
  verifyLogConsistency(older: unknown, newer: unknown, hashes: unknown, jwks: JwksLike): ConsistencyCheck;
}

/**
 * The offline verifier of `ets verify` (packages/adapters-crypto, offline/verify-offline.ts) over
 * the given primitives: Node's in the Node build, @noble's in the browser build.
 */
export function offlineVerifier(crypto: VerifyCrypto): OfflineVerifier {
  const hasher = canonicalHasher(crypto.sha256);
  const notes = (jwks: JwksLike) => noteVerifiersFromJwks(jwks, (publicKey, message, signature) => crypto.ed25519(publicKey)(message, signature));
  return {
    verifyRecord(value, jwks, options = {}) {
      const { record, from, transparency } = unwrapServedRecord(value);
      const report = verifyOfflineWith(crypto, record, jwks, { transparency: options.transparency ?? transparency });
      return from === undefined ? report : { ...report, from };
    },
    logLeafOf: (record) => hasher.contentHash(record),
    verifyLogInclusion: (leaf, proof, jwks) => checkInclusion(leaf, proof, notes(jwks)),
    verifyLogCheckpoint(note, jwks) {
      const opened = checkSignedCheckpoint(note, notes(jwks));
      return 'error' in opened ? { ok: false, errors: [opened.error] } : { ok: true, checkpoint: opened.checkpoint, errors: [] };
    },
    verifyLogConsistency: (older, newer, hashes, jwks) => checkConsistency(older, newer, hashes, notes(jwks)),
  };
}
