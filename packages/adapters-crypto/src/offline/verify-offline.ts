/**
 * Offline verification of anything this service signs (spec 1.4, 2.3, 2.4, 2.9, 4.3.13, 9.5):
 * a pure function of a record and a key set. No server, no database, no network, so the CLI
 * `ets verify`, the demo and any third party run exactly the same checks. The cryptographic
 * primitives are a parameter (`VerifyCrypto`) and nothing here uses a Node API, so the same
 * checks run in a browser (the client library) with @noble's primitives.
 *
 * What each kind is checked for:
 *
 * | kind                   | checks                                                                   |
 * |------------------------|--------------------------------------------------------------------------|
 * | execution-trust-record | signature (+ pqSignature), fields, businessTransactionHash, resultHash,   |
 * |                        | executionChain (spec 4.3.13; chainHash recomputes, chainSignature verifies), |
 * |                        | sourceProofs (when it holds Trusted Signals)                              |
 * | refusal-record         | signature (+ pqSignature), fields, consistency (decision, reason, rule),  |
 * |                        | sourceProofs (when it holds Trusted Signals)                              |
 * | execution-intent       | signature (+ pqSignature), fields, noParameters (spec 2.4)                 |
 * | audit-event            | signature (+ pqSignature), fields                                         |
 * | verification           | signature (+ pqSignature), fields, consistency (VERIFIED = no failed check) |
 * | receipt                | signature (+ pqSignature), fields, and transparency when it carries one    |
 * | attestation            | signature (Ed25519 by `signerKeyId` over the canonical JSON without `signature`), fields, |
 * |                        | identity (executionId, execution_fingerprint recompute), manifestSignature (over manifestHash) |
 * | attestation-simple     | signature (Ed25519 over C({executionId, decision, execution_state, runtimeHash}) by an |
 * |                        | Ed25519 key of the key set: the answer names none), fields, consistency (`status` ok, |
 * |                        | `requires_override` = `decision.requires_override`: both outside the signature) |
 * | override-resolution    | signature (+ pqSignature), fields, fingerprint (execution_fingerprint recomputes) |
 * | runtime-manifest       | signature (`manifestSignature`: Ed25519 by `manifest.signerKeyId` over the hex `manifestHash`), |
 * |                        | fields, manifestHash (= H(C(manifest))), releaseManifestHash (recomputes from the release fields), |
 * |                        | contents (runtimeHash = H(C(runtimeContents)), evaluatorHash = H(C(evaluatorContents)), when listed) |
 * | confirmation-proof     | signature (compact JWS, EdDSA by the header's `kid` over `header.payload`), header (`alg`, `kid`, |
 * |                        | `typ` ets-execution-confirmation+jwt), fields (the claims `POST /confirm-execution` signs) |
 *
 * A runtime manifest is the `{manifest, manifestHash, manifestSignature}` signed at every start
 * (spec 9.4); a confirmation proof is the compact JWS `POST /confirm-execution` answers, a JSON
 * string. Both are leaves of the transparency log like every other record.
 *
 * Transparency log (CONTRACT "Transparency log"): a Receipt's `transparency` member proves its
 * Trust Record (leaf = `trustRecordHash`) is in the tree of a signed checkpoint (check
 * `transparency`); a proof passed beside any record (`options.transparency`, e.g. the
 * `transparency` member of a response or export wrapping the record) proves the record itself
 * (leaf = H(C(record)), check `inclusion`). Both need only the JWKS: the checkpoint's note
 * signature is made by a JWKS key named by its `kid`.
 *
 * `valid` is true only when every check passed. Optional fields added after a record was first
 * signed (`assessment`, `policyContentHash`, `tenantId`) are checked only when present, so older
 * records still verify (spec 9.5). The function never throws: a malformed record is a failed
 * check naming what is wrong.
 */
import {
  attestationIdentityProblems,
  attestationShapeProblems,
  checkExecutionChain,
  CONFIRMATION_PROOF_TYPE,
  evaluatorHashOf,
  releaseManifestHashOf,
  resolutionFingerprintOf,
  runtimeHashOf,
  simpleStatementOf,
  simpleStatementShapeProblems,
  transactionHash,
  type Hasher,
  type OverrideResolution,
  type ReleaseContext,
  type EvaluatorContents,
  type ReleaseManifest,
  type RuntimeContents,
  type SimpleStatement,
} from '@ets/domain';
import { canonicalHasher } from '../canonical-hasher.js';
import { canonicalize } from '../canonical-json.js';
import { sourceProofStatement, verifySourceProofWith } from '../source-proof-check.js';
import type { JwksLike } from '../jwk.js';
import { JwksSignatureVerifier } from '../offline-verifier.js';
import { checkInclusion } from '../transparency/log-proofs.js';
import { fromBase64Url, toBase64 } from '../transparency/bytes.js';
import { noteVerifiersFromJwks } from '../transparency/note-keys.js';
import type { NoteVerifier } from '../transparency/signed-note.js';
import type { VerifyCrypto } from '../verify-crypto.js';
import * as f from './fields.js';

