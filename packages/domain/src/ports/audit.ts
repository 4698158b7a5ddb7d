import type { Signed } from './crypto.js';

/** A caller-authentication audit event (spec 6), signed by the service. */
export interface AuthEvent {
  eventId: string;
  kind: 'caller-authentication';
  callerId: string | null;
  route: string;
  method: string;
  outcome: 'SUCCESS' | 'FAILURE';
  occurredAt: string;
}

/** A governance audit event: who proposed or decided what, and when. */
export interface GovernanceEvent {
  eventId: string;
  kind: 'governance';
  callerId: string;
  action: 'propose' | 'approve' | 'reject';
  subjectType: string;
  subjectId: string;
  summary: string;
  occurredAt: string;
}

export type AuditEvent = AuthEvent | GovernanceEvent;

export interface AuditEventQuery {
  callerId?: string;
  limit: number;
  before?: string;
  beforeEventId?: string;
  kind?: AuditEvent['kind'];
}

export interface AuditEventStore {
  /** Durable on return; a failure must surface so the caller can fail closed. */
  append(event: Signed<AuditEvent>): Promise<void>;
  /**
   * Newest first: by `occurredAt`, then by `eventId`, both descending. `before` (an ISO time as
   * `toISOString` writes it) keeps the events strictly older; with `beforeEventId` too, also those
   * of that very time whose `eventId` sorts below it, so that a page resumed after its last event
   * (its `occurredAt` and `eventId`) neither repeats nor skips one.
   */
  list(query: AuditEventQuery): Promise<Signed<AuditEvent>[]>;
}
