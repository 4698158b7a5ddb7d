import { describe, expect, it } from '@jest/globals';
// The policy shipped with the product (apps/server/policies). Imported, not copied, so this test
// fails when the shipped file stops validating.
import shipped from '../../../../apps/server/policies/payments-transfer.json' with { type: 'json' };
import { compilePolicy, evaluatePolicy, validatePolicyDocument } from './index.js';

describe('shipped policy apps/server/policies/payments-transfer.json', () => {
  it('validates', () => {
    expect(validatePolicyDocument(shipped)).toEqual({ valid: true, errors: [] });
  });

  it('decides as the contract example does', () => {
    const compiled = compilePolicy(shipped);
    expect(compiled.document.name).toBe('payments-transfer');
    expect(compiled.document.policyVersion).toBe('1.0.0');
    const intent = { action: 'payments:transfer', parameters: {} };
    expect(evaluatePolicy(compiled, { signals: { amount: 10, country: 'KP' }, intent }).matchedRuleId).toBe('sanctioned');
    expect(evaluatePolicy(compiled, { signals: { amount: 20000, country: 'FR' }, intent })).toEqual({
      action: 'approve',
      reason: 'Large transfer needs a second look',
      requires_override: true,
      matchedRuleId: 'large',
    });
    expect(evaluatePolicy(compiled, { signals: { amount: 10, country: 'FR' }, intent }).matchedRuleId).toBe('ok');
  });
});
