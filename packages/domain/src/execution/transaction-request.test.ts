import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { DomainError } from '../shared/errors.js';
import { parseBusinessTransaction } from './transaction-request.js';

const valid = () => ({
  businessTransactionId: '7b1e4c2a-3f5d-4e6a-9b8c-0d1e2f3a4b5c',
  metadata: { tenantId: 't1' },
  authority: { principalId: 'agent-7', authorityId: 'auth-1' },
  authorization: { authorityId: 'auth-1' },
  intent: { action: 'sandbox:echo', parameters: { amount: 5 } },
  policy: { name: 'payments-transfer', version: '1.0.0' },
});

const messageOf = (body: unknown): string => {
  try {
    parseBusinessTransaction(body);
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    expect((e as DomainError).kind).toBe('invalid');
    expect((e as DomainError).code).toBeUndefined();
    return (e as DomainError).message;
  }
  throw new Error('expected a validation error');
};

describe('Business Transaction validation (spec 2.2, 7)', () => {
  it('accepts a well-formed transaction and defaults parameters and signals', () => {
    const { intent, ...rest } = valid();
    const tx = parseBusinessTransaction({ ...rest, intent: { action: intent.action } });
    expect(tx.intent.parameters).toEqual({});
    expect(tx.signals).toEqual({});
  });

  it.each(['not-a-uuid', '00000000-0000-0000-0000-000000000000', '7b1e4c2a-3f5d-6e6a-9b8c-0d1e2f3a4b5c', 42, true, {}, ''])(
    'refuses businessTransactionId %p before anything else',
    (id) => {
      // Everything else is broken too: the id is checked first.
      expect(messageOf({ businessTransactionId: id })).toBe('businessTransactionId must be a valid UUID.');
    },
  );

  it('accepts UUID versions 1 to 5', () => {
    for (const v of '12345') {
      expect(() => parseBusinessTransaction({ ...valid(), businessTransactionId: `7b1e4c2a-3f5d-${v}e6a-9b8c-0d1e2f3a4b5c` })).not.toThrow();
    }
  });

  it('names a missing businessTransactionId', () => {
    const { businessTransactionId: _, ...rest } = valid();
    expect(messageOf(rest)).toBe('businessTransactionId is required.');
  });

  it.each(['metadata', 'authority', 'authorization', 'intent', 'policy'])('names %s when missing, null, an array or a scalar', (name) => {
    for (const bad of [undefined, null, [], 'x', 1]) {
      expect(messageOf({ ...valid(), [name]: bad })).toBe(`${name} is required and must be an object.`);
    }
  });

  it.each([
    ['authority', 'principalId'],
    ['authority', 'authorityId'],
    ['authorization', 'authorityId'],
    ['intent', 'action'],
    ['policy', 'name'],
    ['policy', 'version'],
  ])('names %s.%s when it is not a string', (o, f) => {
    for (const bad of [undefined, null, 1, {}, []]) {
      const body = valid() as unknown as Record<string, Record<string, unknown>>;
      body[o] = { ...body[o], [f]: bad };
      expect(messageOf(body)).toBe(`${o}.${f} is required and must be a string.`);
    }
  });

  it('enforces the trust-chain invariants', () => {
    expect(messageOf({ ...valid(), authorization: { authorityId: 'other' } })).toBe('authorization.authorityId must match authority.authorityId.');
    expect(messageOf({ ...valid(), authorization: { authorityId: 'auth-1', principalId: 'x' } })).toBe('authorization.principalId must match authority.principalId.');
    expect(messageOf({ ...valid(), intent: { action: 'no-namespace' } })).toBe('intent.action must be a capability of the form namespace:verb.');
  });

  it('throws only validation errors for arbitrary bodies', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), fc.record({ ...Object.fromEntries(Object.keys(valid()).map((k) => [k, fc.jsonValue()])) })), (body) => {
        try {
          parseBusinessTransaction(body);
        } catch (e) {
          expect(e).toBeInstanceOf(DomainError);
          expect((e as DomainError).kind).toBe('invalid');
        }
      }),
      { numRuns: 2000 },
    );
  });
});
