import { DomainError } from '../shared/errors.js';
import type { Caller } from '../identity/caller.js';
import type { IdGenerator } from '../ports/clock.js';
import type { Signer } from '../ports/crypto.js';
import { DEFAULT_RULE_ID, evaluatePolicy, type CompiledPolicy, type PolicyDecision } from '../policy/index.js';
import type { PolicyCatalog, PublishedPolicy } from '../execution/context.js';
import { evaluatorArtifactHashOf } from './evaluator-identity.js';
import { attestationDecisionOf, executionFingerprintOf, executionIdOf, signalsHashOf, simpleStatementOf } from './identity.js';
import type { AttestationStore } from './ports.js';
import {
  ATTESTATION_SCHEMA_VERSION,
  type AttestationDecision,
  type AttestationVariant,
  type ExecutionAttestation,
  type ExecutionState,
  type SignedAttestation,
  type SignedRuntimeManifest,
} from './records.js';
import { parseExecuteRequest, parsePolicyRequest, signalProblems, type PolicyRequest } from './requests.js';
import { audited, signed } from '../shared/fail-closed.js';
import type { AttestationContext } from './security-events.js';

export interface AttestationServiceDeps extends AttestationContext {
  store: AttestationStore;
  policies: PolicyCatalog;
  signer: Signer;
  ids: IdGenerator;
}

export type ExecuteResult =
  | { status: 'approved' | 'pending_override' | 'blocked'; requires_override: boolean; attestation: SignedAttestation }
  | {
      status: 'ok';
      executionId: string;
      decision: AttestationDecision;
      execution_state: ExecutionState;
      /** The runtime's, which `signature` covers too (so the answer can be verified as it is). */
      runtimeHash: string;
      requires_override: boolean;
      signature: string;
    };

export interface EvaluateResult {
  wouldDecide: 'approve' | 'reject';
  requires_override: boolean;
  ruleMatched: string | null;
  reason: string;
  signalsValidated: boolean;
}

export interface SimulateResult {
  simulation: true;
  decision: { action: 'approve' | 'reject'; reason: string; ruleMatched: string | null; requires_override: boolean };
  signalsValidated: boolean;
  policyLoaded: true;
  wouldSign: boolean;
  attestationPreview: Record<string, unknown>;
}

/** Profile A has no intent: rules that read `intent` see an empty action and no parameters. */
const NO_INTENT = { action: '', parameters: {} };

export const stateOf = (d: Pick<PolicyDecision, 'action' | 'requires_override'>): ExecutionState =>
  d.action === 'reject' ? 'blocked' : d.requires_override ? 'pending_override' : 'completed';

/** A rule that could not be evaluated decided (fail closed): its decision is not the rule's own. */
function isFailClosed(compiled: CompiledPolicy, d: PolicyDecision): boolean {
  if (d.matchedRuleId === null || d.matchedRuleId === DEFAULT_RULE_ID) return false;
  const rule = compiled.rules.find((r) => r.id === d.matchedRuleId);
  return rule !== undefined && (rule.decision.action !== d.action || rule.decision.reason !== d.reason);
}

const unprocessable = (message: string, code?: DomainError['code']) => new DomainError('unprocessable', message, code);

/**
 * `POST /execute`, `POST /evaluate` and `POST /simulate` of profile A (spec 2.9, 4.2): the policy
 * decides the signals, and `execute` signs an ExecutionAttestation and stores it with its replay
 * guard before answering. The dry runs sign and store nothing.
 */
export class AttestationService {
  constructor(
    private readonly d: AttestationServiceDeps,
    private readonly variant: AttestationVariant,
  ) {}

