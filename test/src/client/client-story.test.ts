import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createClient, logLeafOf, signApproval, verifyLogCheckpoint, verifyLogInclusion, verifyRecord, type JwksLike, type ProtocolAnswer, type Schemas } from '@ets/client';
import { apiKeysEnv, makeKey, startTestNetwork, startTestServer, STORAGE_TARGETS, type TestHttpsServer, type TestNetwork, type TestServer } from '@ets/test-support';
import { payInvoice } from '../../../packages/client/examples/agent.js';
import { approveConnectorChange, approvePolicyChange, rejectPolicyChange } from '../../../packages/client/examples/approver.js';
import { audit, fetchPublicKeys } from '../../../packages/client/examples/auditor.js';
import { releaseEndpoint } from '../../../packages/client/examples/endpoint.js';

/**
 * The whole story through the client library (@ets/client) against a started server, on each
 * store: a maker proposes a policy, a checker approves it (and rejects another change) with
 * step-up envelopes the client signs; an agent executes, is refused, and is released to an
 * external endpoint whose owner verifies the release JWS with the client; an auditor verifies the
 * Trust Record, the Refusal, the Intent, the Verification and the Receipt offline with only the
 * JWKS. A `requires_override` transaction is released with a human's approval signed by the client,
 * and the auditor checks the transparency log's checkpoint and inclusion proofs with the client.
 * The examples of packages/client/examples are what runs, as its README shows them.
 */
const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const auditor = makeKey('auditor', { holder: 'USER' });
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['sandbox:echo', 'story:pay'], tenants: ['t1'] });

