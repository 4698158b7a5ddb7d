import { beforeEach, describe, expect, it } from '@jest/globals';
// The policy shipped with the product, imported so these tests follow it.
import shipped from '../../../../apps/server/policies/payments-transfer.json' with { type: 'json' };
import { GovernanceAudit } from '../governance/governance-audit.js';
import { InMemoryPendingChangeStore } from '../governance/in-memory.js';
import type { Caller } from '../identity/caller.js';
import type { Hasher } from '../ports/crypto.js';
import { fakeSigner as signer, fakeStepUpSign, fakeStepUpVerifier as verifier, stableJson as stable } from '../governance/testing.js';
import { InMemoryPolicyStore } from './in-memory-policy-store.js';
import { PolicyGovernance } from './policy-governance.js';
import { PolicyService } from './policy-service.js';

const hasher: Hasher = { contentHash: (v) => `h(${stable(v)})`, sha256Hex: (t) => t, canonicalize: stable };

let t = Date.parse('2026-11-21T12:00:00.000Z');
const clock = { now: () => new Date(t) };
let n = 0;
const ids = { uuid: () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}` };

const human = (callerId: string): Caller => ({
  callerId,
  credentialHolderType: 'USER',
  allowedCapabilities: [],
  allowedPrincipalIds: [],
  allowedTenantIds: [],
  stepUpPublicKeyPem: `key-of-${callerId}`,
});
const alice = human('alice');
const bob = human('bob');

function approval(checker: Caller, id: string) {
  const payload = { pendingPolicyChangeId: id, action: 'approve', expiresAt: new Date(t + 60_000).toISOString(), nonce: `n${String(++n).padStart(24, '0')}`, callerId: checker.callerId };
  return { payload, signature: fakeStepUpSign(checker.stepUpPublicKeyPem!, payload) };
}

const doc = (version: string, over: Record<string, unknown> = {}) => ({ ...structuredClone(shipped), policyVersion: version, ...over });

let policies: InMemoryPolicyStore;
let changes: InMemoryPendingChangeStore;
let gov: PolicyGovernance;
let service: PolicyService;
beforeEach(() => {
  policies = new InMemoryPolicyStore();
  changes = new InMemoryPendingChangeStore();
  gov = new PolicyGovernance({ policies, changes, hasher, stepUpVerifier: verifier, approvers: { stepUpKeysOf: () => [] }, clock, ids, audit: new GovernanceAudit(signer, clock, ids) });
  service = new PolicyService(policies);
});

const publish = async (version: string, base = version) => {
  const c = await gov.propose(alice, 'payments-transfer', base, { proposedContent: doc(version), reason: 'r' });
  t += 1000;
  return gov.approve(c.id, bob, approval(bob, c.id));
};

const refusal = (kind: string, message?: RegExp) => expect.objectContaining({ kind, code: undefined, ...(message ? { message: expect.stringMatching(message) } : {}) });

describe('policy proposals', () => {
  it('proposes a first version and shows the pending change as the contract does', async () => {
    const c = await gov.propose(alice, 'payments-transfer', '1.0.0', { proposedContent: doc('1.0.0'), reason: 'first' });
    expect(c).toEqual({
      id: expect.any(String),
      policyName: 'payments-transfer',
      baseVersion: '1.0.0',
      policyVersion: '1.0.0',
      status: 'PENDING_APPROVAL',
      proposer: 'alice',
      reason: 'first',
      createdAt: expect.any(String),
      contentHash: hasher.contentHash(doc('1.0.0')),
      proposedContent: doc('1.0.0'),
    });
    expect(await service.inEffect()).toEqual([]);
  });

  it.each([
    ['.', '1.0.0', {}, /name/],
    ['..', '1.0.0', {}, /name/],
    ['payments-transfer', '.', {}, /version/],
    ['payments-transfer', '..', {}, /version/],
    ['payments-transfer', '1.0.0', { policyVersion: '.' }, /proposedContent.policyVersion/],
    ['payments-transfer', '1.0.0', { policyVersion: '..' }, /proposedContent.policyVersion/],
  ])('refuses dot-only segments with 400: name %p version %p content %p', async (name, version, over, message) => {
    await expect(gov.propose(alice, name, version, { proposedContent: doc('1.0.0', over) })).rejects.toEqual(refusal('invalid', message));
  });

  it('refuses a content name other than the path name, invalid content (with its errors) and a bad reason with 400', async () => {
    await expect(gov.propose(alice, 'other-policy', '1.0.0', { proposedContent: doc('1.0.0') })).rejects.toEqual(refusal('invalid', /proposedContent.name/));
    await expect(gov.propose(alice, 'payments-transfer', '1.0.0', { proposedContent: doc('1.0.0', { signalsSchema: { amount: { type: 'object' } } }) })).rejects.toEqual(
      refusal('invalid', /invalid: signalsSchema.amount.type/),
    );
    await expect(gov.propose(alice, 'payments-transfer', '1.0.0', {})).rejects.toEqual(refusal('invalid', /proposedContent is required/));
    await expect(gov.propose(alice, 'payments-transfer', '1.0.0', { proposedContent: doc('1.0.0'), reason: 'x'.repeat(2001) })).rejects.toEqual(refusal('invalid', /reason/));
    expect(changes.changes.size).toBe(0);
  });

  it('refuses a version already published or already pending with 409, and an unknown base version with 404', async () => {
    await publish('1.0.0');
    await expect(gov.propose(alice, 'payments-transfer', '1.0.0', { proposedContent: doc('1.0.0') })).rejects.toEqual(refusal('conflict', /already published/));
    await gov.propose(alice, 'payments-transfer', '1.0.0', { proposedContent: doc('1.1.0') });
    await expect(gov.propose(bob, 'payments-transfer', '1.0.0', { proposedContent: doc('1.1.0') })).rejects.toEqual(refusal('conflict', /pending/));
    await expect(gov.propose(alice, 'payments-transfer', '0.9.0', { proposedContent: doc('2.0.0') })).rejects.toEqual(
      refusal('not_found', /^Policy 'payments-transfer' version '0.9.0' was not found.$/),
    );
  });
});

describe('publishing and the versions in effect', () => {
  it('publishes on approval; the latest approved version is in effect; published versions stay as they were', async () => {
    await publish('1.0.0');
    expect((await service.inEffect()).map((p) => p.version)).toEqual(['1.0.0']);
    const v2 = await publish('2.0.0', '1.0.0');
    expect(v2).toMatchObject({ status: 'APPROVED', baseVersion: '1.0.0', decider: 'bob', appliedAt: expect.any(String) });
    // 1.5.0 is approved after 2.0.0: most recently approved wins, whatever the version string says.
    await publish('1.5.0', '2.0.0');
    expect(await service.inEffect()).toEqual([
      {
        name: 'payments-transfer',
        version: '1.5.0',
        contentHash: hasher.contentHash(doc('1.5.0')),
        approvedAt: expect.any(String),
        approvedBy: 'bob',
        authorityGrantRequired: false,
        signals: { sourced: [] },
      },
    ]);
    expect((await service.get({ name: 'payments-transfer', version: '1.0.0' })).content).toEqual(doc('1.0.0'));
  });

  it('reports authorityGrantRequired and sourced signals', async () => {
    const c = await gov.propose(alice, 'payments-transfer', '3.0.0', {
      proposedContent: doc('3.0.0', { requireAuthorityGrant: true, signalSources: { country: { source: 'kyc', fact: 'customer.country', subject: 'intent.parameters.customerId' } } }),
    });
    await gov.approve(c.id, bob, approval(bob, c.id));
    expect(await service.inEffect()).toEqual([expect.objectContaining({ version: '3.0.0', authorityGrantRequired: true, signals: { sourced: ['country'] } })]);
  });
});

describe('validating a published policy (POST /policies/validate)', () => {
  it('checks policyId, then policyVersion (400), then existence (404), then validates in full', async () => {
    await expect(service.validate(undefined, undefined)).rejects.toEqual(refusal('invalid', /^policyId is required.$/));
    await expect(service.validate('', '1.0.0')).rejects.toEqual(refusal('invalid', /^policyId/));
    await expect(service.validate('payments-transfer', '')).rejects.toEqual(refusal('invalid', /^policyVersion is required.$/));
    await expect(service.validate('payments-transfer', 7)).rejects.toEqual(refusal('invalid', /^policyVersion/));
    await expect(service.validate('payments-transfer', '1.0.0')).rejects.toEqual(refusal('not_found', /^Policy 'payments-transfer' version '1.0.0' was not found.$/));
    await publish('1.0.0');
    await expect(service.validate('payments-transfer', '1.0.0')).resolves.toEqual({ valid: true, errors: [] });
  });
});

describe('shipped policies', () => {
  it('are proposed by the system once, skipped while pending, once published, and after a rejection of the same content', async () => {
    const first = await gov.proposeShipped(shipped, 'payments-transfer.json');
    expect(first).toMatchObject({ outcome: 'proposed', change: { proposer: 'system', status: 'PENDING_APPROVAL', policyVersion: '1.0.0', baseVersion: '1.0.0' } });
    expect(await gov.proposeShipped(shipped, 'payments-transfer.json')).toEqual({ outcome: 'pending' });
    const id = (first as { change: { id: string } }).change.id;
    const payload = { pendingPolicyChangeId: id, action: 'reject', expiresAt: new Date(t + 60_000).toISOString(), nonce: 'r'.repeat(24), reason: 'not for us' };
    await gov.reject(id, bob, { payload, signature: fakeStepUpSign('key-of-bob', payload) });
    expect(await gov.proposeShipped(shipped, 'payments-transfer.json')).toEqual({ outcome: 'proposed-before' });
    // Changed content for the same version is proposed again; once approved, it is published and skipped.
    const changed = await gov.proposeShipped(doc('1.0.0', { description: 'revised' }), 'payments-transfer.json');
    expect(changed).toMatchObject({ outcome: 'proposed' });
    const cid = (changed as { change: { id: string } }).change.id;
    await gov.approve(cid, alice, approval(alice, cid));
    expect(await gov.proposeShipped(shipped, 'payments-transfer.json')).toEqual({ outcome: 'published' });
  });

  it('reports an invalid shipped file instead of proposing it', async () => {
    expect(await gov.proposeShipped({ name: 'x' }, 'x.json')).toMatchObject({ outcome: 'invalid', errors: expect.arrayContaining([expect.stringContaining('policyVersion')]) });
  });
});