export const OFFLINE_RECORD_KINDS = [
  'execution-trust-record',
  'refusal-record',
  'execution-intent',
  'audit-event',
  'verification',
  'receipt',
  'attestation',
  'attestation-simple',
  'override-resolution',
  'runtime-manifest',
  'confirmation-proof',
  'unknown',
] as const;
export type OfflineRecordKind = (typeof OFFLINE_RECORD_KINDS)[number];

export interface OfflineCheck {
  /** Stable name: `kind`, `signature`, `pqSignature`, `fields`, `executionChain`, `businessTransactionHash`, `resultHash`, `noParameters`, `consistency`, `transparency`, `inclusion`. */
  name: string;
  ok: boolean;
  /** Why it failed; on success, sometimes what was checked (the key used, "no executions"). */
  detail?: string;
}

export interface OfflineReport {
  kind: OfflineRecordKind;
  /** True only when every check passed. */
  valid: boolean;
  checks: OfflineCheck[];
}

/** `recordType` values of the records this service signs. */
const RECORD_TYPES: Readonly<Record<string, OfflineRecordKind>> = {
  'execution-trust-record': 'execution-trust-record',
  'refusal-record': 'refusal-record',
  'execution-intent': 'execution-intent',
  verification: 'verification',
  receipt: 'receipt',
  'override-resolution': 'override-resolution',
};

const hasOwn = (o: Record<string, unknown>, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k) && o[k] !== undefined;

/** A compact JWS: three base64url parts (the service's confirmation proofs, served as a JSON string). */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * What a JSON value is: by `recordType` for the records of this service, by `kind` for audit
 * events, by `executionId` with `execution_fingerprint` or `signerKeyId` for an
 * ExecutionAttestation (spec 2.9), by `executionId` with `runtimeHash`, `execution_state` and
 * `signature` (and neither of those two) for the answer of attestation-simple's `POST /execute`
 * or the statement its `POST /verify` takes (spec 4.2), by `manifest` with `manifestHash` (and no `executionId`) for a
 * signed runtime manifest (spec 9.4), and a string that is a compact JWS for a confirmation proof.
 */
export function detectKind(value: unknown): OfflineRecordKind {
  if (typeof value === 'string') return COMPACT_JWS.test(value) ? 'confirmation-proof' : 'unknown';
  if (!f.isObject(value)) return 'unknown';
  if (hasOwn(value, 'recordType')) {
    const type = value.recordType;
    return typeof type === 'string' && Object.prototype.hasOwnProperty.call(RECORD_TYPES, type) ? RECORD_TYPES[type]! : 'unknown';
  }
  if (value.kind === 'caller-authentication' || value.kind === 'governance') return 'audit-event';
  if (hasOwn(value, 'executionId') && (hasOwn(value, 'execution_fingerprint') || hasOwn(value, 'signerKeyId'))) return 'attestation';
  if (hasOwn(value, 'executionId') && hasOwn(value, 'runtimeHash') && hasOwn(value, 'execution_state') && hasOwn(value, 'signature')) return 'attestation-simple';
  if (!hasOwn(value, 'executionId') && f.isObject(value.manifest) && hasOwn(value, 'manifestHash')) return 'runtime-manifest';
  return 'unknown';
}

export interface OfflineOptions {
  /** A transparency proof (`{ leafIndex, treeSize, hashes, checkpoint }`) of the record itself, served or exported beside it. */
  transparency?: unknown;
  /**
   * The note verifiers of the JWKS's Ed25519 keys, for a caller that checks many records against
   * one JWKS (an export) and builds them once; else they are made from the JWKS for each record.
   */
  notes?: readonly NoteVerifier[];
}

/**
 * Verifies one signed object against a JWKS (a file's content or `/.well-known/jwks.json`), with
 * the primitives of `crypto` (Node's in `ets verify`, @noble's in a browser: offline/node.ts).
 */
export function verifyOfflineWith(crypto: VerifyCrypto, record: unknown, jwks: JwksLike, options: OfflineOptions = {}): OfflineReport {
  const kind = detectKind(record);
  if (kind === 'unknown') {
    return { kind, valid: false, checks: [{ name: 'kind', ok: false, detail: unknownKindDetail(record) }] };
  }
  // A confirmation proof is checked as its decoded parts; its leaf is still H(C(the JWS string)).
  const r = kind === 'confirmation-proof' ? openJws(record as string) : (record as Record<string, unknown>);
  const v = verifying(jwks, crypto, options.notes);
  const checks: OfflineCheck[] = signatureChecks(kind, r, v);
  for (const [name, run] of CHECKS[kind]) checks.push(guarded(name, () => run(r, v)));
  if (trustedSignalsOf(r).length > 0) checks.push(guarded('sourceProofs', () => sourceProofs(r, v)));
  if (kind === 'receipt' && hasOwn(r, 'transparency')) {
    checks.push(guarded('transparency', () => logInclusion('the Trust Record', r.trustRecordHash, r.transparency, v)));
  }
  if (options.transparency !== undefined) {
    checks.push(guarded('inclusion', () => logInclusion('the record', v.hasher.contentHash(record), options.transparency, v)));
  }
  return { kind, valid: checks.every((c) => c.ok), checks };
}

