import { DomainError, forbidden } from '../shared/errors.js';
import { isVerifiedHuman, type Caller } from '../identity/caller.js';
import type { IdGenerator } from '../ports/clock.js';
import type { Signer } from '../ports/crypto.js';
import { resolutionFingerprintOf } from './identity.js';
import type { AttestationStore } from './ports.js';
import type { OverrideResolution, SignedOverrideResolution } from './records.js';
import { parseOverrideRequest } from './requests.js';
import { audited, signed } from '../shared/fail-closed.js';
import type { AttestationContext } from './security-events.js';

export interface OverrideServiceDeps extends AttestationContext {
  store: Pick<AttestationStore, 'getDecision' | 'resolveOverride'>;
  signer: Signer;
  ids: IdGenerator;
}

export type OverrideResult =
  | { status: 'approved'; overrideId: string; resolution: SignedOverrideResolution }
  | { status: 'rejected'; executionId: string };

export const NO_PENDING_OVERRIDE = 'No pending override for this executionId.';
export const OVERRIDE_ALREADY_RESOLVED = 'The override of this execution was already resolved.';

/**
 * `POST /override` (spec 3, 4.2): a human's decision on an execution stored as
 * `pending_override`. Approved moves it to `executed` and answers the signed resolution with the
 * new `execution_fingerprint`; rejected moves it to `rejected`. The move is a compare-and-set in
 * the store, so of simultaneous calls exactly one resolves it and the others get 409.
 *
 * Who decides (CONTRACT "Review rules, round 2"): a `USER` key, never the caller whose execution
 * waits (an agent must not release its own held action, whatever name it writes), and in its own
 * name: `approvedBy` is the caller's id, so the signed resolution names who really decided.
 */
export class OverrideService {
  constructor(private readonly d: OverrideServiceDeps) {}

  async resolve(caller: Caller, body: unknown): Promise<OverrideResult> {
    requireHumanDecider(caller);
    const req = parseOverrideRequest(body);
    if (req.approvedBy !== caller.callerId) {
      throw forbidden(`approvedBy must be your own caller id ('${caller.callerId}'): an override is decided in the name of the key that sends it.`, 'SELF_APPROVAL_DENIED');
    }
    this.d.runtime.require();
    const decision = await this.d.store.getDecision(req.executionId);
    if (!decision || decision.attestation.execution_state !== 'pending_override') throw new DomainError('not_found', NO_PENDING_OVERRIDE);
    if (decision.attestation.callerId === caller.callerId) {
      throw forbidden('The caller whose execution waits for the override cannot decide it; another human must.', 'SELF_APPROVAL_DENIED');
    }
    if (decision.execution_state !== 'pending_override') throw await this.conflict(caller, req.executionId);

    const unsigned: OverrideResolution = {
      recordType: 'override-resolution',
      overrideId: this.d.ids.uuid(),
      executionId: req.executionId,
      status: req.approved ? 'executed' : 'rejected',
      approved: req.approved,
      approvedBy: req.approvedBy,
      approverRole: req.approverRole,
      reason: req.reason,
      decidedBy: caller.callerId,
      previousFingerprint: decision.attestation.execution_fingerprint,
      execution_fingerprint: '',
      resolvedAt: this.d.clock.now().toISOString(),
    };
    unsigned.execution_fingerprint = resolutionFingerprintOf(this.d.hasher, unsigned);
    const resolution: SignedOverrideResolution = await signed(() => this.d.signer.sign(unsigned));
    const outcome = await audited(() => this.d.store.resolveOverride(resolution), 'The override could not be recorded; nothing was changed.');
    if (outcome === 'not-pending') throw new DomainError('not_found', NO_PENDING_OVERRIDE);
    if (outcome === 'already-resolved') throw await this.conflict(caller, req.executionId);
    return req.approved ? { status: 'approved', overrideId: resolution.overrideId, resolution } : { status: 'rejected', executionId: req.executionId };
  }

  private async conflict(caller: Caller, executionId: string): Promise<DomainError> {
    await this.d.security.record('override_conflict', { callerId: caller.callerId, operation: 'override', executionId, detail: 'an override of an execution that was already resolved' });
    return new DomainError('conflict', OVERRIDE_ALREADY_RESOLVED);
  }
}

/** Only a verified human (a `USER` key) decides an override. */
function requireHumanDecider(caller: Caller): void {
  if (!isVerifiedHuman(caller)) {
    throw forbidden('Only a verified human (a USER key) may decide an override.', 'NON_HUMAN_CALLER_DENIED');
  }
}
