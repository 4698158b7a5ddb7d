import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { TypeOrmExecutionStore } from '@ets/adapters-persistence';
import type { SignedIntent } from '@ets/domain';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  jwksOf,
  makeKey,
  publishPolicy,
  STORAGE_TARGETS,
  startTestServer,
  walkChain,
  type ListedRecord,
  type TestKey,
  type TestServer,
} from '@ets/test-support';

const alpha = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const beta = makeKey('agent-8', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const ann = makeKey('operator-ann', { holder: 'USER', capabilities: ['*'] });

/**
 * CONTRACT "Requests, reads and lists" on the running service, on both stores: who reads what
 * (issue 9 item 8), every list paged (item 5), `/trust-records` in chain order (item 7), and an
 * intent whose request is in flight not resolvable (item 6).
 */
describe.each(STORAGE_TARGETS)('reads and lists on $name', (factory) => {
  let server: TestServer;
  let jwks: unknown;
  const get = (path: string, key: TestKey) => request(server.url).get(path).set('authorization', bearer(key));
  const post = (path: string, body: unknown, key: TestKey) => request(server.url).post(path).set('authorization', bearer(key)).send(body as object);
  const ids = (body: { items: { businessTransactionId?: string; intent?: { businessTransactionId: string } }[] }) =>
    body.items.map((i) => i.businessTransactionId ?? i.intent!.businessTransactionId);
  /** Every item of a list, page by page. */
  const all = async (path: string, key: TestKey): Promise<{ businessTransactionId?: string; intent?: { businessTransactionId: string } }[]> => {
    const out = [];
    for (let page = 1; ; page++) {
      const res = await get(`${path}${path.includes('?') ? '&' : '?'}page=${page}&pageSize=100`, key);
      expect(res.status).toBe(200);
      out.push(...res.body.items);
      if (res.body.items.length < 100) return out;
    }
  };

  beforeAll(async () => {
    server = await startTestServer(factory, { ...apiKeysEnv(alpha, beta, ann), SVC_SANDBOX: 'true', RATE_LIMIT_EXECUTE_PER_MINUTE: '100000' });
    await publishPolicy(server.dataSource);
    jwks = await jwksOf(server.url);
  });
  afterAll(async () => {
    await server?.destroy();
  });

  describe('who reads what (item 8)', () => {
    let executed: string;
    let recorded: string;
    let refused: string;
    let failed: string;
    beforeAll(async () => {
      const tx = [businessTransaction(), businessTransaction(), businessTransaction({ signals: { country: 'KP' } }), businessTransaction({ intent: { action: 'sandbox:echo', parameters: { sandboxFailure: 'before-send' } } })];
      [executed, recorded, refused, failed] = tx.map((t) => t.businessTransactionId as string) as [string, string, string, string];
      expect((await post('/execute', tx[0], alpha)).status).toBe(200);
      expect((await post('/transactions', tx[1], alpha)).status).toBe(201);
      expect((await post('/execute', tx[2], alpha)).status).toBe(403);
      expect((await post('/execute', tx[3], alpha)).status).toBe(502);
      expect((await post('/verify', { businessTransactionId: executed }, alpha)).body.status).toBe('VERIFIED');
      expect((await post('/receipt', { businessTransactionId: executed }, alpha)).status).toBe(201);
      // beta has records of its own.
      expect((await post('/execute', businessTransaction({}, 'agent-8'), beta)).status).toBe(200);
    });

    it('another caller\'s transactions, records, refusals, intents, verifications and receipts are 404 to a key that is not USER, with each route\'s code', async () => {
      const notFound = async (path: string, body: object, key: TestKey = beta) => {
        const res = await get(path, key);
        expect(`${path}: ${res.status} ${JSON.stringify(res.body)}`).toBe(`${path}: 404 ${JSON.stringify(body)}`);
      };
      await notFound(`/transactions/${executed}`, { error: 'Business Transaction not found.' });
      await notFound(`/transactions/${recorded}`, { error: 'Business Transaction not found.' });
      await notFound(`/trust-records/${executed}`, { error: 'Execution Trust Record not found.' });
      await notFound(`/refusal/${refused}`, { error: 'Refusal Record not found.' });
      await notFound(`/execution-intents/${executed}`, { error: 'Execution Intent not found.', code: 'EXECUTION_INTENT_NOT_FOUND' });
      await notFound(`/execution-intents/${failed}`, { error: 'Execution Intent not found.', code: 'EXECUTION_INTENT_NOT_FOUND' });
      await notFound(`/verification/${executed}`, { error: 'Execution Trust Record not found.' });
      await notFound(`/receipt/latest/${executed}`, { error: 'Execution Trust Record not found.' });
      for (const route of ['/verify', '/receipt', '/replay']) {
        const res = await post(route, { businessTransactionId: executed }, beta);
        expect(`${route}: ${res.status}`).toBe(`${route}: 404`);
        expect(res.body).toEqual({ error: 'Execution Trust Record not found.', code: 'VERIFICATION_FAILED' });
      }
    });

    it('the owner and a USER key read them all', async () => {
      for (const key of [alpha, ann]) {
        for (const path of [`/transactions/${executed}`, `/transactions/${refused}`, `/trust-records/${recorded}`, `/refusal/${refused}`, `/execution-intents/${executed}`, `/verification/${executed}`, `/receipt/latest/${executed}`]) {
          expect(`${path}: ${(await get(path, key)).status}`).toBe(`${path}: 200`);
        }
        for (const route of ['/verify', '/replay']) expect((await post(route, { businessTransactionId: executed }, key)).status).toBe(200);
      }
      expect((await get(`/transactions/${executed}`, ann)).body.trustRecord).toEqual((await get(`/trust-records/${executed}`, alpha)).body);
    });

    it('lists hold, and count, the caller\'s own only; a USER key lists everyone\'s', async () => {
      for (const path of ['/transactions', '/trust-records', '/execution-intents?state=PREPARED,RELEASED,FINALIZED,ERRORED,RESOLVED']) {
        const mine = await all(path, beta);
        const everyone = await all(path, ann);
        const own = (await all(path, alpha)).map((i) => i.businessTransactionId ?? i.intent!.businessTransactionId);
        expect(mine.length).toBeGreaterThan(0);
        for (const item of mine) expect(item.businessTransactionId === undefined ? (item.intent as { callerId?: string }).callerId : (item as { callerId?: string }).callerId).toBe('agent-8');
        expect(own).not.toContain(undefined);
        for (const id of [executed, recorded, refused, failed].filter((id) => own.includes(id))) {
          expect(mine.map((i) => i.businessTransactionId ?? i.intent!.businessTransactionId)).not.toContain(id);
          expect(everyone.map((i) => i.businessTransactionId ?? i.intent!.businessTransactionId)).toContain(id);
        }
        expect((await get(`${path}${path.includes('?') ? '&' : '?'}pageSize=1`, beta)).body.total).toBe(mine.length);
        expect((await get(`${path}${path.includes('?') ? '&' : '?'}pageSize=1`, ann)).body.total).toBe(everyone.length);
      }
    });
  });

  describe('GET /transactions filtered by caller, outcome and time (the console\'s records page)', () => {
    let mine: { id: string; outcome: string }[];
    let start: string;
    beforeAll(async () => {
      start = new Date().toISOString();
      const tx = [businessTransaction(), businessTransaction({ signals: { country: 'KP' } }), businessTransaction()];
      expect((await post('/execute', tx[0], alpha)).status).toBe(200);
      expect((await post('/execute', tx[1], alpha)).status).toBe(403);
      expect((await post('/transactions', tx[2], alpha)).status).toBe(201);
      expect((await post('/execute', businessTransaction({}, 'agent-8'), beta)).status).toBe(200);
      mine = [
        { id: tx[0]!.businessTransactionId as string, outcome: 'EXECUTED' },
        { id: tx[1]!.businessTransactionId as string, outcome: 'REFUSED' },
        { id: tx[2]!.businessTransactionId as string, outcome: 'RECORDED' },
      ];
    });
    const listed = async (query: string, key: TestKey = ann) => {
      const res = await get(`/transactions?pageSize=100&${query}`, key);
      expect(`${query}: ${res.status}`).toBe(`${query}: 200`);
      return res.body as { items: { businessTransactionId: string; callerId: string; outcome: string; createdAt: string }[]; total: number };
    };

    it('narrows to one caller, one outcome and a time range, all at once, newest first, counting only those', async () => {
      const since = `from=${encodeURIComponent(start)}`;
      const ofAlpha = await listed(`callerId=agent-7&${since}`);
      expect(ofAlpha.items.map((i) => i.businessTransactionId).sort()).toEqual(mine.map((m) => m.id).sort());
      expect(ofAlpha.items.map((i) => i.createdAt)).toEqual(ofAlpha.items.map((i) => i.createdAt).sort().reverse());
      expect(ofAlpha.items.map((i) => i.outcome).sort()).toEqual(['EXECUTED', 'RECORDED', 'REFUSED']);
      expect(ofAlpha.total).toBe(3);
      const refusedOfAlpha = await listed(`callerId=agent-7&outcome=REFUSED&${since}`);
      expect(refusedOfAlpha.items.map((i) => i.businessTransactionId)).toEqual([mine[1]!.id]);
      expect(refusedOfAlpha.total).toBe(1);
      const executed = await listed(`outcome=EXECUTED&${since}`);
      expect(executed.items.every((i) => i.outcome === 'EXECUTED')).toBe(true);
      expect(new Set(executed.items.map((i) => i.callerId))).toEqual(new Set(['agent-7', 'agent-8']));
      // A bound is inclusive: the first one's own creation time finds it; a range before it finds nothing of it.
      const first = ofAlpha.items[ofAlpha.items.length - 1]!;
      expect((await listed(`callerId=agent-7&from=${encodeURIComponent(first.createdAt)}&to=${encodeURIComponent(first.createdAt)}`)).items.map((i) => i.businessTransactionId)).toContain(first.businessTransactionId);
      expect((await listed(`callerId=agent-7&to=2000-01-01`)).total).toBe(0);
      // A date covers its whole day (UTC).
      const today = start.slice(0, 10);
      expect((await listed(`callerId=agent-7&outcome=RECORDED&from=${today}&to=${today}`)).items.map((i) => i.businessTransactionId)).toContain(mine[2]!.id);
    });

    it("keeps the reader's scope: a key that is not USER finds its own caller's only, whatever callerId it asks for", async () => {
      expect((await listed('callerId=agent-7', beta)).total).toBe(0);
      const own = await listed('outcome=EXECUTED', beta);
      expect(own.total).toBeGreaterThan(0);
      expect(own.items.every((i) => i.callerId === 'agent-8')).toBe(true);
    });

    it.each([
      ['outcome=DONE', /outcome must be one of REFUSED, RECORDED, HELD, EXECUTING, EXECUTED/],
      ['outcome=REFUSED&outcome=EXECUTED', /outcome must be given once/],
      ['callerId=', /callerId must be given once, not empty/],
      ['from=2026-02-30', /from must be an RFC 3339 date-time/],
      ['to=yesterday', /to must be an RFC 3339 date-time/],
      ['from=2026-03-02&to=2026-03-01', /from must not be later than to/],
      [`callerId=${'x'.repeat(257)}`, /callerId must be a caller id of at most 256 characters/],
    ])('refuses %s with 400 naming the filter', async (query, message) => {
      const res = await get(`/transactions?${query}`, ann);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatch(message);
    });
  });

  describe('GET /execution-intents (item 5)', () => {
    it('pages every open intent, past any cap, with page, pageSize and total; each item says whether it is in flight', async () => {
      // 520 intents left open, stored as the pipeline stores them (quicker than 520 requests).
      const store = new TypeOrmExecutionStore(server.dataSource);
      const at = new Date(Date.now() - 3_600_000).toISOString();
      const open = Array.from({ length: 520 }, () => randomUUID());
      await Promise.all(open.map(async (id) => {
        const intent = {
          recordType: 'execution-intent',
          businessTransactionId: id,
          businessTransactionHash: '0'.repeat(64),
          action: 'sandbox:echo',
          connector: 'sandbox',
          callerId: 'agent-8',
          principalId: 'agent-8',
          policy: { name: 'exec-test', version: '1.0.0', contentHash: '0'.repeat(64) },
          decision: { action: 'approve', reason: 'Within limits', requires_override: false, matchedRuleId: 'ok' },
          preparedAt: at,
          keyId: 'k',
          signature: 'cw==',
        } as unknown as SignedIntent;
        await store.prepareIntent({ businessTransactionId: id, callerId: 'agent-8', outcome: 'EXECUTING', createdAt: at }, intent, at);
      }));
      const first = await get('/execution-intents', beta);
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ page: 1, pageSize: 20 });
      expect(first.body.items).toHaveLength(20);
      expect(first.body.total).toBeGreaterThanOrEqual(520);
      const seen = (await all('/execution-intents', beta)).map((i) => i.intent!.businessTransactionId);
      expect(seen.length).toBe(first.body.total);
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen).toEqual(expect.arrayContaining(open));
      // Their requests were stored an hour ago: the leases have ended, none is in flight.
      const page = await get('/execution-intents?state=PREPARED&page=2&pageSize=50', beta);
      expect(page.body).toMatchObject({ page: 2, pageSize: 50 });
      for (const item of page.body.items) expect(item.status).toMatchObject({ state: 'PREPARED', inFlight: false });
      for (const item of page.body.items) expect(item.status).not.toHaveProperty('inFlightUntil');
    });

    it('refuses an unknown state and bad paging with 400', async () => {
      for (const q of ['state=DONE', 'state=', 'state=PREPARED,', 'page=0', 'pageSize=101', 'page=x', 'state=PREPARED&state=ERRORED']) {
        const res = await get(`/execution-intents?${q}`, ann);
        expect(`${q}: ${res.status}`).toBe(`${q}: 400`);
      }
    });
  });

  describe('GET /trust-records in chain order (item 7)', () => {
    it('walks as the auditor of the OpenAPI document walks it: every neighbour links, page after page, the records without executions after the chain', async () => {
      await Promise.all([
        ...Array.from({ length: 24 }, (_, i) => post('/execute', businessTransaction({}, i % 2 ? 'agent-8' : 'agent-7'), i % 2 ? beta : alpha)),
        ...Array.from({ length: 3 }, () => post('/transactions', businessTransaction(), alpha)),
      ]);
      const listed = (pageSize: number) => async (page: number) => (await get(`/trust-records?page=${page}&pageSize=${pageSize}`, ann)).body as { items: ListedRecord[]; total: number };
      const walked = await walkChain(listed(7), jwks, 7);
      expect(walked.chained.length).toBeGreaterThanOrEqual(26);
      expect(walked.unchained.length).toBeGreaterThanOrEqual(4);
      expect(walked.chained.length + walked.unchained.length).toBe((await get('/trust-records?pageSize=1', ann)).body.total);
      // Any page size walks the same list.
      expect(await walkChain(listed(100), jwks, 100)).toEqual(walked);
      // A caller's own list keeps the same order.
      const own = (await all('/trust-records', beta)).map((r) => r.businessTransactionId!);
      expect(own).toEqual([...walked.chained, ...walked.unchained].filter((id) => own.includes(id)));
    });
  });

  describe('an intent whose request is in flight (item 6)', () => {
    it('is listed in flight and cannot be resolved (409) until its request has ended; then the request completes and is listed not in flight', async () => {
      const tx = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { sandboxPauseBeforeReleaseMs: 2500 } } });
      const id = tx.businessTransactionId as string;
      const running = post('/execute', tx, alpha).then((r) => r);
      for (let tries = 0; (await get(`/execution-intents/${id}`, alpha)).status !== 200 && tries < 500; tries++) await new Promise((r) => setTimeout(r, 10));
      const listed = (await all('/execution-intents', ann)) as { intent: { businessTransactionId: string }; status?: { inFlight: boolean } }[];
      expect(listed.find((i) => i.intent.businessTransactionId === id)?.status).toMatchObject({ state: 'PREPARED', inFlight: true, inFlightUntil: expect.any(String) });
      const refused = await post(`/execution-intents/${id}/resolve`, { found: 'NOT_EXECUTED', note: 'Nothing at the connector yet.' }, ann);
      expect(refused.status).toBe(409);
      expect(refused.body).toEqual({ error: expect.stringMatching(/still in flight/), code: 'EXECUTION_INTENT_NOT_RESOLVABLE' });

      const done = await running;
      expect(done.status).toBe(200);
      expect(done.body.executionStatus).toBe('EXECUTED');
      const after = await get(`/execution-intents/${id}`, alpha);
      expect(after.body.status).toMatchObject({ state: 'FINALIZED', inFlight: false });
      const finalized = (await all('/execution-intents?state=FINALIZED', ann)) as { intent: { businessTransactionId: string }; status?: { inFlight: boolean } }[];
      expect(finalized.find((i) => i.intent.businessTransactionId === id)?.status).toMatchObject({ inFlight: false });
      expect((await get(`/trust-records/${id}`, alpha)).status).toBe(200);
      expect((await post(`/execution-intents/${id}/resolve`, { found: 'EXECUTED', note: 'x' }, ann)).status).toBe(409);
    });

    it('an intent the request left ERRORED is resolvable at once', async () => {
      const tx = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { sandboxFailure: 'after-send' } } });
      expect((await post('/execute', tx, alpha)).status).toBe(502);
      expect((await get(`/execution-intents/${tx.businessTransactionId}`, alpha)).body.status).toMatchObject({ state: 'ERRORED', inFlight: false });
      const resolved = await post(`/execution-intents/${tx.businessTransactionId}/resolve`, { found: 'EXECUTED', note: 'The echo came back.' }, ann);
      expect(resolved.status).toBe(200);
      expect(resolved.body.status).toMatchObject({ state: 'RESOLVED', inFlight: false, resolution: { previousState: 'ERRORED', resolvedBy: 'operator-ann' } });
    });
  });
});
