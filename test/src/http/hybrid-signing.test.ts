import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { verifyOffline, verifyRecord } from '@ets/adapters-crypto';
import { apiKeysEnv, bearer, businessTransaction, makeKey, publishPolicy, sqliteTarget, startTestServer, type TestServer } from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });

describe('the pipeline in hybrid signing mode (Ed25519 + ML-DSA-65)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(sqliteTarget, { ...apiKeysEnv(agent), SVC_SIGNING_MODE: 'hybrid' });
    await publishPolicy(server.dataSource);
  });
  afterAll(async () => {
    await server.destroy();
  });

  it('signs intents, trust records, refusals, verifications and receipts with both algorithms; each verifies only when both do', async () => {
    const post = (path: string, body: unknown) => request(server.url).post(path).set('authorization', bearer(agent)).send(body as object);
    const get = (path: string) => request(server.url).get(path).set('authorization', bearer(agent));
    const jwks = (await request(server.url).get('/.well-known/jwks.json')).body;

    const tx = businessTransaction();
    const executed = await post('/execute', tx);
    expect(executed.status).toBe(200);
    const refusedTx = businessTransaction({ signals: { country: 'KP' } });
    expect((await post('/execute', refusedTx)).status).toBe(403);
    const verification = await post('/verify', { businessTransactionId: tx.businessTransactionId });
    expect(verification.body.status).toBe('VERIFIED');
    const receipt = await post('/receipt', { businessTransactionId: tx.businessTransactionId });
    expect(receipt.status).toBeLessThan(300);

    const signed = [
      executed.body.trustRecord,
      (await get(`/execution-intents/${tx.businessTransactionId}`)).body.intent,
      (await get(`/refusal/${refusedTx.businessTransactionId}`)).body,
      verification.body,
      receipt.body,
    ];
    for (const record of signed) {
      expect(record).toEqual(expect.objectContaining({ keyId: expect.any(String), signature: expect.any(String), pqKeyId: expect.any(String), pqSignature: expect.any(String) }));
      expect(verifyRecord(record, jwks).valid).toBe(true);
      expect(verifyOffline(record, jwks).valid).toBe(true);
      const { pqSignature: _dropped, ...withoutPq } = record;
      expect(verifyRecord(withoutPq, jwks).valid).toBe(false);
    }
  });
});
