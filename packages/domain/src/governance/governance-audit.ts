import type { AuditEventStore, GovernanceEvent } from '../ports/audit.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Signer } from '../ports/crypto.js';
import { DomainError } from '../shared/errors.js';

/**
 * Signed audit events of governance (who proposed or decided what, and when), appended to the
 * same store as the authentication events and verifiable with `POST /audit/verify`.
 */
export class GovernanceAudit {
  constructor(
    private readonly signer: Signer,
    private readonly store: AuditEventStore,
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
  ) {}

  async record(e: Pick<GovernanceEvent, 'callerId' | 'action' | 'subjectType' | 'subjectId' | 'summary'>): Promise<void> {
    const event: GovernanceEvent = {
      eventId: this.ids.uuid(),
      kind: 'governance',
      callerId: e.callerId,
      action: e.action,
      subjectType: e.subjectType,
      subjectId: e.subjectId,
      summary: e.summary,
      occurredAt: this.clock.now().toISOString(),
    };
    try {
      await this.store.append(await this.signer.sign(event));
    } catch (cause) {
      throw new DomainError('unavailable', 'Audit log is unavailable; the governance event could not be recorded.', 'AUDIT_UNAVAILABLE', undefined, { cause });
    }
  }
}