/** What the checks verify with: the key set, and hashes and signatures by the caller's primitives. */
interface Verifying {
  jwks: JwksLike;
  hasher: Hasher;
  signatures: JwksSignatureVerifier;
  crypto: VerifyCrypto;
  notes?: readonly NoteVerifier[];
}

function verifying(jwks: JwksLike, crypto: VerifyCrypto, notes: readonly NoteVerifier[] | undefined): Verifying {
  // A function, so that a JWKS without a `keys` list (untrusted input) is taken as a key set that has no keys.
  const v: Verifying = { jwks, crypto, hasher: canonicalHasher(crypto.sha256), signatures: new JwksSignatureVerifier(() => jwks, crypto) };
  if (notes) v.notes = notes;
  return v;
}

/** The leaf (hex leaf input) is in the tree of the proof's signed checkpoint. */
function logInclusion(what: string, leaf: unknown, proof: unknown, v: Verifying): Outcome {
  if (typeof leaf !== 'string' || !/^[0-9a-f]{64}$/.test(leaf)) return { errors: [`${what}'s leaf hash is not a lower-case hex SHA-256`] };
  const notes = v.notes ?? noteVerifiersFromJwks(v.jwks, (publicKey, message, signature) => v.crypto.ed25519(publicKey)(message, signature));
  const result = checkInclusion(leaf, proof, notes);
  if (!result.ok) return { errors: result.errors };
  const { origin, treeSize, signedBy } = result.checkpoint;
  return { errors: [], note: `${what} is leaf ${String((proof as { leafIndex: number }).leafIndex)} of ${treeSize} in the checkpoint of ${origin} signed by ${signedBy.join(', ')}` };
}

function unknownKindDetail(value: unknown): string {
  if (Array.isArray(value)) return 'a list, not one signed object';
  if (typeof value === 'string') return 'a string that is not a compact JWS (confirmation proof)';
  if (!f.isObject(value)) return 'not a JSON object';
  if (hasOwn(value, 'recordType')) return `unknown recordType ${JSON.stringify(value.recordType)}`;
  return 'not a record this service signs (no recordType, audit event kind, attestation executionId, or runtime manifest)';
}

/** A check's outcome: the complaints (none = passed) and, on success, an optional note. */
type Outcome = { errors: string[]; note?: string };
type CheckFn = (record: Record<string, unknown>, v: Verifying) => Outcome;

function guarded(name: string, run: () => Outcome): OfflineCheck {
  let outcome: Outcome;
  try {
    outcome = run();
  } catch {
    outcome = { errors: ['cannot be checked: the record is malformed'] };
  }
  if (outcome.errors.length > 0) return { name, ok: false, detail: outcome.errors.join('; ') };
  return outcome.note === undefined ? { name, ok: true } : { name, ok: true, detail: outcome.note };
}

// ---- signatures ----------------------------------------------------------------------------

/** How each kind is signed. */
function signatureChecks(kind: Exclude<OfflineRecordKind, 'unknown'>, r: Record<string, unknown>, v: Verifying): OfflineCheck[] {
  switch (kind) {
    case 'attestation':
      return [attestationSignature(r, v)];
    case 'attestation-simple':
      return [guarded('signature', () => simpleStatementSignature(r, v))];
    case 'runtime-manifest':
      return [guarded('signature', () => manifestSignatureBy(r.manifestHash, r.manifestSignature, f.isObject(r.manifest) ? r.manifest.signerKeyId : undefined, v))];
    case 'confirmation-proof':
      return [guarded('signature', () => jwsSignature(r, v))];
    default:
      return recordSignatures(r, v);
  }
}

/** CONTRACT "Signed records": `signature` by `keyId`, and in hybrid mode `pqSignature` by `pqKeyId`. */
function recordSignatures(record: Record<string, unknown>, v: Verifying): OfflineCheck[] {
  const result = v.signatures.verify(record);
  const isPq = (e: string) => /^pq(KeyId|Signature):/.test(e);
  const edErrors = result.errors.filter((e) => !isPq(e));
  const checks: OfflineCheck[] = [
    edErrors.length > 0
      ? { name: 'signature', ok: false, detail: edErrors.join('; ') }
      : { name: 'signature', ok: true, detail: `Ed25519, key ${String(record.keyId)}` },
  ];
  if (hasOwn(record, 'pqKeyId') || hasOwn(record, 'pqSignature')) {
    const pqErrors = result.errors.filter(isPq);
    // The hybrid signature covers the same bytes; if they cannot be canonicalized it fails too.
    if (result.errors.some((e) => e.startsWith('record:'))) pqErrors.push('record: cannot be canonicalized (RFC 8785)');
    checks.push(
      pqErrors.length > 0
        ? { name: 'pqSignature', ok: false, detail: pqErrors.join('; ') }
        : { name: 'pqSignature', ok: true, detail: `ML-DSA-65, key ${String(record.pqKeyId)}` },
    );
  }
  return checks;
}

