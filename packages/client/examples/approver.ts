/**
 * The approver (a human, USER key with a registered step-up key): decides a pending change of any
 * kind by signing a step-up envelope with their own Ed25519 key, which never leaves them.
 */
import { createClient, signStepUp, type Ed25519PrivateKey } from '@ets/client';

export async function approvePolicyChange(baseUrl: string, apiKey: string, stepUpKey: Ed25519PrivateKey, changeId: string) {
  const client = createClient({ baseUrl, apiKey });
  const envelope = await signStepUp({ key: stepUpKey, changeId, action: 'approve' });
  const { data, error, response } = await client.POST('/policies/pending-changes/{id}/approve', { params: { path: { id: changeId } }, body: envelope });
  return error ? { status: response.status, code: error.code } : { status: response.status, change: data };
}

export async function rejectPolicyChange(baseUrl: string, apiKey: string, stepUpKey: Ed25519PrivateKey, changeId: string, reason: string) {
  const client = createClient({ baseUrl, apiKey });
  const envelope = await signStepUp({ key: stepUpKey, changeId, action: 'reject', reason });
  const { data, error, response } = await client.POST('/policies/pending-changes/{id}/reject', { params: { path: { id: changeId } }, body: envelope });
  return error ? { status: response.status, code: error.code } : { status: response.status, change: data };
}

/** The same envelope approves a change of another kind: here, the registration of an external connector. */
export async function approveConnectorChange(baseUrl: string, apiKey: string, stepUpKey: Ed25519PrivateKey, changeId: string) {
  const client = createClient({ baseUrl, apiKey });
  const envelope = await signStepUp({ key: stepUpKey, changeId, action: 'approve' });
  const { data, error, response } = await client.POST('/external-connectors/changes/{id}/approve', { params: { path: { id: changeId } }, body: envelope });
  return error ? { status: response.status, code: error.code } : { status: response.status, change: data };
}
