import type { PolicyDocument } from './document.js';

/** The CONTRACT.md example policy, fresh on every call (tests mutate it). */
export const contractSamplePolicy = (): PolicyDocument => ({
  name: 'payments-transfer',
  policyVersion: '1.0.0',
  description: 'Payment transfers',
  signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
  rules: [
    { id: 'sanctioned', when: "signals.country in ['KP', 'IR']", action: 'reject', reason: 'Country is sanctioned' },
    { id: 'large', when: 'signals.amount > 10000', action: 'approve', requires_override: true, reason: 'Large transfer needs a second look' },
    { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
  ],
  default: { action: 'reject', reason: 'No rule matched' },
  requireAuthorityGrant: false,
  signalSources: {},
  boundSignals: {},
});