/** Spec 2.9: base64 Ed25519 over the canonical JSON of the attestation without `signature`, key `signerKeyId`. */
function attestationSignature(record: Record<string, unknown>, v: Verifying): OfflineCheck {
  return guarded('signature', () => {
    // Object rest copies own data properties, so an own `__proto__` key stays covered.
    const { signature, ...unsigned } = record;
    let text: string;
    try {
      text = canonicalize(unsigned);
    } catch {
      return { errors: ['record: cannot be canonicalized (RFC 8785)'] };
    }
    const result = v.signatures.verifyText(text, { keyId: record.signerKeyId as string, signature: signature as string });
    return {
      errors: result.errors.map((e) => e.replace(/^keyId:/, 'signerKeyId:')),
      note: `Ed25519, key ${String(record.signerKeyId)}`,
    };
  });
}

/**
 * Spec 4.2, the simple variant: base64 Ed25519 over C({executionId, decision, execution_state,
 * runtimeHash}). The answer names no key (its shape is fixed, and `POST /verify` takes exactly
 * those fields), so every Ed25519 key of the key set is tried; the note names the one that verifies.
 */
function simpleStatementSignature(record: Record<string, unknown>, v: Verifying): Outcome {
  if (typeof record.signature !== 'string') return { errors: ['signature: not a string'] };
  let text: string;
  try {
    text = canonicalize(simpleStatementOf(record as unknown as SimpleStatement));
  } catch {
    return { errors: ['statement: cannot be canonicalized (RFC 8785)'] };
  }
  const kids = (Array.isArray(v.jwks.keys) ? v.jwks.keys : []).flatMap((k) => (f.isObject(k) && k.kty === 'OKP' && k.crv === 'Ed25519' && typeof k.kid === 'string' ? [k.kid] : []));
  for (const kid of kids) {
    if (v.signatures.verifyText(text, { keyId: kid, signature: record.signature }).valid) return { errors: [], note: `Ed25519, key ${kid}` };
  }
  return { errors: [`signature: does not verify over C({executionId, decision, execution_state, runtimeHash}) with any of the ${kids.length} Ed25519 keys of the key set`] };
}

/** The answer's members outside the signature say what the signed statement says. */
const simpleAnswerConsistency: CheckFn = (record) => {
  const errors: string[] = [];
  if (hasOwn(record, 'status') && record.status !== 'ok') errors.push(`status: ${JSON.stringify(record.status)}, not "ok"`);
  if (hasOwn(record, 'requires_override') && (!f.isObject(record.decision) || record.requires_override !== record.decision.requires_override)) {
    errors.push('requires_override: not the signed decision.requires_override');
  }
  return { errors };
};

// ---- Trusted Signals --------------------------------------------------------------------------

const trustedSignalsOf = (r: Record<string, unknown>): unknown[] => {
  const signals = (r.assessment as { businessValidation?: { sourcedSignals?: unknown } } | undefined)?.businessValidation?.sourcedSignals;
  return Array.isArray(signals) ? signals : [];
};

/**
 * Each Trusted Signal whose source signs (`sourceProofVerified: true`): `sourceProof` verifies with
 * the key its `sourceKeyId` carries (`ed25519:<base64url key>`) over C({fact, subject, value,
 * validUntil, nonce}), so a changed value, subject or expiry fails. A signal of a source trusted by
 * TLS alone has no proof to check, and says so.
 */
function sourceProofs(r: Record<string, unknown>, v: Verifying): Outcome {
  const errors: string[] = [];
  let proved = 0;
  let tlsOnly = 0;
  trustedSignalsOf(r).forEach((s, i) => {
    if (!f.isObject(s)) return;
    if (s.sourceProofVerified !== true) {
      tlsOnly++;
      return;
    }
    if (verifySourceProofWith(v.crypto, s.sourceKeyId, sourceProofStatement(s as Parameters<typeof sourceProofStatement>[0]), s.sourceProof)) proved++;
    else errors.push(`assessment.businessValidation.sourcedSignals[${i}] (${String(s.signal)}): the source's proof does not verify with ${String(s.sourceKeyId)}`);
  });
  return { errors, note: `${proved} signed by their source${tlsOnly > 0 ? `, ${tlsOnly} trusted by TLS alone (no proof)` : ''}` };
}

// ---- shapes ----------------------------------------------------------------------------------

const decision = f.object({
  action: f.oneOf('approve', 'reject'),
  reason: f.text,
  requires_override: f.bool,
  matchedRuleId: f.optional(f.nullable(f.text)),
});

