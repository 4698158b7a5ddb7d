import { randomUUID } from 'node:crypto';

/** A valid Business Transaction for the exec-test policy and the sandbox connector. */
export function businessTransaction(over: Record<string, unknown> = {}, principalId = 'agent-7'): Record<string, unknown> {
  return {
    businessTransactionId: randomUUID(),
    metadata: { tenantId: 't1' },
    authority: { principalId, authorityId: 'auth-1' },
    authorization: { authorityId: 'auth-1' },
    intent: { action: 'sandbox:echo', parameters: { amount: 120, currency: 'EUR', reference: 'inv-42' } },
    policy: { name: 'exec-test', version: '1.0.0' },
    signals: { amount: 120, country: 'FR' },
    ...over,
  };
}
