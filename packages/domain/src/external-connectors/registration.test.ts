import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { DomainError } from '../shared/errors.js';
import { readProposal } from './registration.js';

/** Who owns a namespace other than external connectors: these tests reserve `sandbox` and `test` (and `crm` where said). */
const reserving = (...names: string[]) => (ns: string) => (names.includes(ns) ? `reserved (${names.join(', ')})` : undefined);
const RESERVED = reserving('sandbox', 'test');
const valid = { kind: 'register', capability: 'payments:transfer', endpoint: 'https://pay.example.com/release', policyName: 'payments', forwardedParameters: ['amount'] };

describe('external connector proposals', () => {
  it('reads a register proposal with its defaults, and a revoke', () => {
    expect(readProposal(valid, RESERVED)).toEqual({
      kind: 'register',
      payload: { capability: 'payments:transfer', endpoint: 'https://pay.example.com/release', policyName: 'payments', forwardedParameters: ['amount'], timeoutMs: 10000 },
    });
    expect(readProposal({ kind: 'revoke', capability: 'payments:transfer', reason: 'x' }, RESERVED)).toEqual({ kind: 'revoke', capability: 'payments:transfer' });
  });

  it('refuses the namespace of every built-in connector it is told about', () => {
    expect(() => readProposal({ ...valid, capability: 'crm:update' }, reserving('sandbox', 'test', 'crm'))).toThrow("capability must not be in the namespace 'crm'");
  });

  it('answers arbitrary input with a proposal or a 400, never anything else', () => {
    const field = fc.oneof(fc.anything(), fc.string(), fc.constantFrom('register', 'revoke', 'payments:transfer', 'https://pay.example.com/'));
    const body = fc.oneof(
      fc.anything(),
      fc.record({ kind: field, capability: field, endpoint: field, policyName: field, forwardedParameters: fc.oneof(field, fc.array(field)), timeoutMs: fc.oneof(field, fc.integer()) }, { requiredKeys: [] }),
    );
    fc.assert(
      fc.property(body, (b) => {
        try {
          readProposal(b, RESERVED);
        } catch (e) {
          expect(e).toBeInstanceOf(DomainError);
          expect((e as DomainError).kind).toBe('invalid');
        }
      }),
      { numRuns: 1000 },
    );
  });
});
