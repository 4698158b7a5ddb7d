import type { Caller } from '../identity/caller.js';
import type { IdGenerator } from '../ports/clock.js';
import type { SignatureVerifier } from '../ports/crypto.js';
import { attestationIdentityProblems, attestationShapeProblems, attestationSignatureProblems, simpleStatementShapeProblems } from './attestation-checks.js';
import { simpleStatementOf } from './identity.js';
import type { AttestationStore } from './ports.js';
import type { AttestationVariant, SimpleStatement } from './records.js';
import { parseAttestationBody, parseSimpleVerifyRequest } from './requests.js';
import { audited } from '../shared/fail-closed.js';
import type { AttestationContext } from './security-events.js';

export type CheckOutcome = 'verified' | 'failed' | 'unknown';

export interface AttestationVerification {
  valid: boolean;
  checks: { signature: CheckOutcome; runtime: CheckOutcome; schema: CheckOutcome };
  /** Why a check is not `verified`; empty when valid. */
  errors: string[];
}

export interface SimpleVerification {
  valid: boolean;
  checks: { signature_verified: boolean; runtime_verified: boolean; schema_compatible: boolean };
  errors: string[];
}

export interface AttestationVerifierDeps extends AttestationContext {
  store: Pick<AttestationStore, 'recordVerification'>;
  verifier: SignatureVerifier;
  ids: IdGenerator;
}

type Json = Record<string, unknown>;
type Check = { outcome: CheckOutcome; errors: string[] };
const HEX64 = /^[0-9a-f]{64}$/;

/**
 * `POST /verify` of profile A (spec 4.2). Stateless: the verdict depends only on the attestation
 * presented, the published keys and the runtime manifests this deployment signed, never on a
 * stored decision. Each verification is recorded for the audit (spec 6); an invalid one is also a
 * security event.
 *
 * - `signature`: `verified` when the Ed25519 signature over C(attestation without `signature`)
 *   verifies with the published key `signerKeyId`; otherwise `failed`.
 * - `runtime`: `verified` when `manifestHash` names a runtime manifest this deployment signed (this
 *   process's or one an earlier start stored), that manifest still hashes to it and its signature
 *   verifies, `manifestSignature` is that signature, and `runtimeVersion`, `runtimeHash`,
 *   `evaluatorHash`, `evaluatorSemanticHash`, `releaseManifestHash`, `trustRootVersion` and
 *   `signerKeyId` equal the manifest's: the attestation was signed by code whose hash we measured
 *   and signed at start. `failed` when that can be disproved: `manifestSignature` does not verify
 *   over `manifestHash`, or a field differs from the known manifest. `unknown` when the manifest is
 *   not one this deployment knows (another deployment, or fields missing).
 * - `schema`: `verified` when `schemaVersion` is supported and the attestation has every field of
 *   that version with its type, and `executionId` and `execution_fingerprint` recompute; `failed`
 *   when the version is not supported or the attestation is malformed; `unknown` without a
 *   `schemaVersion`.
 *
 * `valid` is true only when all three are `verified`.
 */
export class AttestationVerifier {
  constructor(private readonly d: AttestationVerifierDeps) {}

  async verify(caller: Caller, body: unknown): Promise<AttestationVerification> {
    const a = parseAttestationBody(body);
    this.d.runtime.require();
    const signature = this.outcome(attestationSignatureProblems(this.d.hasher, this.d.verifier, a));
    const runtime = await this.runtimeCheck(a);
    const schema = this.schemaCheck(a);
    const result: AttestationVerification = {
      valid: signature.outcome === 'verified' && runtime.outcome === 'verified' && schema.outcome === 'verified',
      checks: { signature: signature.outcome, runtime: runtime.outcome, schema: schema.outcome },
      errors: [...signature.errors, ...runtime.errors, ...schema.errors],
    };
    await this.record(caller, a.executionId, 'attestation', result.valid, result.checks, result.errors);
    return result;
  }

