/**
 * Pure checks of an ExecutionAttestation as presented (never throwing on odd input): its shape,
 * its derived identity fields, its signature. `POST /verify` and the offline verifier share them.
 */
import type { Hasher, SignatureVerifier } from '../ports/crypto.js';
import { isPlainObject } from '../shared/guards.js';
import { executionFingerprintOf, executionIdOf } from './identity.js';
import type { ExecutionAttestation } from './records.js';

type Json = Record<string, unknown>;

const HEX64 = /^[0-9a-f]{64}$/;
const isHex64 = (v: unknown): boolean => typeof v === 'string' && HEX64.test(v);
const isText = (v: unknown): boolean => typeof v === 'string' && v !== '';

const HASH_FIELDS = [
  'executionId',
  'execution_fingerprint',
  'runtimeHash',
  'signalsHash',
  'bundleHash',
  'manifestHash',
  'trustRootVersion',
  'evaluatorHash',
  'evaluatorSemanticHash',
  'evaluatorArtifactHash',
  'releaseManifestHash',
] as const;
const TEXT_FIELDS = ['requestId', 'policyId', 'policyVersion', 'schemaVersion', 'runtimeVersion', 'manifestSignature', 'signerKeyId', 'callerId', 'signature'] as const;
export const EXECUTION_STATES = ['completed', 'pending_override', 'blocked'] as const;

/** The decision object of spec 2.9 (plus `matchedRuleId`). */
export function decisionProblems(d: unknown, path = 'decision'): string[] {
  if (!isPlainObject(d)) return [`${path}: ${d === undefined ? 'missing' : 'not an object'}`];
  const problems: string[] = [];
  if (d.action !== 'approve' && d.action !== 'reject') problems.push(`${path}.action: not "approve" or "reject"`);
  if (typeof d.requires_override !== 'boolean') problems.push(`${path}.requires_override: not a boolean`);
  if (typeof d.reason !== 'string') problems.push(`${path}.reason: not a string`);
  if (d.matchedRuleId !== undefined && d.matchedRuleId !== null && typeof d.matchedRuleId !== 'string') problems.push(`${path}.matchedRuleId: not a string or null`);
  return problems;
}

export const executionStateProblems = (v: unknown, path = 'execution_state'): string[] =>
  (EXECUTION_STATES as readonly unknown[]).includes(v) ? [] : [`${path}: ${v === undefined ? 'missing' : `not one of ${EXECUTION_STATES.join(', ')}`}`];

/** Every field of schema version 1 is present with its type (hashes are lower-case hex SHA-256). */
export function attestationShapeProblems(a: Json): string[] {
  const problems: string[] = [];
  for (const f of HASH_FIELDS) if (!isHex64(a[f])) problems.push(`${f}: ${a[f] === undefined ? 'missing' : 'not a lower-case hex SHA-256'}`);
  for (const f of TEXT_FIELDS) if (!isText(a[f])) problems.push(`${f}: ${a[f] === undefined ? 'missing' : 'not a non-empty string'}`);
  problems.push(...decisionProblems(a.decision));
  problems.push(...executionStateProblems(a.execution_state));
  if (typeof a.issuedAt !== 'string' || Number.isNaN(Date.parse(a.issuedAt))) problems.push(`issuedAt: ${a.issuedAt === undefined ? 'missing' : 'not an ISO 8601 time'}`);
  return problems;
}

/**
 * The simple variant's statement (`{executionId, decision, execution_state, runtimeHash, signature}`)
 * has the types of schema version 1. `POST /verify` of attestation-simple and the offline verifier share it.
 */
export function simpleStatementShapeProblems(b: Json): string[] {
  const problems: string[] = [];
  if (typeof b.executionId !== 'string' || !HEX64.test(b.executionId)) problems.push('executionId: not a lower-case hex SHA-256');
  problems.push(...decisionProblems(b.decision));
  problems.push(...executionStateProblems(b.execution_state));
  if (typeof b.runtimeHash !== 'string' || !HEX64.test(b.runtimeHash)) problems.push('runtimeHash: not a lower-case hex SHA-256');
  if (typeof b.signature !== 'string') problems.push('signature: not a string');
  if (isPlainObject(b.decision) && !('matchedRuleId' in b.decision)) problems.push('decision.matchedRuleId: missing');
  return problems;
}

/** `executionId` and `execution_fingerprint` recompute from the fields they are computed over. */
export function attestationIdentityProblems(hasher: Hasher, a: Json): string[] {
  try {
    const x = a as unknown as ExecutionAttestation;
    const problems: string[] = [];
    if (executionIdOf(hasher, x) !== x.executionId) problems.push('executionId: does not recompute from requestId, policyId, policyVersion and signalsHash');
    if (executionFingerprintOf(hasher, x) !== x.execution_fingerprint) problems.push('execution_fingerprint: does not recompute from the attestation');
    return problems;
  } catch {
    return ['attestation: cannot be canonicalized (RFC 8785)'];
  }
}

/** Spec 2.9: base64 Ed25519 over C(the attestation without `signature`), with the published key `signerKeyId`. */
export function attestationSignatureProblems(hasher: Hasher, verifier: SignatureVerifier, a: Json): string[] {
  const { signature, ...unsigned } = a;
  if (typeof signature !== 'string' || typeof a.signerKeyId !== 'string') return ['signature: signature and signerKeyId are required'];
  let text: string;
  try {
    text = hasher.canonicalize(unsigned);
  } catch {
    return ['attestation: cannot be canonicalized (RFC 8785)'];
  }
  const r = verifier.verifyText(text, { keyId: a.signerKeyId, signature });
  return r.valid ? [] : r.errors.map((e) => e.replace(/^keyId:/, 'signerKeyId:'));
}