const checkStatus = f.oneOf('VERIFIED', 'NOT_REQUIRED', 'FAILED');
const trustedSignal = f.object({
  signal: f.id,
  source: f.id,
  fact: f.id,
  validUntil: f.text,
  nonce: f.id,
  sourceKeyId: f.nullable(f.id),
  sourceProof: f.nullable(f.id),
  sourceProofVerified: f.bool,
  fetchedAt: f.time,
});
const assessment = f.optional(
  f.object({
    authority: f.object({ status: checkStatus, callerId: f.id, principalId: f.id, grant: f.nullable(f.anyObject) }),
    businessValidation: f.object({ status: checkStatus, sourcedSignals: f.listOf(trustedSignal) }),
    execution: f.object({ status: f.oneOf('EXECUTED', 'NOT_RELEASED', 'REFUSED') }),
  }),
);

const execution = f.object({
  executionId: f.id,
  connector: f.id,
  action: f.id,
  status: f.id,
  releasedAt: f.time,
  completedAt: f.time,
  resultHash: f.hex64,
  // chain fields: the executionChain check
});

const SHAPES: Readonly<Record<Exclude<OfflineRecordKind, 'unknown' | 'audit-event' | 'attestation' | 'attestation-simple' | 'runtime-manifest' | 'confirmation-proof'>, f.Shape>> = {
  'execution-trust-record': {
    businessTransactionId: f.id,
    businessTransactionHash: f.hex64,
    callerId: f.id,
    transaction: f.object({
      businessTransactionId: f.id,
      metadata: f.object({ tenantId: f.optional(f.text) }),
      authority: f.object({ principalId: f.id, authorityId: f.text }),
      authorization: f.object({ authorityId: f.text }),
      intent: f.object({ action: f.id, parameters: f.anyObject }),
      policy: f.object({ name: f.id, version: f.id, contentHash: f.hex64 }),
      signals: f.optional(f.anyObject),
    }),
    decision,
    assessment,
    executions: f.listOf(execution),
    recordedAt: f.time,
  },
  'refusal-record': {
    businessTransactionId: f.id,
    businessTransactionHash: f.hex64,
    callerId: f.id,
    principalId: f.id,
    action: f.id,
    policy: f.object({ name: f.id, version: f.id }),
    policyContentHash: f.optional(f.hex64),
    decision,
    matchedRuleId: f.nullable(f.text),
    reason: f.text,
    assessment,
    refusedAt: f.time,
  },
  'execution-intent': {
    businessTransactionId: f.id,
    businessTransactionHash: f.hex64,
    action: f.id,
    connector: f.id,
    callerId: f.id,
    principalId: f.id,
    tenantId: f.optional(f.text),
    policy: f.object({ name: f.id, version: f.id, contentHash: f.hex64 }),
    decision,
    preparedAt: f.time,
  },
  verification: {
    verificationId: f.id,
    businessTransactionId: f.id,
    status: f.oneOf('VERIFIED', 'FAILED'),
    checks: (v, path, errors) => {
      if (!f.isObject(v) || Object.keys(v).length === 0) {
        errors.push(`${path}: ${v === undefined ? 'missing' : 'not an object of checks'}`);
        return;
      }
      for (const [name, c] of Object.entries(v)) {
        f.object({ status: f.oneOf('PASSED', 'FAILED', 'NOT_APPLICABLE'), errors: f.listOf(f.text) })(c, `${path}.${name}`, errors);
      }
    },
    trustRecordHash: f.hex64,
    verifiedAt: f.time,
  },
  receipt: {
    receiptId: f.id,
    businessTransactionId: f.id,
    verificationId: f.id,
    trustRecordHash: f.hex64,
    decision: f.object({ action: f.oneOf('approve', 'reject'), reason: f.text, requires_override: f.bool }),
    executionStatus: f.id,
    issuedAt: f.time,
    transparency: f.optional(f.object({ leafIndex: f.count, treeSize: f.count, hashes: f.listOf(f.hex64), checkpoint: f.text })),
  },
  'override-resolution': {
    overrideId: f.id,
    executionId: f.hex64,
    status: f.oneOf('executed', 'rejected'),
    approved: f.bool,
    approvedBy: f.id,
    approverRole: f.id,
    reason: f.text,
    decidedBy: f.id,
    previousFingerprint: f.hex64,
    execution_fingerprint: f.hex64,
    resolvedAt: f.time,
  },
};

const AUDIT_SHAPES: Readonly<Record<string, f.Shape>> = {
  'caller-authentication': {
    eventId: f.id,
    callerId: f.nullable(f.id),
    route: f.text,
    method: f.id,
    outcome: f.oneOf('SUCCESS', 'FAILURE'),
    occurredAt: f.time,
  },
  governance: {
    eventId: f.id,
    callerId: f.id,
    action: f.oneOf('propose', 'approve', 'reject'),
    subjectType: f.id,
    subjectId: f.id,
    summary: f.text,
    occurredAt: f.time,
  },
};

const fieldsOf =
  (shape: f.Shape): CheckFn =>
  (record) => {
    const errors: string[] = [];
    f.checkShape(record, shape, '', errors);
    return { errors };
  };

