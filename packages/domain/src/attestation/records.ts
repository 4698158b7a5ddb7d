import type { Signed } from '../ports/crypto.js';
import type { PolicyAction } from '../policy/index.js';

/**
 * The attestation profile (spec 2.9, 3, 4.2): what is signed, stored and served. Every hash is
 * lower-case hex SHA-256; `C(x)` is the RFC 8785 canonical JSON of `x` as UTF-8 (see identity.ts
 * for what each hash is computed over).
 */

/** One process serves one profile (CONTRACT "Profiles"). */
export type ServiceProfile = 'transaction' | 'attestation' | 'attestation-simple';
/** The two request shapes of profile A's `POST /execute` and `POST /verify`. */
export type AttestationVariant = 'attestation' | 'attestation-simple';

export const ATTESTATION_SCHEMA_VERSION = '1';
/** Schema versions of ExecutionAttestation this runtime can verify (spec 9.4). */
export const SUPPORTED_SCHEMA_VERSIONS: readonly string[] = Object.freeze([ATTESTATION_SCHEMA_VERSION]);

/** As attested: an approval, an approval waiting for a human override, a rejection. */
export type ExecutionState = 'completed' | 'pending_override' | 'blocked';
/** As it stands now: a pending override becomes `executed` (approved) or `rejected` (spec 3). */
export type CurrentExecutionState = ExecutionState | 'executed' | 'rejected';

export interface AttestationDecision {
  action: PolicyAction;
  requires_override: boolean;
  reason: string;
  /** The deciding rule's id, `default`, or null when no rule matched and the policy has no default. */
  matchedRuleId: string | null;
}

/** Spec 2.9. Signed as a whole: `signature` is base64 Ed25519 over C(the attestation without `signature`). */
export interface ExecutionAttestation {
  /** The SHA-256 execution identity: H(C({requestId, policyId, policyVersion, signalsHash})). */
  executionId: string;
  /** H(C({executionId, bundleHash, evaluatorArtifactHash, signalsHash, decision, execution_state})). */
  execution_fingerprint: string;
  /** The id the execution was requested under: the caller's `executionId`, or a random UUID in the simple variant. */
  requestId: string;
  policyId: string;
  policyVersion: string;
  schemaVersion: string;
  runtimeVersion: string;
  runtimeHash: string;
  decision: AttestationDecision;
  execution_state: ExecutionState;
  signalsHash: string;
  bundleHash: string;
  manifestHash: string;
  manifestSignature: string;
  trustRootVersion: string;
  signerKeyId: string;
  evaluatorHash: string;
  evaluatorSemanticHash: string;
  evaluatorArtifactHash: string;
  releaseManifestHash: string;
  callerId: string;
  issuedAt: string;
}

export type SignedAttestation = ExecutionAttestation & { signature: string };

/** What the simple variant signs and its `POST /verify` checks: `signature` over C(this). */
export interface SimpleStatement {
  executionId: string;
  decision: AttestationDecision;
  execution_state: ExecutionState;
  runtimeHash: string;
}

/** One package of the code that runs: a workspace of the service or an installed dependency. */
export interface MeasuredPackage {
  name: string;
  version: string;
  /** Its directory (symbolic links resolved), relative to the install root, POSIX separators. */
  path: string;
  /** `workspace`: the service's own package, of which its code, `package.json`, `bin` and `assets` are hashed; `dependency`: every file of it. */
  kind: 'workspace' | 'dependency';
  /** How many files `hash` covers. */
  files: number;
  /** H(C({files: {"<path inside the package>": "<SHA-256 of the file's bytes>", …}})). */
  hash: string;
}

/** What `runtimeHash` covers: `runtimeHash` = H(C(this)). */
export interface RuntimeContents {
  /** The JavaScript runtime by its identity (the binary itself is not hashed). */
  node: { version: string; v8: string; openssl: string; platform: string; arch: string };
  /**
   * `built`: the workspaces' `dist` JavaScript runs (every deployment); `sources`: their TypeScript
   * `src` runs, compiled in memory (the test suite under ts-jest), so that is what is hashed.
   */
  code: 'built' | 'sources';
  /** The production dependency closure of the server, each package once, sorted by `path`. */
  packages: MeasuredPackage[];
}

/** What `evaluatorHash` covers: `evaluatorHash` = H(C(this)). */
export interface EvaluatorContents {
  /** The policy engine's own code (`packages/domain/{dist,src}/policy`). */
  engine: { path: string; files: number; hash: string };
  /** The CEL library it evaluates with and that library's production dependencies. */
  packages: MeasuredPackage[];
}

/**
 * The part of the runtime manifest that is the same for every start of one build: the code, the
 * policy engine, what it can do. `releaseManifestHash` = H(C(this)).
 */
