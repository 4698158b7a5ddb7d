import type { AuditEventStore, AuthEvent } from '../ports/audit.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Signed, Signer } from '../ports/crypto.js';
import { AUDIT_UNAVAILABLE_MESSAGE } from '../shared/fail-closed.js';
import { signEvent, storeEvent, type AuditDeps } from './signed-audit.js';

type Attempt = { callerId: string | null; method: string; route: string; outcome: AuthEvent['outcome'] };

/**
 * A signed authentication event not stored yet. A request that goes on to write records hands it
 * to that write, which stores it in the same commit (`stored` becomes true); whatever it does not
 * store, `AuthenticationAudit.settle` stores before the request is answered.
 */
export interface PendingAuthEvent {
  readonly event: Signed<AuthEvent>;
  stored: boolean;
}


/** One signed event per authentication attempt, successful or not (spec 6). Fails closed. */
export class AuthenticationAudit {
  private readonly deps: AuditDeps;

  constructor(signer: Signer, store: AuditEventStore, clock: Clock, ids: IdGenerator) {
    this.deps = { signer, store, clock, ids };
  }

  /** Signs and stores the event of one attempt. */
  async record(attempt: Attempt): Promise<void> {
    await this.settle(await this.prepare(attempt));
  }

  /** Signs the event of one attempt without storing it yet (see PendingAuthEvent). */
  async prepare(attempt: Attempt): Promise<PendingAuthEvent> {
    const event = await signEvent(
      this.deps,
      (base): AuthEvent => ({ eventId: base.eventId, kind: 'caller-authentication', callerId: attempt.callerId, route: attempt.route, method: attempt.method, outcome: attempt.outcome, occurredAt: base.occurredAt }),
      AUDIT_UNAVAILABLE_MESSAGE,
    );
    return { event, stored: false };
  }

  /** Stores a pending event unless a write of the request already did; AUDIT_UNAVAILABLE when it cannot. */
  async settle(pending: PendingAuthEvent): Promise<void> {
    if (pending.stored) return;
    await storeEvent(this.deps.store, pending.event, AUDIT_UNAVAILABLE_MESSAGE);
    pending.stored = true;
  }
}
