/**
 * Offline verification of anything this service signs (spec 1.4, 2.3, 2.4, 2.9, 4.3.13, 9.5):
 * a pure function of a record and a key set. No server, no database, no network, so the CLI
 * `ets verify`, the demo and any third party run exactly the same checks.
 *
 * What each kind is checked for:
 *
 * | kind                   | checks                                                                   |
 * |------------------------|--------------------------------------------------------------------------|
 * | execution-trust-record | signature (+ pqSignature), fields, businessTransactionHash, resultHash,   |
 * |                        | executionChain (spec 4.3.13; chainHash recomputes, chainSignature verifies) |
 * | refusal-record         | signature (+ pqSignature), fields, consistency (decision, reason, rule)    |
 * | execution-intent       | signature (+ pqSignature), fields, noParameters (spec 2.4)                 |
 * | audit-event            | signature (+ pqSignature), fields                                         |
 * | verification           | signature (+ pqSignature), fields, consistency (VERIFIED = no failed check) |
 * | receipt                | signature (+ pqSignature), fields                                         |
 * | attestation            | signature (Ed25519 by `signerKeyId` over the canonical JSON without `signature`), fields |
 *
 * `valid` is true only when every check passed. Optional fields added after a record was first
 * signed (`assessment`, `policyContentHash`, `tenantId`) are checked only when present, so older
 * records still verify (spec 9.5). The function never throws: a malformed record is a failed
 * check naming what is wrong.
 */
import { checkExecutionChain, transactionHash, type ReleaseContext } from '@ets/domain';
import { canonicalize } from '../canonical-json.js';
import type { JwksLike } from '../jwk.js';
import { JwksSignatureVerifier, verifyDetached, verifyRecord } from '../offline-verifier.js';
import { Sha256Hasher } from '../sha256-hasher.js';
import * as f from './fields.js';

export const OFFLINE_RECORD_KINDS = [
  'execution-trust-record',
  'refusal-record',
  'execution-intent',
  'audit-event',
  'verification',
  'receipt',
  'attestation',
  'unknown',
] as const;
export type OfflineRecordKind = (typeof OFFLINE_RECORD_KINDS)[number];

export interface OfflineCheck {
  /** Stable name: `kind`, `signature`, `pqSignature`, `fields`, `executionChain`, `businessTransactionHash`, `resultHash`, `noParameters`, `consistency`. */
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
};

const hasOwn = (o: Record<string, unknown>, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k) && o[k] !== undefined;

/**
 * What a JSON value is: by `recordType` for the records of this service, by `kind` for audit
 * events, and by `executionId` with `execution_fingerprint` or `signerKeyId` for an
 * ExecutionAttestation (spec 2.9).
 */
export function detectKind(value: unknown): OfflineRecordKind {
  if (!f.isObject(value)) return 'unknown';
  if (hasOwn(value, 'recordType')) {
    const type = value.recordType;
    return typeof type === 'string' && Object.prototype.hasOwnProperty.call(RECORD_TYPES, type) ? RECORD_TYPES[type]! : 'unknown';
  }
  if (value.kind === 'caller-authentication' || value.kind === 'governance') return 'audit-event';
  if (hasOwn(value, 'executionId') && (hasOwn(value, 'execution_fingerprint') || hasOwn(value, 'signerKeyId'))) return 'attestation';
  return 'unknown';
}

/** Verifies one signed object against a JWKS (a file's content or `/.well-known/jwks.json`). */
export function verifyOffline(record: unknown, jwks: JwksLike): OfflineReport {
  const kind = detectKind(record);
  if (kind === 'unknown') {
    return { kind, valid: false, checks: [{ name: 'kind', ok: false, detail: unknownKindDetail(record) }] };
  }
  const r = record as Record<string, unknown>;
  const checks: OfflineCheck[] = kind === 'attestation' ? [attestationSignature(r, jwks)] : recordSignatures(r, jwks);
  for (const [name, run] of CHECKS[kind]) checks.push(guarded(name, () => run(r, jwks)));
  return { kind, valid: checks.every((c) => c.ok), checks };
}

