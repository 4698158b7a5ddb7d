import type { AuditEventStore, AuthEvent } from '../ports/audit.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Signer } from '../ports/crypto.js';
import { appendSignedEvent, type AuditDeps } from './signed-audit.js';

/** One signed event per authentication attempt, successful or not (spec 6). Fails closed. */
export class AuthenticationAudit {
  private readonly deps: AuditDeps;

  constructor(signer: Signer, store: AuditEventStore, clock: Clock, ids: IdGenerator) {
    this.deps = { signer, store, clock, ids };
  }

  record(attempt: { callerId: string | null; method: string; route: string; outcome: AuthEvent['outcome'] }): Promise<void> {
    return appendSignedEvent(
      this.deps,
      (base): AuthEvent => ({ eventId: base.eventId, kind: 'caller-authentication', callerId: attempt.callerId, route: attempt.route, method: attempt.method, outcome: attempt.outcome, occurredAt: base.occurredAt }),
      'Audit log is unavailable; the request was not processed.',
    );
  }
}