  async execute(caller: Caller, body: unknown): Promise<ExecuteResult> {
    const req = parseExecuteRequest(body, this.variant);
    const manifest = this.d.runtime.require();
    const policy = await this.load(req);
    const problems = signalProblems(policy.document, req.signals);
    if (problems.length > 0) throw unprocessable(signalsMessage(problems));
    if (req.requestId !== undefined && (await this.d.store.isReplay(req.requestId))) throw await this.replayed(caller, req.requestId);

    const decision = evaluatePolicy(policy.compiled, { signals: req.signals, intent: NO_INTENT });
    if (this.variant === 'attestation-simple') await this.refuseOutsideInvariants(caller, req, policy.compiled, decision);

    const attestation = await this.sign(this.build(caller, manifest, policy, req, decision, req.requestId ?? this.d.ids.uuid()));
    const outcome = await audited(
      () =>
        this.d.store.recordDecision({
          executionId: attestation.executionId,
          requestId: attestation.requestId,
          variant: this.variant,
          callerId: caller.callerId,
          policyId: attestation.policyId,
          policyVersion: attestation.policyVersion,
          decision: attestation.decision,
          execution_state: attestation.execution_state,
          createdAt: attestation.issuedAt,
          attestation,
        }),
      'The decision could not be recorded; no attestation was issued.',
    );
    // The request id was taken between the early check and here (a concurrent replay): the store's guard decides.
    if (outcome === 'replayed') throw await this.replayed(caller, attestation.requestId);
    if (this.variant === 'attestation') {
      const status = attestation.execution_state === 'completed' ? 'approved' : attestation.execution_state;
      return { status, requires_override: attestation.decision.requires_override, attestation };
    }
    const statement = simpleStatementOf(attestation);
    const signed = await this.signText(this.d.hasher.canonicalize(statement), attestation.signerKeyId);
    return { status: 'ok', ...statement, requires_override: attestation.decision.requires_override, signature: signed };
  }

  /** Dry run: what the policy would decide. No attestation, nothing stored. */
  async evaluate(body: unknown): Promise<EvaluateResult> {
    const req = parsePolicyRequest(body);
    const policy = await this.load(req);
    const { decision, signalsValidated } = this.decide(policy, req);
    return { wouldDecide: decision.action, requires_override: decision.requires_override, ruleMatched: decision.matchedRuleId, reason: decision.reason, signalsValidated };
  }

  /**
   * Dry run of `execute`: the decision, whether `execute` would sign an attestation, and the
   * attestation it would sign without what only an execution has (executionId, requestId,
   * execution_fingerprint, callerId, issuedAt, signature). Writes nothing at all.
   */
  async simulate(body: unknown): Promise<SimulateResult> {
    const req = parsePolicyRequest(body);
    const policy = await this.load(req);
    const { decision, signalsValidated } = this.decide(policy, req);
    const state = this.d.runtime.state();
    const outsideInvariants = this.variant === 'attestation-simple' && (decision.matchedRuleId === null || isFailClosed(policy.compiled, decision));
    const m = state.configured ? state.manifest : undefined;
    const artifact = evaluatorArtifactHashOf(this.d.hasher, policy.compiled, policy.contentHash);
    return {
      simulation: true,
      decision: { action: decision.action, reason: decision.reason, ruleMatched: decision.matchedRuleId, requires_override: decision.requires_override },
      signalsValidated,
      policyLoaded: true,
      wouldSign: signalsValidated && state.configured && !outsideInvariants,
      attestationPreview: {
        policyId: req.policyId,
        policyVersion: req.policyVersion,
        schemaVersion: ATTESTATION_SCHEMA_VERSION,
        ...previewRuntimeFields(m),
        decision: signalsValidated ? attestationDecisionOf(decision) : null,
        execution_state: signalsValidated ? stateOf(decision) : null,
        signalsHash: signalsHashOf(this.d.hasher, req.signals),
        bundleHash: policy.contentHash,
        evaluatorArtifactHash: artifact,
      },
    };
  }

  private decide(policy: PublishedPolicy, req: PolicyRequest): { decision: PolicyDecision; signalsValidated: boolean } {
    const problems = signalProblems(policy.document, req.signals);
    if (problems.length > 0) {
      return { decision: { action: 'reject', reason: signalsMessage(problems), requires_override: false, matchedRuleId: null }, signalsValidated: false };
    }
    return { decision: evaluatePolicy(policy.compiled, { signals: req.signals, intent: NO_INTENT }), signalsValidated: true };
  }

  private async load(req: PolicyRequest): Promise<PublishedPolicy> {
    const policy = await this.d.policies.find(req.policyId, req.policyVersion);
    if (!policy) throw unprocessable(`Policy '${req.policyId}' version '${req.policyVersion}' was not found.`);
    return policy;
  }

