import type { Hasher } from '../ports/crypto.js';
import type { AttestationDecision, EvaluatorContents, ExecutionAttestation, OverrideResolution, ReleaseManifest, RuntimeContents, SimpleStatement } from './records.js';

/**
 * What each hash of an attestation is computed over, in one place, so that the service, the
 * offline verifier and the documentation say the same thing. H = SHA-256 (lower-case hex),
 * C = RFC 8785 canonical JSON.
 */

/** `signalsHash` = H(C(signals)): the signals exactly as received. */
export const signalsHashOf = (hasher: Hasher, signals: Record<string, unknown>): string => hasher.contentHash(signals);

/**
 * `executionId`, the SHA-256 execution identity: H(C({requestId, policyId, policyVersion,
 * signalsHash})). It names one request for one decision: the id it was requested under (unique per
 * deployment, the replay guard), the exact policy version and the exact signals.
 */
export function executionIdOf(
  hasher: Hasher,
  facts: Pick<ExecutionAttestation, 'requestId' | 'policyId' | 'policyVersion' | 'signalsHash'>,
): string {
  return hasher.contentHash({ requestId: facts.requestId, policyId: facts.policyId, policyVersion: facts.policyVersion, signalsHash: facts.signalsHash });
}

/**
 * `execution_fingerprint` = H(C({executionId, bundleHash, evaluatorArtifactHash, signalsHash,
 * decision, execution_state})): the identity bound to what decided it (the policy bundle and its
 * compiled artifact), on what input, and with what outcome.
 */
export function executionFingerprintOf(
  hasher: Hasher,
  a: Pick<ExecutionAttestation, 'executionId' | 'bundleHash' | 'evaluatorArtifactHash' | 'signalsHash' | 'decision' | 'execution_state'>,
): string {
  return hasher.contentHash({
    executionId: a.executionId,
    bundleHash: a.bundleHash,
    evaluatorArtifactHash: a.evaluatorArtifactHash,
    signalsHash: a.signalsHash,
    decision: a.decision,
    execution_state: a.execution_state,
  });
}

/** The fingerprint of an execution after its override: the earlier fingerprint bound to who decided what. */
export function resolutionFingerprintOf(
  hasher: Hasher,
  r: Pick<OverrideResolution, 'executionId' | 'previousFingerprint' | 'overrideId' | 'status' | 'approvedBy' | 'approverRole' | 'reason' | 'resolvedAt'>,
): string {
  return hasher.contentHash({
    executionId: r.executionId,
    previousFingerprint: r.previousFingerprint,
    overrideId: r.overrideId,
    status: r.status,
    approvedBy: r.approvedBy,
    approverRole: r.approverRole,
    reason: r.reason,
    resolvedAt: r.resolvedAt,
  });
}

/** `runtimeHash` = H(C(what it covers)): the Node runtime's identity and every package of the code that runs. */
export const runtimeHashOf = (hasher: Hasher, contents: RuntimeContents): string => hasher.contentHash(contents);

/** `evaluatorHash` = H(C(what it covers)): the policy engine's code and its CEL library. */
export const evaluatorHashOf = (hasher: Hasher, contents: EvaluatorContents): string => hasher.contentHash(contents);

/** `releaseManifestHash` = H(C(release manifest)). */
export const releaseManifestHashOf = (hasher: Hasher, m: ReleaseManifest): string =>
  hasher.contentHash({
    version: m.version,
    runtimeHash: m.runtimeHash,
    evaluatorHash: m.evaluatorHash,
    evaluatorSemanticHash: m.evaluatorSemanticHash,
    capabilities: m.capabilities,
    supportedSchemaVersions: m.supportedSchemaVersions,
  });

/** The bytes the simple variant's `signature` covers. */
export const simpleStatementOf = (s: SimpleStatement): SimpleStatement => ({
  executionId: s.executionId,
  decision: s.decision,
  execution_state: s.execution_state,
  runtimeHash: s.runtimeHash,
});

/** The decision as an attestation carries it (never more, never less). */
export const attestationDecisionOf = (d: AttestationDecision): AttestationDecision => ({
  action: d.action,
  requires_override: d.requires_override,
  reason: d.reason,
  matchedRuleId: d.matchedRuleId,
});
