import { DomainError } from '../shared/errors.js';
import type { AuditEvent, AuditEventStore } from '../ports/audit.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Signed, Signer } from '../ports/crypto.js';

export interface AuditDeps {
  signer: Signer;
  store: AuditEventStore;
  clock: Clock;
  ids: IdGenerator;
}

const auditUnavailable = (message: string, cause: unknown) => new DomainError('unavailable', message, 'AUDIT_UNAVAILABLE', undefined, { cause });

/** Signs one audit event that occurred `at` (default now); AUDIT_UNAVAILABLE when it cannot be signed. */
export async function signEvent<E extends AuditEvent>(
  deps: Pick<AuditDeps, 'signer' | 'clock' | 'ids'>,
  build: (base: { eventId: string; occurredAt: string }) => E,
  failureMessage: string,
  at: Date = deps.clock.now(),
): Promise<Signed<E>> {
  const event = build({ eventId: deps.ids.uuid(), occurredAt: at.toISOString() });
  try {
    return await deps.signer.sign<E>(event);
  } catch (cause) {
    throw auditUnavailable(failureMessage, cause);
  }
}

/** Stores one signed audit event; AUDIT_UNAVAILABLE when it cannot be stored. */
export async function storeEvent(store: AuditEventStore, event: Signed<AuditEvent>, failureMessage: string): Promise<void> {
  try {
    await store.append(event);
  } catch (cause) {
    throw auditUnavailable(failureMessage, cause);
  }
}
