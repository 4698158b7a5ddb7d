import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { Caller } from '../identity/caller.js';
import type { PendingChange } from '../governance/change.js';
import { DomainError } from '../shared/errors.js';
import {
  actionOf,
  compilePolicy,
  evaluatePolicy,
  ImpactTally,
  PolicyImpactPreview,
  readImpactLimit,
  type PolicyChangePayload,
  type PolicyDocument,
  type RecordedDecision,
} from './index.js';

/** Version 1 of a transfer policy: sanctioned countries refused, large amounts overridden, the rest approved. */
const v1: PolicyDocument = {
  name: 'transfers',
  policyVersion: '1',
  signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
  rules: [
    { id: 'sanctioned', when: "signals.country in ['KP', 'IR']", action: 'reject', reason: 'sanctioned' },
    { id: 'large', when: 'signals.amount > 10000', action: 'approve', requires_override: true, reason: 'large' },
    { id: 'ok', when: 'true', action: 'approve', reason: 'ok' },
  ],
};

/** Version 2: RU is sanctioned too, the override starts at 5000, above 50000 is refused, and no catch-all (default rejects). */
const v2: PolicyDocument = {
  ...v1,
  policyVersion: '2',
  rules: [
    { id: 'sanctioned', when: "signals.country in ['KP', 'IR', 'RU']", action: 'reject', reason: 'sanctioned' },
    { id: 'huge', when: 'signals.amount > 50000', action: 'reject', reason: 'huge' },
    { id: 'large', when: 'signals.amount > 5000', action: 'approve', requires_override: true, reason: 'large' },
    { id: 'eu', when: "signals.country in ['FR', 'DE']", action: 'approve', reason: 'eu' },
  ],
  default: { action: 'reject', reason: 'outside the EU' },
};

const compiledV1 = compilePolicy(v1);
let seq = 0;
/** A decision as version 1 recorded it. */
function recorded(signals: Record<string, unknown>): RecordedDecision {
  const input = { signals, intent: { action: 'payments:transfer', parameters: {} } };
  const d = evaluatePolicy(compiledV1, input);
  seq++;
  return { businessTransactionId: `tx-${seq}`, decidedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString(), policyName: 'transfers', policyVersion: '1', action: actionOf(d), matchedRuleId: d.matchedRuleId, input };
}

describe('impact of a proposed policy version', () => {
  it('counts every replayed decision exactly: changes by transition, every decision by its rule after, the changed ones as examples', () => {
    const decisions = [
      recorded({ amount: 100, country: 'FR' }), // approve/ok -> approve/eu (same action: not changed)
      recorded({ amount: 100, country: 'RU' }), // approve/ok -> reject/sanctioned
      recorded({ amount: 7000, country: 'FR' }), // approve/ok -> requires_override/large
      recorded({ amount: 20000, country: 'DE' }), // requires_override/large -> requires_override/large
      recorded({ amount: 60000, country: 'FR' }), // requires_override/large -> reject/huge
      recorded({ amount: 100, country: 'KP' }), // reject/sanctioned -> reject/sanctioned
      recorded({ amount: 100, country: 'US' }), // approve/ok -> reject/default
      recorded({ amount: 'lots', country: 'FR' }), // reject/signal-type-violation -> same
      recorded({ amount: 100 }), // CEL error reading country: reject/sanctioned (fail closed) -> same
    ];
    const tally = new ImpactTally(compilePolicy(v2));
    for (const d of decisions) tally.add(d);
    const report = tally.report({ policyName: 'transfers', fromVersion: '1', toVersion: '2' });
    expect(report).toEqual({
      policyName: 'transfers',
      fromVersion: '1',
      toVersion: '2',
      replayed: 9,
      changed: 4,
      byTransition: { 'approve->reject': 2, 'approve->requires_override': 1, 'requires_override->reject': 1 },
      byRule: { eu: 1, sanctioned: 3, large: 2, huge: 1, default: 1, 'signal-type-violation': 1 },
      examples: [
        { businessTransactionId: decisions[1]!.businessTransactionId, before: { action: 'approve', matchedRuleId: 'ok' }, after: { action: 'reject', matchedRuleId: 'sanctioned' } },
        { businessTransactionId: decisions[2]!.businessTransactionId, before: { action: 'approve', matchedRuleId: 'ok' }, after: { action: 'requires_override', matchedRuleId: 'large' } },
        { businessTransactionId: decisions[4]!.businessTransactionId, before: { action: 'requires_override', matchedRuleId: 'large' }, after: { action: 'reject', matchedRuleId: 'huge' } },
        { businessTransactionId: decisions[6]!.businessTransactionId, before: { action: 'approve', matchedRuleId: 'ok' }, after: { action: 'reject', matchedRuleId: 'default' } },
      ],
    });
  });

  it('keys "no matching rule" as (none), and counts a rule named like an Object property as any other', () => {
    const bare: PolicyDocument = { ...v1, policyVersion: '3', rules: [{ id: 'constructor', when: 'signals.amount > 10', action: 'approve', reason: 'x' }] };
    const tally = new ImpactTally(compilePolicy(bare));
    for (const amount of [1, 2, 50]) tally.add(recorded({ amount, country: 'FR' }));
    const report = tally.report({ policyName: 'transfers', fromVersion: '1', toVersion: '3' });
    expect(report.byRule).toEqual({ '(none)': 2, constructor: 1 });
    expect(report.byTransition).toEqual({ 'approve->reject': 2 });
  });

  it('keeps at most 20 examples, the first changed ones in the order given (newest first)', () => {
    const tally = new ImpactTally(compilePolicy(v2));
    const all = Array.from({ length: 45 }, () => recorded({ amount: 1, country: 'RU' }));
    for (const d of all) tally.add(d);
    const report = tally.report({ policyName: 'transfers', fromVersion: '1', toVersion: '2' });
    expect(report.changed).toBe(45);
    expect(report.examples.map((e) => e.businessTransactionId)).toEqual(all.slice(0, 20).map((d) => d.businessTransactionId));
  });

  it('agrees with a plain recount for any decisions (fast-check)', () => {
    const signals = fc.record({ amount: fc.oneof(fc.integer({ min: 0, max: 100000 }), fc.constant('x')), country: fc.constantFrom('FR', 'DE', 'RU', 'KP', 'US') }, { requiredKeys: [] });
    fc.assert(
      fc.property(fc.array(signals, { maxLength: 60 }), (all) => {
        const decisions = all.map((s) => recorded(s));
        const tally = new ImpactTally(compilePolicy(v2));
        for (const d of decisions) tally.add(d);
        const report = tally.report({ policyName: 'transfers', fromVersion: '1', toVersion: '2' });
        const after = decisions.map((d) => evaluatePolicy(compilePolicy(v2), d.input));
        const changed = decisions.filter((d, i) => d.action !== actionOf(after[i]!));
        expect(report.replayed).toBe(decisions.length);
        expect(report.changed).toBe(changed.length);
        expect(Object.values(report.byTransition).reduce((a, b) => a + b, 0)).toBe(changed.length);
        expect(Object.values(report.byRule).reduce((a, b) => a + b, 0)).toBe(decisions.length);
        expect(report.examples.map((e) => e.businessTransactionId)).toEqual(changed.slice(0, 20).map((d) => d.businessTransactionId));
      }),
      { numRuns: 50 },
    );
  });
});

