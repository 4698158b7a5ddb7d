import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { readApproval } from '../approvals/approval.js';
import { SandboxApprovals } from '../approvals/sandbox-approvals.js';
import { readGrantProposal } from '../authority/grants.js';
import { DomainError } from '../shared/errors.js';
import { readSourceProposal } from './sources.js';

const NOW = new Date('2026-11-21T12:00:00.000Z');
const keys = { keyIdOf: (pem: string) => (pem.startsWith('-----BEGIN PUBLIC KEY-----') ? 'ed25519:key' : undefined) };

/** Arbitrary input answers with a value or a DomainError of `kind`: never anything else (no 500). */
function onlyDomainErrors(run: (input: unknown) => unknown, kind: DomainError['kind'], body: fc.Arbitrary<unknown>) {
  fc.assert(
    fc.property(body, (b) => {
      try {
        run(b);
      } catch (e) {
        expect(e).toBeInstanceOf(DomainError);
        expect((e as DomainError).kind).toBe(kind);
      }
    }),
    { numRuns: 800 },
  );
}

const field = fc.oneof(fc.anything(), fc.string(), fc.constantFrom('register', 'revoke', 'grant', 'erp', 'https://erp.example.com/f', 'payments:transfer', '2027-01-01T00:00:00Z'));

describe('business validation input: arbitrary bodies are a result or a 400, never anything else', () => {
  it('source proposals', () => {
    onlyDomainErrors((b) => readSourceProposal(b, keys), 'invalid', fc.oneof(fc.anything(), fc.record({ kind: field, name: field, endpoint: field, publicKey: field, reason: field }, { requiredKeys: [] })));
  });

  it('grant proposals', () => {
    const limit = fc.record({ path: fc.oneof(field, fc.constant('intent.parameters.amount')), min: field, max: field, oneOf: fc.oneof(field, fc.array(field)) }, { requiredKeys: [] });
    onlyDomainErrors(
      (b) => readGrantProposal(b, NOW, 366),
      'invalid',
      fc.oneof(fc.anything(), fc.record({ kind: field, grantee: field, action: field, limits: fc.oneof(field, fc.array(limit)), expiresAt: field, grantId: field }, { requiredKeys: [] })),
    );
  });

  it('sandbox approval requests', async () => {
    const service = new SandboxApprovals({
      signer: { sign: async () => 'sig' },
      hasher: { contentHash: () => 'h' },
      clock: { now: () => NOW },
      ids: { uuid: () => 'id' },
      nonces: { nonce: () => 'n'.repeat(43) },
    });
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.anything(), fc.record({ businessTransactionId: fc.oneof(field, fc.uuid()), action: fc.oneof(field, fc.constant('sandbox:echo')), scope: fc.oneof(field, fc.record({ field: fc.constantFrom('value', 'resourceId', 'x'), value: fc.anything(), resourceId: field }, { requiredKeys: [] })), signals: field }, { requiredKeys: [] })), async (b) => {
        try {
          await service.issue(b);
        } catch (e) {
          expect(e).toBeInstanceOf(DomainError);
          expect((e as DomainError).kind).toBe('invalid');
        }
      }),
      { numRuns: 500 },
    );
  });

  it('approvals in authorization.approval: anything malformed is APPROVAL_INVALID (403)', () => {
    onlyDomainErrors((b) => readApproval(b), 'forbidden', fc.oneof(fc.anything(), fc.record({ payload: fc.oneof(field, fc.dictionary(fc.string(), field)), signature: field }, { requiredKeys: [] })));
  });
});
