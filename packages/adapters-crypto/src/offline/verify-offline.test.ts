import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { generateKeyPairSync, sign as nodeSign } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  AuthenticationAudit,
  buildTrustRecord,
  CONFIRMATION_PROOF_TYPE,
  evaluatorHashOf,
  releaseManifestHashOf,
  runtimeHashOf,
  type EvaluatorContents,
  type ReleaseManifest,
  type RuntimeContents,
  executionFingerprintOf,
  executionIdOf,
  resolutionFingerprintOf,
  type OverrideResolution,
  GovernanceAudit,
  transactionHash,
  type AuditEvent,
  type AuditEventStore,
  type ExecutionIntent,
  type ExecutionTrustRecord,
  type Receipt,
  type RefusalRecord,
  type ReleaseContext,
  type Signed,
  type Verification,
} from '@ets/domain';
import { canonicalize } from '../canonical-json.js';
import { ed25519KeyId, type JwksLike } from '../jwk.js';
import { KeyRing, type SigningMode } from '../key-ring.js';
import { JwsProofSigner } from '../jws-proof-signer.js';
import { KeyRingSigner } from '../record-signer.js';
import { Sha256Hasher } from '../sha256-hasher.js';
import { verifyOffline } from './node.js';
import { detectKind, type OfflineRecordKind, type OfflineReport } from './verify-offline.js';
import { unwrapServedRecord } from './unwrap.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

type Json = Record<string, unknown>;
const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
const failed = (r: OfflineReport): string[] => r.checks.filter((c) => !c.ok).map((c) => c.name);

/** One signed object of every kind this service produces, made with a real KeyRing signer. */
interface Fixtures {
  jwks: JwksLike;
  signer: KeyRingSigner;
  records: Record<Exclude<OfflineRecordKind, 'unknown' | 'runtime-manifest' | 'confirmation-proof'> | 'first-trust-record' | 'recorded-trust-record' | 'governance-event', Json>;
  /** Signs an attestation the way spec 2.9 describes, with its own Ed25519 key. */
  signAttestation(a: Json): Json;
}