// ---- execution trust record ---------------------------------------------------------------

const CHAIN_FIELDS = ['chainHash', 'chainSignature', 'previousChainHash'] as const;

/**
 * Spec 4.3.13 and CONTRACT "Execution chain", by the domain's own check (the one `POST /verify`
 * runs): every execution carries all or none of the chain fields (`previousChainHash: null` counts
 * as carried: the deployment's first execution); none after a chained one; a chained execution's
 * `chainHash` recomputes from `previousChainHash` and the execution's canonical digest
 * (`executionDigest`, `chainHashOf`), and `chainSignature` verifies over `chainHash` with the
 * record's `keyId`. That `previousChainHash` is the deployment's previous execution needs the
 * previous record; one record shows only its own links.
 */
const executionChain: CheckFn = (record, v) => {
  const result = checkExecutionChain(record, v.hasher, v.signatures);
  if (result.status === 'FAILED') return { errors: result.errors.length > 0 ? result.errors : ['does not verify'] };
  if (result.status === 'NOT_APPLICABLE') return { errors: [], note: 'no executions (nothing was released)' };
  const chained = (record.executions as unknown[]).filter((e) => f.isObject(e) && CHAIN_FIELDS.some((k) => hasOwn(e, k))).length;
  return {
    errors: [],
    note: chained === 0 ? 'no chained executions (written before the chain existed)' : `${chained} chained execution(s) recompute and verify`,
  };
};

/** `businessTransactionHash` recomputes from `transaction` (the five objects, the signals and the id). */
const businessTransactionHash: CheckFn = (record, { hasher }) => {
  const tx = record.transaction;
  if (!f.isObject(tx)) return { errors: ['transaction: not an object'] };
  const errors: string[] = [];
  if (tx.businessTransactionId !== record.businessTransactionId) {
    errors.push('transaction.businessTransactionId: differs from businessTransactionId');
  }
  let expected: string | undefined;
  try {
    expected = transactionHash(hasher, tx as unknown as ReleaseContext['transaction']);
  } catch {
    errors.push('transaction: cannot be canonicalized (RFC 8785)');
  }
  if (expected !== undefined && expected !== record.businessTransactionHash) {
    errors.push('businessTransactionHash: does not recompute from transaction');
  }
  return { errors };
};

/** Each execution's `resultHash` is the SHA-256 of its canonical `result`. */
const resultHash: CheckFn = (record, { hasher }) => {
  const executions = record.executions;
  if (!Array.isArray(executions)) return { errors: ['executions: not a list'] };
  if (executions.length === 0) return { errors: [], note: 'no executions' };
  const errors: string[] = [];
  executions.forEach((entry: unknown, i) => {
    if (!f.isObject(entry)) return; // reported by fields
    let expected: string | undefined;
    try {
      expected = hasher.contentHash(entry.result ?? null);
    } catch {
      errors.push(`executions[${i}].result: cannot be canonicalized (RFC 8785)`);
    }
    if (expected !== undefined && expected !== entry.resultHash) errors.push(`executions[${i}].resultHash: does not recompute from result`);
  });
  return { errors };
};

// ---- other kinds ------------------------------------------------------------------------------

/** Spec 2.4: an intent holds only facts that exist before release, never the parameters. */
const noParameters: CheckFn = (record) => {
  const found: string[] = [];
  const walk = (v: unknown, path: string, depth: number) => {
    if (depth > 64) return;
    if (Array.isArray(v)) v.forEach((x: unknown, i) => walk(x, `${path}[${i}]`, depth + 1));
    else if (f.isObject(v)) {
      for (const k of Object.keys(v)) {
        const at = path ? `${path}.${k}` : k;
        if (k === 'parameters') found.push(at);
        walk(v[k], at, depth + 1);
      }
    }
  };
  walk(record, '', 0);
  return { errors: found.map((p) => `${p}: an Execution Intent must not carry the intent parameters (they are bound by businessTransactionHash)`) };
};

/** A refusal repeats its decision's reason and rule; its decision is a rejection. */
const refusalConsistency: CheckFn = (record) => {
  const d = record.decision;
  if (!f.isObject(d)) return { errors: ['decision: not an object'] };
  const errors: string[] = [];
  if (d.action !== 'reject') errors.push('decision.action: a Refusal Record must record a rejection');
  if (record.reason !== d.reason) errors.push('reason: differs from decision.reason');
  if (hasOwn(d, 'matchedRuleId') && record.matchedRuleId !== d.matchedRuleId) errors.push('matchedRuleId: differs from decision.matchedRuleId');
  return { errors };
};

/** A Verification is VERIFIED only when none of its checks failed. */
const verificationConsistency: CheckFn = (record) => {
  const checks = record.checks;
  if (!f.isObject(checks)) return { errors: ['checks: not an object'] };
  const failedChecks = Object.entries(checks)
    .filter(([, c]) => f.isObject(c) && c.status === 'FAILED')
    .map(([name]) => name);
  if (record.status === 'VERIFIED' && failedChecks.length > 0) {
    return { errors: [`status: VERIFIED although ${failedChecks.join(', ')} failed`] };
  }
  if (record.status === 'FAILED' && failedChecks.length === 0) return { errors: ['status: FAILED although no check failed'] };
  return { errors: [] };
};

