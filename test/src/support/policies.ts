import { createHash } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { canonicalize } from '@ets/adapters-crypto';
import { TypeOrmPolicyStore } from '@ets/adapters-persistence';
import type { PolicyDocument } from '@ets/domain';

/** A policy for pipeline tests: reject sanctioned countries, override above 10000, approve the rest. */
export const EXEC_POLICY: PolicyDocument = {
  name: 'exec-test',
  policyVersion: '1.0.0',
  description: 'pipeline tests',
  signalsSchema: { amount: { type: 'number' }, country: { type: 'string' }, vip: { type: 'boolean' } },
  rules: [
    { id: 'sanctioned', when: "has(signals.country) && signals.country in ['KP', 'IR']", action: 'reject', reason: 'Country is sanctioned' },
    { id: 'large', when: 'has(signals.amount) && signals.amount > 10000', action: 'approve', requires_override: true, reason: 'Large transfer needs a second look' },
    { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
  ],
  default: { action: 'reject', reason: 'No rule matched' },
};

/** H(C(x)): lower-case hex SHA-256 of the RFC 8785 canonical JSON. */
export const contentHash = (v: unknown): string => createHash('sha256').update(canonicalize(v)).digest('hex');

/**
 * Publishes a policy version directly in the store, as an approved change would: tests of the
 * pipeline need a policy in effect without walking the maker-checker flow each time.
 */
export async function publishPolicy(ds: DataSource, doc: PolicyDocument = EXEC_POLICY): Promise<string> {
  const hash = contentHash(doc);
  await new TypeOrmPolicyStore(ds).publish({
    name: doc.name,
    version: doc.policyVersion,
    content: doc,
    contentHash: hash,
    changeId: '00000000-0000-4000-8000-000000000000',
    proposer: 'test-maker',
    approvedBy: 'test-checker',
    approvedAt: new Date().toISOString(),
  });
  return hash;
}
