import { describe, expect, it } from '@jest/globals';
import { createHash, generateKeyPairSync } from 'node:crypto';
import canonicalizeReference from 'canonicalize';
import { Ed25519StepUpVerifier } from '@ets/adapters-crypto';
import { STEP_UP_MAX_VALIDITY_MS } from '@ets/domain';
import { EtsRequestError, heldApprovalPayload, heldRejectPayload, heldTransactions, type HeldTransaction } from './held.js';
import { createClient } from './http.js';

/**
 * The held-transaction calls send what the service checks (CONTRACT "Held transactions"): an
 * approval bound to the transaction as `GET /overrides/{id}` shows it (scope, signals hash, action,
 * the approver's own caller id, at most 15 minutes), a rejection envelope naming the transaction
 * with a reason; the service's refusals come back as `EtsRequestError` with its code. The e2e test
 * (test/src/client/held-transactions.test.ts) runs them against a started server on each store.
 */
const canonical = canonicalizeReference as unknown as (v: unknown) => string;
const verifier = new Ed25519StepUpVerifier();
const now = new Date('2026-11-21T12:00:00.000Z');
const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const privateKeyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
const publicKeyPem = publicKey.export({ type: 'spki', format: 'pem' }) as string;

const HELD: HeldTransaction = {
  businessTransactionId: '0b7f5a52-3c52-4a8e-9d0c-0d3e3c2a1f10',
  callerId: 'agent-7',
  action: 'payments:transfer',
  parameters: { amount: 5000, currency: 'EUR' },
  signals: { country: 'FR', amount: 5000 },
  signalsHash: createHash('sha256').update(canonical({ amount: 5000, country: 'FR' })).digest('hex'),
  scope: { field: 'value', value: 5000 },
  businessTransactionHash: 'ab'.repeat(32),
  policy: { name: 'payments', version: '1.0.0', contentHash: 'cd'.repeat(32) },
  decision: { action: 'approve', requires_override: true, matchedRuleId: 'large', reason: 'Large' } as HeldTransaction['decision'],
  status: 'PENDING',
  createdAt: '2026-11-21T11:59:00.000Z',
  expiresAt: '2026-11-22T11:59:00.000Z',
};

