import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { KeyRingSigner, Sha256Hasher, verifyRecord } from '@ets/adapters-crypto';
import { withSqliteWriteLock } from '@ets/adapters-persistence';
import {
  buildTrustRecord,
  type ExecutionIntent,
  type ExecutionTrustRecord,
  type PolicyDocument,
  type ReleaseContext,
  type SignedTrustRecord,
} from '@ets/domain';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  EXEC_POLICY,
  makeKey,
  publishPolicy,
  STORAGE_TARGETS,
  startTestServer,
  type TestServer,
} from '@ets/test-support';

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['sandbox:echo'], tenants: ['t1'] });

const NOT_FOUND_CODED = { error: 'Execution Trust Record not found.', code: 'VERIFICATION_FAILED' };
const NOT_FOUND = { error: 'Execution Trust Record not found.' };
const INVALID_UUID = { error: 'businessTransactionId must be a valid UUID.' };
const REQUIRED = { error: 'businessTransactionId is required.' };
const NEVER_VERIFIED = { error: 'The record must be verified first: it has no Verification.', code: 'RECEIPT_GENERATION_FAILED' };
const NOT_VERIFIED = { error: 'The record must be verified first: its latest Verification is not VERIFIED.', code: 'RECEIPT_GENERATION_FAILED' };
const RECORD_CHANGED = { error: 'The record must be verified first: it changed since its latest Verification.', code: 'RECEIPT_GENERATION_FAILED' };
const VERIFICATION_INVALID = { error: 'The record must be verified first: its latest Verification does not verify.', code: 'RECEIPT_GENERATION_FAILED' };

const PASSED = { status: 'PASSED', errors: [] };
const NOT_APPLICABLE = { status: 'NOT_APPLICABLE', errors: [] };

/** A second version of the pipeline policy, so that a test may damage its stored content alone. */
const ALTERABLE_POLICY: PolicyDocument = { ...EXEC_POLICY, policyVersion: '2.0.0' };

type Json = Record<string, any>;