function unknownKindDetail(value: unknown): string {
  if (Array.isArray(value)) return 'a list, not one signed object';
  if (!f.isObject(value)) return 'not a JSON object';
  if (hasOwn(value, 'recordType')) return `unknown recordType ${JSON.stringify(value.recordType)}`;
  return 'not a record this service signs (no recordType, audit event kind, or attestation executionId)';
}

/** A check's outcome: the complaints (none = passed) and, on success, an optional note. */
type Outcome = { errors: string[]; note?: string };
type CheckFn = (record: Record<string, unknown>, jwks: JwksLike) => Outcome;

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

const hasher = new Sha256Hasher();

// ---- signatures ----------------------------------------------------------------------------

/** CONTRACT "Signed records": `signature` by `keyId`, and in hybrid mode `pqSignature` by `pqKeyId`. */
function recordSignatures(record: Record<string, unknown>, jwks: JwksLike): OfflineCheck[] {
  const result = verifyRecord(record, jwks);
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
function attestationSignature(record: Record<string, unknown>, jwks: JwksLike): OfflineCheck {
  return guarded('signature', () => {
    // Object rest copies own data properties, so an own `__proto__` key stays covered.
    const { signature, ...unsigned } = record;
    let text: string;
    try {
      text = canonicalize(unsigned);
    } catch {
      return { errors: ['record: cannot be canonicalized (RFC 8785)'] };
    }
    const result = verifyDetached(text, { keyId: record.signerKeyId as string, signature: signature as string }, jwks);
    return {
      errors: result.errors.map((e) => e.replace(/^keyId:/, 'signerKeyId:')),
      note: `Ed25519, key ${String(record.signerKeyId)}`,
    };
  });
}

// ---- shapes ----------------------------------------------------------------------------------

const decision = f.object({
  action: f.oneOf('approve', 'reject'),
  reason: f.text,
  requires_override: f.bool,
  matchedRuleId: f.optional(f.nullable(f.text)),
});

const checkStatus = f.oneOf('VERIFIED', 'NOT_REQUIRED', 'FAILED');
const assessment = f.optional(
  f.object({
    authority: f.object({ status: checkStatus, callerId: f.id, principalId: f.id, grant: f.nullable(f.anyObject) }),
    businessValidation: f.object({ status: checkStatus, sourcedSignals: f.listOf(f.text) }),
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

const SHAPES: Readonly<Record<Exclude<OfflineRecordKind, 'unknown' | 'audit-event'>, f.Shape>> = {
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
  },
  attestation: {
    executionId: f.id,
    execution_fingerprint: f.id,
    policyId: f.id,
    policyVersion: f.id,
    schemaVersion: f.id,
    runtimeVersion: f.optional(f.text),
    runtimeHash: f.optional(f.text),
    decision: f.object({ action: f.text, requires_override: f.bool, reason: f.text }),
    execution_state: f.oneOf('completed', 'pending_override', 'blocked'),
    signalsHash: f.optional(f.text),
    bundleHash: f.optional(f.text),
    manifestHash: f.optional(f.text),
    manifestSignature: f.optional(f.text),
    trustRootVersion: f.optional(f.text),
    signerKeyId: f.id,
    evaluatorHash: f.optional(f.text),
    evaluatorSemanticHash: f.optional(f.text),
    evaluatorArtifactHash: f.optional(f.text),
    releaseManifestHash: f.optional(f.text),
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
const executionChain: CheckFn = (record, jwks) => {
  const result = checkExecutionChain(record, hasher, new JwksSignatureVerifier(jwks));
  if (result.status === 'FAILED') return { errors: result.errors.length > 0 ? result.errors : ['does not verify'] };
  if (result.status === 'NOT_APPLICABLE') return { errors: [], note: 'no executions (nothing was released)' };
  const chained = (record.executions as unknown[]).filter((e) => f.isObject(e) && CHAIN_FIELDS.some((k) => hasOwn(e, k))).length;
  return {
    errors: [],
    note: chained === 0 ? 'no chained executions (written before the chain existed)' : `${chained} chained execution(s) recompute and verify`,
  };
};

/** `businessTransactionHash` recomputes from `transaction` (the five objects, the signals and the id). */
const businessTransactionHash: CheckFn = (record) => {
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
const resultHash: CheckFn = (record) => {
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
  attestation: [['fields', fieldsOf(SHAPES.attestation)]],
};