describe('heldApprovalPayload', () => {
  it('binds the approval to the held transaction as the service shows it: id, action, scope, signals hash, approver', () => {
    const payload = heldApprovalPayload(HELD, 'ann', { now });
    expect(payload).toEqual({
      approvalId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      approverId: 'ann',
      businessTransactionId: HELD.businessTransactionId,
      action: 'payments:transfer',
      scope: { field: 'value', value: 5000 },
      signalsHash: HELD.signalsHash,
      expiresAt: '2026-11-21T12:05:00.000Z',
      nonce: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    expect(heldApprovalPayload(HELD, 'ann').nonce).not.toBe(payload.nonce);
  });

  it('scopes the transaction itself when its policy names no scope, and a resource as a string', () => {
    const { scope: _none, ...unscoped } = HELD;
    expect(heldApprovalPayload(unscoped, 'ann').scope).toEqual({ field: 'resourceId', resourceId: HELD.businessTransactionId });
    expect(heldApprovalPayload({ ...HELD, scope: { field: 'resourceId', resourceId: 'inv-9' } }, 'ann').scope).toEqual({ field: 'resourceId', resourceId: 'inv-9' });
  });

  it('expires at most 15 minutes ahead, as the service requires', () => {
    expect(Date.parse(heldApprovalPayload(HELD, 'ann', { now, ttlSeconds: 900 }).expiresAt) - now.getTime()).toBe(STEP_UP_MAX_VALIDITY_MS);
    expect(() => heldApprovalPayload(HELD, 'ann', { ttlSeconds: 901 })).toThrow(RangeError);
    expect(() => heldApprovalPayload(HELD, 'ann', { ttlSeconds: 0 })).toThrow(RangeError);
  });
});

describe('heldRejectPayload', () => {
  it('names the transaction, not a pending change, and needs a reason', () => {
    expect(heldRejectPayload(HELD.businessTransactionId, 'Not this payee', { callerId: 'ann', now })).toEqual({
      businessTransactionId: HELD.businessTransactionId,
      action: 'reject',
      expiresAt: '2026-11-21T12:05:00.000Z',
      nonce: expect.any(String),
      callerId: 'ann',
      reason: 'Not this payee',
    });
    expect(() => heldRejectPayload(HELD.businessTransactionId, ' ')).toThrow(/reason/);
  });
});

describe('heldTransactions', () => {
  /** A fake service: answers by method and path, records what it was sent. */
  const service = (answers: Record<string, [number, unknown]>) => {
    const sent: { method: string; url: URL; body: unknown; authorization: string | null }[] = [];
    const fetch = async (request: Request) => {
      const url = new URL(request.url);
      const text = await request.text();
      sent.push({ method: request.method, url, body: text ? JSON.parse(text) : undefined, authorization: request.headers.get('authorization') });
      const [status, body] = answers[`${request.method} ${url.pathname}`] ?? [404, { error: 'Not found.', code: 'NOT_FOUND' }];
      return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
    };
    return { sent, held: heldTransactions(createClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'pk_local_ann', fetch })) };
  };
  const id = HELD.businessTransactionId;

  it('lists with a status filter and paging, and gets one', async () => {
    const { sent, held } = service({ 'GET /overrides': [200, { items: [HELD], page: 2, pageSize: 10, total: 11 }], [`GET /overrides/${id}`]: [200, HELD] });
    expect(await held.list({ status: 'PENDING', page: 2, pageSize: 10 })).toEqual({ items: [HELD], page: 2, pageSize: 10, total: 11 });
    expect(Object.fromEntries(sent[0]!.url.searchParams)).toEqual({ status: 'PENDING', page: '2', pageSize: '10' });
    expect(sent[0]!.authorization).toBe('Bearer pk_local_ann');
    expect(await held.get(id)).toEqual(HELD);
  });

  it('approves with an approval of what the service shows, signed by the approver as themself', async () => {
    const { sent, held } = service({
      [`GET /overrides/${id}`]: [200, HELD],
      'GET /callers/me': [200, { callerId: 'ann', holderType: 'USER' }],
      [`POST /overrides/${id}/approve`]: [200, { executionStatus: 'EXECUTED' }],
    });
    expect(await held.approve(id, { key: privateKeyPem, ttlSeconds: 600 })).toEqual({ executionStatus: 'EXECUTED' });
    const post = sent.find((s) => s.method === 'POST')!;
    const { payload, signature } = post.body as { payload: Record<string, unknown>; signature: string };
    expect(payload).toMatchObject({ approverId: 'ann', businessTransactionId: id, action: 'payments:transfer', scope: HELD.scope, signalsHash: HELD.signalsHash });
    expect(Date.parse(payload.expiresAt as string) - Date.now()).toBeLessThanOrEqual(600_000);
    expect(verifier.verify(publicKeyPem, payload, signature)).toBe(true);
  });

  it('rejects with a step-up envelope naming the transaction and the reason', async () => {
    const { sent, held } = service({
      'GET /callers/me': [200, { callerId: 'ann', holderType: 'USER' }],
      [`POST /overrides/${id}/reject`]: [200, { ...HELD, status: 'REJECTED', reason: 'Not this payee' }],
    });
    expect((await held.reject(id, { key: privateKeyPem, reason: 'Not this payee' })).status).toBe('REJECTED');
    const { payload, signature } = sent.find((s) => s.method === 'POST')!.body as { payload: Record<string, unknown>; signature: string };
    expect(payload).toMatchObject({ businessTransactionId: id, action: 'reject', reason: 'Not this payee', callerId: 'ann' });
    expect(payload.pendingPolicyChangeId).toBeUndefined();
    expect(verifier.verify(publicKeyPem, payload, signature)).toBe(true);
  });

  it("throws the service's refusal with its status, code and message", async () => {
    const { held } = service({
      [`GET /overrides/${id}`]: [200, HELD],
      'GET /callers/me': [200, { callerId: 'agent-7', holderType: 'SERVICE' }],
      [`POST /overrides/${id}/approve`]: [403, { error: 'The requester cannot decide its own transaction.', code: 'SELF_APPROVAL_DENIED' }],
    });
    const refusal = await held.approve(id, { key: privateKeyPem }).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(EtsRequestError);
    expect(refusal).toMatchObject({ status: 403, code: 'SELF_APPROVAL_DENIED', message: 'The requester cannot decide its own transaction.' });
    await expect(held.get('missing')).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });
});
