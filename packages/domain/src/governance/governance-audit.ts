import type { GovernanceEvent } from '../ports/audit.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Signed, Signer } from '../ports/crypto.js';
import { signEvent } from '../identity/signed-audit.js';

/**
 * Signed audit events of governance (who proposed or decided what, and when), verifiable with
 * `POST /audit/verify` like the authentication events. An event is signed BEFORE what it records
 * is stored, and the pending-change store keeps it (and its transparency-log leaf) in the same
 * transaction as the proposal or decision: a crash can never leave a decision without its event,
 * nor an event without its decision. Fails closed: no signature, no change.
 */
export class GovernanceAudit {
  constructor(
    private readonly signer: Signer,
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
  ) {}

  /** The signed event; `at` is the moment of what it records (a decision's `decidedAt`), default now. */
  async sign(e: Pick<GovernanceEvent, 'callerId' | 'action' | 'subjectType' | 'subjectId' | 'summary'>, at: Date = this.clock.now()): Promise<Signed<GovernanceEvent>> {
    return signEvent(
      { signer: this.signer, clock: this.clock, ids: this.ids },
      (base): GovernanceEvent => ({ eventId: base.eventId, kind: 'governance', callerId: e.callerId, action: e.action, subjectType: e.subjectType, subjectId: e.subjectId, summary: e.summary, occurredAt: base.occurredAt }),
      'Audit log is unavailable; the governance event could not be signed.',
      at,
    );
  }
}