describe('readImpactLimit', () => {
  it('takes absent (1000) and whole numbers 1 to 10000 in plain digits', () => {
    expect(readImpactLimit(undefined)).toBe(1000);
    expect(readImpactLimit('1')).toBe(1);
    expect(readImpactLimit('10000')).toBe(10000);
  });
  it.each([['0'], ['10001'], ['-1'], ['1.5'], ['1e3'], ['010'], ['+5'], [' 5'], [''], ['abc'], ['99999999999999999999']])('refuses %j with 400', (raw) => {
    expect(() => readImpactLimit(raw)).toThrow(expect.objectContaining({ kind: 'invalid' }) as unknown as Error);
  });
  it('refuses a repeated or nested parameter', () => {
    expect(() => readImpactLimit(['5', '6'])).toThrow(DomainError);
    expect(() => readImpactLimit({ a: '5' })).toThrow(DomainError);
  });
});

describe('PolicyImpactPreview', () => {
  const human: Caller = { callerId: 'ann', credentialHolderType: 'USER', allowedCapabilities: [], allowedPrincipalIds: [], allowedTenantIds: [] } as unknown as Caller;
  const change = (over: Partial<PendingChange<PolicyChangePayload>> = {}): PendingChange<PolicyChangePayload> => ({
    id: 'chg-1',
    kind: 'policy',
    payload: { policyName: 'transfers', baseVersion: '1', policyVersion: '2', contentHash: 'h', content: v2 },
    status: 'PENDING_APPROVAL',
    proposer: 'bob',
    createdAt: '2026-01-01T00:00:00.000Z',
    ...over,
  });
  const history = [recorded({ amount: 100, country: 'RU' }), recorded({ amount: 100, country: 'FR' })];
  const asked: [string, number][] = [];
  const preview = (c: PendingChange | undefined) =>
    new PolicyImpactPreview({
      changes: { get: async () => c },
      decisions: {
        async *latest(name, limit) {
          asked.push([name, limit]);
          yield* history.slice(0, limit);
        },
      },
    });

  it('replays the latest decisions of the policy name, `limit` of them', async () => {
    const report = await preview(change()).preview(human, 'chg-1', '1');
    expect(asked.at(-1)).toEqual(['transfers', 1]);
    expect(report).toMatchObject({ policyName: 'transfers', fromVersion: '1', toVersion: '2', replayed: 1, changed: 1 });
    expect((await preview(change()).preview(human, 'chg-1', undefined)).replayed).toBe(2);
    expect(asked.at(-1)).toEqual(['transfers', 1000]);
  });

  it('refuses a key that is not a USER key (403), another kind of change or none (404), a decided change (409)', async () => {
    const service = { ...human, credentialHolderType: 'SERVICE' } as Caller;
    await expect(preview(change()).preview(service, 'chg-1', '5')).rejects.toMatchObject({ kind: 'forbidden', code: 'NON_HUMAN_CALLER_DENIED' });
    await expect(preview(change()).preview(service, 'chg-1', 'nope')).rejects.toMatchObject({ kind: 'forbidden' });
    await expect(preview(change()).preview(human, 'chg-1', 'nope')).rejects.toMatchObject({ kind: 'invalid' });
    await expect(preview(undefined).preview(human, 'chg-1', '5')).rejects.toMatchObject({ kind: 'not_found' });
    await expect(preview(change({ kind: 'authority-grant' })).preview(human, 'chg-1', '5')).rejects.toMatchObject({ kind: 'not_found' });
    for (const status of ['APPROVED', 'REJECTED'] as const) {
      await expect(preview(change({ status })).preview(human, 'chg-1', '5')).rejects.toMatchObject({ kind: 'conflict' });
    }
  });
});
