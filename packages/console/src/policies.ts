import { enc, listAll } from './api';

/**
 * A published policy version's document. The service keeps it with the change that published it
 * (an approved policy change, the shipped ones included), so it is found among those.
 */
export async function publishedPolicy(name: string, version: string): Promise<Record<string, unknown> | undefined> {
  const approved = (await listAll<Record<string, unknown>>(`/policies/pending-changes?status=${enc('APPROVED')}`, 50)) ?? [];
  const change = approved.find((c) => c.policyName === name && c.policyVersion === version);
  return change?.proposedContent as Record<string, unknown> | undefined;
}