  /** The simple variant: the statement `{executionId, decision, execution_state, runtimeHash}` and its `signature`. */
  async verifySimple(caller: Caller, body: unknown): Promise<SimpleVerification> {
    const b = parseSimpleVerifyRequest(body);
    this.d.runtime.require();
    const schemaErrors = simpleStatementShapeProblems(b);
    const known = typeof b.runtimeHash === 'string' && HEX64.test(b.runtimeHash) ? await this.d.runtime.manifestsWithRuntimeHash(b.runtimeHash) : [];
    const runtimeErrors = known.length > 0 ? [] : ['runtimeHash: not the hash of a runtime this deployment signed a manifest for'];
    const signatureErrors = schemaErrors.length > 0 ? ['signature: the statement is malformed'] : this.simpleSignatureProblems(b, known.map((m) => m.manifest.signerKeyId));
    const checks = { signature_verified: signatureErrors.length === 0, runtime_verified: runtimeErrors.length === 0, schema_compatible: schemaErrors.length === 0 };
    const result: SimpleVerification = {
      valid: checks.signature_verified && checks.runtime_verified && checks.schema_compatible,
      checks,
      errors: [...signatureErrors, ...runtimeErrors, ...schemaErrors],
    };
    await this.record(caller, b.executionId, 'attestation-simple', result.valid, checks, result.errors);
    return result;
  }

  private outcome(errors: string[]): Check {
    return { outcome: errors.length === 0 ? 'verified' : 'failed', errors };
  }

  private async runtimeCheck(a: Json): Promise<Check> {
    if (typeof a.manifestHash !== 'string' || !HEX64.test(a.manifestHash) || typeof a.manifestSignature !== 'string') {
      return { outcome: 'unknown', errors: ['runtime: manifestHash and manifestSignature are missing or malformed'] };
    }
    const known = await this.d.runtime.findManifest(a.manifestHash);
    const keyId = known?.manifest.signerKeyId ?? a.signerKeyId;
    const signed = typeof keyId === 'string' && this.d.verifier.verifyText(a.manifestHash, { keyId, signature: a.manifestSignature }).valid;
    if (!signed) return { outcome: 'failed', errors: ['manifestSignature: does not verify over manifestHash with the published keys'] };
    if (!known) return { outcome: 'unknown', errors: [`runtime: manifest ${a.manifestHash} is not a runtime manifest this deployment signed`] };
    const errors = this.d.runtime.problemsOf(known).map((p) => `runtime: the stored manifest: ${p}`);
    const m = known.manifest;
    const expected: Json = {
      manifestSignature: known.manifestSignature,
      runtimeVersion: m.version,
      runtimeHash: m.runtimeHash,
      evaluatorHash: m.evaluatorHash,
      evaluatorSemanticHash: m.evaluatorSemanticHash,
      releaseManifestHash: m.releaseManifestHash,
      trustRootVersion: m.trustRootVersion,
      signerKeyId: m.signerKeyId,
    };
    for (const [field, value] of Object.entries(expected)) if (a[field] !== value) errors.push(`${field}: differs from the runtime manifest ${a.manifestHash}`);
    return { outcome: errors.length === 0 ? 'verified' : 'failed', errors };
  }

  private schemaCheck(a: Json): Check {
    if (typeof a.schemaVersion !== 'string') return { outcome: 'unknown', errors: ['schemaVersion: missing'] };
    if (!this.d.runtime.supportedSchemaVersions.includes(a.schemaVersion)) {
      return { outcome: 'failed', errors: [`schemaVersion: '${a.schemaVersion}' is not supported (supported: ${this.d.runtime.supportedSchemaVersions.join(', ')})`] };
    }
    const shape = attestationShapeProblems(a);
    return this.outcome(shape.length > 0 ? shape : attestationIdentityProblems(this.d.hasher, a));
  }

  private simpleSignatureProblems(b: Json, manifestKeys: string[]): string[] {
    const state = this.d.runtime.state();
    const keys = new Set([...(state.configured ? [state.manifest.manifest.signerKeyId] : []), ...manifestKeys]);
    const text = this.d.hasher.canonicalize(simpleStatementOf(b as unknown as SimpleStatement));
    for (const keyId of keys) if (this.d.verifier.verifyText(text, { keyId, signature: b.signature as string }).valid) return [];
    return ['signature: does not verify over the statement with the keys of this runtime'];
  }

  private async record(caller: Caller, executionId: unknown, variant: AttestationVariant, valid: boolean, checks: Json, errors: string[]): Promise<void> {
    const id = typeof executionId === 'string' && executionId.length <= 256 ? executionId : null;
    const verifiedAt = this.d.clock.now().toISOString();
    await audited(() => this.d.store.recordVerification({ verificationId: this.d.ids.uuid(), executionId: id, variant, callerId: caller.callerId, valid, checks, verifiedAt }));
    if (!valid) await this.d.security.record('attestation_invalid', { callerId: caller.callerId, operation: 'verify', executionId: id, detail: errors.join('; ') });
  }
}
