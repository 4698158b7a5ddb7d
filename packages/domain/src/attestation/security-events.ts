import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Hasher } from '../ports/crypto.js';
import { audited } from '../shared/fail-closed.js';
import type { AttestationStore } from './ports.js';
import type { SecurityEventKind } from './records.js';
import type { AttestationRuntime } from './runtime.js';

/** Security events of profile A (spec 6): refusals worth an operator's attention. */
export class SecurityEvents {
  constructor(private readonly d: { store: Pick<AttestationStore, 'recordSecurityEvent'>; clock: Clock; ids: IdGenerator }) {}

  record(kind: SecurityEventKind, e: { callerId: string | null; operation: string; executionId?: string | null; detail: string }): Promise<void> {
    return audited(() =>
      this.d.store.recordSecurityEvent({
        eventId: this.d.ids.uuid(),
        kind,
        occurredAt: this.d.clock.now().toISOString(),
        callerId: e.callerId,
        operation: e.operation,
        executionId: e.executionId ?? null,
        detail: e.detail.slice(0, 2000),
      }),
    );
  }
}

/** What every service of profile A works with. */
export interface AttestationContext {
  runtime: AttestationRuntime;
  hasher: Hasher;
  clock: Clock;
  security: SecurityEvents;
}
