import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { DomainError } from '../shared/errors.js';
import type { Caller } from '../identity/caller.js';
import { compilePolicy, type PolicyDocument } from '../policy/index.js';
import type { PolicyCatalog } from '../execution/context.js';
import { attestationIdentityProblems, attestationShapeProblems, attestationSignatureProblems } from './attestation-checks.js';
import { AttestationService, type ExecuteResult } from './attestation-service.js';
import { AttestationVerifier } from './attestation-verifier.js';
import { AttestationAudit } from './audit-reads.js';
import { ExecutionConfirmation } from './confirmation.js';
import { evaluatorArtifactHashOf, evaluatorConformance, evaluatorSemanticHashOf } from './evaluator-identity.js';
import { evaluatorHashOf, executionFingerprintOf, executionIdOf, runtimeHashOf, signalsHashOf } from './identity.js';
import { OverrideService } from './overrides.js';
import type { RuntimeManifest, SignedAttestation, SignedRuntimeManifest } from './records.js';
import { parseConfirmRequest, parseExecuteRequest, parseOverrideRequest, parsePolicyRequest, parseSimpleVerifyRequest } from './requests.js';
import { AttestationRuntime, manifestProblems } from './runtime.js';
import { SecurityEvents } from './security-events.js';
import { fakeHasher as hasher, fakeKeys, fakeRuntimeFacts, InMemoryAttestationStore } from './testing.js';

const POLICY: PolicyDocument = {
  name: 'payments',
  policyVersion: '1.0.0',
  signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
  rules: [
    { id: 'sanctioned', when: "has(signals.country) && signals.country == 'KP'", action: 'reject', reason: 'Country is sanctioned' },
    { id: 'large', when: 'signals.amount > 10000', action: 'approve', requires_override: true, reason: 'Large' },
    { id: 'ok', when: 'signals.amount > 0', action: 'approve', reason: 'Within limits' },
  ],
};
const POLICIES = [POLICY, { ...POLICY, policyVersion: '2.0.0', default: { action: 'reject' as const, reason: 'No rule matched' } }];

const caller = (callerId = 'agent-1', holder?: Caller['credentialHolderType']): Caller => ({ callerId, credentialHolderType: holder, allowedCapabilities: [], allowedPrincipalIds: [], allowedTenantIds: [] });

class FakeClock {
  t = Date.parse('2026-11-21T12:00:00.000Z');
  now = (): Date => new Date(this.t);
}

