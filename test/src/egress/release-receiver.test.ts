import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { HttpsEgress } from '@ets/adapters-connectors';
import { KeyRing, KeyRingReleaseSigner } from '@ets/adapters-crypto';
import { releaseClaims, type ReleaseClaims } from '@ets/domain';
import { ReleaseVerifier, startExampleReceiver, type ExampleReceiver } from '@ets/release-receiver';
import { startTestNetwork, tempDirs, type TestNetwork } from '@ets/test-support';

const tmp = tempDirs('ets-ring-');

/**
 * The receiver library against releases signed by the service's own signer, delivered over real
 * HTTPS through the egress adapter: it acts once on a valid release and refuses every other.
 */
describe('release receiver: what an endpoint owner runs', () => {
  let network: TestNetwork;
  let signer: KeyRingReleaseSigner;
  let stranger: KeyRingReleaseSigner;
  let receiver: ExampleReceiver;
  let conditionHolds = true;
  let egress: HttpsEgress;
  let jwks: { keys: unknown[] };

  const openRing = async (mode: 'ed25519' | 'hybrid') => KeyRing.open({ dataDir: tmp(), mode });

  beforeAll(async () => {
    network = await startTestNetwork();
    const ring = await openRing('hybrid'); // the JWKS then holds an ML-DSA-65 key beside the Ed25519 one
    signer = new KeyRingReleaseSigner(ring);
    stranger = new KeyRingReleaseSigner(await openRing('ed25519'));
    receiver = await startExampleReceiver({
      tls: await network.ca.issue(['rx.receiver.test']),
      hostName: 'rx.receiver.test',
      address: network.address(),
      jwks: (jwks = structuredClone(ring.jwks()) as { keys: unknown[] }) as never,
      checkCondition: () => conditionHolds,
    });
    network.dns.set('rx.receiver.test', { A: [receiver.address] });
    egress = new HttpsEgress({ dnsServers: [network.dns.address], allowCidrs: ['127.0.0.0/8'], extraCaPem: network.ca.certificatePem });
  });
  afterAll(async () => {
    await receiver?.close();
    await network?.close();
  });

  const now = () => Math.floor(Date.now() / 1000);
  const claims = (over: Partial<ReleaseClaims> = {}): ReleaseClaims => ({
    iss: 'ets',
    aud: receiver.endpoint,
    iat: now(),
    exp: now() + 10,
    jti: randomUUID(),
    businessTransactionId: randomUUID(),
    action: 'payments:transfer',
    parameters: { amount: 10 },
    intentHash: 'a'.repeat(64),
    conditions: [],
    ...over,
  });
  const deliver = async (token: string) => {
    const r = await egress.postJson({ endpoint: receiver.endpoint, body: { release: token }, timeoutMs: 3000 });
    if (r.outcome !== 'answered') throw new Error(`no answer: ${JSON.stringify(r)}`);
    return { status: r.status, body: r.body as Record<string, unknown> };
  };

  it('acts on a valid release once, and refuses it when it comes again (single-use jti)', async () => {
    const before = receiver.executed.length;
    const token = await signer.sign(claims());
    const first = await deliver(token);
    expect(first).toEqual({ status: 200, body: { status: 'executed', result: expect.objectContaining({ received: { amount: 10 }, action: 'payments:transfer' }) } });
    const again = await deliver(token);
    expect(again).toEqual({ status: 409, body: { status: 'refused', reason: expect.stringContaining('already received') } });
    expect(receiver.executed.length - before).toBe(1);
  });

  it.each([
    ['another audience', { aud: 'https://other.receiver.test/release' }, 'another endpoint'],
    ['an expired release', { iat: now() - 60, exp: now() - 1 }, 'expired'],
    ['another issuer', { iss: 'someone-else' }, 'another issuer'],
  ])('refuses %s and does nothing', async (_what, over, reason) => {
    const before = receiver.executed.length;
    const r = await deliver(await signer.sign(claims(over)));
    expect(r).toEqual({ status: 401, body: { status: 'refused', reason: expect.stringContaining(reason) } });
    expect(receiver.executed.length).toBe(before);
  });

  it('refuses a release signed with a key that is not in the JWKS, and garbage', async () => {
    expect((await deliver(await stranger.sign(claims()))).body).toMatchObject({ status: 'refused', reason: expect.stringContaining('signature') });
    const token = await signer.sign(claims());
    const [h, p] = token.split('.');
    expect((await deliver(`${h}.${p}.${'A'.repeat(86)}`)).status).toBe(401);
    expect((await deliver('not-a-jws')).status).toBe(401);
  });

  it('answers conditionsNotMet, and does nothing, when a condition no longer holds', async () => {
    const before = receiver.executed.length;
    const passed = { signal: 'invoiceOpen', value: true, validUntil: new Date(Date.now() - 1000).toISOString(), source: 'erp' };
    const r1 = await deliver(await signer.sign(claims({ conditions: [passed] })));
    expect(r1).toEqual({ status: 200, body: { status: 'conditionsNotMet', reason: expect.stringContaining('invoiceOpen') } });
    const future = { ...passed, validUntil: new Date(Date.now() + 60_000).toISOString() };
    conditionHolds = false; // the owner's own view of the fact
    const r2 = await deliver(await signer.sign(claims({ conditions: [future] })));
    expect(r2.body.status).toBe('conditionsNotMet');
    conditionHolds = true;
    const r3 = await deliver(await signer.sign(claims({ conditions: [future] })));
    expect(r3.body.status).toBe('executed');
    expect(receiver.executed.length - before).toBe(1);
  });

  it('a release signed at x.998 s with a timeout of 1000 ms is accepted for that whole second, and not after', async () => {
    const signedAt = Date.parse('2026-11-21T12:00:00.998Z');
    const registration = {
      registrationId: 'reg-1', capability: 'payments:transfer', endpoint: receiver.endpoint, policyName: 'payments', forwardedParameters: ['amount'],
      timeoutMs: 1000, proposer: 'alice', approvedBy: 'bob', registeredAt: '2026-11-20T00:00:00.000Z',
    };
    const release = { businessTransactionId: randomUUID(), action: 'payments:transfer', parameters: { amount: 1 }, intentHash: 'a'.repeat(64), conditions: [] };
    const token = await signer.sign(releaseClaims(registration, release, { now: new Date(signedAt), jti: randomUUID(), issuer: 'ets' }));
    const at = (ms: number) => new ReleaseVerifier({ jwks: jwks as never, audience: receiver.endpoint, now: () => new Date(ms) });
    // Arrives 5 ms later, in the next second: with whole seconds it had expired 3 ms before.
    expect(await at(signedAt + 5).verify(token)).toMatchObject({ ok: true, release: { iat: 1795262400.998, exp: 1795262401.998 } });
    expect(await at(signedAt + 999).verify(token)).toMatchObject({ ok: true });
    // Not a millisecond longer, although jose alone compares whole seconds of the clock.
    expect(await at(signedAt + 1000).verify(token)).toEqual({ ok: false, reason: 'expired', message: 'the release has expired' });
  });

  it('the verifier alone: exp is checked against the clock it is given, with no tolerance', async () => {
    const exp = now() + 5;
    const token = await signer.sign(claims({ exp }));
    const at = (seconds: number) => new ReleaseVerifier({ jwks: jwks as never, audience: receiver.endpoint, now: () => new Date(seconds * 1000) });
    expect(await at(exp - 1).verify(token)).toMatchObject({ ok: true, release: { exp } });
    expect(await at(exp).verify(token)).toEqual({ ok: false, reason: 'expired', message: 'the release has expired' });
  });
});