const POLICY = {
  name: 'payments',
  policyVersion: '1.0.0',
  description: 'The client story',
  signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
  rules: [
    { id: 'sanctioned', when: "signals.country in ['KP', 'IR']", action: 'reject', reason: 'Country is sanctioned' },
    { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
  ],
  default: { action: 'reject', reason: 'No rule matched' },
} as const;

describe.each(STORAGE_TARGETS)('the story through @ets/client on $name', (factory) => {
  let network: TestNetwork;
  let server: TestServer;
  let endpoint: TestHttpsServer;
  let owner: ReturnType<typeof releaseEndpoint>;
  const answers: ProtocolAnswer[] = [];
  const paid: Record<string, unknown>[] = [];
  let base: string;
  const maker = () => createClient({ baseUrl: base, apiKey: alice.raw });
  /** What the story hands the auditor. */
  const evidence: Record<string, unknown> = {};
  let executedId: string;

  beforeAll(async () => {
    network = await startTestNetwork();
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, auditor, agent), ...network.env, SVC_SIGNING_MODE: 'hybrid' });
    base = server.url;
    // The endpoint owner's receiver: the client's release verifier behind an HTTPS server on the test network.
    endpoint = await network.https('pay.story.test', (_req, res, body) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(body);
      } catch {
        parsed = undefined;
      }
      void owner.answer(parsed).then((a) => {
        answers.push(a);
        res.writeHead(a.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(a.body));
      });
    });
    owner = releaseEndpoint({ jwks: `${base}/.well-known/jwks.json`, endpoint: endpoint.url('/release'), pay: async (p) => (paid.push(p), { paid: p.amount }) });
  });
  afterAll(async () => {
    await server?.destroy();
    await network?.close();
  });

  it('the maker proposes a policy; the checker approves it with a step-up envelope signed by the client', async () => {
    const { data: proposal, response } = await maker().POST('/policies/{name}/{version}/pending-changes', {
      params: { path: { name: POLICY.name, version: POLICY.policyVersion } },
      body: { proposedContent: POLICY as unknown as Schemas['PolicyDocument'], reason: 'the client story' },
    });
    expect(response.status).toBe(201);
    // The maker may not approve her own change.
    expect(await approvePolicyChange(base, alice.raw, alice.stepUpPrivateKeyPem!, proposal!.id)).toEqual({ status: 403, code: 'SELF_APPROVAL_DENIED' });
    const approved = await approvePolicyChange(base, bob.raw, bob.stepUpPrivateKeyPem!, proposal!.id);
    expect(approved).toMatchObject({ status: 200, change: { status: 'APPROVED', decider: 'bob', policyVersion: '1.0.0' } });
    const { data: inEffect } = await maker().GET('/policies/in-effect');
    expect(inEffect!.find((p) => p.name === 'payments')).toMatchObject({ version: '1.0.0', approvedBy: 'bob' });
  });

  it('the checker rejects another change with a reason', async () => {
    const { data: proposal } = await maker().POST('/policies/{name}/{version}/pending-changes', {
      params: { path: { name: POLICY.name, version: '1.0.0' } },
      body: { proposedContent: { ...POLICY, policyVersion: '1.1.0' } as unknown as Schemas['PolicyDocument'], reason: 'looser' },
    });
    const rejected = await rejectPolicyChange(base, bob.raw, bob.stepUpPrivateKeyPem!, proposal!.id, 'Too loose');
    expect(rejected).toMatchObject({ status: 200, change: { status: 'REJECTED', decider: 'bob', rejectionReason: 'Too loose' } });
  });

  it('the agent executes through client.POST("/execute"), and is refused when the policy says no', async () => {
    const executed = await payInvoice(base, agent.raw, { id: 'inv-1', amount: 120, country: 'FR' });
    expect(executed).toMatchObject({ executed: true, status: 200, trustRecord: { recordType: 'execution-trust-record', callerId: 'agent-7' } });
    executedId = executed.id;
    evidence.trustRecord = executed.executed && executed.trustRecord;

    const refused = await payInvoice(base, agent.raw, { id: 'inv-2', amount: 120, country: 'KP' });
    expect(refused).toMatchObject({ executed: false, status: 403, code: 'POLICY_DENIED' });
    const agentClient = createClient({ baseUrl: base, apiKey: agent.raw });
    const { data: refusal } = await agentClient.GET('/refusal/{id}', { params: { path: { id: refused.id } } });
    evidence.refusal = refusal;

    const { data: verification } = await agentClient.POST('/verify', { body: { businessTransactionId: executedId } });
    expect(verification).toMatchObject({ status: 'VERIFIED' });
    evidence.verification = verification;
    const { data: receipt, response } = await agentClient.POST('/receipt', { body: { businessTransactionId: executedId } });
    expect(response.status).toBe(201);
    evidence.receipt = receipt;
  });

  it('an external connector approved by the checker gets a release JWS that its owner verifies with the client: audience, expiry, single use', async () => {
    const { data: change } = await maker().POST('/external-connectors/changes', {
      body: { kind: 'register', capability: 'story:pay', endpoint: endpoint.url('/release'), policyName: 'payments', forwardedParameters: ['invoiceId', 'amount'], reason: 'pay suppliers' },
    });
    expect(await approveConnectorChange(base, bob.raw, bob.stepUpPrivateKeyPem!, change!.id)).toMatchObject({ status: 200, change: { status: 'APPROVED' } });

    const executed = await payInvoice(base, agent.raw, { id: 'inv-3', amount: 420, country: 'FR' }, 'story:pay');
    expect(executed).toMatchObject({ executed: true, status: 200, result: { paid: 420 } });
    expect(paid).toEqual([{ invoiceId: 'inv-3', amount: 420 }]); // only the forwarded parameters
    expect(answers.map((a) => a.status)).toEqual([200]);

    // The token as the endpoint received it: a second delivery is refused, and so is it at another endpoint or after its expiry.
    const token = (JSON.parse(endpoint.received[0]!) as { release: string }).release;
    expect(await owner.verifier.verify(token)).toMatchObject({ ok: false, reason: 'replayed' });
    expect((await owner.answer({ release: token })).status).toBe(409);
    const { ReleaseVerifier } = await import('@ets/client');
    const elsewhere = new ReleaseVerifier({ jwks: `${base}/.well-known/jwks.json`, audience: 'https://other.story.test/release' });
    expect(await elsewhere.verify(token)).toMatchObject({ ok: false, reason: 'audience' });
    const later = new ReleaseVerifier({ jwks: `${base}/.well-known/jwks.json`, audience: endpoint.url('/release'), now: () => new Date(Date.now() + 3_600_000) });
    expect(await later.verify(token)).toMatchObject({ ok: false, reason: 'expired' });
    const fresh = new ReleaseVerifier({ jwks: `${base}/.well-known/jwks.json`, audience: endpoint.url('/release') });
    expect(await fresh.verify(token)).toMatchObject({ ok: true, release: { action: 'story:pay', parameters: { invoiceId: 'inv-3', amount: 420 }, intentHash: expect.stringMatching(/^[0-9a-f]{64}$/) } });
  });

  it('a requires_override transaction is recorded pending, and released with the approval a second human signs with the client', async () => {
    const LARGE = {
      name: 'payments-large',
      policyVersion: '1.0.0',
      signalsSchema: { amount: { type: 'number' } },
      rules: [
        { id: 'large', when: 'signals.amount > 1000', action: 'approve', requires_override: true, reason: 'Large payment: a human approves it' },
        { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
      ],
      approvalScope: { value: 'intent.parameters.amount' },
    };
    const { data: proposal } = await maker().POST('/policies/{name}/{version}/pending-changes', {
      params: { path: { name: LARGE.name, version: LARGE.policyVersion } },
      body: { proposedContent: LARGE as unknown as Schemas['PolicyDocument'] },
    });
    expect(await approvePolicyChange(base, bob.raw, bob.stepUpPrivateKeyPem!, proposal!.id)).toMatchObject({ status: 200 });

    const agentClient = createClient({ baseUrl: base, apiKey: agent.raw });
    /** A transaction of 5000, with the approval `approve` signs for its id (none: without). */
    const transaction = async (approve?: (id: string) => Promise<unknown>) => {
      const id = crypto.randomUUID();
      return {
        businessTransactionId: id,
        metadata: { tenantId: 't1' },
        authority: { principalId: 'agent-7', authorityId: 'auth-1' },
        authorization: { authorityId: 'auth-1', ...(approve ? { approval: await approve(id) } : {}) },
        intent: { action: 'sandbox:echo', parameters: { invoiceId: 'inv-9', amount: 5000 } },
        policy: { name: LARGE.name, version: '1.0.0' },
        signals: { amount: 5000 },
      } as unknown as Schemas['BusinessTransaction'];
    };
    const pending = await agentClient.POST('/execute', { body: await transaction() });
    expect(pending.response.status).toBe(202);
    expect(pending.data).toMatchObject({ executionStatus: 'PENDING_OVERRIDE' });

    // Bob, a USER with a step-up key and not the requesting caller, approves this very transaction.
    const approvalOf = (value: number) => (id: string) =>
      signApproval({ key: bob.stepUpPrivateKeyPem!, approverId: 'bob', businessTransactionId: id, action: 'sandbox:echo', scope: { field: 'value', value }, signals: { amount: 5000 } });
    const approved = await agentClient.POST('/execute', { body: await transaction(approvalOf(5000)) });
    expect(approved.response.status).toBe(200);
    expect(approved.data).toMatchObject({ executionStatus: 'EXECUTED' });
    // An approval of another amount is refused, and nothing is executed.
    const refused = await agentClient.POST('/execute', { body: await transaction(approvalOf(50)) });
    expect(refused.response.status).toBe(403);
    expect(refused.error).toMatchObject({ code: 'APPROVAL_INVALID' });
  });

  it('the auditor checks the transparency log with the client: the signed checkpoint, and the inclusion of the Trust Record and of the Receipt', async () => {
    const jwks: JwksLike = await fetchPublicKeys(base);
    const receipt = evidence.receipt as { transparency: { leafIndex: number; treeSize: number; hashes: string[]; checkpoint: string }; trustRecordHash: string };
    expect(verifyLogInclusion(receipt.trustRecordHash, receipt.transparency, jwks)).toMatchObject({ ok: true });
    expect(logLeafOf(evidence.trustRecord)).toBe(receipt.trustRecordHash);

    const note = await (await fetch(`${base}/log/checkpoint`)).text();
    const checkpoint = verifyLogCheckpoint(note, jwks);
    expect(checkpoint).toMatchObject({ ok: true });
    const size = (checkpoint as { checkpoint: { treeSize: number } }).checkpoint.treeSize;
    const proof = (await (await fetch(`${base}/log/proof/inclusion?leaf=${logLeafOf(evidence.trustRecord)}&size=${size}`)).json()) as { leafIndex: number; treeSize: number; hashes: string[] };
    expect(verifyLogInclusion(logLeafOf(evidence.trustRecord), { ...proof, checkpoint: note }, jwks)).toMatchObject({ ok: true });
    // A leaf that is not in the log does not verify with that proof.
    expect(verifyLogInclusion(logLeafOf(evidence.refusal), { ...proof, checkpoint: note }, jwks)).toMatchObject({ ok: false });
  });

  it('the auditor verifies every record offline with only the JWKS; a changed record fails', async () => {
    const auditorClient = createClient({ baseUrl: base, apiKey: auditor.raw });
    const { data: intent } = await auditorClient.GET('/execution-intents/{id}', { params: { path: { id: executedId } } });
    const jwks: JwksLike = await fetchPublicKeys(base);
    const records = [evidence.trustRecord, evidence.refusal, evidence.verification, evidence.receipt, intent];
    const reports = audit(records, jwks);
    expect(reports.map((r) => [r.kind, r.valid, r.checks.filter((c) => !c.ok)])).toEqual([
      ['execution-trust-record', true, []],
      ['refusal-record', true, []],
      ['verification', true, []],
      ['receipt', true, []],
      ['execution-intent', true, []],
    ]);
    expect(reports[0]!.checks.map((c) => c.name)).toEqual(['signature', 'pqSignature', 'fields', 'businessTransactionHash', 'resultHash', 'executionChain']);
    expect(reports[4]!.from).toBe('intent');

    const trustRecord = evidence.trustRecord as { transaction: { signals: Record<string, unknown> } };
    const changed = { ...trustRecord, transaction: { ...trustRecord.transaction, signals: { amount: 1, country: 'FR' } } };
    expect(verifyRecord(changed, jwks).checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['signature', 'pqSignature', 'businessTransactionHash']);
  });
});