export interface ReleaseManifest {
  /** The internal build identifier (spec 9.1), the same as `GET /version`. */
  version: string;
  runtimeHash: string;
  evaluatorHash: string;
  evaluatorSemanticHash: string;
  capabilities: string[];
  supportedSchemaVersions: string[];
}

/**
 * Signed at every start (spec 9.4): the release, the keys it signs with, when it started.
 * `manifestHash` = H(C(this)); `manifestSignature` = base64 Ed25519 over the UTF-8 of the hex
 * `manifestHash`, with `signerKeyId`.
 */
export interface RuntimeManifest extends ReleaseManifest {
  manifestType: 'runtime-manifest';
  releaseManifestHash: string;
  trustRootVersion: string;
  signerKeyId: string;
  /** The JavaScript runtime, e.g. `node v20.20.0`. */
  platform: string;
  startedAt: string;
  /** What `runtimeHash` was computed over (absent from manifests signed before it was recorded). */
  runtimeContents?: RuntimeContents;
  /** What `evaluatorHash` was computed over (likewise). */
  evaluatorContents?: EvaluatorContents;
}

export interface SignedRuntimeManifest {
  manifest: RuntimeManifest;
  manifestHash: string;
  manifestSignature: string;
}

/** Spec 3: the signed outcome of `POST /override` (a standard signed record: `keyId`, `signature`). */
export interface OverrideResolution {
  recordType: 'override-resolution';
  overrideId: string;
  executionId: string;
  status: 'executed' | 'rejected';
  approved: boolean;
  approvedBy: string;
  approverRole: string;
  reason: string;
  /** The authenticated caller that submitted the override. */
  decidedBy: string;
  /** The attestation's `execution_fingerprint`. */
  previousFingerprint: string;
  /** H(C({executionId, previousFingerprint, overrideId, status, approvedBy, approverRole, reason, resolvedAt})). */
  execution_fingerprint: string;
  resolvedAt: string;
}

export type SignedOverrideResolution = Signed<OverrideResolution>;

/** The action bound to an authorization by the first matching `POST /confirm-execution`. */
export interface ConfirmationBinding {
  executionId: string;
  actionType: string;
  actionId: string;
  actionTimestamp: string;
  /** H(C(actionDetails)), or null when none were sent. */
  actionDetailsHash: string | null;
  confirmedAt: string;
}

/**
 * A signed confirmation proof as it was answered (`POST /confirm-execution`, matched or not): kept
 * because every signed record of the service is a leaf of the transparency log.
 */
export interface ConfirmationProofEntry {
  executionId: string;
  matched: boolean;
  /** The compact JWS. */
  proof: string;
  confirmedAt: string;
}

/** A row of `GET /audit/decisions`. */
export interface DecisionRow {
  executionId: string;
  requestId: string;
  variant: AttestationVariant;
  callerId: string;
  policyId: string;
  policyVersion: string;
  decision: AttestationDecision;
  /** The state now (an override moves `pending_override` on). */
  execution_state: CurrentExecutionState;
  createdAt: string;
}

/** `GET /audit/decisions/{executionId}`. */
export interface DecisionDetail extends DecisionRow {
  attestation: SignedAttestation;
  override: SignedOverrideResolution | null;
  confirmation: ConfirmationBinding | null;
}

/** A row of `GET /audit/security`. Operational telemetry: stored, not signed. */
export interface SecurityEvent {
  eventId: string;
  kind: SecurityEventKind;
  occurredAt: string;
  callerId: string | null;
  /** `POST /execute`-style method and route, or the domain operation (`execute`, `verify`, …). */
  operation: string;
  executionId: string | null;
  detail: string;
}

export type SecurityEventKind =
  | 'authentication_failed'
  | 'execution_replayed'
  | 'attestation_invalid'
  | 'override_conflict'
  | 'confirmation_mismatch'
  | 'invariant_violation';

/** One answered request to a recorded route (batched; never the body or the key). */
export interface ApiCall {
  method: string;
  route: string;
  status: number;
  callerId: string | null;
  durationMs: number;
  occurredAt: string;
}

/** One `POST /verify` of profile A, as recorded. */
export interface VerificationEntry {
  verificationId: string;
  /** The presented `executionId` when it was a string of at most 256 characters. */
  executionId: string | null;
  variant: AttestationVariant;
  callerId: string;
  valid: boolean;
  checks: Record<string, unknown>;
  verifiedAt: string;
}

/** `GET /audit/stats`: each figure a decimal string (spec 4.2). */
export interface AuditStats {
  total_decisions: string;
  decisions_today: string;
  total_verifications: string;
  valid_verifications: string;
  invalid_verifications: string;
  total_security_events: string;
  total_api_calls: string;
}