/**
 * `manifestSignature` is Ed25519 over the UTF-8 of the hex `manifestHash`, key `signerKeyId`
 * (spec 9.4): how a runtime manifest is signed, and so how an attestation names it.
 */
function manifestSignatureBy(manifestHash: unknown, signature: unknown, signerKeyId: unknown, v: Verifying): Outcome {
  if (typeof manifestHash !== 'string' || typeof signature !== 'string') return { errors: ['manifestHash and manifestSignature: missing'] };
  const r = v.signatures.verifyText(manifestHash, { keyId: signerKeyId as string, signature });
  return { errors: r.errors.map((e) => `manifestSignature: ${e.replace(/^signature: /, '')}`), note: `runtime manifest ${manifestHash.slice(0, 12)}…, key ${String(signerKeyId)}` };
}

/**
 * The runtime manifest the attestation names was signed by the same key: `manifestSignature`
 * verifies over its `manifestHash` with its `signerKeyId`. (Whether that manifest is the service's
 * own, and what it says, is what `POST /verify` answers as `checks.runtime`.)
 */
const manifestSignature: CheckFn = (record, v) => manifestSignatureBy(record.manifestHash, record.manifestSignature, record.signerKeyId, v);

/** One package of what runs, as `runtimeContents` and `evaluatorContents` list it. */
const measuredPackage = f.object({ name: f.id, version: f.text, path: f.text, kind: f.oneOf('workspace', 'dependency'), files: f.count, hash: f.hex64 });

const runtimeManifestShape: f.Shape = {
  manifest: f.object({
    manifestType: f.oneOf('runtime-manifest'),
    version: f.id,
    runtimeHash: f.hex64,
    evaluatorHash: f.hex64,
    evaluatorSemanticHash: f.hex64,
    capabilities: f.listOf(f.id),
    supportedSchemaVersions: f.listOf(f.id),
    releaseManifestHash: f.hex64,
    trustRootVersion: f.hex64,
    signerKeyId: f.id,
    platform: f.text,
    startedAt: f.time,
    runtimeContents: f.optional(
      f.object({
        node: f.object({ version: f.id, v8: f.text, openssl: f.text, platform: f.id, arch: f.id }),
        code: f.oneOf('built', 'sources'),
        packages: f.listOf(measuredPackage),
      }),
    ),
    evaluatorContents: f.optional(f.object({ engine: f.object({ path: f.text, files: f.count, hash: f.hex64 }), packages: f.listOf(measuredPackage) })),
  }),
  manifestHash: f.hex64,
  manifestSignature: f.id,
};

/**
 * `runtimeHash` and `evaluatorHash` are H(C(what they cover)), which the manifest lists: a verifier
 * compares that list with the packages it trusts. Manifests signed before the lists were recorded
 * have none (spec 9.5).
 */
const manifestContents: CheckFn = (record, { hasher }) => {
  const m = record.manifest as { runtimeHash?: unknown; evaluatorHash?: unknown; runtimeContents?: RuntimeContents; evaluatorContents?: EvaluatorContents };
  if (m.runtimeContents === undefined && m.evaluatorContents === undefined) return { errors: [], note: 'the manifest lists no contents (signed before they were recorded)' };
  const errors: string[] = [];
  if (m.runtimeContents !== undefined && runtimeHashOf(hasher, m.runtimeContents) !== m.runtimeHash) errors.push('manifest.runtimeHash does not recompute from manifest.runtimeContents');
  if (m.evaluatorContents !== undefined && evaluatorHashOf(hasher, m.evaluatorContents) !== m.evaluatorHash) errors.push('manifest.evaluatorHash does not recompute from manifest.evaluatorContents');
  const packages = m.runtimeContents?.packages.length;
  return { errors, ...(packages !== undefined ? { note: `runtimeHash covers ${packages} packages, ${m.runtimeContents!.code} code, node ${m.runtimeContents!.node.version}` } : {}) };
};

/** `manifestHash` is H(C(manifest)): the signature over it covers every field of the manifest. */
const manifestHash: CheckFn = (record, { hasher }) =>
  hasher.contentHash(record.manifest) === record.manifestHash ? { errors: [] } : { errors: ['does not recompute from the manifest'] };

/** `releaseManifestHash` is H(C(the release part of the manifest)): the same for every start of one build. */
const releaseManifestHash: CheckFn = (record, { hasher }) => {
  const m = record.manifest as Record<string, unknown>;
  const { version, runtimeHash, evaluatorHash, evaluatorSemanticHash, capabilities, supportedSchemaVersions } = m;
  const release = { version, runtimeHash, evaluatorHash, evaluatorSemanticHash, capabilities, supportedSchemaVersions } as ReleaseManifest;
  return releaseManifestHashOf(hasher, release) === m.releaseManifestHash
    ? { errors: [] }
    : { errors: ['manifest.releaseManifestHash does not recompute from version, runtimeHash, evaluatorHash, evaluatorSemanticHash, capabilities and supportedSchemaVersions'] };
};

