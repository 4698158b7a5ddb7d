import { describe, expect, it } from '@jest/globals';
import type { BusinessTransaction } from '../execution/records.js';
import type { Caller } from '../identity/caller.js';
import type { StepUpSignatureVerifier } from '../ports/crypto.js';
import type { SingleUseLedger } from '../ports/single-use.js';
import { ApprovalChecker, DEMO_APPROVER_ID, type ApprovalCheckDeps } from './approval.js';

const NOW = new Date('2026-11-21T12:00:00.000Z');
const caller: Caller = { callerId: 'agent-7', allowedCapabilities: ['*'], allowedPrincipalIds: [], allowedTenantIds: [] };

const tx = (action: string): BusinessTransaction => ({
  businessTransactionId: '7b1e4c2a-3f5d-4e6a-9b8c-0d1e2f3a4b5c',
  metadata: {},
  authority: { principalId: 'agent-7', authorityId: 'a' },
  authorization: { authorityId: 'a' },
  intent: { action, parameters: { amount: 5000 } },
  policy: { name: 'p', version: '1' },
  signals: {},
});

const approval = (action: string, approverId = DEMO_APPROVER_ID) => ({
  payload: {
    approvalId: 'appr-1',
    approverId,
    businessTransactionId: '7b1e4c2a-3f5d-4e6a-9b8c-0d1e2f3a4b5c',
    action,
    scope: { field: 'value', value: 5000 },
    signalsHash: 'hash-of-{}',
    expiresAt: '2026-11-21T12:05:00Z',
    nonce: 'n'.repeat(43),
  },
  signature: 'c2lnbmF0dXJl',
});

/** Every signature verifies with the key it is checked against: the rules around it are under test. */
function checker(over: Partial<ApprovalCheckDeps> = {}) {
  const used = new Set<string>();
  const verified: string[] = [];
  const deps: ApprovalCheckDeps = {
    approvers: { stepUpKeysOf: (id) => (id === 'bob' ? ['BOB-KEY'] : []) },
    verifier: { verify: (pem) => (verified.push(pem), true), publicKeyOf: (pem) => pem } satisfies StepUpSignatureVerifier,
    used: { consume: async (scope, id) => !used.has(`${scope}:${id}`) && !!used.add(`${scope}:${id}`) } satisfies SingleUseLedger,
    hasher: { contentHash: () => 'hash-of-{}', canonicalize: (v) => JSON.stringify(v) },
    clock: { now: () => NOW },
    ...over,
  };
  return { check: new ApprovalChecker(deps), verified };
}

const scope = { value: 'intent.parameters.amount' };

describe('the demo approver of sandbox mode', () => {
  it('approves a sandbox action in sandbox mode, with its published key, once', async () => {
    const { check, verified } = checker({ demoApproverPublicKeyPem: 'DEMO-KEY' });
    await expect(check.accept(approval('sandbox:echo'), { requesterId: caller.callerId, tx: tx('sandbox:echo'), approvalScope: scope })).resolves.toMatchObject({ approvalId: 'appr-1' });
    expect(verified).toEqual(['DEMO-KEY']);
    await expect(check.accept(approval('sandbox:echo'), { requesterId: caller.callerId, tx: tx('sandbox:echo'), approvalScope: scope })).rejects.toMatchObject({ code: 'APPROVAL_INVALID', message: expect.stringContaining('used before') });
  });

  it('approves nothing but sandbox actions, even in sandbox mode', async () => {
    const { check, verified } = checker({ demoApproverPublicKeyPem: 'DEMO-KEY' });
    await expect(check.accept(approval('payments:transfer'), { requesterId: caller.callerId, tx: tx('payments:transfer'), approvalScope: scope })).rejects.toMatchObject({ code: 'APPROVAL_INVALID', message: expect.stringContaining('sandbox actions only') });
    expect(verified).toEqual([]);
  });

  it('approves nothing outside sandbox mode', async () => {
    const { check } = checker();
    await expect(check.accept(approval('sandbox:echo'), { requesterId: caller.callerId, tx: tx('sandbox:echo'), approvalScope: scope })).rejects.toMatchObject({ code: 'APPROVAL_INVALID', message: expect.stringContaining('sandbox mode') });
  });

  it('a human approver is checked with their own step-up keys, never the demo key', async () => {
    const { check, verified } = checker({ demoApproverPublicKeyPem: 'DEMO-KEY' });
    await check.accept(approval('payments:transfer', 'bob'), { requesterId: caller.callerId, tx: tx('payments:transfer'), approvalScope: scope });
    expect(verified).toEqual(['BOB-KEY']);
  });
});
