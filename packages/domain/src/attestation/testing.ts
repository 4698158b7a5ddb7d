/**
 * Fakes for unit tests of the attestation profile (no crypto in the domain): a "hash" is 64 hex
 * characters derived from sorted-key JSON, a "signature" names the key and the signed text, and
 * the store keeps everything in memory with the same compare-and-set semantics as the real ones.
 * Not exported by the package.
 */
import type { Hasher, SignatureVerifier, Signer } from '../ports/crypto.js';
import { stableJson } from '../governance/testing.js';
import type { AttestationStore, DecisionEntry, DecisionOutcome, ProofSigner } from './ports.js';
import type { ApiCall, ConfirmationBinding, ConfirmationProofEntry, DecisionDetail, SecurityEvent, SignedOverrideResolution, SignedRuntimeManifest, VerificationEntry } from './records.js';
import type { RuntimeFacts } from './runtime.js';

/** FNV-1a, eight times with different seeds: 64 hex characters, deterministic, not cryptographic. */
function fakeDigest(text: string): string {
  let out = '';
  for (let seed = 0; seed < 8; seed++) {
    let h = (0x811c9dc5 ^ seed) >>> 0;
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
    out += h.toString(16).padStart(8, '0');
  }
  return out;
}

export const fakeHasher: Hasher = {
  canonicalize: stableJson,
  contentHash: (v) => fakeDigest(stableJson(v)),
  sha256Hex: fakeDigest,
};

/** Signs as `sig(<keyId>):<text>`; `keyId` can be changed to play a rotation. */
export function fakeKeys(keyId = 'k1') {
  const state = { keyId, published: new Set([keyId]) };
  const sigOf = (k: string, text: string) => `sig(${k}):${text}`;
  const signer: Signer = {
    sign: async <T extends object>(r: T) => {
      const unsigned = { ...(r as Record<string, unknown>), keyId: state.keyId };
      return { ...unsigned, signature: sigOf(state.keyId, stableJson(unsigned)) } as T & { keyId: string; signature: string };
    },
    signText: async (text) => ({ keyId: state.keyId, signature: sigOf(state.keyId, text) }),
  };
  const verifier: SignatureVerifier = {
    verify: (record) => {
      const { signature, pqSignature: _pq, ...rest } = record as Record<string, unknown>;
      const k = String(rest.keyId);
      return state.published.has(k) && signature === sigOf(k, stableJson(rest)) ? { valid: true, keyId: k, errors: [] } : { valid: false, errors: ['signature: does not verify'] };
    },
    verifyText: (text, sig) =>
      !state.published.has(sig.keyId)
        ? { valid: false, errors: [`keyId: unknown key ${sig.keyId}`] }
        : sig.signature === sigOf(sig.keyId, text)
          ? { valid: true, keyId: sig.keyId, errors: [] }
          : { valid: false, keyId: sig.keyId, errors: ['signature: does not verify'] },
  };
  const proofs: ProofSigner = { signProof: async (claims, type) => `${type}.${stableJson(claims)}.${state.keyId}` };
  return { state, signer, verifier, proofs };
}

export class InMemoryAttestationStore implements AttestationStore {
  readonly guard = new Set<string>();
  readonly decisions = new Map<string, DecisionDetail>();
  readonly verifications: VerificationEntry[] = [];
  readonly confirmationProofs: ConfirmationProofEntry[] = [];
  readonly securityEvents: SecurityEvent[] = [];
  readonly apiCalls: ApiCall[] = [];
  readonly manifests = new Map<string, SignedRuntimeManifest>();

  async isReplay(requestId: string) {
    return this.guard.has(requestId);
  }
  async recordDecision(e: DecisionEntry): Promise<DecisionOutcome> {
    if (this.guard.has(e.requestId)) return 'replayed';
    this.guard.add(e.requestId);
    const { attestation, execution_state, ...row } = e;
    this.decisions.set(e.executionId, { ...row, execution_state, attestation, override: null, confirmation: null });
    return 'recorded';
  }
  async getDecision(id: string) {
    const d = this.decisions.get(id);
    return d && structuredClone(d);
  }
  async listDecisions() {
    return [...this.decisions.values()];
  }
  async resolveOverride(r: SignedOverrideResolution) {
    const d = this.decisions.get(r.executionId);
    if (!d || d.attestation.execution_state !== 'pending_override') return 'not-pending' as const;
    if (d.execution_state !== 'pending_override') return 'already-resolved' as const;
    d.execution_state = r.status;
    d.override = r;
    return 'resolved' as const;
  }
  async bindConfirmation(b: ConfirmationBinding) {
    const d = this.decisions.get(b.executionId)!;
    d.confirmation ??= b;
    return d.confirmation;
  }
  async recordConfirmationProof(p: ConfirmationProofEntry) {
    this.confirmationProofs.push(p);
  }
  async recordVerification(v: VerificationEntry) {
    this.verifications.push(v);
  }
  async recordSecurityEvent(e: SecurityEvent) {
    this.securityEvents.push(e);
  }
  async listSecurityEvents() {
    return [...this.securityEvents];
  }
  recordApiCall(c: ApiCall) {
    this.apiCalls.push(c);
  }
  async counts() {
    const valid = this.verifications.filter((v) => v.valid).length;
    return { totalDecisions: this.decisions.size, decisionsSince: this.decisions.size, totalVerifications: this.verifications.length, validVerifications: valid, totalSecurityEvents: this.securityEvents.length, totalApiCalls: this.apiCalls.length };
  }
  async saveManifest(m: SignedRuntimeManifest) {
    this.manifests.set(m.manifestHash, m);
  }
  async findManifest(h: string) {
    return this.manifests.get(h);
  }
  async manifestsWithRuntimeHash(h: string) {
    return [...this.manifests.values()].filter((m) => m.manifest.runtimeHash === h);
  }
  async isAvailable() {
    return true;
  }
}

/** What the runtime adapter would measure, for a one-package "install" whose code is `code`. */
export function fakeRuntimeFacts(code = 'code', runtimeVersion = 'b1'): RuntimeFacts {
  const pkg = (name: string, hash: string) => ({ name, version: '1.0.0', path: `packages/${name}`, kind: 'workspace' as const, files: 1, hash });
  return {
    runtimeVersion,
    runtimeContents: { node: { version: 'v20.0.0', v8: '11', openssl: '3', platform: 'linux', arch: 'x64' }, code: 'built', packages: [pkg('server', fakeDigest(code))] },
    evaluatorContents: { engine: { path: 'packages/domain/dist/policy', files: 1, hash: fakeDigest('engine') }, packages: [] },
    platform: 'node v20',
  };
}