async function harness(facts: { error: string } | undefined = undefined) {
  let n = 0;
  const ids = { uuid: () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}` };
  const clock = new FakeClock();
  const keys = fakeKeys();
  const store = new InMemoryAttestationStore();
  const runtime = new AttestationRuntime({ store, signer: keys.signer, verifier: keys.verifier, hasher, clock, profile: 'attestation', trustRootVersion: hasher.contentHash(['k1']), signerKeyId: 'k1' });
  await runtime.start(facts ?? fakeRuntimeFacts());
  const compiled = new Map(POLICIES.map((p) => [`${p.name}@${p.policyVersion}`, { document: p, contentHash: hasher.contentHash(p), compiled: compilePolicy(p) }]));
  const policies: PolicyCatalog = { find: async (name, version) => compiled.get(`${name}@${version}`) };
  const security = new SecurityEvents({ store, clock, ids });
  const base = { store, runtime, hasher, clock, security, ids };
  return {
    clock,
    keys,
    store,
    runtime,
    full: new AttestationService({ ...base, policies, signer: keys.signer }, 'attestation'),
    simple: new AttestationService({ ...base, policies, signer: keys.signer }, 'attestation-simple'),
    verifier: new AttestationVerifier({ ...base, verifier: keys.verifier }),
    overrides: new OverrideService({ ...base, signer: keys.signer }),
    confirmation: new ExecutionConfirmation({ ...base, verifier: keys.verifier, proofs: keys.proofs }),
    audit: new AttestationAudit({ store, clock }),
  };
}

const body = (signals: Record<string, unknown>, over: Record<string, unknown> = {}) => ({ executionId: `run-${Math.random()}`, policyId: 'payments', policyVersion: '1.0.0', signals, ...over });
const attestationOf = (r: ExecuteResult): SignedAttestation => ('attestation' in r ? r.attestation : (undefined as never));

async function expectError(p: Promise<unknown>, kind: DomainError['kind'], message: RegExp, code?: string): Promise<void> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(DomainError);
  expect({ kind: (e as DomainError).kind, code: (e as DomainError).code }).toEqual({ kind, code });
  expect((e as DomainError).message).toMatch(message);
}

describe('POST /execute (attestation variant)', () => {
  it('signs an attestation whose every field has its meaning', async () => {
    const h = await harness();
    const req = body({ amount: 120, country: 'FR' }, { executionId: 'run-1' });
    const res = await h.full.execute(caller(), req);
    expect(res).toMatchObject({ status: 'approved', requires_override: false });
    const a = attestationOf(res);
    const m = h.runtime.require();
    const signalsHash = signalsHashOf(hasher, req.signals);
    expect(a).toEqual({
      executionId: executionIdOf(hasher, { requestId: 'run-1', policyId: 'payments', policyVersion: '1.0.0', signalsHash }),
      execution_fingerprint: expect.any(String),
      requestId: 'run-1',
      policyId: 'payments',
      policyVersion: '1.0.0',
      schemaVersion: '1',
      runtimeVersion: 'b1',
      runtimeHash: m.manifest.runtimeHash,
      decision: { action: 'approve', requires_override: false, reason: 'Within limits', matchedRuleId: 'ok' },
      execution_state: 'completed',
      signalsHash,
      bundleHash: hasher.contentHash(POLICY),
      manifestHash: m.manifestHash,
      manifestSignature: m.manifestSignature,
      trustRootVersion: hasher.contentHash(['k1']),
      signerKeyId: 'k1',
      evaluatorHash: m.manifest.evaluatorHash,
      evaluatorSemanticHash: evaluatorSemanticHashOf(hasher),
      evaluatorArtifactHash: evaluatorArtifactHashOf(hasher, compilePolicy(POLICY), hasher.contentHash(POLICY)),
      releaseManifestHash: m.manifest.releaseManifestHash,
      callerId: 'agent-1',
      issuedAt: '2026-11-21T12:00:00.000Z',
      signature: expect.any(String),
    });
    expect(a.execution_fingerprint).toBe(executionFingerprintOf(hasher, a));
    expect(attestationShapeProblems(a as unknown as Record<string, unknown>)).toEqual([]);
    expect(attestationIdentityProblems(hasher, a as unknown as Record<string, unknown>)).toEqual([]);
    expect(attestationSignatureProblems(hasher, h.keys.verifier, a as unknown as Record<string, unknown>)).toEqual([]);
    expect(await h.store.getDecision(a.executionId)).toMatchObject({ requestId: 'run-1', execution_state: 'completed', attestation: a });
  });

  it.each([
    [{ amount: 20000 }, 'pending_override', true],
    [{ amount: 5, country: 'KP' }, 'blocked', false],
  ])('answers %p as %s', async (signals, status, requiresOverride) => {
    const h = await harness();
    const res = await h.full.execute(caller(), body(signals));
    expect(res).toMatchObject({ status, requires_override: requiresOverride, attestation: { execution_state: status } });
  });

  it('refuses a replayed executionId with 422 EXECUTION_ID_REPLAYED, stores nothing more and records a security event', async () => {
    const h = await harness();
    await h.full.execute(caller(), body({ amount: 1 }, { executionId: 'once' }));
    await expectError(h.full.execute(caller(), body({ amount: 2 }, { executionId: 'once' })), 'unprocessable', /'once' was already used/, 'EXECUTION_ID_REPLAYED');
    expect(h.store.decisions.size).toBe(1);
    expect(h.store.securityEvents).toMatchObject([{ kind: 'execution_replayed', callerId: 'agent-1', operation: 'execute' }]);
  });

  it('of simultaneous requests with one executionId, one is attested and every other is a 422 replay with its security event (the store\'s guard decides, not the early check)', async () => {
    const h = await harness();
    const results = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => h.full.execute(caller(), body({ amount: i + 1 }, { executionId: 'race' }))));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results.filter((x) => x.status === 'rejected')) {
      expect((r as PromiseRejectedResult).reason).toMatchObject({ kind: 'unprocessable', code: 'EXECUTION_ID_REPLAYED' });
    }
    expect(h.store.decisions.size).toBe(1);
    expect(h.store.securityEvents.filter((e) => e.kind === 'execution_replayed')).toHaveLength(4);
  });

  it('answers 422 without a code for a policy version that is not published, and for signals that do not match signalsSchema', async () => {
    const h = await harness();
    await expectError(h.full.execute(caller(), body({ amount: 1 }, { policyVersion: '9' })), 'unprocessable', /^Policy 'payments' version '9' was not found\.$/);
    await expectError(
      h.full.execute(caller(), body({ amount: '1', colour: 'red', country: null })),
      'unprocessable',
      /signal 'amount' must be of type number; signal 'colour' is not declared in signalsSchema; signal 'country' must be of type string/,
    );
    expect(h.store.decisions.size).toBe(0);
  });

  it('refuses malformed bodies with 400 naming the field, in order, and nothing else for any input', () => {
    const message = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return (e as DomainError).message;
      }
      return 'no error';
    };
    expect(message(() => parseExecuteRequest([], 'attestation'))).toMatch(/must be a JSON object/);
    expect(message(() => parseExecuteRequest({}, 'attestation'))).toBe('executionId is required and must be a non-empty string.');
    expect(message(() => parseExecuteRequest({ executionId: 'x' }, 'attestation'))).toBe('policyId is required and must be a non-empty string.');
    expect(message(() => parseExecuteRequest({ executionId: 'x', policyId: 'p', policyVersion: '1' }, 'attestation'))).toBe('signals is required and must be an object.');
    expect(message(() => parseExecuteRequest({ executionId: 'a\u0000', policyId: 'p', policyVersion: '1', signals: {} }, 'attestation'))).toBe('executionId must not contain U+0000.');
    expect(message(() => parseExecuteRequest({ executionId: 'x'.repeat(257), policyId: 'p', policyVersion: '1', signals: {} }, 'attestation'))).toBe('executionId must be at most 256 characters.');
    expect(message(() => parseExecuteRequest({ executionId: 'x', policyId: 'p', policyVersion: '1', signals: {} }, 'attestation-simple'))).toMatch(/executionId is assigned by the service/);
    const confirmAt = (actionTimestamp: string) => () =>
      parseConfirmRequest({ attestation: { executionId: 'e' }, executedAction: { actionType: 't', actionId: 'i', actionTimestamp } });
    for (const bad of ['2026-01-01T23:59:60Z', '2026-02-29T00:00:00Z', '2026-01-01T00:00:00.1234567891Z', '2026-01-01 00:00:00Z']) {
      expect(message(confirmAt(bad))).toMatch(/^executedAction\.actionTimestamp is required and must be an ISO 8601 date-time/);
    }
    expect(confirmAt('2026-01-01T01:00:00.123456789+01:00')().actionAt).toBe(Date.parse('2026-01-01T00:00:00.123Z'));
    const parsers = [
      (b: unknown) => parseExecuteRequest(b, 'attestation'),
      (b: unknown) => parseExecuteRequest(b, 'attestation-simple'),
      parsePolicyRequest,
      parseOverrideRequest,
      parseConfirmRequest,
      parseSimpleVerifyRequest,
    ];
    const field = fc.oneof(fc.jsonValue(), fc.string());
    const arbitrary = fc.oneof(
      fc.jsonValue(),
      fc.record({ executionId: field, policyId: field, policyVersion: field, signals: field, approved: field, attestation: field, executedAction: field, timeWindowSeconds: field }, { requiredKeys: [] }),
    );
    fc.assert(
      fc.property(arbitrary, (b) => {
        for (const parse of parsers) {
          try {
            parse(b);
          } catch (e) {
            expect(e).toBeInstanceOf(DomainError);
            expect((e as DomainError).kind).toBe('invalid');
            expect((e as DomainError).code).toBeUndefined();
          }
        }
      }),
      { numRuns: 400 },
    );
  });
});

describe('POST /execute (simple variant)', () => {
  it('answers the statement and its signature, and stores the full attestation', async () => {
    const h = await harness();
    const res = await h.simple.execute(caller(), { policyId: 'payments', policyVersion: '1.0.0', signals: { amount: 3 } });
    if (res.status !== 'ok') throw new Error('expected the simple shape');
    const runtimeHash = h.runtime.require().manifest.runtimeHash;
    expect(res).toEqual({
      status: 'ok',
      executionId: expect.stringMatching(/^[0-9a-f]{64}$/),
      decision: { action: 'approve', requires_override: false, reason: 'Within limits', matchedRuleId: 'ok' },
      execution_state: 'completed',
      runtimeHash,
      requires_override: false,
      signature: `sig(k1):${hasher.canonicalize({ executionId: res.executionId, decision: res.decision, execution_state: 'completed', runtimeHash })}`,
    });
    const stored = await h.store.getDecision(res.executionId);
    expect(stored).toMatchObject({ variant: 'attestation-simple', requestId: '00000000-0000-4000-8000-000000000001' });
    expect(attestationIdentityProblems(hasher, stored!.attestation as unknown as Record<string, unknown>)).toEqual([]);
    const verdict = await h.verifier.verifySimple(caller(), res);
    expect(verdict).toEqual({ valid: true, checks: { signature_verified: true, runtime_verified: true, schema_compatible: true }, errors: [] });
  });

  it('answers 422 for no matching rule and for a rule that cannot be evaluated, instead of attesting them', async () => {
    const h = await harness();
    const req = (signals: Record<string, unknown>) => ({ policyId: 'payments', policyVersion: '1.0.0', signals });
    await expectError(h.simple.execute(caller(), req({ amount: -1 })), 'unprocessable', /^No matching rule/, 'NO_MATCHING_RULE');
    await expectError(h.simple.execute(caller(), req({ country: 'FR' })), 'unprocessable', /^Invariant violation: Rule 'large' could not be evaluated/, 'INVARIANT_VIOLATION');
    expect(h.store.decisions.size).toBe(0);
    expect(h.store.securityEvents.map((e) => e.kind)).toEqual(['invariant_violation']);
    // The attestation variant attests both as blocked.
    expect(await h.full.execute(caller(), body({ amount: -1 }))).toMatchObject({ status: 'blocked', attestation: { decision: { matchedRuleId: null } } });
    expect(await h.full.execute(caller(), body({ country: 'FR' }))).toMatchObject({ status: 'blocked', attestation: { decision: { matchedRuleId: 'large' } } });
  });
});

describe('the runtime', () => {
  it('is not configured until it started, or when it could not measure its code: 503 without a code, naming why', async () => {
    const h = await harness({ error: 'the built code of apps/server is missing (run npm run build)' });
    expect(h.runtime.selfCheck()).toBe(false);
    await expectError(h.full.execute(caller(), body({ amount: 1 })), 'unavailable', /^Runtime not configured: the built code of apps\/server is missing/);
    await expectError(h.verifier.verify(caller(), {}), 'unavailable', /^Runtime not configured/);
    await expectError(h.overrides.resolve(caller('ops', 'USER'), { executionId: 'x', approved: true, approvedBy: 'ops', approverRole: 'r', reason: 'x' }), 'unavailable', /^Runtime not configured/);
    const fresh = new AttestationRuntime({ store: h.store, signer: h.keys.signer, verifier: h.keys.verifier, hasher, clock: h.clock, profile: 'attestation', trustRootVersion: 't', signerKeyId: 'k1' });
    expect(() => fresh.require()).toThrow('Runtime not configured: the runtime is starting.');
    // The dry runs still answer; simulate says it would not sign.
    expect(await h.full.simulate(body({ amount: 1 }))).toMatchObject({ wouldSign: false, attestationPreview: { runtimeHash: null, manifestHash: null, bundleHash: hasher.contentHash(POLICY) } });
  });

  it('is not configured when its manifest is signed with another key, or cannot be stored; a key that changes later is 503 too', async () => {
    const h = await harness();
    const other = new AttestationRuntime({ store: h.store, signer: h.keys.signer, verifier: h.keys.verifier, hasher, clock: h.clock, profile: 'attestation', trustRootVersion: 't', signerKeyId: 'k0' });
    expect(await other.start(fakeRuntimeFacts())).toEqual({ configured: false, reason: 'the runtime manifest was signed with key k1, not the active key k0' });
    const failing = new AttestationRuntime({ store: { ...h.store, saveManifest: async () => Promise.reject(new Error('down')), findManifest: async () => undefined, manifestsWithRuntimeHash: async () => [] }, signer: h.keys.signer, verifier: h.keys.verifier, hasher, clock: h.clock, profile: 'attestation', trustRootVersion: 't', signerKeyId: 'k1' });
    expect(await failing.start(fakeRuntimeFacts())).toEqual({ configured: false, reason: 'the runtime manifest could not be stored' });

    expect(h.runtime.selfCheck()).toBe(true);
    h.keys.state.keyId = 'k2';
    h.keys.state.published.add('k2');
    await expectError(h.full.execute(caller(), body({ amount: 1 })), 'unavailable', /^Runtime not configured: the signing key changed to k2/);
  });

  it('publishes capabilities per profile and a manifest whose hashes recompute', async () => {
    const h = await harness();
    const m = h.runtime.require();
    expect(m.manifestHash).toBe(hasher.contentHash(m.manifest));
    expect(m.manifestSignature).toBe(`sig(k1):${m.manifestHash}`);
    expect(m.manifest.capabilities).toEqual(['execute:attestation', 'verify:attestation', 'evaluate', 'simulate', 'override', 'confirm-execution', 'audit', 'runtime-manifest']);
    expect(h.store.manifests.get(m.manifestHash)).toEqual(m);
  });
});

describe('evaluator identity', () => {
  it('the semantic hash is deterministic and its conformance suite covers every outcome of evaluation', () => {
    expect(evaluatorSemanticHashOf(hasher)).toBe(evaluatorSemanticHashOf(hasher));
    const decisions = evaluatorConformance().map((c) => (c as { decision: { action: string; requires_override: boolean; reason: string; matchedRuleId: string | null } }).decision);
    const ids = new Set(decisions.map((d) => d.matchedRuleId));
    for (const id of ['sanctioned', 'vip', 'large', 'exact', 'intent', 'default', 'signal-type-violation', 'low', null]) expect(ids).toContain(id);
    expect(decisions.some((d) => d.requires_override)).toBe(true);
    expect(decisions.some((d) => /could not be evaluated/.test(d.reason))).toBe(true);
  });

  it('the artifact hash changes with any rule of the compiled policy', () => {
    const hashOf = (doc: PolicyDocument) => evaluatorArtifactHashOf(hasher, compilePolicy(doc), 'bundle');
    const base = hashOf(POLICY);
    expect(hashOf(structuredClone(POLICY))).toBe(base);
    const changed = (f: (d: PolicyDocument) => void) => {
      const d = structuredClone(POLICY);
      f(d);
      return hashOf(d);
    };
    expect(changed((d) => (d.rules[1]!.when = 'signals.amount > 10001'))).not.toBe(base);
    expect(changed((d) => (d.rules[1]!.when = 'signals.amount > 10000.0'))).not.toBe(base);
    expect(changed((d) => (d.rules[2]!.reason = 'other'))).not.toBe(base);
    expect(changed((d) => (d.default = { action: 'reject', reason: 'x' }))).not.toBe(base);
    expect(evaluatorArtifactHashOf(hasher, compilePolicy(POLICY), 'other bundle')).not.toBe(base);
  });
});

describe('POST /verify', () => {
  it('verifies an attestation this runtime signed, and records the verification', async () => {
    const h = await harness();
    const a = attestationOf(await h.full.execute(caller(), body({ amount: 1 })));
    expect(await h.verifier.verify(caller(), a)).toEqual({ valid: true, checks: { signature: 'verified', runtime: 'verified', schema: 'verified' }, errors: [] });
    expect(h.store.verifications).toMatchObject([{ executionId: a.executionId, valid: true, variant: 'attestation' }]);
  });

  it('fails the signature when any field changes', async () => {
    const h = await harness();
    const a = attestationOf(await h.full.execute(caller(), body({ amount: 1 })));
    for (const [field, value] of Object.entries({ policyVersion: '2.0.0', execution_state: 'blocked', callerId: 'x', issuedAt: '2020-01-01T00:00:00.000Z' })) {
      const r = await h.verifier.verify(caller(), { ...a, [field]: value });
      expect({ field, valid: r.valid, signature: r.checks.signature }).toEqual({ field, valid: false, signature: 'failed' });
    }
    expect(h.store.securityEvents.filter((e) => e.kind === 'attestation_invalid')).toHaveLength(4);
  });

  it('runtime: failed on a provable mismatch, unknown for a manifest it does not know; schema: failed or unknown', async () => {
    const h = await harness();
    const a = attestationOf(await h.full.execute(caller(), body({ amount: 1 })));
    const resign = async (x: Record<string, unknown>) => {
      const { signature: _s, ...unsigned } = x;
      return { ...unsigned, signature: (await h.keys.signer.signText(hasher.canonicalize(unsigned))).signature };
    };
    const verdict = async (x: Record<string, unknown>) => h.verifier.verify(caller(), await resign(x));
    expect((await verdict({ ...a, runtimeHash: 'f'.repeat(64) })).checks).toEqual({ signature: 'verified', runtime: 'failed', schema: 'verified' });
    expect((await verdict({ ...a, manifestSignature: 'sig(k1):forged' })).checks.runtime).toBe('failed');
    const unknownHash = 'e'.repeat(64);
    expect((await verdict({ ...a, manifestHash: unknownHash, manifestSignature: `sig(k1):${unknownHash}` })).checks.runtime).toBe('unknown');
    expect((await verdict({ ...a, schemaVersion: '2' })).checks.schema).toBe('failed');
    const { schemaVersion: _v, ...noVersion } = a;
    expect((await verdict(noVersion)).checks.schema).toBe('unknown');
    expect((await verdict({ ...a, execution_fingerprint: 'a'.repeat(64) })).errors).toContain('execution_fingerprint: does not recompute from the attestation');
  });

  it('checks its own manifest once it holds, and a stored one each time it is asked', async () => {
    const h = await harness();
    let hashed = 0;
    const counting: typeof hasher = { ...hasher, contentHash: (v) => (hashed++, hasher.contentHash(v)) };
    const runtime = new AttestationRuntime({ store: h.store, signer: h.keys.signer, verifier: h.keys.verifier, hasher: counting, clock: h.clock, profile: 'attestation', trustRootVersion: 't', signerKeyId: 'k1' });
    expect(runtime.selfCheck()).toBe(false);
    await runtime.start(fakeRuntimeFacts());
    hashed = 0;
    expect(runtime.selfCheck()).toBe(true);
    const once = hashed;
    expect(once).toBeGreaterThan(0);
    expect(runtime.selfCheck()).toBe(true);
    expect(runtime.problemsOf(runtime.require())).toEqual([]);
    expect(hashed).toBe(once);
    // Another process's manifest (an equal copy here) is checked again on every question.
    const stored = structuredClone(runtime.require());
    expect(runtime.problemsOf(stored)).toEqual([]);
    expect(runtime.problemsOf(stored)).toEqual([]);
    expect(hashed).toBe(3 * once);
    expect(runtime.problemsOf({ ...stored, manifestSignature: 'forged' })).toEqual(['manifestSignature: does not verify']);
  });

  it('the manifest says what runtimeHash and evaluatorHash cover, and a manifest whose listed contents do not give its hashes does not hold', async () => {
    const h = await harness();
    const m = h.runtime.require();
    const facts = fakeRuntimeFacts();
    expect(m.manifest).toMatchObject({ runtimeContents: facts.runtimeContents, evaluatorContents: facts.evaluatorContents });
    expect(m.manifest.runtimeHash).toBe(runtimeHashOf(hasher, facts.runtimeContents));
    expect(m.manifest.evaluatorHash).toBe(evaluatorHashOf(hasher, facts.evaluatorContents));
    expect(runtimeHashOf(hasher, fakeRuntimeFacts('other code').runtimeContents)).not.toBe(m.manifest.runtimeHash);

    // Signed again after the change, so only the contents can be what is wrong.
    const resigned = async (manifest: RuntimeManifest): Promise<SignedRuntimeManifest> => {
      const manifestHash = hasher.contentHash(manifest);
      return { manifest, manifestHash, manifestSignature: (await h.keys.signer.signText(manifestHash)).signature };
    };
    const problems = async (manifest: RuntimeManifest) => manifestProblems(hasher, h.keys.verifier, await resigned(manifest));
    expect(await problems(m.manifest)).toEqual([]);
    expect(await problems({ ...m.manifest, runtimeContents: fakeRuntimeFacts('other code').runtimeContents })).toEqual(['runtimeHash: does not recompute from runtimeContents']);
    expect(await problems({ ...m.manifest, evaluatorContents: { ...facts.evaluatorContents, packages: facts.runtimeContents.packages } })).toEqual(['evaluatorHash: does not recompute from evaluatorContents']);
    // A manifest signed before the contents were recorded has none to check.
    const { runtimeContents: _r, evaluatorContents: _e, ...older } = m.manifest;
    expect(await problems(older)).toEqual([]);
  });
});

describe('POST /override', () => {
  it('is a state machine: 404 without a pending override, approved once, then 409', async () => {
    const h = await harness();
    const req = (executionId: string, approved = true, approvedBy = 'ops') => ({ executionId, approved, approvedBy, approverRole: 'risk', reason: 'checked' });
    const ops = caller('ops', 'USER');
    await expectError(h.overrides.resolve(ops, req('nope')), 'not_found', /^No pending override/);
    const completed = attestationOf(await h.full.execute(caller(), body({ amount: 1 })));
    await expectError(h.overrides.resolve(ops, req(completed.executionId)), 'not_found', /^No pending override/);

    const pending = attestationOf(await h.full.execute(caller(), body({ amount: 20000 })));
    const res = await h.overrides.resolve(ops, req(pending.executionId));
    if (res.status !== 'approved') throw new Error('expected approved');
    expect(res.resolution).toMatchObject({ status: 'executed', executionId: pending.executionId, previousFingerprint: pending.execution_fingerprint, approvedBy: 'ops', decidedBy: 'ops', keyId: 'k1' });
    expect(h.keys.verifier.verify(res.resolution).valid).toBe(true);
    expect((await h.store.getDecision(pending.executionId))!.execution_state).toBe('executed');
    await expectError(h.overrides.resolve(ops, req(pending.executionId, false)), 'conflict', /already resolved/);
    expect(h.store.securityEvents.map((e) => e.kind)).toEqual(['override_conflict']);

    const other = attestationOf(await h.full.execute(caller(), body({ amount: 30000 })));
    expect(await h.overrides.resolve(ops, req(other.executionId, false))).toEqual({ status: 'rejected', executionId: other.executionId });
    expect((await h.store.getDecision(other.executionId))!.execution_state).toBe('rejected');
  });

  it('is decided by a USER key other than the requester, in its own name; anything else is 403 and changes nothing', async () => {
    const h = await harness();
    const pending = attestationOf(await h.full.execute(caller('agent-1'), body({ amount: 20000 })));
    const own = attestationOf(await h.full.execute(caller('ann', 'USER'), body({ amount: 20001 })));
    const req = (executionId: string, approvedBy: string) => ({ executionId, approved: true, approvedBy, approverRole: 'risk', reason: 'checked' });
    const denied = async (who: Caller, r: unknown, code: string) => {
      const e = await h.overrides.resolve(who, r).then(() => undefined, (x: unknown) => x);
      expect(e).toMatchObject({ kind: 'forbidden', code });
    };
    await denied(caller('agent-1'), req(pending.executionId, 'bob'), 'NON_HUMAN_CALLER_DENIED');
    await denied(caller('agent-2', 'SERVICE'), req(pending.executionId, 'agent-2'), 'NON_HUMAN_CALLER_DENIED');
    // The human check comes before the body is read: an agent learns nothing from a malformed one.
    await denied(caller('agent-1'), {}, 'NON_HUMAN_CALLER_DENIED');
    await denied(caller('ops', 'USER'), req(pending.executionId, 'bob'), 'SELF_APPROVAL_DENIED');
    await denied(caller('ann', 'USER'), req(own.executionId, 'ann'), 'SELF_APPROVAL_DENIED');
    expect((await h.store.getDecision(pending.executionId))!.execution_state).toBe('pending_override');
    expect((await h.store.getDecision(own.executionId))!.execution_state).toBe('pending_override');
    expect(await h.overrides.resolve(caller('ops', 'USER'), { ...req(own.executionId, 'ops'), approved: false })).toEqual({ status: 'rejected', executionId: own.executionId });
  });
});

describe('POST /confirm-execution', () => {
  it('binds one action to an authorized attestation within the time window, and signs the answer', async () => {
    const h = await harness();
    const a = attestationOf(await h.full.execute(caller(), body({ amount: 1 })));
    const at = (seconds: number) => new Date(Date.parse(a.issuedAt) + seconds * 1000).toISOString();
    const confirm = (action: Record<string, unknown>, extra: Record<string, unknown> = {}, attestation: unknown = a) =>
      h.confirmation.confirm(caller(), { attestation, executedAction: { actionType: 'payment', actionId: 'p-1', actionTimestamp: at(10), ...action }, ...extra });

    const first = await confirm({});
    expect(first).toMatchObject({ matched: true, executionId: a.executionId, withinTimeWindow: true, reasons: [] });
    expect(first.proof).toMatch(/^ets-execution-confirmation\+jwt\./);
    expect((await confirm({ actionTimestamp: at(301) })).withinTimeWindow).toBe(false);
    expect((await confirm({ actionTimestamp: at(301) }, { timeWindowSeconds: 600 })).withinTimeWindow).toBe(true);
    expect((await confirm({ actionTimestamp: at(-1) })).withinTimeWindow).toBe(false);
    const second = await confirm({ actionId: 'p-2' });
    expect(second).toMatchObject({ matched: false, reasons: ["executedAction: the execution is already bound to action payment 'p-1'"] });
    expect((await confirm({}, {}, { ...a, callerId: 'x' })).matched).toBe(false);
    expect(h.store.securityEvents.map((e) => e.kind)).toEqual(['confirmation_mismatch', 'confirmation_mismatch']);
  });

  it('an override-approved execution is authorized from the override on; blocked or pending ones are not', async () => {
    const h = await harness();
    const blocked = attestationOf(await h.full.execute(caller(), body({ amount: 1, country: 'KP' })));
    const pending = attestationOf(await h.full.execute(caller(), body({ amount: 20000 })));
    const confirm = (attestation: SignedAttestation, actionTimestamp: string) => h.confirmation.confirm(caller(), { attestation, executedAction: { actionType: 't', actionId: 'i', actionTimestamp } });
    expect((await confirm(blocked, blocked.issuedAt)).reasons).toEqual(['execution_state: the execution is blocked, not authorized']);
    expect((await confirm(pending, pending.issuedAt)).reasons).toEqual(['execution_state: the execution is pending_override, not authorized']);
    h.clock.t += 3600_000;
    await h.overrides.resolve(caller('ops', 'USER'), { executionId: pending.executionId, approved: true, approvedBy: 'ops', approverRole: 'r', reason: 'x' });
    expect(await confirm(pending, new Date(h.clock.t + 5000).toISOString())).toMatchObject({ matched: true, withinTimeWindow: true });
  });
});

describe('audit reads', () => {
  it('validates limit, offset, from, to and decision, and scopes a non-USER key to its own decisions', async () => {
    const h = await harness();
    await h.full.execute(caller('agent-1'), body({ amount: 1 }));
    await h.full.execute(caller('agent-2'), body({ amount: 1 }));
    for (const [q, message] of [
      [{ limit: '0' }, /^limit must be a whole number from 1 to 500/],
      [{ limit: '501' }, /^limit/],
      [{ limit: 'x' }, /^limit/],
      [{ offset: '-1' }, /^offset must be a whole number from 0 to 1000000/],
      [{ from: 'yesterday' }, /^from must be an ISO 8601 date-time/],
      [{ to: '2026-13-01T00:00:00Z' }, /^to must be/],
      // A leap second passed an own check here and then threw in Date (a 500).
      [{ from: '2026-01-01T23:59:60Z' }, /^from must be an ISO 8601 date-time/],
      [{ to: '2026-01-01T00:00:00.1234567891Z' }, /^to must be/],
      // Year 0 is a leap year (Date.UTC would read it as 1900).
      [{ from: '0000-02-29T00:00:00Z', to: '0000-02-28T00:00:00Z' }, /^from must not be later than to/],
      [{ from: '2026-02-01T00:00:00Z', to: '2026-01-01T00:00:00Z' }, /^from must not be later than to/],
      [{ decision: 'maybe' }, /^decision must be approve or reject/],
      [{ policyId: ['a', 'b'] }, /^policyId/],
    ] as const) {
      await expectError(h.audit.decisions(caller('boss', 'USER'), q), 'invalid', message);
    }
    expect(await h.audit.decisions(caller('boss', 'USER'), {})).toHaveLength(2);
    const [own] = h.store.decisions.values();
    await expectError(h.audit.decision(caller('agent-2'), own!.executionId), 'not_found', /^Decision not found\.$/);
    expect((await h.audit.decision(caller('agent-1'), own!.executionId)).executionId).toBe(own!.executionId);
    const stats = await h.audit.stats(caller('boss', 'USER'));
    expect(stats).toEqual({ total_decisions: '2', decisions_today: '2', total_verifications: '0', valid_verifications: '0', invalid_verifications: '0', total_security_events: '0', total_api_calls: '0' });
  });
});
