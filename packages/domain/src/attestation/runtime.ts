import { DomainError } from '../shared/errors.js';
import type { Clock } from '../ports/clock.js';
import type { Hasher, SignatureVerifier, Signer } from '../ports/crypto.js';
import { evaluatorSemanticHashOf } from './evaluator-identity.js';
import { evaluatorHashOf, releaseManifestHashOf, runtimeHashOf } from './identity.js';
import type { AttestationStore } from './ports.js';
import {
  SUPPORTED_SCHEMA_VERSIONS,
  type EvaluatorContents,
  type ReleaseManifest,
  type RuntimeContents,
  type RuntimeManifest,
  type ServiceProfile,
  type SignedRuntimeManifest,
} from './records.js';

/**
 * What the runtime adapter measures at start from the files that run. The hashes are computed from
 * these here (identity.ts), so a manifest always says what its `runtimeHash` covers.
 */
export interface RuntimeFacts {
  /** The internal build identifier (spec 9.1). */
  runtimeVersion: string;
  runtimeContents: RuntimeContents;
  evaluatorContents: EvaluatorContents;
  platform: string;
}

export type RuntimeState =
  | { configured: true; manifest: SignedRuntimeManifest }
  | { configured: false; reason: string };

const COMMON_CAPABILITIES = ['evaluate', 'simulate', 'override', 'confirm-execution', 'audit', 'runtime-manifest'];

/** What this runtime can do, by profile: the shapes of `/execute` and `/verify`, then the shared routes. */
export function capabilitiesOf(profile: ServiceProfile): string[] {
  const shaped =
    profile === 'transaction'
      ? ['execute:business-transaction', 'verify:trust-record']
      : profile === 'attestation'
        ? ['execute:attestation', 'verify:attestation']
        : ['execute:attestation-simple', 'verify:attestation-simple'];
  return [...shaped, ...COMMON_CAPABILITIES];
}

export interface AttestationRuntimeDeps {
  store: Pick<AttestationStore, 'saveManifest' | 'findManifest' | 'manifestsWithRuntimeHash'>;
  signer: Signer;
  verifier: SignatureVerifier;
  hasher: Hasher;
  clock: Clock;
  profile: ServiceProfile;
  /** H(C(the sorted key ids published in the JWKS)) when the runtime starts. */
  trustRootVersion: string;
  /** The Ed25519 key id new signatures are made with. */
  signerKeyId: string;
}

/**
 * The runtime that attestations are signed by. At start it builds, signs and stores its runtime
 * manifest; until then, or when that failed, it is "not configured" and every profile-A route
 * that signs or checks a runtime answers 503 (spec 4.2) with the reason.
 */
export class AttestationRuntime {
  #state: RuntimeState = { configured: false, reason: 'the runtime is starting' };
  /** This process's own manifest once manifestProblems found none (see problemsOf). */
  #ownHeld: SignedRuntimeManifest | undefined;
  readonly capabilities: readonly string[];
  readonly supportedSchemaVersions = SUPPORTED_SCHEMA_VERSIONS;

  constructor(private readonly d: AttestationRuntimeDeps) {
    this.capabilities = Object.freeze(capabilitiesOf(d.profile));
  }