describe.each(STORAGE_TARGETS)('verification, receipts and replay on $name', (factory) => {
  let server: TestServer;
  let contentHash: string;
  let jwks: { keys: object[] };
  const hasher = new Sha256Hasher();

  const post = (path: string, body?: unknown) => {
    const r = request(server.url).post(path).set('authorization', bearer(agent));
    return body === undefined ? r : r.send(body as object);
  };
  const get = (path: string) => request(server.url).get(path).set('authorization', bearer(agent));
  const verify = (id: string) => post('/verify', { businessTransactionId: id });

  /** Plain SQL with `?` placeholders, on SQLite through the server's single writer. */
  const sql = async <T = Json>(text: string, params: unknown[] = []): Promise<T[]> => {
    const ds = server.dataSource;
    if (factory.name === 'postgres') {
      let n = 0;
      return ds.query(text.replace(/\?/g, () => `$${++n}`), params);
    }
    return withSqliteWriteLock(ds, () => ds.query(text, params));
  };

  const storedText = async (table: 'trust_records', id: string): Promise<string> =>
    (await sql<{ body: string }>(`SELECT body FROM ${table} WHERE business_transaction_id = ?`, [id]))[0]!.body;

  /** Rewrites the stored Trust Record as an attacker with database access would: the JSON text. */
  const alterRecord = async (id: string, change: (r: Json) => void): Promise<void> => {
    const record = JSON.parse(await storedText('trust_records', id)) as Json;
    change(record);
    await sql('UPDATE trust_records SET body = ? WHERE business_transaction_id = ?', [JSON.stringify(record), id]);
  };

  const alterIntent = async (id: string, change: (i: Json) => void): Promise<void> => {
    const [row] = await sql<{ intent: string }>('SELECT intent FROM execution_intents WHERE business_transaction_id = ?', [id]);
    const intent = JSON.parse(row!.intent) as Json;
    change(intent);
    await sql('UPDATE execution_intents SET intent = ? WHERE business_transaction_id = ?', [JSON.stringify(intent), id]);
  };

  const execute = async (over: Record<string, unknown> = {}): Promise<{ id: string; record: Json }> => {
    const tx = businessTransaction(over);
    const res = await post('/execute', tx);
    expect(res.status).toBe(200);
    return { id: tx.businessTransactionId as string, record: res.body.trustRecord };
  };

  const expectVerified = async (id: string): Promise<Json> => {
    const res = await verify(id);
    expect(res.status).toBe(200);
    expect(res.body.checks.signature).toEqual(PASSED);
    expect(res.body.status).toBe('VERIFIED');
    return res.body;
  };

  const expectFailed = async (id: string, failing: string[]): Promise<Json> => {
    const res = await verify(id);
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('FAILED');
    for (const check of failing) expect(`${check}: ${res.body.checks[check].status}`).toBe(`${check}: FAILED`);
    // Still signed evidence of what was found.
    expect(verifyRecord(res.body, jwks).valid).toBe(true);
    return res.body;
  };

  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(agent), SVC_SANDBOX: 'true' });
    contentHash = await publishPolicy(server.dataSource);
    await publishPolicy(server.dataSource, ALTERABLE_POLICY);
    jwks = (await request(server.url).get('/.well-known/jwks.json')).body;
  });
  afterAll(async () => {
    await server.destroy();
  });

  // --- statuses and messages (spec 7) ------------------------------------------------------------

  it('keeps every route behind a key (401)', async () => {
    const id = randomUUID();
    for (const [method, path] of [['post', '/verify'], ['post', '/receipt'], ['post', '/replay'], ['get', `/verification/${id}`], ['get', `/receipt/latest/${id}`]] as const) {
      const res = await request(server.url)[method](path).send({ businessTransactionId: id });
      expect(`${method} ${path} ${res.status}`).toBe(`${method} ${path} 401`);
      expect(res.body).toEqual({ error: 'authentication required' });
    }
  });

  it.each(['/verify', '/receipt'])('%s: 400 without a code for a missing or malformed id, 404 VERIFICATION_FAILED for no record', async (path) => {
    for (const body of [{}, { businessTransactionId: null }, undefined]) {
      const res = await post(path, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(REQUIRED);
    }
    for (const bad of ['abc', '', 42, '00000000-0000-0000-0000-000000000000', '7b1e4c2a-3f5d-6e6a-9b8c-0d1e2f3a4b5c', `${randomUUID()}x`]) {
      const res = await post(path, { businessTransactionId: bad });
      expect(res.status).toBe(400);
      expect(res.body).toEqual(INVALID_UUID);
    }
    const missing = await post(path, { businessTransactionId: randomUUID() });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual(NOT_FOUND_CODED);
  });

  it('/replay: 400 businessTransactionId is required. when missing, presence only (no UUID check), 404 VERIFICATION_FAILED for no record', async () => {
    for (const body of [{}, { businessTransactionId: null }, { businessTransactionId: '' }, { businessTransactionId: 7 }, undefined]) {
      const res = await post('/replay', body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(REQUIRED);
    }
    for (const id of ['abc', randomUUID()]) {
      const res = await post('/replay', { businessTransactionId: id });
      expect(res.status).toBe(404);
      expect(res.body).toEqual(NOT_FOUND_CODED);
    }
  });

  it('GET /verification/{id} and /receipt/latest/{id}: 404 without a code for no record, then for no Verification or Receipt', async () => {
    for (const id of [randomUUID(), 'abc']) {
      for (const path of [`/verification/${id}`, `/receipt/latest/${id}`]) {
        const res = await get(path);
        expect(res.status).toBe(404);
        expect(res.body).toEqual(NOT_FOUND);
      }
    }
    const { id } = await execute();
    expect((await get(`/verification/${id}`)).body).toEqual({ error: 'Verification not found.' });
    expect((await get(`/verification/${id}`)).status).toBe(404);
    expect((await get(`/receipt/latest/${id}`)).body).toEqual({ error: 'Receipt not found.' });
    expect((await get(`/receipt/latest/${id}`)).status).toBe(404);
    // A refused transaction has a Refusal Record, not an Execution Trust Record.
    const refused = businessTransaction({ signals: { amount: 5, country: 'KP' } });
    expect((await post('/execute', refused)).status).toBe(403);
    expect((await verify(refused.businessTransactionId as string)).body).toEqual(NOT_FOUND_CODED);
    expect((await get(`/verification/${refused.businessTransactionId}`)).body).toEqual(NOT_FOUND);
  });

  // --- verification of what the service wrote ----------------------------------------------------

  it('verifies a fresh /execute record: every check PASSED, signed, served as the latest', async () => {
    const { id, record } = await execute();
    const res = await verify(id.toUpperCase());
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      recordType: 'verification',
      businessTransactionId: id,
      status: 'VERIFIED',
      checks: { signature: PASSED, executionChain: PASSED, policyContentHash: PASSED, intentBinding: PASSED },
      trustRecordHash: hasher.contentHash(record),
    });
    expect(res.body.verificationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(verifyRecord(res.body, jwks)).toEqual(expect.objectContaining({ valid: true }));
    const latest = await get(`/verification/${id}`);
    expect(latest.status).toBe(200);
    expect(latest.body).toEqual(res.body);
  });

  it('verifies a /transactions record (no executions: chain and intent binding NOT_APPLICABLE) and a pending-override record', async () => {
    const tx = businessTransaction();
    expect((await post('/transactions', tx)).status).toBe(201);
    const v = await expectVerified(tx.businessTransactionId as string);
    expect(v.checks).toEqual({ signature: PASSED, executionChain: NOT_APPLICABLE, policyContentHash: PASSED, intentBinding: NOT_APPLICABLE });
    const receipt = await post('/receipt', { businessTransactionId: tx.businessTransactionId });
    expect(receipt.status).toBe(201);
    expect(receipt.body.executionStatus).toBe('NOT_RELEASED');

    const large = businessTransaction({ signals: { amount: 20000, country: 'FR' } });
    expect((await post('/execute', large)).status).toBe(202);
    expect((await expectVerified(large.businessTransactionId as string)).checks.intentBinding).toEqual(NOT_APPLICABLE);
  });

  // --- tampering in the database -------------------------------------------------------------------

  it('fails after an execution result is changed in the stored record: signature and chain', async () => {
    const { id } = await execute();
    await expectVerified(id);
    await alterRecord(id, (r) => (r.executions[0].result = { echo: { amount: 1_000_000 } }));
    const v = await expectFailed(id, ['signature', 'executionChain']);
    expect(v.checks.signature.errors).toEqual(['signature: does not verify']);
    expect(v.checks.executionChain.errors).toEqual(['executions[0].chainHash: does not recompute from previousChainHash and the execution']);
    expect(v.checks.policyContentHash).toEqual(PASSED);
    expect(v.checks.intentBinding).toEqual(PASSED);
  });

  it('fails after the decision reason is changed: the signature check', async () => {
    const { id } = await execute();
    await alterRecord(id, (r) => (r.decision.reason = 'Approved by the board'));
    const v = await expectFailed(id, ['signature']);
    expect(v.checks.executionChain).toEqual(PASSED);
    expect(v.checks.intentBinding).toEqual(PASSED);
  });

  it('fails after chainSignature is removed (only some chain fields, spec 4.3.13)', async () => {
    const { id } = await execute();
    await alterRecord(id, (r) => delete r.executions[0].chainSignature);
    const v = await expectFailed(id, ['executionChain', 'signature']);
    expect(v.checks.executionChain.errors).toEqual(['executions[0]: carries only some of chainHash, chainSignature, previousChainHash (missing chainSignature)']);
  });

  it('fails after chainHash is changed', async () => {
    const { id } = await execute();
    await alterRecord(id, (r) => (r.executions[0].chainHash = 'f'.repeat(64)));
    const v = await expectFailed(id, ['executionChain']);
    expect(v.checks.executionChain.errors).toEqual([
      'executions[0].chainHash: does not recompute from previousChainHash and the execution',
      'executions[0].chainSignature: does not verify',
    ]);
  });

  it('fails after the stored policy content is changed in policy_versions, and replay no longer matches', async () => {
    const { id } = await execute({ policy: { name: 'exec-test', version: '2.0.0' } });
    await expectVerified(id);
    const replayBefore = await post('/replay', { businessTransactionId: id });
    expect(replayBefore.body).toMatchObject({ decisionMatches: true, policyContentHashMatches: true, signatureValid: true });

    const altered: PolicyDocument = {
      ...ALTERABLE_POLICY,
      rules: ALTERABLE_POLICY.rules.map((r) => (r.id === 'ok' ? { ...r, reason: 'Anything goes' } : r)),
    };
    await sql("UPDATE policy_versions SET content = ? WHERE name = 'exec-test' AND version = '2.0.0'", [JSON.stringify(altered)]);
    const v = await expectFailed(id, ['policyContentHash']);
    expect(v.checks.policyContentHash.errors).toEqual(["transaction.policy.contentHash: does not match the stored content of policy 'exec-test' version '2.0.0'"]);
    expect(v.checks.signature).toEqual(PASSED);
    expect(v.checks.executionChain).toEqual(PASSED);
    expect(v.checks.intentBinding).toEqual(PASSED);

    const replay = await post('/replay', { businessTransactionId: id });
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({
      businessTransactionId: id,
      decisionMatches: false,
      policyContentHashMatches: false,
      signatureValid: true,
      recordedDecision: { action: 'approve', reason: 'Within limits', matchedRuleId: 'ok' },
      replayedDecision: { action: 'approve', reason: 'Anything goes', matchedRuleId: 'ok' },
    });
  });

  it('fails after the intent businessTransactionHash is changed: the intent no longer binds and its signature fails', async () => {
    const { id } = await execute();
    await alterIntent(id, (i) => (i.businessTransactionHash = 'a'.repeat(64)));
    const v = await expectFailed(id, ['intentBinding']);
    expect(v.checks.intentBinding.errors).toEqual([
      'intent.signature: does not verify',
      'intent.businessTransactionHash: does not match the hash of the recorded transaction',
    ]);
    expect(v.checks.signature).toEqual(PASSED);
  });

  it('fails when the Execution Intent of a released record is missing', async () => {
    const { id } = await execute();
    await sql('DELETE FROM execution_intents WHERE business_transaction_id = ?', [id]);
    const v = await expectFailed(id, ['intentBinding']);
    expect(v.checks.intentBinding.errors).toEqual(['intent: no Execution Intent is stored for this businessTransactionId']);
  });

  // --- receipts -------------------------------------------------------------------------------------

  it('issues a Receipt only on a VERIFIED latest Verification of an unchanged record', async () => {
    const { id, record } = await execute();
    const before = await post('/receipt', { businessTransactionId: id });
    expect(before.status).toBe(409);
    expect(before.body).toEqual(NEVER_VERIFIED);

    const v = await expectVerified(id);
    const receipt = await post('/receipt', { businessTransactionId: id });
    expect(receipt.status).toBe(201);
    expect(receipt.body).toMatchObject({
      recordType: 'receipt',
      businessTransactionId: id,
      verificationId: v.verificationId,
      trustRecordHash: v.trustRecordHash,
      decision: { action: 'approve', reason: 'Within limits', requires_override: false },
      executionStatus: 'EXECUTED',
    });
    expect(verifyRecord(receipt.body, jwks).valid).toBe(true);
    expect(v.trustRecordHash).toBe(hasher.contentHash(record));
    const latest = await get(`/receipt/latest/${id}`);
    expect(latest.status).toBe(200);
    expect(latest.body).toEqual(receipt.body);
    // Each call issues a new Receipt; the latest is served.
    const second = await post('/receipt', { businessTransactionId: id });
    expect(second.status).toBe(201);
    expect(second.body.receiptId).not.toBe(receipt.body.receiptId);
    expect((await get(`/receipt/latest/${id}`)).body).toEqual(second.body);

    // A FAILED verification becomes the latest: no receipt.
    await alterRecord(id, (r) => (r.decision.reason = 'changed'));
    await expectFailed(id, ['signature']);
    const after = await post('/receipt', { businessTransactionId: id });
    expect(after.status).toBe(409);
    expect(after.body).toEqual(NOT_VERIFIED);
    expect((await get(`/verification/${id}`)).body.status).toBe('FAILED');

    // Editing the stored FAILED Verification into VERIFIED does not help: it no longer verifies.
    const [row] = await sql<{ body: string }>('SELECT body FROM verifications WHERE business_transaction_id = ? ORDER BY seq DESC', [id]);
    const forged = { ...JSON.parse(row!.body), status: 'VERIFIED' };
    await sql('UPDATE verifications SET body = ? WHERE id = ?', [JSON.stringify(forged), forged.verificationId]);
    expect((await post('/receipt', { businessTransactionId: id })).body).toEqual(VERIFICATION_INVALID);
  });

  it('refuses a Receipt when the record changed after its VERIFIED Verification', async () => {
    const { id } = await execute();
    await expectVerified(id);
    await alterRecord(id, (r) => (r.executions[0].completedAt = '2030-01-01T00:00:00.000Z'));
    const res = await post('/receipt', { businessTransactionId: id });
    expect(res.status).toBe(409);
    expect(res.body).toEqual(RECORD_CHANGED);
    expect((await get(`/receipt/latest/${id}`)).body).toEqual({ error: 'Receipt not found.' });
  });

  // --- replay ---------------------------------------------------------------------------------------

  it('replays a recorded decision (also for a pending-override and a /transactions record)', async () => {
    const { id, record } = await execute();
    const res = await post('/replay', { businessTransactionId: id.toUpperCase() });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      businessTransactionId: id,
      decisionMatches: true,
      recordedDecision: record.decision,
      replayedDecision: record.decision,
      signatureValid: true,
      policyContentHashMatches: true,
      replayedAt: expect.any(String),
      errors: [],
    });
    // Not stored: no Verification appeared.
    expect((await get(`/verification/${id}`)).status).toBe(404);

    const large = businessTransaction({ signals: { amount: 20000, country: 'FR' } });
    await post('/execute', large);
    const override = await post('/replay', { businessTransactionId: large.businessTransactionId });
    expect(override.body).toMatchObject({ decisionMatches: true, replayedDecision: { requires_override: true, matchedRuleId: 'large' } });

    const recorded = businessTransaction();
    await post('/transactions', recorded);
    expect((await post('/replay', { businessTransactionId: recorded.businessTransactionId })).body.decisionMatches).toBe(true);
  });

  it('replay reports a changed recorded decision and a broken signature', async () => {
    const { id } = await execute();
    await alterRecord(id, (r) => (r.decision = { ...r.decision, reason: 'Board approval', matchedRuleId: 'board' }));
    const res = await post('/replay', { businessTransactionId: id });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      decisionMatches: false,
      signatureValid: false,
      policyContentHashMatches: true,
      recordedDecision: { reason: 'Board approval' },
      replayedDecision: { reason: 'Within limits', matchedRuleId: 'ok' },
    });
    expect(res.body.errors).toEqual(['signature: does not verify', 'decision: the replayed decision differs from the recorded one']);
  });

  // --- compatibility (spec 9.5, 9.6) ---------------------------------------------------------------

  /** Signs a record and its intent with the running server's own keys and stores them as older versions would have. */
  const insertFixture = async (shape: (ctx: ReleaseContext, record: SignedTrustRecord) => ExecutionTrustRecord, head: string | null): Promise<{ id: string; text: string }> => {
    const signer = new KeyRingSigner(server.signingKeys);
    const tx = businessTransaction();
    const id = tx.businessTransactionId as string;
    const transaction = { ...(tx as unknown as ReleaseContext['transaction']) };
    const decision = { action: 'approve' as const, reason: 'Within limits', requires_override: false, matchedRuleId: 'ok' };
    const policy = { name: 'exec-test', version: '1.0.0', contentHash };
    const at = new Date().toISOString();
    const ctx: ReleaseContext = {
      transaction,
      decision,
      policy,
      assessment: {
        authority: { status: 'VERIFIED', callerId: 'agent-7', principalId: 'agent-7', grant: null },
        businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] },
        execution: { status: 'EXECUTED' },
      },
      execution: {
        executionId: randomUUID(),
        connector: 'sandbox',
        action: 'sandbox:echo',
        status: 'SUCCEEDED',
        releasedAt: at,
        completedAt: at,
        resultHash: hasher.contentHash({ echo: {} }),
        result: { echo: {} },
      },
    };
    const built = await buildTrustRecord({ hasher, signer }, ctx, { chainHash: head }, 'agent-7', at);
    const { signature: _s, keyId: _k, pqKeyId: _pk, pqSignature: _ps, ...unsigned } = built;
    const record = await signer.sign(shape(ctx, unsigned as unknown as SignedTrustRecord));
    const intent = await signer.sign<ExecutionIntent>({
      recordType: 'execution-intent',
      businessTransactionId: id,
      businessTransactionHash: record.businessTransactionHash,
      action: 'sandbox:echo',
      connector: 'sandbox',
      callerId: 'agent-7',
      principalId: 'agent-7',
      tenantId: 't1',
      policy,
      decision,
      preparedAt: at,
    });
    const text = JSON.stringify(record);
    await sql('INSERT INTO business_transactions (business_transaction_id, caller_id, outcome, created_at) VALUES (?, ?, ?, ?)', [id, 'agent-7', 'EXECUTING', at]);
    await sql(
      "INSERT INTO execution_intents (business_transaction_id, caller_id, state, intent, created_at, updated_at) VALUES (?, ?, 'FINALIZED', ?, ?, ?)",
      [id, 'agent-7', JSON.stringify(intent), at, at],
    );
    await sql('INSERT INTO trust_records (business_transaction_id, caller_id, body, created_at) VALUES (?, ?, ?, ?)', [id, 'agent-7', text, at]);
    return { id, text };
  };

  it('verifies a record signed without `assessment` (older records)', async () => {
    const { id, text } = await insertFixture((_ctx, r) => {
      const { assessment: _a, ...older } = r;
      return older as ExecutionTrustRecord;
    }, 'e'.repeat(64));
    expect(JSON.parse(text)).not.toHaveProperty('assessment');
    const v = await expectVerified(id);
    expect(v.checks).toEqual({ signature: PASSED, executionChain: PASSED, policyContentHash: PASSED, intentBinding: PASSED });
    const receipt = await post('/receipt', { businessTransactionId: id });
    expect(receipt.status).toBe(201);
    expect(receipt.body.executionStatus).toBe('EXECUTED');
  });

  it('verifies a record whose first execution has previousChainHash null, and serves it byte-identical', async () => {
    const { id, text } = await insertFixture((_ctx, r) => r, null);
    expect(text).toContain('"previousChainHash":null');
    await expectVerified(id);
    const res = await get(`/trust-records/${id}`);
    expect(res.status).toBe(200);
    expect(res.text).toBe(text);
    expect(res.body.executions[0].previousChainHash).toBeNull();
  });

  it('verifies a record written before chaining (no chain fields at all)', async () => {
    const { id } = await insertFixture((_ctx, r) => {
      const { previousChainHash: _p, chainHash: _h, chainSignature: _c, ...unchained } = r.executions[0]!;
      return { ...r, executions: [unchained] };
    }, null);
    const v = await expectVerified(id);
    expect(v.checks.executionChain).toEqual(PASSED);
  });

  it('covers a `__proto__` key in intent parameters by the signature, and round-trips it', async () => {
    const id = randomUUID();
    const body = JSON.stringify(businessTransaction({ businessTransactionId: id })).replace(
      '"parameters":{',
      '"parameters":{"__proto__":{"limit":5,"isAdmin":false},',
    );
    const res = await request(server.url).post('/execute').set('authorization', bearer(agent)).set('content-type', 'application/json').send(body);
    expect(res.status).toBe(200);
    const stored = await storedText('trust_records', id);
    // Stored as the record's canonical text: members in RFC 8785 order, the `__proto__` key kept.
    expect(stored).toContain('"parameters":{"__proto__":{"isAdmin":false,"limit":5},');
    const served = await get(`/trust-records/${id}`);
    expect(served.text).toBe(stored);
    expect(Object.prototype.hasOwnProperty.call(served.body.transaction.intent.parameters, '__proto__')).toBe(true);
    expect(verifyRecord(served.body, jwks).valid).toBe(true);
    await expectVerified(id);
    expect((await post('/replay', { businessTransactionId: id })).body.decisionMatches).toBe(true);

    await sql('UPDATE trust_records SET body = ? WHERE business_transaction_id = ?', [
      stored.replace('"parameters":{"__proto__":{"isAdmin":false,"limit":5},', '"parameters":{"__proto__":{"isAdmin":true,"limit":5},'),
      id,
    ]);
    const v = await expectFailed(id, ['signature', 'intentBinding']);
    expect(v.checks.intentBinding.errors).toEqual(['intent.businessTransactionHash: does not match the hash of the recorded transaction', 'businessTransactionHash: does not match the recorded transaction']);
  });

  it('keeps the latest Verification deterministic: newest verifiedAt, then insertion order', async () => {
    const { id } = await execute();
    const first = await expectVerified(id);
    await alterRecord(id, (r) => (r.decision.reason = 'x'));
    const second = await expectFailed(id, ['signature']);
    // Same instant as the first: the later insert still wins.
    await sql('UPDATE verifications SET created_at = ? WHERE id = ?', [first.verifiedAt, second.verificationId]);
    expect((await get(`/verification/${id}`)).body.verificationId).toBe(second.verificationId);
  });
});
