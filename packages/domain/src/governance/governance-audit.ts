import type { AuditEventStore, GovernanceEvent } from '../ports/audit.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Signer } from '../ports/crypto.js';
import { appendSignedEvent, type AuditDeps } from '../identity/signed-audit.js';

/**
 * Signed audit events of governance (who proposed or decided what, and when), appended to the
 * same store as the authentication events and verifiable with `POST /audit/verify`. Fails closed.
 */
export class GovernanceAudit {
  private readonly deps: AuditDeps;

  constructor(signer: Signer, store: AuditEventStore, clock: Clock, ids: IdGenerator) {
    this.deps = { signer, store, clock, ids };
  }

  record(e: Pick<GovernanceEvent, 'callerId' | 'action' | 'subjectType' | 'subjectId' | 'summary'>): Promise<void> {
    return appendSignedEvent(
      this.deps,
      (base): GovernanceEvent => ({ eventId: base.eventId, kind: 'governance', callerId: e.callerId, action: e.action, subjectType: e.subjectType, subjectId: e.subjectId, summary: e.summary, occurredAt: base.occurredAt }),
      'Audit log is unavailable; the governance event could not be recorded.',
    );
  }
}
