import { expect } from '@jest/globals';
import request from 'supertest';
import { envelope, policyDoc } from '../http/governance-fixtures.js';
import { heldApproval } from './business.js';
import { bearer, type TestKey } from './keys.js';
import { businessTransaction } from './transactions.js';

/**
 * The concurrency claims of a deployment of several instances, each proved by racing requests
 * over every instance given (request `i` goes to `urls[i % urls.length]`).
 */

/** Of many requests with one businessTransactionId (execute and record alike), exactly one wins; the rest are 409. */
export async function expectOneWinnerPerId(urls: string[], key: TestKey, rounds = 5, perRound = 10): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    const tx = businessTransaction();
    const results = await Promise.all(
      Array.from({ length: perRound }, (_, i) => request(urls[i % urls.length]!).post(i % 3 ? '/execute' : '/transactions').set('authorization', bearer(key)).send(tx)),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200 || s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(perRound - 1);
  }
}

/** Proposes version `version` of policy `name` and returns the change's id. */
async function propose(url: string, maker: TestKey, name: string, version: string): Promise<string> {
  const proposed = await request(url).post(`/policies/${name}/${version}/pending-changes`).set('authorization', bearer(maker)).send({ proposedContent: policyDoc(version, { name }) });
  expect(proposed.status).toBe(201);
  return proposed.body.id as string;
}

/**
 * A change approved at the same moment by two checkers on different instances is applied once
 * (one 200, one 409), and so is one approved by 20 envelopes of one checker over every instance;
 * `decisionEvents` (the governance audit events that decide a change, other than its proposal)
 * is then 1 for each.
 */
export async function expectApprovedOnce(
  urls: string[],
  maker: TestKey,
  checkers: [TestKey, TestKey],
  decisionEvents: (changeId: string) => Promise<number>,
  policyName = 'gov-approvals',
): Promise<void> {
  const id = await propose(urls[0]!, maker, policyName, '1.0.0');
  const pair = await Promise.all(
    checkers.map((checker, i) => request(urls[i % urls.length]!).post(`/policies/pending-changes/${id}/approve`).set('authorization', bearer(checker)).send(envelope(checker, id, 'approve'))),
  );
  expect(pair.map((r) => r.status).sort()).toEqual([200, 409]);
  const winner = pair.find((r) => r.status === 200)!;
  expect(winner.body).toMatchObject({ id, status: 'APPROVED', appliedAt: expect.any(String) });
  for (const url of urls) {
    const inEffect = await request(url).get('/policies/in-effect').set('authorization', bearer(maker));
    expect(inEffect.body).toContainEqual(expect.objectContaining({ name: policyName, version: '1.0.0' }));
  }

  const many = await propose(urls[0]!, maker, policyName, '2.0.0');
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      request(urls[i % urls.length]!).post(`/policies/pending-changes/${many}/approve`).set('authorization', bearer(checkers[0])).send(envelope(checkers[0], many, 'approve')),
    ),
  );
  const statuses = results.map((r) => r.status);
  expect(statuses.filter((s) => s === 200)).toHaveLength(1);
  expect(statuses.filter((s) => s === 409)).toHaveLength(19);
  expect(await decisionEvents(id)).toBe(1);
  expect(await decisionEvents(many)).toBe(1);
}

/** One step-up nonce, presented at the same moment for two changes on different instances, is accepted once. */
export async function expectNonceOnce(urls: string[], maker: TestKey, checker: TestKey, policyName = 'gov-nonces'): Promise<void> {
  const ids = [await propose(urls[0]!, maker, policyName, '1.0.0'), await propose(urls[0]!, maker, `${policyName}-2`, '1.0.0')];
  const first = envelope(checker, ids[0]!, 'approve');
  const second = envelope(checker, ids[1]!, 'approve', { nonce: first.payload.nonce });
  const [r1, r2] = await Promise.all([
    request(urls[0]!).post(`/policies/pending-changes/${ids[0]}/approve`).set('authorization', bearer(checker)).send(first),
    request(urls[1 % urls.length]!).post(`/policies/pending-changes/${ids[1]}/approve`).set('authorization', bearer(checker)).send(second),
  ]);
  expect([r1.status, r2.status].sort()).toEqual([200, 409]);
  expect([r1.body.code, r2.body.code]).toContain('STEP_UP_NONCE_REUSED');
}

/**
 * The failed-authentication limit is shared: of 300 bad keys sent at once from one client address
 * over every instance, exactly `limit` are answered 401 (and audited: `auditedFailures` grows by
 * that much), the rest 429; a valid key from the same address is served throughout.
 */
export async function expectSharedFailedAuthLimit(
  urls: string[],
  valid: TestKey,
  clientIp: string,
  limit: number,
  auditedFailures: () => Promise<number>,
): Promise<void> {
  const before = await auditedFailures();
  const results = await Promise.all(
    Array.from({ length: 330 }, (_, i) =>
      request(urls[i % urls.length]!)
        .get('/callers/me')
        .set('x-forwarded-for', clientIp)
        .set('authorization', i % 11 === 0 ? bearer(valid) : `Bearer pk_local_wrong${i}`),
    ),
  );
  const bad = results.filter((_, i) => i % 11 !== 0).map((r) => r.status);
  expect(bad.filter((s) => s === 401)).toHaveLength(limit);
  expect(bad.filter((s) => s === 429)).toHaveLength(300 - limit);
  expect(results.filter((_, i) => i % 11 === 0).map((r) => r.status)).toEqual(Array(30).fill(200));
  expect((await auditedFailures()) - before).toBe(limit);
}

/**
 * A held transaction (EXEC_POLICY holds amounts above 10000) approved by 20 approvals at once,
 * spread over the instances and the checkers, is released once: one 200, 19 409, one intent.
 */
export async function expectHeldReleasedOnce(urls: string[], agent: TestKey, checkers: TestKey[], intentsOf: (id: string) => Promise<number>): Promise<void> {
  const tx = businessTransaction({ signals: { amount: 20000, country: 'FR' } });
  const id = tx.businessTransactionId as string;
  expect((await request(urls[0]!).post('/execute').set('authorization', bearer(agent)).send(tx)).status).toBe(202);
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) => {
      const checker = checkers[i % checkers.length]!;
      return request(urls[i % urls.length]!).post(`/overrides/${id}/approve`).set('authorization', bearer(checker)).send(heldApproval(checker, tx));
    }),
  );
  const statuses = results.map((r) => r.status);
  expect(statuses.filter((s) => s === 200)).toHaveLength(1);
  expect(statuses.filter((s) => s === 409)).toHaveLength(19);
  expect(await intentsOf(id)).toBe(1);
  for (const url of urls) expect((await request(url).get(`/overrides/${id}`).set('authorization', bearer(checkers[0]!))).body.status).toBe('APPROVED');
}
