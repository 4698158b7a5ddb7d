/**
 * The agent (an application or an AI agent): asks the service to execute an action, with its own
 * API key. One typed call; the answer says whether it was executed and carries the signed record.
 */
import { createClient, type Schemas } from '@ets/client';

export async function payInvoice(baseUrl: string, apiKey: string, invoice: { id: string; amount: number; country: string }, action = 'sandbox:echo') {
  const client = createClient({ baseUrl, apiKey });
  const transaction: Schemas['BusinessTransaction'] = {
    businessTransactionId: crypto.randomUUID(), // a repeated id is refused (409)
    metadata: { tenantId: 't1' },
    authority: { principalId: 'agent-7', authorityId: 'auth-1' },
    authorization: { authorityId: 'auth-1' },
    intent: { action, parameters: { invoiceId: invoice.id, amount: invoice.amount, currency: 'EUR' } },
    policy: { name: 'payments', version: '1.0.0' },
    signals: { amount: invoice.amount, country: invoice.country },
  };
  const { data, error, response } = await client.POST('/execute', { body: transaction });
  if (error) {
    // Refused or failed: `error` is the documented error body, e.g. 403 { error, code: 'POLICY_DENIED' }.
    return { executed: false as const, status: response.status, code: error.code, reason: error.error, id: transaction.businessTransactionId };
  }
  // Executed: the connector's result and the signed Execution Trust Record.
  return { executed: true as const, status: response.status, result: data.result, trustRecord: data.trustRecord, id: transaction.businessTransactionId };
}