  /** Spec 4.2: the simple variant answers 422 instead of attesting "no matching rule" or a rule that could not be evaluated. */
  private async refuseOutsideInvariants(caller: Caller, req: PolicyRequest, compiled: CompiledPolicy, decision: PolicyDecision): Promise<void> {
    if (decision.matchedRuleId === null) throw unprocessable('No matching rule: no rule of the policy matched and it has no default.', 'NO_MATCHING_RULE');
    if (!isFailClosed(compiled, decision)) return;
    await this.d.security.record('invariant_violation', { callerId: caller.callerId, operation: 'execute', detail: `${req.policyId} ${req.policyVersion}: ${decision.reason}` });
    throw unprocessable(`Invariant violation: ${decision.reason}`, 'INVARIANT_VIOLATION');
  }

  private async replayed(caller: Caller, requestId: string): Promise<DomainError> {
    await this.d.security.record('execution_replayed', { callerId: caller.callerId, operation: 'execute', detail: `executionId '${requestId}' was sent again` });
    return unprocessable(`executionId '${requestId}' was already used: an execution is attested once.`, 'EXECUTION_ID_REPLAYED');
  }

  private build(
    caller: Caller,
    m: SignedRuntimeManifest,
    policy: PublishedPolicy,
    req: PolicyRequest,
    policyDecision: PolicyDecision,
    requestId: string,
  ): ExecutionAttestation {
    const h = this.d.hasher;
    const signalsHash = signalsHashOf(h, req.signals);
    const decision = attestationDecisionOf(policyDecision);
    const execution_state = stateOf(decision);
    const bundleHash = policy.contentHash;
    const evaluatorArtifactHash = evaluatorArtifactHashOf(h, policy.compiled, bundleHash);
    const executionId = executionIdOf(h, { requestId, policyId: req.policyId, policyVersion: req.policyVersion, signalsHash });
    return {
      executionId,
      execution_fingerprint: executionFingerprintOf(h, { executionId, bundleHash, evaluatorArtifactHash, signalsHash, decision, execution_state }),
      requestId,
      policyId: req.policyId,
      policyVersion: req.policyVersion,
      schemaVersion: ATTESTATION_SCHEMA_VERSION,
      ...runtimeFields(m),
      decision,
      execution_state,
      signalsHash,
      bundleHash,
      evaluatorArtifactHash,
      callerId: caller.callerId,
      issuedAt: this.d.clock.now().toISOString(),
    };
  }

  private async sign(a: ExecutionAttestation): Promise<SignedAttestation> {
    return { ...a, signature: await this.signText(this.d.hasher.canonicalize(a), a.signerKeyId) };
  }

  /** Base64 Ed25519 over `text` with the key the attestation names (spec 2.9: Ed25519 only, also in hybrid mode). */
  private async signText(text: string, keyId: string): Promise<string> {
    const sig = await signed(() => this.d.signer.signText(text, 'ed25519'));
    if (sig.keyId !== keyId) {
      throw new DomainError('unavailable', `Runtime not configured: the signing key changed to ${sig.keyId} since the runtime manifest was signed; restart the service.`);
    }
    return sig.signature;
  }
}

export const signalsMessage = (problems: string[]): string => `Signals do not match the policy's signalsSchema: ${problems.join('; ')}.`;

const RUNTIME_FIELDS = [
  'runtimeVersion',
  'runtimeHash',
  'manifestHash',
  'manifestSignature',
  'trustRootVersion',
  'signerKeyId',
  'evaluatorHash',
  'evaluatorSemanticHash',
  'releaseManifestHash',
] as const;
type RuntimeFields = Pick<ExecutionAttestation, (typeof RUNTIME_FIELDS)[number]>;

/** The runtime's fields of an attestation: all from its signed manifest. */
const runtimeFields = (m: SignedRuntimeManifest): RuntimeFields => ({
  runtimeVersion: m.manifest.version,
  runtimeHash: m.manifest.runtimeHash,
  manifestHash: m.manifestHash,
  manifestSignature: m.manifestSignature,
  trustRootVersion: m.manifest.trustRootVersion,
  signerKeyId: m.manifest.signerKeyId,
  evaluatorHash: m.manifest.evaluatorHash,
  evaluatorSemanticHash: m.manifest.evaluatorSemanticHash,
  releaseManifestHash: m.manifest.releaseManifestHash,
});

/** In a preview, null where the runtime is not configured. */
const previewRuntimeFields = (m: SignedRuntimeManifest | undefined): Record<keyof RuntimeFields, string | null> =>
  m ? runtimeFields(m) : (Object.fromEntries(RUNTIME_FIELDS.map((k) => [k, null])) as Record<keyof RuntimeFields, null>);
