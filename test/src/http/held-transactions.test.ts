import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { canonicalize } from '@ets/adapters-crypto';
import { verifyRecord } from '@ets/client';
import type { PolicyDecision, PolicyDocument } from '@ets/domain';
import {
  apiKeysEnv,
  bearer,
  businessCast,
  businessTransaction,
  envelope,
  makeKey,
  publishPolicy,
  signedApproval,
  STORAGE_TARGETS,
  startTestServer,
  type TestKey,
  type TestServer,
} from '@ets/test-support';

/**
 * Held transactions (CONTRACT "Held transactions"): a `requires_override` decision without an
 * approval waits on the server; a human approves it there (released once, through the pipeline's
 * own stages) or rejects it; one nobody decides in time is refused by expiry.
 */
const { alice, bob, agent } = businessCast();
const ann = makeKey('ann', { holder: 'USER', capabilities: ['*'], stepUp: true });
const other = makeKey('agent-9', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const KEYS = apiKeysEnv(alice, bob, ann, agent, other);

const POLICY: PolicyDocument = {
  name: 'held',
  policyVersion: '1.0.0',
  signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
  approvalScope: { value: 'intent.parameters.amount' },
  rules: [
    { id: 'large', when: 'signals.amount > 1000', action: 'approve', requires_override: true, reason: 'Large transfer needs a second look' },
    { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
  ],
};

const signalsHash = (signals: unknown) => createHash('sha256').update(canonicalize(signals)).digest('hex');

describe.each(STORAGE_TARGETS)('held transactions on $name', (factory) => {
  let server: TestServer;
  let quick: TestServer;
  let jwks: { keys: unknown[] };

  beforeAll(async () => {
    server = await startTestServer(factory, { ...KEYS, SVC_SANDBOX: 'true' });
    // Held transactions of this one expire after a second.
    quick = await startTestServer(factory, { ...KEYS, SVC_OVERRIDE_TTL_SECONDS: '1' });
    for (const s of [server, quick]) await publishPolicy(s.dataSource, POLICY);
    jwks = (await request(server.url).get('/.well-known/jwks.json')).body as { keys: unknown[] };
  });
  afterAll(async () => {
    await server?.destroy();
    await quick?.destroy();
  });

  const post = (s: TestServer, p: string, key: TestKey, body: unknown) => request(s.url).post(p).set('authorization', bearer(key)).send(body as object);
  const get = (s: TestServer, p: string, key: TestKey = bob) => request(s.url).get(p).set('authorization', bearer(key));
  const large = (amount = 5000) =>
    businessTransaction({
      intent: { action: 'sandbox:echo', parameters: { amount, currency: 'EUR' } },
      policy: { name: 'held', version: '1.0.0' },
      signals: { amount, country: 'FR' },
    });
  const approvalBy = (signer: TestKey, tx: Record<string, unknown>, over: Record<string, unknown> = {}) =>
    signedApproval(signer.stepUpPrivateKeyPem!, {
      approvalId: randomUUID(),
      approverId: signer.record.callerId,
      businessTransactionId: tx.businessTransactionId,
      action: 'sandbox:echo',
      scope: { field: 'value', value: (tx.intent as { parameters: { amount: number } }).parameters.amount },
      signalsHash: signalsHash(tx.signals),
      expiresAt: new Date(Date.now() + 300_000).toISOString(),
      nonce: randomBytes(32).toString('base64url'),
      ...over,
    });
  const rejection = (checker: TestKey, id: string, over: Record<string, unknown> = {}) =>
    envelope(checker, id, 'reject', { pendingPolicyChangeId: undefined, businessTransactionId: id, reason: 'Not this payee', ...over });
  const hold = async (s: TestServer = server, tx = large()) => {
    const res = await post(s, '/execute', agent, tx);
    expect(res.status).toBe(202);
    return { tx, id: tx.businessTransactionId as string, res };
  };
  const released = () => readFileSync(path.join(server.settings.dataDir, 'sandbox-releases.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { businessTransactionId: string }).businessTransactionId);
  const releasesOf = (id: string) => {
    try {
      return released().filter((r) => r === id).length;
    } catch {
      return 0;
    }
  };

  it('holds a requires_override decision for a human: 202 with expiresAt, listed PENDING, shown with the hash an approval binds to', async () => {
    const { tx, id, res } = await hold();
    expect(res.body).toMatchObject({ executionStatus: 'PENDING_OVERRIDE', decision: { requires_override: true, matchedRuleId: 'large' } });
    expect(Date.parse(res.body.expiresAt as string) - Date.now()).toBeGreaterThan(86_000_000);
    const view = await get(server, `/overrides/${id}`);
    expect(view.status).toBe(200);
    expect(view.body).toEqual({
      businessTransactionId: id,
      callerId: 'agent-7',
      action: 'sandbox:echo',
      parameters: { amount: 5000, currency: 'EUR' },
      signals: tx.signals,
      signalsHash: signalsHash(tx.signals),
      scope: { field: 'value', value: 5000 },
      businessTransactionHash: res.body.trustRecord.businessTransactionHash,
      policy: { name: 'held', version: '1.0.0', contentHash: res.body.trustRecord.transaction.policy.contentHash },
      decision: res.body.decision,
      status: 'PENDING',
      createdAt: expect.any(String),
      expiresAt: res.body.expiresAt,
    });
    expect((await get(server, `/transactions/${id}`)).body.outcome).toBe('HELD');
    // The held decision's record is served as before.
    expect((await get(server, `/trust-records/${id}`)).body.executions).toEqual([]);
    const pending = (await get(server, '/overrides?status=PENDING&pageSize=100')).body as { items: { businessTransactionId: string }[]; total: number };
    expect(pending.items.map((i) => i.businessTransactionId)).toContain(id);
    // Reads are scoped: the requesting agent sees its own, another agent does not.
    expect((await get(server, `/overrides/${id}`, agent)).status).toBe(200);
    expect((await get(server, `/overrides/${id}`, other)).status).toBe(404);
    expect(((await get(server, '/overrides', other)).body as { total: number }).total).toBe(0);
    expect((await get(server, '/overrides?status=WAITING')).status).toBe(400);
    expect(releasesOf(id)).toBe(0);
  });

  it('an approval releases it once, through the pipeline: the intent first, then the chained Trust Record carrying the approval', async () => {
    const { tx, id } = await hold();
    const approval = approvalBy(bob, tx);
    const res = await post(server, `/overrides/${id}/approve`, bob, approval);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ businessTransactionId: id, executionStatus: 'EXECUTED', result: { echo: { amount: 5000, currency: 'EUR' } } });
    const record = res.body.trustRecord as Record<string, unknown> & { executions: { chainHash: string }[]; override: unknown };
    expect(record.executions).toHaveLength(1);
    expect(record.override).toEqual({ approverId: 'bob', approvedAt: expect.any(String), approval });
    expect(verifyRecord(record, jwks as never).valid).toBe(true);
    expect((await get(server, `/trust-records/${id}`)).body).toEqual(record);
    expect((await get(server, `/transactions/${id}`)).body.outcome).toBe('EXECUTED');
    const intent = (await get(server, `/execution-intents/${id}`)).body as { intent: { approvedBy: string }; status: { state: string } };
    expect(intent.intent.approvedBy).toBe('bob');
    expect(intent.status.state).toBe('FINALIZED');
    expect((await get(server, `/overrides/${id}`)).body).toMatchObject({ status: 'APPROVED', decidedBy: 'bob' });
    expect((await post(server, '/verify', bob, { businessTransactionId: id })).body.status).toBe('VERIFIED');
    // Decided: a second approval, or a rejection, changes nothing.
    const again = await post(server, `/overrides/${id}/approve`, ann, approvalBy(ann, tx));
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('CHANGE_ALREADY_DECIDED');
    expect((await post(server, `/overrides/${id}/reject`, ann, rejection(ann, id))).status).toBe(409);
    expect(releasesOf(id)).toBe(1);
  });

  it('of 20 concurrent approvals one releases it, the others are 409; one intent, one release', async () => {
    const { tx, id } = await hold();
    const approvers = [bob, ann];
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => post(server, `/overrides/${id}/approve`, approvers[i % 2]!, approvalBy(approvers[i % 2]!, tx))));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(19);
    expect(releasesOf(id)).toBe(1);
    const intents = (await get(server, '/execution-intents?state=PREPARED,RELEASED,FINALIZED,ERRORED,RESOLVED&pageSize=100')).body as { items: { intent: { businessTransactionId: string } }[] };
    expect(intents.items.filter((i) => i.intent.businessTransactionId === id)).toHaveLength(1);
  });

  it('only a human who is not the requester approves, with a valid approval of this transaction; a refused approval changes nothing', async () => {
    const { tx, id } = await hold();
    const byAgent = await post(server, `/overrides/${id}/approve`, agent, approvalBy(bob, tx));
    expect([byAgent.status, byAgent.body.code]).toEqual([403, 'NON_HUMAN_CALLER_DENIED']);
    // An approval signed by bob but sent by ann: the approver is who sends it.
    const relayed = await post(server, `/overrides/${id}/approve`, ann, approvalBy(bob, tx));
    expect([relayed.status, relayed.body.code]).toEqual([403, 'APPROVAL_INVALID']);
    const wrongSignals = await post(server, `/overrides/${id}/approve`, bob, approvalBy(bob, tx, { signalsHash: signalsHash({ amount: 1 }) }));
    expect([wrongSignals.status, wrongSignals.body.code]).toEqual([403, 'APPROVAL_INVALID']);
    const wrongScope = await post(server, `/overrides/${id}/approve`, bob, approvalBy(bob, tx, { scope: { field: 'value', value: 4999 } }));
    expect([wrongScope.status, wrongScope.body.code]).toEqual([403, 'APPROVAL_INVALID']);
    const forAnother = await post(server, `/overrides/${id}/approve`, bob, approvalBy(bob, { ...tx, businessTransactionId: randomUUID() }));
    expect([forAnother.status, forAnother.body.code]).toEqual([403, 'APPROVAL_INVALID']);
    expect((await post(server, `/overrides/${id}/approve`, bob, { hello: 1 })).status).toBe(403);
    expect((await post(server, `/overrides/${randomUUID()}/approve`, bob, approvalBy(bob, tx))).status).toBe(404);
    expect((await get(server, `/overrides/${id}`)).body.status).toBe('PENDING');
    expect(releasesOf(id)).toBe(0);
    // An approval used once is used: a second held transaction cannot reuse its id.
    const used = approvalBy(bob, tx);
    expect((await post(server, `/overrides/${id}/approve`, bob, used)).status).toBe(200);
  });

  it('the requester (or its principal) cannot decide its own held transaction', async () => {
    const own = businessTransaction({
      authority: { principalId: 'alice', authorityId: 'auth-1' },
      intent: { action: 'sandbox:echo', parameters: { amount: 7000, currency: 'EUR' } },
      policy: { name: 'held', version: '1.0.0' },
      signals: { amount: 7000, country: 'FR' },
      metadata: {},
    });
    const res = await post(server, '/execute', alice, own);
    expect(res.status).toBe(202);
    const id = own.businessTransactionId as string;
    const self = await post(server, `/overrides/${id}/approve`, alice, approvalBy(alice, own));
    expect([self.status, self.body.code]).toEqual([403, 'SELF_APPROVAL_DENIED']);
    const selfReject = await post(server, `/overrides/${id}/reject`, alice, rejection(alice, id));
    expect([selfReject.status, selfReject.body.code]).toEqual([403, 'SELF_APPROVAL_DENIED']);
  });

  it('a rejection with a step-up envelope refuses it with a signed Refusal Record; nothing is released', async () => {
    const { tx, id } = await hold();
    const env = rejection(ann, id);
    const res = await post(server, `/overrides/${id}/reject`, ann, env);
    expect(res.status).toBe(200);
    expect(res.headers.link).toBe(`</refusal/${id}>; rel="related"`);
    expect(res.body).toMatchObject({ status: 'REJECTED', decidedBy: 'ann', reason: 'Not this payee' });
    const refusal = (await get(server, `/refusal/${id}`)).body as Record<string, unknown>;
    expect(refusal).toMatchObject({ matchedRuleId: 'override-rejected', decision: { action: 'reject' } });
    expect(verifyRecord(refusal, jwks as never).valid).toBe(true);
    expect((await get(server, `/transactions/${id}`)).body.outcome).toBe('REFUSED');
    expect((await get(server, `/trust-records/${id}`)).status).toBe(404);
    expect((await post(server, `/overrides/${id}/approve`, bob, approvalBy(bob, tx))).status).toBe(409);
    // The envelope's nonce is spent: used for another held transaction it is refused.
    const second = await hold();
    const reused = await post(server, `/overrides/${second.id}/reject`, ann, { ...rejection(ann, second.id, { nonce: env.payload.nonce }) });
    expect([reused.status, reused.body.code]).toEqual([409, 'STEP_UP_NONCE_REUSED']);
    expect((await get(server, `/overrides/${second.id}`)).body.status).toBe('PENDING');
    // A malformed or mismatched envelope.
    expect((await post(server, `/overrides/${second.id}/reject`, ann, rejection(ann, second.id, { reason: undefined }))).status).toBe(400);
    expect((await post(server, `/overrides/${second.id}/reject`, ann, rejection(ann, id))).body.code).toBe('STEP_UP_INVALID');
    expect((await post(server, `/overrides/${second.id}/reject`, ann, rejection(ann, second.id, {}, ))).status).toBe(200);
    expect(releasesOf(id)).toBe(0);
  });

  it('silence is never consent: one nobody decides in time is refused by expiry, and a later approval is 409', async () => {
    const { tx, id } = await hold(quick);
    await until(async () => ((await get(quick, `/overrides/${id}`)).body.status === 'EXPIRED' ? true : undefined));
    const view = (await get(quick, `/overrides/${id}`)).body as Record<string, unknown>;
    expect(view).toMatchObject({ status: 'EXPIRED', reason: expect.stringContaining('silence is never consent') });
    expect(view.decidedBy).toBeUndefined();
    const refusal = (await get(quick, `/refusal/${id}`)).body as { matchedRuleId: string; decision: PolicyDecision };
    expect(refusal.matchedRuleId).toBe('override-expired');
    expect((await get(quick, `/transactions/${id}`)).body.outcome).toBe('REFUSED');
    const late = await post(quick, `/overrides/${id}/approve`, bob, approvalBy(bob, tx));
    expect([late.status, late.body.code]).toEqual([409, 'CHANGE_ALREADY_DECIDED']);
  });

  it('the log keeps every record: the held decision\'s leaf still finds its record after the release replaced it', async () => {
    const { tx, id, res } = await hold();
    expect((await post(server, `/overrides/${id}/approve`, bob, approvalBy(bob, tx))).status).toBe(200);
    const heldRecord = res.body.trustRecord as object;
    const leaf = createHash('sha256').update(canonicalize(heldRecord)).digest('hex');
    const rows = (await server.dataSource.query(
      `SELECT record_kind, record_id FROM transparency_log_leaves WHERE leaf = ${factory.name === 'postgres' ? '$1' : '?'}`,
      [leaf],
    )) as { record_kind: string; record_id: string }[];
    expect(rows).toEqual([{ record_kind: 'held-trust-record', record_id: id }]);
    const [held] = (await server.dataSource.query(
      `SELECT held_record FROM held_transactions WHERE business_transaction_id = ${factory.name === 'postgres' ? '$1' : '?'}`,
      [id],
    )) as { held_record: string }[];
    expect(createHash('sha256').update(held!.held_record).digest('hex')).toBe(leaf);
  });
});

async function until(check: () => Promise<true | undefined>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 200));
  }
}
