import type { Caller } from '../identity/caller.js';
import type { SignatureVerifier } from '../ports/crypto.js';
import { attestationSignatureProblems } from './attestation-checks.js';
import type { AttestationStore, ProofSigner } from './ports.js';
import type { ConfirmationBinding, DecisionDetail } from './records.js';
import { parseConfirmRequest } from './requests.js';
import { audited, signed } from '../shared/fail-closed.js';
import type { AttestationContext } from './security-events.js';

export interface ConfirmationDeps extends AttestationContext {
  store: Pick<AttestationStore, 'getDecision' | 'bindConfirmation' | 'recordConfirmationProof'>;
  verifier: SignatureVerifier;
  proofs: ProofSigner;
}

export interface ConfirmationResult {
  matched: boolean;
  executionId: string;
  withinTimeWindow: boolean;
  /** Compact JWS (`typ: ets-execution-confirmation+jwt`) over the claims below, verifiable with the JWKS. */
  proof: string;
  /** Why it did not match; empty when it did. */
  reasons: string[];
}

export const CONFIRMATION_PROOF_TYPE = 'ets-execution-confirmation+jwt';

/**
 * `POST /confirm-execution` (spec 4.2): binds the action that was taken to the attestation that
 * authorized it. It `matched` when the attestation's signature verifies, it is the attestation
 * this deployment issued for its `executionId` (byte for byte, canonically), its execution was
 * authorized (`completed`, or `pending_override` whose override was approved), and this is the
 * action bound to it: the first matching confirmation binds its `actionType` and `actionId`; a
 * later one with another action does not match (one authorization, one action).
 * `withinTimeWindow`: the action's timestamp is no earlier than the authorization (the
 * attestation's `issuedAt`, or the override's `resolvedAt`) and at most `timeWindowSeconds`
 * (default 300) after it. The answer is signed as `proof` either way.
 */
export class ExecutionConfirmation {
  constructor(private readonly d: ConfirmationDeps) {}

  async confirm(caller: Caller, body: unknown): Promise<ConfirmationResult> {
    const req = parseConfirmRequest(body);
    this.d.runtime.require();
    const h = this.d.hasher;
    const reasons = attestationSignatureProblems(h, this.d.verifier, req.attestation);
    let attestationHash: string | null = null;
    try {
      attestationHash = h.contentHash(req.attestation);
    } catch {
      reasons.push('attestation: cannot be canonicalized (RFC 8785)');
    }
    const stored = await this.d.store.getDecision(req.executionId);
    const authorizedAt = stored ? authorizationTime(stored) : undefined;
    if (!stored) reasons.push('executionId: no attestation was issued for it');
    else if (attestationHash === null || h.contentHash(stored.attestation) !== attestationHash) reasons.push('attestation: is not the attestation issued for this executionId');
    else if (!authorizedAt) reasons.push(`execution_state: the execution is ${stored.execution_state}, not authorized`);

    const { actionType, actionId, actionTimestamp, actionDetails } = req.action;
    const actionDetailsHash = actionDetails === undefined ? null : h.contentHash(actionDetails);
    const confirmedAt = this.d.clock.now().toISOString();
    if (reasons.length === 0) {
      const binding: ConfirmationBinding = { executionId: req.executionId, actionType, actionId, actionTimestamp, actionDetailsHash, confirmedAt };
      const bound = await audited(() => this.d.store.bindConfirmation(binding));
      if (bound.actionType !== actionType || bound.actionId !== actionId) {
        reasons.push(`executedAction: the execution is already bound to action ${bound.actionType} '${bound.actionId}'`);
      }
    }
    const matched = reasons.length === 0;
    const from = authorizedAt ? Date.parse(authorizedAt) : NaN;
    const withinTimeWindow = Number.isFinite(from) && req.actionAt >= from && req.actionAt <= from + req.timeWindowSeconds * 1000;
    if (!matched) {
      await this.d.security.record('confirmation_mismatch', { callerId: caller.callerId, operation: 'confirm-execution', executionId: req.executionId, detail: reasons.join('; ') });
    }
    const proof = await signed(
      () =>
        this.d.proofs.signProof(
        {
          executionId: req.executionId,
          attestationHash,
          executedAction: { actionType, actionId, actionTimestamp, actionDetailsHash },
          matched,
          withinTimeWindow,
          timeWindowSeconds: req.timeWindowSeconds,
          authorizedAt: authorizedAt ?? null,
          confirmedAt,
          confirmedBy: caller.callerId,
        },
        CONFIRMATION_PROOF_TYPE,
      ),
      'Signing is unavailable; the confirmation proof could not be signed.',
    );
    // A signed statement is evidence: it is kept (and logged) before it is answered.
    await audited(() => this.d.store.recordConfirmationProof({ executionId: req.executionId, matched, proof, confirmedAt }));
    return { matched, executionId: req.executionId, withinTimeWindow, proof, reasons };
  }
}

/** When the execution was authorized: at issue when completed, at the approval of its override; undefined when it was not. */
function authorizationTime(d: DecisionDetail): string | undefined {
  if (d.execution_state === 'completed') return d.attestation.issuedAt;
  if (d.execution_state === 'executed' && d.override) return d.override.resolvedAt;
  return undefined;
}
