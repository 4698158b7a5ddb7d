import { randomUUID } from 'node:crypto';
import type { GovernanceEvent, Signed } from '@ets/domain';

/** A governance event as the domain signs it, for store tests (a store keeps what it is given; it verifies nothing). */
export const governanceEvent = (action: GovernanceEvent['action'] = 'propose', callerId = 'alice', subjectId = 'chg'): Signed<GovernanceEvent> => ({
  eventId: randomUUID(),
  kind: 'governance',
  callerId,
  action,
  subjectType: 'policy-change',
  subjectId,
  summary: `${action} by ${callerId}`,
  occurredAt: new Date().toISOString(),
  keyId: 'ed25519-test',
  signature: 'c2ln',
});
