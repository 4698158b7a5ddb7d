import { describe, expect, it } from '@jest/globals';
import type { Egress, EgressResult, OutboundJsonRequest } from '../egress/ports.js';
import { ConnectorError, type ReleaseRequest } from '../execution/connectors.js';
import { InMemoryExternalConnectorStore } from './in-memory.js';
import type { ReleaseClaims } from './ports.js';
import type { ExternalConnectorRegistration } from './registration.js';
import { ExternalConnector, interpretAnswer, releaseClaims } from './release.js';

const NOW = Date.parse('2026-11-21T12:00:00.000Z');
const registration: ExternalConnectorRegistration = {
  registrationId: 'reg-1',
  capability: 'payments:transfer',
  endpoint: 'https://api.example.com/release',
  policyName: 'payments',
  forwardedParameters: ['amount', 'currency', 'absent'],
  timeoutMs: 10_000,
  proposer: 'alice',
  approvedBy: 'bob',
  registeredAt: '2026-11-20T00:00:00.000Z',
};
const request = (over: Partial<ReleaseRequest> = {}): ReleaseRequest => ({
  businessTransactionId: 'tx-1',
  action: 'payments:transfer',
  parameters: { amount: 10, currency: 'EUR', secret: 'kept back' },
  intentHash: 'h'.repeat(64),
  conditions: [],
  ...over,
});

async function setup(answer: EgressResult = { outcome: 'answered', status: 200, body: { status: 'executed', result: { id: 9 } } }) {
  const store = new InMemoryExternalConnectorStore();
  await store.activate(registration);
  const sent: OutboundJsonRequest[] = [];
  const signed: ReleaseClaims[] = [];
  const egress: Egress = {
    check: async () => ({ ok: true, addresses: [] }),
    postJson: async (r) => {
      sent.push(r);
      return answer;
    },
  };
  const connector = new ExternalConnector(registration, {
    egress,
    signer: { sign: async (c) => (signed.push(c), 'header.payload.signature') },
    clock: { now: () => new Date(NOW) },
    ids: { uuid: () => 'jti-1' },
    issuer: 'ets',
    registrations: store,
  });
  return { store, sent, signed, connector };
}

describe('release to an external endpoint', () => {
  it('signs the claims of the contract, forwards only the registered parameters, and posts {release} once', async () => {
    const { sent, signed, connector } = await setup();
    await expect(connector.release(request())).resolves.toEqual({ result: { id: 9 } });
    expect(signed).toEqual([
      {
        iss: 'ets',
        aud: registration.endpoint,
        iat: NOW / 1000,
        exp: NOW / 1000 + 10,
        jti: 'jti-1',
        businessTransactionId: 'tx-1',
        action: 'payments:transfer',
        parameters: { amount: 10, currency: 'EUR' },
        intentHash: 'h'.repeat(64),
        conditions: [],
      },
    ]);
    expect(sent).toEqual([{ endpoint: registration.endpoint, body: { release: 'header.payload.signature' }, timeoutMs: 10_000 }]);
  });

  it('expires no later than the earliest condition, and carries the facts as conditions', async () => {
    const { signed, connector } = await setup();
    const conditions = [
      { signal: 'a', value: 1, validUntil: '2026-11-21T12:00:07.900Z', source: 'erp' },
      { signal: 'b', value: 'x', validUntil: '2026-11-21T13:00:00.000Z', source: 'crm' },
    ];
    await connector.release(request({ conditions }));
    expect(signed[0]).toMatchObject({ exp: NOW / 1000 + 7.9, conditions });
  });

  it('is valid for its whole timeout wherever in the second it is signed: iat and exp are NumericDates to the millisecond', () => {
    const at = (iso: string, timeoutMs: number, conditions: ReleaseRequest['conditions'] = []) =>
      releaseClaims({ ...registration, timeoutMs }, request({ conditions }), { now: new Date(iso), jti: 'j', issuer: 'ets' });
    // Whole seconds made this iat 1795262400 and exp 1795262401: 2 ms to arrive.
    expect(at('2026-11-21T12:00:00.998Z', 1000)).toMatchObject({ iat: 1795262400.998, exp: 1795262401.998 });
    expect(at('2026-11-21T12:00:00.001Z', 1500)).toMatchObject({ iat: 1795262400.001, exp: 1795262401.501 });
    // A condition ending within the second still bounds exp, to the millisecond.
    expect(at('2026-11-21T12:00:00.100Z', 10_000, [{ signal: 'a', value: 1, validUntil: '2026-11-21T12:00:00.900Z', source: 'erp' }])).toMatchObject({ exp: 1795262400.9 });
  });

  it.each([
    ['has passed', '2026-11-21T11:59:59.000Z'],
    ['ends now', '2026-11-21T12:00:00.000Z'],
  ])('a condition that %s is conditions-not-met: nothing is signed or sent', async (_what, validUntil) => {
    const { sent, signed, connector } = await setup();
    await expect(connector.release(request({ conditions: [{ signal: 'a', value: 1, validUntil, source: 'erp' }] }))).rejects.toMatchObject({ phase: 'conditions-not-met' });
    expect(signed).toEqual([]);
    expect(sent).toEqual([]);
  });

  it('a registration revoked since the decision sends nothing (before-send)', async () => {
    const { store, sent, connector } = await setup();
    await store.revoke('reg-1', new Date(NOW).toISOString(), 'chg-2');
    await expect(connector.release(request())).rejects.toMatchObject({ phase: 'before-send', message: expect.stringContaining('revoked') });
    expect(sent).toEqual([]);
  });

  it('exposes the registration policy, so the pipeline can hold requests to it', async () => {
    const { connector } = await setup();
    expect(connector).toMatchObject({ namespace: 'payments', policyName: 'payments' });
  });
});

describe('what an answer means', () => {
  const phase = (answer: EgressResult): string => {
    try {
      interpretAnswer(answer, 'https://api.example.com/');
      return 'executed';
    } catch (e) {
      return (e as ConnectorError).phase;
    }
  };
  it.each<[EgressResult, string]>([
    [{ outcome: 'answered', status: 200, body: { status: 'executed', result: 1 } }, 'executed'],
    [{ outcome: 'answered', status: 201, body: { status: 'executed' } }, 'executed'],
    [{ outcome: 'answered', status: 200, body: { status: 'conditionsNotMet', reason: 'paid' } }, 'conditions-not-met'],
    [{ outcome: 'answered', status: 500, body: { status: 'executed' } }, 'outcome-unknown'],
    [{ outcome: 'answered', status: 302, body: undefined }, 'outcome-unknown'],
    [{ outcome: 'answered', status: 200, body: undefined }, 'outcome-unknown'],
    [{ outcome: 'answered', status: 200, body: { status: 'done' } }, 'outcome-unknown'],
    [{ outcome: 'answered', status: 200, body: ['executed'] }, 'outcome-unknown'],
    [{ outcome: 'unknown', reason: 'timeout', message: 'late' }, 'outcome-unknown'],
    [{ outcome: 'unknown', reason: 'reset', message: 'reset' }, 'outcome-unknown'],
    [{ outcome: 'not-sent', reason: 'address', message: 'private' }, 'before-send'],
    [{ outcome: 'not-sent', reason: 'timeout', message: 'late' }, 'before-send'],
  ])('%j → %s', (answer, expected) => {
    expect(phase(answer)).toBe(expected);
  });
});