  /** `facts` is what the adapter measured, or why it could not. Never throws. */
  async start(facts: RuntimeFacts | { error: string }): Promise<RuntimeState> {
    this.#state = await this.build(facts).catch((e: unknown) => ({
      configured: false as const,
      reason: e instanceof DomainError ? e.message : 'the runtime manifest could not be built, signed and stored',
    }));
    return this.#state;
  }

  state(): RuntimeState {
    return this.#state;
  }

  /** The signed manifest, or 503 "runtime not configured" (no code, spec 7). */
  require(): SignedRuntimeManifest {
    if (this.#state.configured) return this.#state.manifest;
    throw new DomainError('unavailable', `Runtime not configured: ${this.#state.reason}.`);
  }

  /** This runtime's manifest, or one an earlier start (of any instance on this database) signed. */
  async findManifest(manifestHash: string): Promise<SignedRuntimeManifest | undefined> {
    if (this.#state.configured && this.#state.manifest.manifestHash === manifestHash) return this.#state.manifest;
    return this.d.store.findManifest(manifestHash);
  }

  /** The signed manifests of this runtime and of earlier starts that ran code with this runtimeHash. */
  async manifestsWithRuntimeHash(runtimeHash: string): Promise<SignedRuntimeManifest[]> {
    const stored = await this.d.store.manifestsWithRuntimeHash(runtimeHash);
    const current = this.#state.configured && this.#state.manifest.manifest.runtimeHash === runtimeHash ? [this.#state.manifest] : [];
    return [...current, ...stored.filter((m) => !current.some((c) => c.manifestHash === m.manifestHash))];
  }

  /**
   * manifestProblems of `m`, remembered for this process's own manifest once it holds: that object
   * never changes and published keys are only ever added, so a pass stays a pass. Its
   * runtimeContents list every file of the production closure; hashing them again on every
   * `GET /health` and `POST /verify` would be the same work each time.
   */
  problemsOf(m: SignedRuntimeManifest): string[] {
    if (m === this.#ownHeld) return [];
    const problems = manifestProblems(this.d.hasher, this.d.verifier, m);
    if (problems.length === 0 && this.#state.configured && this.#state.manifest === m) this.#ownHeld = m;
    return problems;
  }

  /** `GET /health` `verification`: the running manifest's signature verifies with the published keys. */
  selfCheck(): boolean {
    return this.#state.configured && this.problemsOf(this.#state.manifest).length === 0;
  }

  private async build(facts: RuntimeFacts | { error: string }): Promise<RuntimeState> {
    if ('error' in facts) return { configured: false, reason: facts.error };
    const release: ReleaseManifest = {
      version: facts.runtimeVersion,
      runtimeHash: runtimeHashOf(this.d.hasher, facts.runtimeContents),
      evaluatorHash: evaluatorHashOf(this.d.hasher, facts.evaluatorContents),
      evaluatorSemanticHash: evaluatorSemanticHashOf(this.d.hasher),
      capabilities: [...this.capabilities],
      supportedSchemaVersions: [...this.supportedSchemaVersions],
    };
    const manifest: RuntimeManifest = {
      manifestType: 'runtime-manifest',
      ...release,
      releaseManifestHash: releaseManifestHashOf(this.d.hasher, release),
      trustRootVersion: this.d.trustRootVersion,
      signerKeyId: this.d.signerKeyId,
      platform: facts.platform,
      startedAt: this.d.clock.now().toISOString(),
      runtimeContents: facts.runtimeContents,
      evaluatorContents: facts.evaluatorContents,
    };
    const manifestHash = this.d.hasher.contentHash(manifest);
    let signed;
    try {
      signed = await this.d.signer.signText(manifestHash, 'ed25519');
    } catch {
      return { configured: false, reason: 'no signing key is available to sign the runtime manifest' };
    }
    if (signed.keyId !== this.d.signerKeyId) {
      return { configured: false, reason: `the runtime manifest was signed with key ${signed.keyId}, not the active key ${this.d.signerKeyId}` };
    }
    const result: SignedRuntimeManifest = { manifest, manifestHash, manifestSignature: signed.signature };
    try {
      await this.d.store.saveManifest(result);
    } catch {
      return { configured: false, reason: 'the runtime manifest could not be stored' };
    }
    return { configured: true, manifest: result };
  }
}

/**
 * Why a signed manifest does not hold: its hash does not recompute, its signature does not verify,
 * or `runtimeHash` / `evaluatorHash` do not recompute from the contents it lists (manifests signed
 * before the contents were recorded have none to check).
 */
export function manifestProblems(hasher: Hasher, verifier: SignatureVerifier, m: SignedRuntimeManifest): string[] {
  const problems: string[] = [];
  if (hasher.contentHash(m.manifest) !== m.manifestHash) problems.push('manifestHash: does not recompute from the manifest');
  const { runtimeContents, evaluatorContents } = m.manifest;
  if (runtimeContents !== undefined && runtimeHashOf(hasher, runtimeContents) !== m.manifest.runtimeHash) problems.push('runtimeHash: does not recompute from runtimeContents');
  if (evaluatorContents !== undefined && evaluatorHashOf(hasher, evaluatorContents) !== m.manifest.evaluatorHash) problems.push('evaluatorHash: does not recompute from evaluatorContents');
  const sig = verifier.verifyText(m.manifestHash, { keyId: m.manifest.signerKeyId, signature: m.manifestSignature });
  if (!sig.valid) problems.push('manifestSignature: does not verify');
  return problems;
}
