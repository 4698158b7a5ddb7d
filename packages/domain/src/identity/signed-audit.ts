import { DomainError } from '../shared/errors.js';
import type { AuditEvent, AuditEventStore } from '../ports/audit.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Signer } from '../ports/crypto.js';

export interface AuditDeps {
  signer: Signer;
  store: AuditEventStore;
  clock: Clock;
  ids: IdGenerator;
}

/**
 * Signs and appends one audit event. Auditing fails closed: when the event cannot be signed or
 * stored the caller gets AUDIT_UNAVAILABLE and must not go on unaudited.
 */
export async function appendSignedEvent(
  deps: AuditDeps,
  build: (base: { eventId: string; occurredAt: string }) => AuditEvent,
  failureMessage: string,
): Promise<void> {
  const event = build({ eventId: deps.ids.uuid(), occurredAt: deps.clock.now().toISOString() });
  try {
    await deps.store.append(await deps.signer.sign<AuditEvent>(event));
  } catch (cause) {
    throw new DomainError('unavailable', failureMessage, 'AUDIT_UNAVAILABLE', undefined, { cause });
  }
}
