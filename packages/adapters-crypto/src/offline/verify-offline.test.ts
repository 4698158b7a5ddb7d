import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { generateKeyPairSync, sign as nodeSign } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  AuthenticationAudit,
  buildTrustRecord,
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
import { KeyRingSigner } from '../record-signer.js';
import { Sha256Hasher } from '../sha256-hasher.js';
import { detectKind, verifyOffline, type OfflineRecordKind, type OfflineReport } from './verify-offline.js';
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
  records: Record<Exclude<OfflineRecordKind, 'unknown'> | 'first-trust-record' | 'recorded-trust-record' | 'governance-event', Json>;
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
  await new GovernanceAudit(signer, store, clock, ids).record({ callerId: 'bob', action: 'approve', subjectType: 'policy', subjectId: 'chg-1', summary: 'publish policy x' });

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
  const attestation = signAttestation({
    executionId: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    execution_fingerprint: 'fp-' + 'ef'.repeat(16),
    policyId: 'payments-transfer',
    policyVersion: '1.0.0',
    schemaVersion: '1',
    runtimeVersion: '2025.11.21',
    runtimeHash: '01'.repeat(32),
    decision: { action: 'approve', requires_override: false, reason: 'Within limits' },
    execution_state: 'completed',
    signalsHash: '02'.repeat(32),
    bundleHash: '03'.repeat(32),
    manifestHash: '04'.repeat(32),
    manifestSignature: 'bWFuaWZlc3Q=',
    trustRootVersion: '1',
    signerKeyId,
    evaluatorHash: '05'.repeat(32),
    evaluatorSemanticHash: '06'.repeat(32),
    evaluatorArtifactHash: '07'.repeat(32),
    releaseManifestHash: '08'.repeat(32),
  });

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
      for (const field of ['execution_fingerprint', 'policyId', 'policyVersion', 'schemaVersion', 'decision', 'execution_state']) {
        const report = verifyOffline(fx.signAttestation(deleteAt(attestation, [field])), fx.jwks);
        expect({ field, failed: failed(report) }).toEqual({ field, failed: ['fields'] });
      }
    });
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
