import { DomainError } from '../shared/errors.js';
import type { AuditEventStore, AuthEvent } from '../ports/audit.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Signer } from '../ports/crypto.js';

/**
 * Signs and stores one event per authentication attempt (spec 6). Auditing fails closed: when the
 * event cannot be signed or stored the request must not go on unaudited.
 */
export class AuthenticationAudit {
  constructor(
    private readonly signer: Signer,
    private readonly store: AuditEventStore,
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
  ) {}

  async record(attempt: { callerId: string | null; method: string; route: string; outcome: AuthEvent['outcome'] }): Promise<void> {
    const event: AuthEvent = {
      eventId: this.ids.uuid(),
      kind: 'caller-authentication',
      callerId: attempt.callerId,
      route: attempt.route,
      method: attempt.method,
      outcome: attempt.outcome,
      occurredAt: this.clock.now().toISOString(),
    };
    try {
      await this.store.append(await this.signer.sign(event));
    } catch (cause) {
      throw new DomainError('unavailable', 'Audit log is unavailable; the request was not processed.', 'AUDIT_UNAVAILABLE', undefined, { cause });
    }
  }
}
