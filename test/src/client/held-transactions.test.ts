import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createClient, EtsRequestError, heldTransactions, verifyRecord, type JwksLike } from '@ets/client';
import type { PolicyDocument } from '@ets/domain';
import { apiKeysEnv, businessCast, holdingPolicy, holdTransfer, publishPolicy, STORAGE_TARGETS, startTestServer, type TestServer } from '@ets/test-support';
import request from 'supertest';

/**
 * Held transactions through @ets/client against a started server, on each store (CONTRACT "Held
 * transactions"): an agent's `requires_override` transaction waits; a human lists it, approves it
 * with the approval the client builds and signs from what the service shows (released once, a
 * Trust Record that verifies offline), rejects another with a reason; the service's refusals come
 * back as `EtsRequestError` with their code.
 */
const { alice, bob, agent } = businessCast();

const POLICY = holdingPolicy('held-client') as PolicyDocument;

describe.each(STORAGE_TARGETS)('held transactions through @ets/client on $name', (factory) => {
  let server: TestServer;
  const as = (key: { raw: string }) => heldTransactions(createClient({ baseUrl: server.url, apiKey: key.raw }));
  const hold = (amount: number): Promise<string> => holdTransfer(server.url, agent, POLICY.name, amount);

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