async function makeFixtures(mode: SigningMode): Promise<Fixtures> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ets-offline-'));
  dirs.push(dataDir);
  const ring = await KeyRing.open({ dataDir, mode });
  const signer = new KeyRingSigner(ring);
  const hasher = new Sha256Hasher();
  let n = 0;
  const ids = { uuid: () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}` };
  const clock = { now: () => new Date('2025-11-21T12:00:00.000Z') };
  const now = clock.now().toISOString();

  const transaction: ReleaseContext['transaction'] = {
    businessTransactionId: '7b1e4c2a-3f5d-4e6a-9b8c-0d1e2f3a4b5c',
    metadata: { tenantId: 't1' },
    authority: { principalId: 'agent-7', authorityId: 'auth-1' },
    authorization: { authorityId: 'auth-1' },
    intent: { action: 'sandbox:echo', parameters: { amount: 120, currency: 'EUR', reference: 'inv-42', flags: [true, null] } },
    policy: { name: 'payments-transfer', version: '1.0.0' },
    signals: { amount: 120, country: 'FR', vip: false },
  };
  const decision = { action: 'approve' as const, reason: 'Within limits', requires_override: false, matchedRuleId: 'ok' };
  const binding = { name: 'payments-transfer', version: '1.0.0', contentHash: 'ab'.repeat(32) };
  const context = (id: string, result: unknown): ReleaseContext => ({
    transaction: { ...transaction, businessTransactionId: id },
    decision,
    policy: binding,
    assessment: {
      authority: { status: 'VERIFIED', callerId: 'agent-7', principalId: 'agent-7', grant: null },
      businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] },
      execution: { status: 'EXECUTED' },
    },
    execution: {
      executionId: ids.uuid(),
      connector: 'sandbox',
      action: 'sandbox:echo',
      status: 'SUCCEEDED',
      releasedAt: now,
      completedAt: now,
      resultHash: hasher.contentHash(result),
      result,
    },
  });
  // The deployment's first execution (previousChainHash null), then one linked to it.
  const first = await buildTrustRecord({ hasher, signer }, context('11111111-1111-4111-8111-111111111111', { echo: { amount: 1 } }), { chainHash: null }, 'agent-7', now);
  const trust = await buildTrustRecord(
    { hasher, signer },
    context(transaction.businessTransactionId, { echo: { amount: 120, currency: 'EUR' }, ok: true, n: 1.5 }),
    { chainHash: first.executions[0]!.chainHash! },
    'agent-7',
    now,
  );
  // Decided with requires_override (or recorded by POST /transactions): signed, nothing released.
  const recordedTx = { ...transaction, businessTransactionId: '22222222-2222-4222-8222-222222222222' };
  const recorded = await signer.sign<ExecutionTrustRecord>({
    recordType: 'execution-trust-record',
    businessTransactionId: recordedTx.businessTransactionId,
    businessTransactionHash: transactionHash(hasher, recordedTx),
    callerId: 'agent-7',
    transaction: { ...recordedTx, policy: { ...recordedTx.policy, contentHash: binding.contentHash } },
    decision: { ...decision, requires_override: true, matchedRuleId: 'large', reason: 'Large transfer needs a second look' },
    assessment: {
      authority: { status: 'VERIFIED', callerId: 'agent-7', principalId: 'agent-7', grant: null },
      businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] },
      execution: { status: 'NOT_RELEASED' },
    },
    executions: [],
    recordedAt: now,
  });

  const intent = await signer.sign<ExecutionIntent>({
    recordType: 'execution-intent',
    businessTransactionId: transaction.businessTransactionId,
    businessTransactionHash: trust.businessTransactionHash,
    action: 'sandbox:echo',
    connector: 'sandbox',
    callerId: 'agent-7',
    principalId: 'agent-7',
    tenantId: 't1',
    policy: binding,
    decision,
    preparedAt: now,
  });
  const refusal = await signer.sign<RefusalRecord>({
    recordType: 'refusal-record',
    businessTransactionId: '33333333-3333-4333-8333-333333333333',
    businessTransactionHash: 'cd'.repeat(32),
    callerId: 'agent-7',
    principalId: 'agent-7',
    action: 'sandbox:echo',
    policy: { name: 'payments-transfer', version: '1.0.0' },
    policyContentHash: binding.contentHash,
    decision: { action: 'reject', reason: 'Country is sanctioned', requires_override: false, matchedRuleId: 'sanctioned' },
    matchedRuleId: 'sanctioned',
    reason: 'Country is sanctioned',
    assessment: {
      authority: { status: 'VERIFIED', callerId: 'agent-7', principalId: 'agent-7', grant: null },
      businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] },
      execution: { status: 'REFUSED' },
    },
    refusedAt: now,
  });

  const events: Signed<AuditEvent>[] = [];
  const store: AuditEventStore = { append: async (e) => void events.push(e), list: async () => events };
  await new AuthenticationAudit(signer, store, clock, ids).record({ callerId: 'agent-7', method: 'POST', route: '/execute', outcome: 'SUCCESS' });
  events.push(await new GovernanceAudit(signer, clock, ids).sign({ callerId: 'bob', action: 'approve', subjectType: 'policy', subjectId: 'chg-1', summary: 'publish policy x' }));

  const verification = await signer.sign<Verification>({
    recordType: 'verification',
    verificationId: ids.uuid(),
    businessTransactionId: transaction.businessTransactionId,
    status: 'VERIFIED',
    checks: {
      signature: { status: 'PASSED', errors: [] },
      executionChain: { status: 'PASSED', errors: [] },
      policyContentHash: { status: 'PASSED', errors: [] },
      intentBinding: { status: 'NOT_APPLICABLE', errors: [] },
    },
    trustRecordHash: hasher.contentHash(trust),
    verifiedAt: now,
  });
  const receipt = await signer.sign<Receipt>({
    recordType: 'receipt',
    receiptId: ids.uuid(),
    businessTransactionId: transaction.businessTransactionId,
    verificationId: verification.verificationId,
    trustRecordHash: verification.trustRecordHash,
    decision: { action: 'approve', reason: 'Within limits', requires_override: false },
    executionStatus: 'EXECUTED',
    issuedAt: now,
  });

  // ExecutionAttestation (spec 2.9): signed by its own Ed25519 key, published in the same JWKS.
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const x = (publicKey.export({ format: 'jwk' }) as { x: string }).x;
  const signerKeyId = await ed25519KeyId(x);
  const signAttestation = (a: Json): Json => {
    const { signature: _old, ...unsigned } = a;
    return { ...unsigned, signature: nodeSign(null, Buffer.from(canonicalize(unsigned)), privateKey).toString('base64') };
  };
  // A real one: executionId and execution_fingerprint computed as the service computes them, and
  // the manifest signature over manifestHash made with the same key.
  const signalsHash = hasher.contentHash({ amount: 120, country: 'FR' });
  const executionId = executionIdOf(hasher, { requestId: 'run-42', policyId: 'payments-transfer', policyVersion: '1.0.0', signalsHash });
  const attDecision = { action: 'approve' as const, requires_override: false, reason: 'Within limits', matchedRuleId: 'ok' };
  const identity = { executionId, bundleHash: binding.contentHash, evaluatorArtifactHash: '07'.repeat(32), signalsHash, decision: attDecision, execution_state: 'completed' as const };
  const manifestHash = '04'.repeat(32);
  const attestation = signAttestation({
    executionId,
    execution_fingerprint: executionFingerprintOf(hasher, identity),
    requestId: 'run-42',
    policyId: 'payments-transfer',
    policyVersion: '1.0.0',
    schemaVersion: '1',
    runtimeVersion: 'abc123.20251121T120000Z',
    runtimeHash: '01'.repeat(32),
    decision: attDecision,
    execution_state: 'completed',
    signalsHash,
    bundleHash: binding.contentHash,
    manifestHash,
    manifestSignature: nodeSign(null, Buffer.from(manifestHash), privateKey).toString('base64'),
    trustRootVersion: '09'.repeat(32),
    signerKeyId,
    evaluatorHash: '05'.repeat(32),
    evaluatorSemanticHash: '06'.repeat(32),
    evaluatorArtifactHash: '07'.repeat(32),
    releaseManifestHash: '08'.repeat(32),
    callerId: 'agent-7',
    issuedAt: now,
  });
  const unsignedResolution: OverrideResolution = {
    recordType: 'override-resolution',
    overrideId: ids.uuid(),
    executionId,
    status: 'executed',
    approved: true,
    approvedBy: 'ann',
    approverRole: 'risk officer',
    reason: 'Checked with the customer',
    decidedBy: 'ops',
    previousFingerprint: attestation.execution_fingerprint as string,
    execution_fingerprint: '',
    resolvedAt: now,
  };
  unsignedResolution.execution_fingerprint = resolutionFingerprintOf(hasher, unsignedResolution);
  const resolution = await signer.sign(unsignedResolution);

  const jwks = { keys: [...ring.jwks().keys, { kty: 'OKP', crv: 'Ed25519', x, kid: signerKeyId, alg: 'EdDSA', use: 'sig' }] };
  return {
    jwks,
    signer,
    signAttestation,
    records: clone({
      'execution-trust-record': trust,
      'first-trust-record': first,
      'recorded-trust-record': recorded,
      'refusal-record': refusal,
      'execution-intent': intent,
      'audit-event': events[0]!,
      'governance-event': events[1]!,
      verification,
      receipt,
      attestation,
      'override-resolution': resolution,
    }) as unknown as Fixtures['records'],
  };
}

type Path = (string | number)[];

/** Every leaf of a JSON value (empty objects and lists count as leaves). */
function leafPaths(v: unknown, at: Path = []): Path[] {
  if (Array.isArray(v) && v.length > 0) return v.flatMap((x: unknown, i) => leafPaths(x, [...at, i]));
  if (typeof v === 'object' && v !== null && Object.keys(v).length > 0) return Object.entries(v).flatMap(([k, x]) => leafPaths(x, [...at, k]));
  return [at];
}

/** A different value of a similar kind: what a tamperer would write. */
function changed(v: unknown): unknown {
  if (typeof v === 'string') return v === '' ? 'x' : v.endsWith('0') ? v.slice(0, -1) + '1' : v.slice(0, -1) + '0';
  if (typeof v === 'number') return v + 1;
  if (typeof v === 'boolean') return !v;
  if (v === null) return 'null';
  if (Array.isArray(v)) return [0];
  return { x: 1 };
}

function setAt(root: Json, p: Path, value: unknown): Json {
  const copy = clone(root);
  let node = copy as Record<string | number, unknown>;
  for (const k of p.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
  node[p[p.length - 1]!] = value;
  return copy;
}

function deleteAt(root: Json, p: Path): Json {
  const copy = clone(root);
  let node = copy as Record<string | number, unknown>;
  for (const k of p.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
  delete node[p[p.length - 1]!];
  return copy;
}

const show = (p: Path) => p.map((k) => (typeof k === 'number' ? `[${k}]` : `.${k}`)).join('').slice(1);

/** The field whose change makes the object another kind (or none): then `kind` is what fails. */
const KIND_FIELD: Record<string, string | undefined> = { 'audit-event': 'kind', 'governance-event': 'kind', attestation: undefined };

describe.each(['ed25519', 'hybrid'] as const)('verifyOffline, %s signing', (mode) => {
  let fx: Fixtures;
  beforeAll(async () => {
    fx = await makeFixtures(mode);
  });

  const expectedKind = (name: string): OfflineRecordKind =>
    name.endsWith('trust-record') ? 'execution-trust-record' : name === 'governance-event' ? 'audit-event' : (name as OfflineRecordKind);

  it('detects the kind of every record and verifies it, with every check passing', () => {
    for (const [name, record] of Object.entries(fx.records)) {
      const report = verifyOffline(record, fx.jwks);
      expect({ name, kind: report.kind, valid: report.valid, failed: failed(report) }).toEqual({ name, kind: expectedKind(name), valid: true, failed: [] });
      expect(report.checks.map((c) => c.name)).toContain('signature');
      expect(report.checks.map((c) => c.name)).toContain('fields');
      if (mode === 'hybrid' && name !== 'attestation') expect(report.checks.map((c) => c.name)).toContain('pqSignature');
    }
    const trust = verifyOffline(fx.records['execution-trust-record'], fx.jwks);
    expect(trust.checks.map((c) => c.name)).toEqual([
      'signature',
      ...(mode === 'hybrid' ? ['pqSignature'] : []),
      'fields',
      'businessTransactionHash',
      'resultHash',
      'executionChain',
    ]);
    expect(verifyOffline(fx.records['execution-intent'], fx.jwks).checks.map((c) => c.name)).toContain('noParameters');
  });

  it('fails, naming the failed check, when ANY field of ANY kind changes', () => {
    let tried = 0;
    for (const [name, record] of Object.entries(fx.records)) {
      for (const p of leafPaths(record)) {
        const original = p.reduce<unknown>((node, k) => (node as Record<string | number, unknown>)[k], record);
        const tampered = setAt(record, p, changed(original));
        const report = verifyOffline(tampered, fx.jwks);
        tried++;
        const kindField = name in KIND_FIELD ? KIND_FIELD[name] : 'recordType';
        // pqSignature is the one field the Ed25519 signature does not cover; its own check fails.
        const expected = p.length === 1 && p[0] === kindField ? 'kind' : show(p) === 'pqSignature' ? 'pqSignature' : 'signature';
        expect({ name, path: show(p), valid: report.valid, includes: failed(report).includes(expected) }).toEqual({
          name,
          path: show(p),
          valid: false,
          includes: true,
        });
      }
    }
    expect(tried).toBeGreaterThan(150);
  });

  it('fails when a field is removed, and names the signature check (pqSignature for that one)', () => {
    for (const [name, record] of Object.entries(fx.records)) {
      for (const key of Object.keys(record)) {
        const report = verifyOffline(deleteAt(record, [key]), fx.jwks);
        expect({ name, key, valid: report.valid }).toEqual({ name, key, valid: false });
        const expected = key === 'pqSignature' ? 'pqSignature' : 'signature';
        if (report.kind !== 'unknown') expect({ name, key, failed: failed(report).includes(expected) }).toEqual({ name, key, failed: true });
      }
    }
  });

  it('fails without the signature fields', () => {
    for (const [name, record] of Object.entries(fx.records)) {
      const fields = name === 'attestation' ? ['signature', 'signerKeyId'] : ['signature', 'keyId', ...(mode === 'hybrid' ? ['pqSignature', 'pqKeyId'] : [])];
      for (const field of fields) {
        const report = verifyOffline(deleteAt(record, [field]), fx.jwks);
        expect(report.valid).toBe(false);
        const expected = field.startsWith('pq') ? 'pqSignature' : 'signature';
        expect({ name, field, failed: failed(report) }).toEqual({ name, field, failed: expect.arrayContaining([expected]) });
      }
      if (name !== 'attestation') {
        const bare = deleteAt(deleteAt(deleteAt(deleteAt(record, ['signature']), ['keyId']), ['pqSignature']), ['pqKeyId']);
        expect(verifyOffline(bare, fx.jwks).valid).toBe(false);
      }
    }
  });

  it('fails with a JWKS that lacks the key', () => {
    const keys = fx.jwks.keys as Json[];
    for (const [name, record] of Object.entries(fx.records)) {
      const kid = (name === 'attestation' ? record.signerKeyId : record.keyId) as string;
      const report = verifyOffline(record, { keys: keys.filter((k) => k.kid !== kid) });
      expect(report.valid).toBe(false);
      expect(report.checks.find((c) => c.name === 'signature')).toEqual({ name: 'signature', ok: false, detail: expect.stringContaining(`unknown key ${kid}`) });
      expect(verifyOffline(record, { keys: [] }).valid).toBe(false);
    }
    if (mode === 'hybrid') {
      const record = fx.records['execution-intent'];
      const report = verifyOffline(record, { keys: keys.filter((k) => k.kid !== record.pqKeyId) });
      expect(failed(report)).toEqual(['pqSignature']);
    }
  });

  describe('checks beyond the signature (a record re-signed after the change, as a faulty or dishonest signer would)', () => {
    const resign = (r: Json) => fx.signer.sign(r) as Promise<Json>;

    it('trust record: any change in transaction breaks businessTransactionHash', async () => {
      const record = fx.records['execution-trust-record'];
      const paths = leafPaths(record.transaction).filter((p) => show(p) !== 'policy.contentHash');
      expect(paths.length).toBeGreaterThan(10);
      for (const p of paths) {
        const at = ['transaction', ...p];
        const original = at.reduce<unknown>((node, k) => (node as Record<string | number, unknown>)[k], record);
        const report = verifyOffline(await resign(setAt(record, at, changed(original))), fx.jwks);
        expect({ path: show(at), failed: failed(report) }).toEqual({ path: show(at), failed: expect.arrayContaining(['businessTransactionHash']) });
        expect(failed(report)).not.toContain('signature');
      }
    });

    it('trust record: any change in an execution breaks the execution chain', async () => {
      const record = fx.records['execution-trust-record'];
      for (const p of leafPaths((record.executions as Json[])[0])) {
        const at = ['executions', 0, ...p];
        const original = at.reduce<unknown>((node, k) => (node as Record<string | number, unknown>)[k], record);
        const report = verifyOffline(await resign(setAt(record, at, changed(original))), fx.jwks);
        expect({ path: show(at), failed: failed(report) }).toEqual({ path: show(at), failed: expect.arrayContaining(['executionChain']) });
        if (p[0] === 'result' || p[0] === 'resultHash') expect(failed(report)).toContain('resultHash');
      }
      const report = verifyOffline(await resign(setAt(record, ['businessTransactionId'], '7b1e4c2a-3f5d-4e6a-9b8c-0d1e2f3a4b5d')), fx.jwks);
      expect(failed(report)).toEqual(expect.arrayContaining(['businessTransactionHash', 'executionChain']));
    });

    it('trust record: spec 4.3.13, partial chain fields or none after a chained execution fail; unchained (older) executions pass', async () => {
      const record = fx.records['execution-trust-record'];
      const exec = (record.executions as Json[])[0]!;
      for (const field of ['chainHash', 'chainSignature', 'previousChainHash']) {
        const report = verifyOffline(await resign(deleteAt(record, ['executions', 0, field])), fx.jwks);
        expect(failed(report)).toEqual(['executionChain']);
        expect(report.checks.find((c) => c.name === 'executionChain')!.detail).toMatch(/only some of chainHash, chainSignature, previousChainHash/);
      }
      const { chainHash: _h, chainSignature: _s, previousChainHash: _p, ...unchained } = exec;
      const older = await resign({ ...record, executions: [unchained] });
      expect(verifyOffline(older, fx.jwks)).toMatchObject({ valid: true });
      expect(verifyOffline(older, fx.jwks).checks.find((c) => c.name === 'executionChain')!.detail).toMatch(/no chained executions/);

      const noneAfterChained = verifyOffline(await resign({ ...record, executions: [exec, { ...unchained, executionId: 'e-2' }] }), fx.jwks);
      expect(failed(noneAfterChained)).toEqual(['executionChain']);
      expect(noneAfterChained.checks.find((c) => c.name === 'executionChain')!.detail).toMatch(/executions\[1\]: carries no chain fields after a chained execution/);

      // An unchained execution before a chained one is an older one: fine.
      expect(verifyOffline(await resign({ ...record, executions: [{ ...unchained, executionId: 'e-0' }, exec] }), fx.jwks).valid).toBe(true);
    });

    it('trust record: a null previousChainHash is valid (the first execution); a record without executions has nothing to chain', () => {
      const first = fx.records['first-trust-record'];
      expect((first.executions as Json[])[0]!.previousChainHash).toBeNull();
      expect(verifyOffline(first, fx.jwks).valid).toBe(true);
      const recorded = verifyOffline(fx.records['recorded-trust-record'], fx.jwks);
      expect(recorded.valid).toBe(true);
      expect(recorded.checks.find((c) => c.name === 'executionChain')).toEqual({ name: 'executionChain', ok: true, detail: expect.stringMatching(/no executions/) });
    });

    it('older records without assessment or policyContentHash still verify (spec 9.5)', async () => {
      for (const name of ['execution-trust-record', 'recorded-trust-record', 'refusal-record'] as const) {
        const { assessment: _a, policyContentHash: _p, ...older } = fx.records[name];
        expect({ name, report: verifyOffline(await resign(older), fx.jwks) }).toMatchObject({ name, report: { valid: true } });
      }
      const { tenantId: _t, ...intentWithoutTenant } = fx.records['execution-intent'];
      expect(verifyOffline(await resign(intentWithoutTenant), fx.jwks).valid).toBe(true);
    });

    it('intent: parameters anywhere fail noParameters; required fields are checked', async () => {
      const intent = fx.records['execution-intent'];
      const withParams = verifyOffline(await resign({ ...intent, parameters: { amount: 120 } }), fx.jwks);
      expect(failed(withParams)).toEqual(['noParameters']);
      const nested = verifyOffline(await resign({ ...intent, policy: { ...(intent.policy as Json), parameters: {} } }), fx.jwks);
      expect(failed(nested)).toEqual(['noParameters']);
      for (const field of ['businessTransactionId', 'businessTransactionHash', 'action', 'connector', 'callerId', 'principalId', 'policy', 'decision', 'preparedAt']) {
        const report = verifyOffline(await resign(deleteAt(intent, [field])), fx.jwks);
        expect({ field, failed: failed(report), detail: report.checks.find((c) => c.name === 'fields')!.detail }).toEqual({
          field,
          failed: ['fields'],
          detail: expect.stringContaining(`${field}: missing`),
        });
      }
    });

    it('refusal, verification, receipt, audit events, attestation: required fields and consistency', async () => {
      const refusal = fx.records['refusal-record'];
      expect(failed(verifyOffline(await resign({ ...refusal, reason: 'Another reason' }), fx.jwks))).toEqual(['consistency']);
      expect(failed(verifyOffline(await resign({ ...refusal, decision: { ...(refusal.decision as Json), action: 'approve' } }), fx.jwks))).toEqual(['consistency']);

      const verification = fx.records.verification;
      const contradicting = { ...verification, checks: { ...(verification.checks as Json), executionChain: { status: 'FAILED', errors: ['x'] } } };
      expect(failed(verifyOffline(await resign(contradicting), fx.jwks))).toEqual(['consistency']);
      expect(verifyOffline(await resign({ ...contradicting, status: 'FAILED' }), fx.jwks).valid).toBe(true);

      const required: Record<string, string[]> = {
        'refusal-record': ['businessTransactionId', 'businessTransactionHash', 'callerId', 'principalId', 'action', 'policy', 'decision', 'matchedRuleId', 'reason', 'refusedAt'],
        verification: ['verificationId', 'businessTransactionId', 'status', 'checks', 'trustRecordHash', 'verifiedAt'],
        receipt: ['receiptId', 'businessTransactionId', 'verificationId', 'trustRecordHash', 'decision', 'executionStatus', 'issuedAt'],
        'audit-event': ['eventId', 'callerId', 'route', 'method', 'outcome', 'occurredAt'],
        'governance-event': ['eventId', 'callerId', 'action', 'subjectType', 'subjectId', 'summary', 'occurredAt'],
        'execution-trust-record': ['businessTransactionId', 'businessTransactionHash', 'callerId', 'transaction', 'decision', 'executions', 'recordedAt'],
      };
      for (const [name, fields] of Object.entries(required)) {
        for (const field of fields) {
          const report = verifyOffline(await resign(deleteAt(fx.records[name as keyof Fixtures['records']], [field])), fx.jwks);
          expect({ name, field, fields: report.checks.find((c) => c.name === 'fields') }).toEqual({
            name,
            field,
            fields: { name: 'fields', ok: false, detail: expect.stringContaining(`${field}: missing`) },
          });
        }
      }
      const attestation = fx.records.attestation;
      for (const field of ['execution_fingerprint', 'requestId', 'policyId', 'policyVersion', 'schemaVersion', 'runtimeHash', 'decision', 'execution_state', 'bundleHash', 'manifestHash', 'trustRootVersion', 'evaluatorHash', 'evaluatorSemanticHash', 'evaluatorArtifactHash', 'releaseManifestHash', 'issuedAt']) {
        const report = verifyOffline(fx.signAttestation(deleteAt(attestation, [field])), fx.jwks);
        expect({ field, kind: report.kind, fields: report.checks.find((c) => c.name === 'fields') }).toEqual({
          field,
          kind: 'attestation',
          fields: { name: 'fields', ok: false, detail: expect.stringContaining(`${field}: missing`) },
        });
        expect(failed(report)).not.toContain('signature');
      }
    });
  });
});

describe('attestation and override resolution: checks beyond the signature', () => {
  let fx: Fixtures;
  beforeAll(async () => {
    fx = await makeFixtures('ed25519');
  });

  it('names the checks: identity recomputes executionId and execution_fingerprint; the manifest signature covers manifestHash', () => {
    const report = verifyOffline(fx.records.attestation, fx.jwks);
    expect(report.checks.map((c) => c.name)).toEqual(['signature', 'fields', 'identity', 'manifestSignature']);
    expect(verifyOffline(fx.records['override-resolution'], fx.jwks).checks.map((c) => c.name)).toEqual(['signature', 'fields', 'fingerprint']);
  });

  it.each(['requestId', 'policyId', 'policyVersion', 'signalsHash'])('a re-signed attestation with another %s fails identity', (field) => {
    const a = fx.records.attestation;
    const report = verifyOffline(fx.signAttestation(setAt(a, [field], changed(a[field]))), fx.jwks);
    expect(failed(report)).toEqual(['identity']);
    expect(report.checks.find((c) => c.name === 'identity')!.detail).toMatch(/executionId: does not recompute/);
  });

  it.each(['bundleHash', 'evaluatorArtifactHash', 'decision.reason', 'execution_state'])('a re-signed attestation with another %s fails the fingerprint', (field) => {
    const a = fx.records.attestation;
    const path = field.split('.');
    const value = field === 'execution_state' ? 'blocked' : changed(path.reduce<unknown>((o, k) => (o as Json)[k], a));
    const report = verifyOffline(fx.signAttestation(setAt(a, path, value)), fx.jwks);
    expect(failed(report)).toEqual(['identity']);
    expect(report.checks.find((c) => c.name === 'identity')!.detail).toMatch(/execution_fingerprint: does not recompute/);
  });

  it('a re-signed attestation whose manifest signature does not cover its manifestHash fails manifestSignature', () => {
    const a = fx.records.attestation;
    expect(failed(verifyOffline(fx.signAttestation({ ...a, manifestHash: '0a'.repeat(32) }), fx.jwks))).toEqual(['manifestSignature']);
  });

  it('a re-signed override resolution whose fields changed fails the fingerprint', async () => {
    const r = fx.records['override-resolution'];
    for (const field of ['approvedBy', 'reason', 'previousFingerprint', 'status']) {
      const value = field === 'status' ? 'rejected' : changed(r[field]);
      const report = verifyOffline(await fx.signer.sign(setAt(r, [field], value)), fx.jwks);
      expect({ field, failed: failed(report) }).toEqual({ field, failed: ['fingerprint'] });
    }
  });
});

describe('detectKind, unwrapServedRecord and odd input', () => {
  const trust = { recordType: 'execution-trust-record', businessTransactionId: 'x', keyId: 'k', signature: 's' };

  it('detects kinds by recordType, audit kind, and attestation fields', () => {
    expect(detectKind(trust)).toBe('execution-trust-record');
    expect(detectKind({ recordType: 'receipt' })).toBe('receipt');
    expect(detectKind({ recordType: 'verification' })).toBe('verification');
    expect(detectKind({ recordType: 'other' })).toBe('unknown');
    expect(detectKind({ recordType: 'toString' })).toBe('unknown');
    expect(detectKind({ recordType: '__proto__' })).toBe('unknown');
    expect(detectKind({ kind: 'governance' })).toBe('audit-event');
    expect(detectKind({ kind: 'caller-authentication' })).toBe('audit-event');
    expect(detectKind({ executionId: 'e', execution_fingerprint: 'f' })).toBe('attestation');
    expect(detectKind({ executionId: 'e', signerKeyId: 'k' })).toBe('attestation');
    expect(detectKind({ executionId: 'e' })).toBe('unknown');
    // attestation-simple's answer, or the statement its POST /verify takes.
    expect(detectKind({ status: 'ok', executionId: 'e', decision: {}, execution_state: 'completed', runtimeHash: 'r', requires_override: false, signature: 's' })).toBe('attestation-simple');
    expect(detectKind({ executionId: 'e', decision: {}, execution_state: 'completed', runtimeHash: 'r', signature: 's' })).toBe('attestation-simple');
    expect(detectKind({ executionId: 'e', execution_state: 'completed', runtimeHash: 'r' })).toBe('unknown');
    expect(detectKind([trust])).toBe('unknown');
  });

  it('never throws, and is never valid, for things that are not signed records', () => {
    const odd: unknown[] = [null, undefined, 0, 'x', true, [], {}, [trust], { recordType: 'nope' }, { recordType: 'execution-trust-record' }, { recordType: 'execution-intent', parameters: 1 }, { executionId: 1, signerKeyId: {} }, { kind: 'governance', signature: 1 }];
    for (const value of odd) {
      for (const jwks of [{ keys: [] }, { keys: 'x' } as unknown as JwksLike, null as unknown as JwksLike, { keys: [null, 1, { kid: 'k' }] }]) {
        const report = verifyOffline(value, jwks);
        expect(report.valid).toBe(false);
        expect(report.checks.some((c) => !c.ok && typeof c.detail === 'string')).toBe(true);
      }
    }
    expect(verifyOffline([trust], { keys: [] }).checks).toEqual([{ name: 'kind', ok: false, detail: 'a list, not one signed object' }]);
    expect(verifyOffline({ recordType: 'nope' }, { keys: [] }).checks).toEqual([{ name: 'kind', ok: false, detail: 'unknown recordType "nope"' }]);
  });

  it('unwraps the responses that carry a signed object', () => {
    const intent = { recordType: 'execution-intent', businessTransactionId: 'x' };
    const refusal = { recordType: 'refusal-record', businessTransactionId: 'x' };
    expect(unwrapServedRecord(trust)).toEqual({ record: trust });
    expect(unwrapServedRecord({ intent, status: { state: 'FINALIZED' } })).toEqual({ record: intent, from: 'intent' });
    expect(unwrapServedRecord({ businessTransactionId: 'x', executionStatus: 'EXECUTED', decision: {}, result: {}, trustRecord: trust })).toEqual({ record: trust, from: 'trustRecord' });
    expect(unwrapServedRecord({ businessTransactionId: 'x', outcome: 'REFUSED', trustRecord: null, refusal })).toEqual({ record: refusal, from: 'refusal' });
    const attestation = { executionId: 'e', signerKeyId: 'k' };
    expect(unwrapServedRecord({ status: 'approved', requires_override: false, attestation })).toEqual({ record: attestation, from: 'attestation' });
    // A Business Transaction has an `intent` too, but not a signed one: nothing to unwrap.
    const body = { businessTransactionId: 'x', intent: { action: 'sandbox:echo', parameters: {} } };
    expect(unwrapServedRecord(body)).toEqual({ record: body });
    expect(unwrapServedRecord([trust])).toEqual({ record: [trust] });
  });
});

describe('Trusted Signals: each sourceProof is checked against the key its sourceKeyId carries', () => {
  async function refusalWith(sourcedSignals: Json[]): Promise<{ record: Json; jwks: JwksLike }> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ets-offline-src-'));
    dirs.push(dataDir);
    const ring = await KeyRing.open({ dataDir, mode: 'ed25519' });
    const record = await new KeyRingSigner(ring).sign({
      recordType: 'refusal-record',
      businessTransactionId: '7b1e4c2a-3f5d-4e6a-9b8c-0d1e2f3a4b5c',
      businessTransactionHash: 'ab'.repeat(32),
      callerId: 'agent-7',
      principalId: 'agent-7',
      action: 'sandbox:echo',
      policy: { name: 'p', version: '1' },
      decision: { action: 'reject', reason: 'Invoice too large', requires_override: false, matchedRuleId: 'large' },
      matchedRuleId: 'large',
      reason: 'Invoice too large',
      assessment: {
        authority: { status: 'VERIFIED', callerId: 'agent-7', principalId: 'agent-7', grant: null },
        businessValidation: { status: 'VERIFIED', sourcedSignals },
        execution: { status: 'REFUSED' },
      },
      refusedAt: '2025-11-21T12:00:00.000Z',
    });
    return { record: record as unknown as Json, jwks: ring.jwks() as JwksLike };
  }
  const source = generateKeyPairSync('ed25519');
  const keyId = `ed25519:${source.publicKey.export({ format: 'jwk' }).x as string}`;
  const signal = (over: Json = {}, signedValue: unknown = 9000): Json => {
    const base = { fact: 'invoice.amount', subject: 'inv-42', value: 9000, validUntil: '2025-11-21T12:05:00.000Z', nonce: 'n'.repeat(43), ...over };
    const proof = nodeSign(null, Buffer.from(canonicalize({ fact: base.fact, subject: base.subject, value: signedValue, validUntil: base.validUntil, nonce: base.nonce })), source.privateKey).toString('base64');
    return { signal: 'invoiceAmount', source: 'erp', ...base, sourceKeyId: keyId, sourceProof: proof, sourceProofVerified: true, fetchedAt: '2025-11-21T12:00:00.000Z' };
  };

  it('verifies proofs made by the source, and says which signals were trusted by TLS alone', async () => {
    const tlsOnly = { ...signal(), signal: 'country', sourceKeyId: null, sourceProof: null, sourceProofVerified: false };
    const { record, jwks } = await refusalWith([signal(), tlsOnly]);
    const report = verifyOffline(record, jwks);
    expect(report.valid).toBe(true);
    expect(report.checks.find((c) => c.name === 'sourceProofs')).toEqual({ name: 'sourceProofs', ok: true, detail: '1 signed by their source, 1 trusted by TLS alone (no proof)' });
  });

  it.each<[string, Json]>([
    ['a value other than the one the source signed', signal({}, 120)],
    ['another key id', { ...signal(), sourceKeyId: `ed25519:${generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x as string}` }],
    ['a key id that carries no key', { ...signal(), sourceKeyId: 'erp-2025' }],
    ['no proof', { ...signal(), sourceProof: null }],
  ])('fails a Trusted Signal with %s, even under a valid record signature', async (_what, s) => {
    const { record, jwks } = await refusalWith([s]);
    const report = verifyOffline(record, jwks);
    expect(failed(report)).toEqual(['sourceProofs']);
    expect(report.checks.find((c) => c.name === 'sourceProofs')!.detail).toContain('sourcedSignals[0] (invoiceAmount)');
  });
});

describe('runtime manifest and confirmation proof: the other leaves of the transparency log', () => {
  const hasher = new Sha256Hasher();
  const pkg = (name: string, kind: 'workspace' | 'dependency', hash: string) => ({ name, version: '1.0.0', path: kind === 'workspace' ? `packages/${name}` : `node_modules/${name}`, kind, files: 3, hash });
  const runtimeContents: RuntimeContents = {
    node: { version: 'v20.20.0', v8: '11.3.244.8-node.33', openssl: '3.0.17', platform: 'linux', arch: 'x64' },
    code: 'built',
    packages: [pkg('@ets/server', 'workspace', '02'.repeat(32)), pkg('express', 'dependency', '03'.repeat(32))],
  };
  const evaluatorContents: EvaluatorContents = { engine: { path: 'packages/domain/dist/policy', files: 9, hash: '04'.repeat(32) }, packages: [pkg('@marcbachmann/cel-js', 'dependency', '07'.repeat(32))] };
  let jwks: JwksLike;
  let signer: KeyRingSigner;
  let proofs: JwsProofSigner;
  let manifest: Json;
  let proof: string;

  /** Signs a manifest as the service does at start (spec 9.4): manifestSignature over the hex manifestHash. */
  const signManifest = async (m: Json): Promise<Json> => {
    const manifestHash = hasher.contentHash(m);
    return { manifest: m, manifestHash, manifestSignature: (await signer.signText(manifestHash)).signature };
  };

  beforeAll(async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ets-offline-'));
    dirs.push(dataDir);
    const ring = await KeyRing.open({ dataDir, mode: 'hybrid' });
    jwks = ring.jwks();
    signer = new KeyRingSigner(ring);
    proofs = new JwsProofSigner(ring);
    const release: ReleaseManifest = {
      version: 'abc123.20251121T120000Z',
      runtimeHash: runtimeHashOf(hasher, runtimeContents),
      evaluatorHash: evaluatorHashOf(hasher, evaluatorContents),
      evaluatorSemanticHash: '06'.repeat(32),
      capabilities: ['execute:business-transaction', 'verify:business-transaction', 'runtime-manifest'],
      supportedSchemaVersions: ['1'],
    };
    const keyId = (await signer.signText('x')).keyId;
    manifest = await signManifest({
      manifestType: 'runtime-manifest',
      ...release,
      releaseManifestHash: releaseManifestHashOf(hasher, release),
      trustRootVersion: '09'.repeat(32),
      signerKeyId: keyId,
      platform: 'node v20.20.0',
      startedAt: '2025-11-21T12:00:00.000Z',
      runtimeContents,
      evaluatorContents,
    });
    proof = await proofs.signProof(
      {
        executionId: 'ab'.repeat(32),
        attestationHash: 'cd'.repeat(32),
        executedAction: { actionType: 'payment', actionId: 'p-1', actionTimestamp: '2025-11-21T12:00:01.000Z', actionDetailsHash: null },
        matched: true,
        withinTimeWindow: true,
        timeWindowSeconds: 300,
        authorizedAt: '2025-11-21T12:00:00.000Z',
        confirmedAt: '2025-11-21T12:00:02.000Z',
        confirmedBy: 'agent-7',
      },
      CONFIRMATION_PROOF_TYPE,
    );
  });

  it('detects and verifies a signed runtime manifest: signature by manifest.signerKeyId, fields, manifestHash, releaseManifestHash, contents', () => {
    expect(detectKind(manifest)).toBe('runtime-manifest');
    const report = verifyOffline(manifest, jwks);
    expect({ valid: report.valid, failed: failed(report) }).toEqual({ valid: true, failed: [] });
    expect(report.checks.map((c) => c.name)).toEqual(['signature', 'fields', 'manifestHash', 'releaseManifestHash', 'contents']);
    expect(report.checks.find((c) => c.name === 'contents')!.detail).toBe('runtimeHash covers 2 packages, built code, node v20.20.0');
  });

  it('a re-signed runtime manifest whose listed contents do not give its runtimeHash or evaluatorHash fails contents; one that lists none (older) passes', async () => {
    const m = manifest.manifest as Json;
    const otherPackages = [{ ...runtimeContents.packages[0]!, hash: '0f'.repeat(32) }];
    expect(failed(verifyOffline(await signManifest({ ...m, runtimeContents: { ...runtimeContents, packages: otherPackages } }), jwks))).toEqual(['contents']);
    expect(failed(verifyOffline(await signManifest({ ...m, evaluatorContents: { ...evaluatorContents, packages: otherPackages } }), jwks))).toEqual(['contents']);
    expect(failed(verifyOffline(await signManifest({ ...m, runtimeContents: { ...runtimeContents, code: 'other' } }), jwks))).toEqual(['fields', 'contents']);
    const { runtimeContents: _r, evaluatorContents: _e, ...older } = m;
    const report = verifyOffline(await signManifest(older), jwks);
    expect({ valid: report.valid, contents: report.checks.find((c) => c.name === 'contents')!.detail }).toEqual({ valid: true, contents: 'the manifest lists no contents (signed before they were recorded)' });
  });

  it('a runtime manifest fails when any field changes, when a field is removed, or with a JWKS that lacks its key', () => {
    for (const p of leafPaths(manifest)) {
      const original = p.reduce<unknown>((node, k) => (node as Record<string | number, unknown>)[k], manifest);
      const report = verifyOffline(setAt(manifest, p, changed(original)), jwks);
      // The signature covers manifestHash; manifestHash covers every field of the manifest.
      const expected = p[0] === 'manifest' ? 'manifestHash' : 'signature';
      expect({ path: show(p), valid: report.valid, includes: failed(report).includes(expected) }).toEqual({ path: show(p), valid: false, includes: true });
    }
    expect(failed(verifyOffline(deleteAt(manifest, ['manifestSignature']), jwks))).toEqual(['signature', 'fields']);
    // Without manifestHash it is no longer a signed manifest at all.
    expect(failed(verifyOffline(deleteAt(manifest, ['manifestHash']), jwks))).toEqual(['kind']);
    expect(failed(verifyOffline(deleteAt(manifest, ['manifest', 'platform']), jwks))).toEqual(expect.arrayContaining(['fields', 'manifestHash']));
    const none = verifyOffline(manifest, { keys: [] });
    expect(none.checks.find((c) => c.name === 'signature')!.detail).toMatch(/^manifestSignature: keyId: unknown key /);
  });

  it('a re-signed runtime manifest whose release fields changed fails releaseManifestHash', async () => {
    const resigned = await signManifest({ ...(manifest.manifest as Json), capabilities: ['evaluate'] });
    expect(failed(verifyOffline(resigned, jwks))).toEqual(['releaseManifestHash']);
    const foreignType = await signManifest({ ...(manifest.manifest as Json), manifestType: 'other' });
    expect(failed(verifyOffline(foreignType, jwks))).toEqual(['fields']);
  });

  it('unwraps the flat manifest GET /runtime/manifest serves into the signed one', () => {
    const { manifestHash, manifestSignature } = manifest;
    const served = { ...(manifest.manifest as Json), manifestHash, manifestSignature };
    const { record } = unwrapServedRecord(served);
    expect(record).toEqual(manifest);
    expect(verifyOffline(record, jwks).valid).toBe(true);
  });

  it('detects and verifies a confirmation proof (a compact JWS): signature by the kid, header, claims', () => {
    expect(detectKind(proof)).toBe('confirmation-proof');
    const report = verifyOffline(proof, jwks);
    expect({ valid: report.valid, failed: failed(report) }).toEqual({ valid: true, failed: [] });
    expect(report.checks.map((c) => c.name)).toEqual(['signature', 'header', 'fields']);
    expect(unwrapServedRecord({ matched: true, executionId: 'x', withinTimeWindow: true, proof, reasons: [] })).toEqual({ record: proof, from: 'proof' });
    expect(unwrapServedRecord({ record: proof, transparency: { leafIndex: 1 } })).toEqual({ record: proof, from: 'record', transparency: { leafIndex: 1 } });
  });

  it('a confirmation proof fails when its claims, header or signature change, or with a JWKS that lacks its key', async () => {
    const [h, p, s] = proof.split('.') as [string, string, string];
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as Json;
    const header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as Json;
    expect(failed(verifyOffline(`${h}.${b64({ ...claims, matched: false })}.${s}`, jwks))).toEqual(['signature']);
    expect(failed(verifyOffline(`${b64({ ...header, typ: 'JWT' })}.${p}.${s}`, jwks))).toEqual(['signature', 'header']);
    // One character of the signature's first bytes changed: always another signature (its last
    // characters may already be the replacement, e.g. "AA", one time in 256).
    const changed = `${s.slice(0, 5)}${s[5] === 'A' ? 'B' : 'A'}${s.slice(6)}`;
    expect(changed).not.toBe(s);
    expect(failed(verifyOffline(`${h}.${p}.${changed}`, jwks))).toEqual(['signature']);
    expect(failed(verifyOffline(`${b64({ ...header, alg: 'none' })}.${p}.${s}`, jwks))).toEqual(['signature', 'header']);
    expect(failed(verifyOffline(`${h}.${p}.${s}`, { keys: [] }))).toEqual(['signature']);
    // Signed, but not a confirmation proof's claims: fields names what is missing.
    const other = await proofs.signProof({ executionId: 'x' }, CONFIRMATION_PROOF_TYPE);
    const report = verifyOffline(other, jwks);
    expect(failed(report)).toEqual(['fields']);
    expect(report.checks.find((c) => c.name === 'fields')!.detail).toMatch(/claims\.matched: missing/);
    expect(detectKind('a.b')).toBe('unknown');
    expect(failed(verifyOffline('x.y.z', jwks))).toEqual(['signature', 'header', 'fields']);
  });

  it('a proof passed beside either proves H(C(the record as stored)): the JWS string, the manifest object', () => {
    // No checkpoint here (transparency-offline.test.ts covers proofs); a malformed one fails inclusion only.
    expect(failed(verifyOffline(proof, jwks, { transparency: { leafIndex: 0 } }))).toEqual(['inclusion']);
    expect(failed(verifyOffline(manifest, jwks, { transparency: { leafIndex: 0 } }))).toEqual(['inclusion']);
  });
});