// ---- confirmation proof (compact JWS) ------------------------------------------------------------

/** A compact JWS taken apart; `header` and `claims` are undefined when their part is not base64url JSON. */
function openJws(token: string): Record<string, unknown> {
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const json = (part: string): unknown => {
    const bytes = fromBase64Url(part);
    if (!bytes) return undefined;
    try {
      return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as unknown;
    } catch {
      return undefined;
    }
  };
  return { header: json(header), claims: json(payload), signingInput: `${header}.${payload}`, signature };
}

/** RFC 7515 with EdDSA (Ed25519): the signature verifies over the ASCII of `header.payload` with the JWKS key of the header's `kid`. */
const jwsSignature: CheckFn = (jws, v) => {
  const header = jws.header;
  if (!f.isObject(header)) return { errors: ['header: not base64url JSON'] };
  if (header.alg !== 'EdDSA') return { errors: [`header.alg: ${JSON.stringify(header.alg)}, not "EdDSA"`] };
  const bytes = fromBase64Url(jws.signature);
  if (!bytes) return { errors: ['signature: not base64url'] };
  const r = v.signatures.verifyText(jws.signingInput as string, { keyId: header.kid as string, signature: toBase64(bytes) });
  return { errors: r.errors.map((e) => e.replace(/^keyId:/, 'kid:')), note: `Ed25519, key ${String(header.kid)}` };
};

const confirmationHeader = f.object({ alg: f.oneOf('EdDSA'), kid: f.id, typ: f.oneOf(CONFIRMATION_PROOF_TYPE) });

/** The claims `POST /confirm-execution` signs (spec 4.2). */
const confirmationClaims = f.object({
  executionId: f.id,
  attestationHash: f.nullable(f.hex64),
  executedAction: f.object({ actionType: f.id, actionId: f.id, actionTimestamp: f.text, actionDetailsHash: f.nullable(f.hex64) }),
  matched: f.bool,
  withinTimeWindow: f.bool,
  timeWindowSeconds: f.count,
  authorizedAt: f.nullable(f.time),
  confirmedAt: f.time,
  confirmedBy: f.id,
});

/** An override resolution's `execution_fingerprint` recomputes from what it resolved. */
const resolutionFingerprint: CheckFn = (record, { hasher }) =>
  resolutionFingerprintOf(hasher, record as unknown as OverrideResolution) === record.execution_fingerprint
    ? { errors: [] }
    : { errors: ['execution_fingerprint: does not recompute from the resolution'] };

const auditFields: CheckFn = (record) => {
  const shape = AUDIT_SHAPES[String(record.kind)];
  const errors: string[] = [];
  if (shape) f.checkShape(record, shape, '', errors);
  return { errors };
};

const CHECKS: Readonly<Record<Exclude<OfflineRecordKind, 'unknown'>, ReadonlyArray<readonly [string, CheckFn]>>> = {
  'execution-trust-record': [
    ['fields', fieldsOf(SHAPES['execution-trust-record'])],
    ['businessTransactionHash', businessTransactionHash],
    ['resultHash', resultHash],
    ['executionChain', executionChain],
  ],
  'refusal-record': [
    ['fields', fieldsOf(SHAPES['refusal-record'])],
    ['consistency', refusalConsistency],
  ],
  'execution-intent': [
    ['fields', fieldsOf(SHAPES['execution-intent'])],
    ['noParameters', noParameters],
  ],
  'audit-event': [['fields', auditFields]],
  verification: [
    ['fields', fieldsOf(SHAPES.verification)],
    ['consistency', verificationConsistency],
  ],
  receipt: [['fields', fieldsOf(SHAPES.receipt)]],
  attestation: [
    ['fields', (record) => ({ errors: attestationShapeProblems(record) })],
    ['identity', (record, { hasher }) => ({ errors: attestationIdentityProblems(hasher, record) })],
    ['manifestSignature', manifestSignature],
  ],
  'attestation-simple': [
    ['fields', (record) => ({ errors: simpleStatementShapeProblems(record) })],
    ['consistency', simpleAnswerConsistency],
  ],
  'override-resolution': [
    ['fields', fieldsOf(SHAPES['override-resolution'])],
    ['fingerprint', resolutionFingerprint],
  ],
  'runtime-manifest': [
    ['fields', fieldsOf(runtimeManifestShape)],
    ['manifestHash', manifestHash],
    ['releaseManifestHash', releaseManifestHash],
    ['contents', manifestContents],
  ],
  'confirmation-proof': [
    ['header', fieldsOf({ header: confirmationHeader })],
    ['fields', fieldsOf({ claims: confirmationClaims })],
  ],
};
