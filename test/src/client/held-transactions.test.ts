import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createClient, EtsRequestError, heldTransactions, verifyRecord, type JwksLike } from '@ets/client';
import type { PolicyDocument } from '@ets/domain';
import { apiKeysEnv, bearer, businessCast, businessTransaction, publishPolicy, STORAGE_TARGETS, startTestServer, type TestServer } from '@ets/test-support';
import request from 'supertest';

/**
 * Held transactions through @ets/client against a started server, on each store (CONTRACT "Held
 * transactions"): an agent's `requires_override` transaction waits; a human lists it, approves it
 * with the approval the client builds and signs from what the service shows (released once, a
 * Trust Record that verifies offline), rejects another with a reason; the service's refusals come
 * back as `EtsRequestError` with their code.
 */
const { alice, bob, agent } = businessCast();

const POLICY: PolicyDocument = {
  name: 'held-client',
  policyVersion: '1.0.0',
  signalsSchema: { amount: { type: 'number' } },
  approvalScope: { value: 'intent.parameters.amount' },
  rules: [
    { id: 'large', when: 'signals.amount > 1000', action: 'approve', requires_override: true, reason: 'Large transfer needs a second look' },
    { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
  ],
};

describe.each(STORAGE_TARGETS)('held transactions through @ets/client on $name', (factory) => {
  let server: TestServer;
  const as = (key: { raw: string }) => heldTransactions(createClient({ baseUrl: server.url, apiKey: key.raw }));
  const hold = async (amount: number): Promise<string> => {
    const tx = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { amount } }, policy: { name: POLICY.name, version: '1.0.0' }, signals: { amount } });
    const res = await request(server.url).post('/execute').set('authorization', bearer(agent)).send(tx);
    expect(res.status).toBe(202);
    return tx.businessTransactionId as string;
  };

  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, agent), SVC_SANDBOX: 'true' });
    await publishPolicy(server.dataSource, POLICY);
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it('lists the pending ones, approves one with a signed approval: released once, with a Trust Record that verifies', async () => {
    const id = await hold(5000);
    const pending = await as(bob).list({ status: 'PENDING' });
    expect(pending.items.map((h) => h.businessTransactionId)).toContain(id);
    expect(await as(bob).get(id)).toMatchObject({ status: 'PENDING', scope: { field: 'value', value: 5000 }, callerId: 'agent-7' });

    // The requester cannot approve its own transaction: the service's code comes back.
    await expect(as(agent).approve(id, { key: bob.stepUpPrivateKeyPem! })).rejects.toMatchObject({ status: 403, code: 'NON_HUMAN_CALLER_DENIED' });
    // Nor can a human sign as another: bob's key file, alice's API key.
    await expect(as(alice).approve(id, { key: bob.stepUpPrivateKeyPem! })).rejects.toBeInstanceOf(EtsRequestError);

    const answer = await as(bob).approve(id, { key: bob.stepUpPrivateKeyPem!, ttlSeconds: 900 });
    expect(answer).toMatchObject({ executionStatus: 'EXECUTED', trustRecord: { businessTransactionId: id } });
    const jwks = (await request(server.url).get('/.well-known/jwks.json')).body as JwksLike;
    expect(verifyRecord(answer.trustRecord, jwks)).toMatchObject({ valid: true, kind: 'execution-trust-record' });
    expect(await as(bob).get(id)).toMatchObject({ status: 'APPROVED', decidedBy: 'bob' });
    await expect(as(alice).approve(id, { key: alice.stepUpPrivateKeyPem! })).rejects.toMatchObject({ status: 409 });
  });

  it('rejects one with a reason: REJECTED, listed so', async () => {
    const id = await hold(7000);
    expect(await as(alice).reject(id, { key: alice.stepUpPrivateKeyPem!, reason: 'Not this payee' })).toMatchObject({ status: 'REJECTED', reason: 'Not this payee', decidedBy: 'alice' });
    const rejected = await as(alice).list({ status: 'REJECTED', pageSize: 100 });
    expect(rejected.items.map((h) => h.businessTransactionId)).toContain(id);
    await expect(as(alice).get('00000000-0000-4000-8000-000000000000')).rejects.toMatchObject({ status: 404 });
  });
});
