import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPublicKey, generateKeyPairSync, verify as nodeVerify } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { canonicalize, Ed25519StepUpVerifier, Sha256Hasher } from '@ets/adapters-crypto';
import { createClient } from '@ets/client';
import { apiKeysEnv, businessTransaction, makeKey, publishPolicy, REPO_ROOT, startTestServer, STORAGE_TARGETS, type TestServer } from '@ets/test-support';
import { launchChromium } from '../support/browser.js';

/**
 * The browser build of @ets/client (packages/client/dist/browser.js, what `npm run build` makes)
 * loaded as it is into a page of headless Chromium: it verifies real records of a started server
 * (hybrid signing: Ed25519 and ML-DSA-65) offline, with only the JWKS, and fails a changed one;
 * it checks the transparency log's signed checkpoint and a record's inclusion proof as the server
 * serves them (`/log/checkpoint`, `/log/proof/inclusion`, `/trust-records/{id}/proof`); an approver
 * signs a step-up envelope and an approval there that the service's verifier accepts.
 * The page talks to nobody but the local server that serves it. The store does not matter here.
 */
const BUNDLE = path.join(REPO_ROOT, 'packages', 'client', 'dist', 'browser.js');
const PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>ets client</title><link rel="icon" href="data:,"></head><body>
<script type="module">import * as ets from '/ets-client.js'; window.ets = ets; document.body.dataset.ready = 'yes';</script></body></html>`;

const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['sandbox:echo'], tenants: ['t1'] });

type Report = { kind: string; valid: boolean; checks: { name: string; ok: boolean }[] };
declare const window: { ets: typeof import('@ets/client') };

describe('@ets/client browser build in Chromium', () => {
  let server: TestServer;
  let browser: Browser;
  let files: http.Server;
  let page: Page;
  const problems: string[] = [];
  let jwks: unknown;
  const records: Record<string, unknown> = {};

  beforeAll(async () => {
    if (!existsSync(BUNDLE)) throw new Error(`${BUNDLE} is missing: run npm run build`);
    [server, browser] = await Promise.all([startTestServer(STORAGE_TARGETS[0]!, { ...apiKeysEnv(agent), SVC_SIGNING_MODE: 'hybrid' }), launchChromium()]);
    await publishPolicy(server.dataSource);
    const client = createClient({ baseUrl: server.url, apiKey: agent.raw });
    const executed = await client.POST('/execute', { body: businessTransaction() as never });
    records.trustRecord = executed.data!.trustRecord;
    const refused = businessTransaction({ signals: { amount: 5, country: 'KP' } });
    expect((await client.POST('/execute', { body: refused as never })).response.status).toBe(403);
    records.refusal = (await client.GET('/refusal/{id}', { params: { path: { id: refused.businessTransactionId as string } } })).data;
    jwks = (await client.GET('/.well-known/jwks.json')).data;

    files = http.createServer((req, res) => {
      const file = req.url === '/ets-client.js' ? BUNDLE : req.url === '/ets-client.js.map' ? `${BUNDLE}.map` : undefined;
      if (req.url === '/') res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
      else if (file) res.writeHead(200, { 'content-type': 'text/javascript' }).end(readFileSync(file));
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
    page = await browser.newPage();
    page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('request', (r) => !r.url().startsWith(origin) && problems.push(`request to another origin: ${r.url()}`));
    await page.goto(`${origin}/`);
    await page.waitForSelector('body[data-ready="yes"]', { state: 'attached', timeout: 30_000 });
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => (files ? files.close(resolve) : resolve(undefined)));
    await server?.destroy();
  });

  const verifyInPage = (record: unknown): Promise<Report> => page.evaluate(([r, k]) => window.ets.verifyRecord(r, k as never), [record, jwks] as const);

  it('verifies a Trust Record and a Refusal Record of the server offline, with only the JWKS', async () => {
    for (const [name, record] of Object.entries(records)) {
      const report = await verifyInPage(record);
      expect({ name, valid: report.valid, failed: report.checks.filter((c) => !c.ok) }).toEqual({ name, valid: true, failed: [] });
      expect(report.checks.map((c) => c.name)).toEqual(expect.arrayContaining(['signature', 'pqSignature', 'fields']));
    }
    expect((await verifyInPage(records.trustRecord)).checks.map((c) => c.name)).toContain('executionChain');
    expect(problems).toEqual([]);
  });

  it('fails a changed record there', async () => {
    const record = records.trustRecord as { decision: { reason: string } };
    const changed = await verifyInPage({ ...record, decision: { ...record.decision, reason: 'something else' } });
    expect(changed.valid).toBe(false);
    expect(changed.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['signature', 'pqSignature']);
    const otherKeys = await page.evaluate((r) => window.ets.verifyRecord(r, { keys: [] }), records.refusal);
    expect(otherKeys.valid).toBe(false);
  });

  it("checks the server's transparency log there: its signed checkpoint, and a Trust Record's inclusion proof", async () => {
    const client = createClient({ baseUrl: server.url, apiKey: agent.raw });
    const record = records.trustRecord as { businessTransactionId: string };
    // The record with its proof in a checkpoint that holds it (signed for it when needed).
    const served = (await client.GET('/trust-records/{id}/proof', { params: { path: { id: record.businessTransactionId } } })).data as unknown as { trustRecord: unknown; transparency: { treeSize: number; checkpoint: string } };
    // The same from the public routes: the latest checkpoint and the proof in its tree.
    const note = await (await fetch(`${server.url}/log/checkpoint`)).text();
    const size = Number(note.split('\n')[1]);
    const leaf = await page.evaluate((r) => window.ets.logLeafOf(r), served.trustRecord);
    expect(leaf).toBe(new Sha256Hasher().contentHash(served.trustRecord as object));
    const fromRoutes = (await (await fetch(`${server.url}/log/proof/inclusion?leaf=${leaf}&size=${size}`)).json()) as object;
    const result = await page.evaluate(
      ([r, proof, routeProof, checkpoint, k]) => {
        const leaf = window.ets.logLeafOf(r);
        return {
          checkpoint: window.ets.verifyLogCheckpoint(checkpoint, k as never),
          served: window.ets.verifyLogInclusion(leaf, proof, k as never),
          record: window.ets.verifyRecord({ trustRecord: r, transparency: proof }, k as never).checks.find((c) => c.name === 'inclusion'),
          routes: window.ets.verifyLogInclusion(leaf, { ...(routeProof as object), checkpoint }, k as never),
          changed: window.ets.verifyLogInclusion(leaf, { ...(proof as object), hashes: [] }, k as never),
        };
      },
      [served.trustRecord, served.transparency, fromRoutes, note, jwks] as const,
    ).catch((e: unknown) => ({ error: String(e) }));
    expect(result).not.toHaveProperty('error');
    const r = result as { checkpoint: { ok: boolean; errors: string[]; checkpoint?: { origin: string; treeSize: number } }; served: { ok: boolean; errors: string[] }; record?: { ok: boolean }; routes: { ok: boolean; errors: string[] }; changed: { ok: boolean } };
    expect(r.checkpoint).toMatchObject({ ok: true, errors: [], checkpoint: { treeSize: size } });
    expect(r.served).toMatchObject({ ok: true, errors: [] });
    expect(r.record).toMatchObject({ ok: true });
    expect(r.routes).toMatchObject({ ok: true, errors: [] });
    expect(r.changed.ok).toBe(false);
    expect(served.transparency.treeSize).toBeLessThanOrEqual(size);
    expect(problems).toEqual([]);
  });

  it('signs a step-up envelope and an approval in the page that verify with the approver\'s registered key', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    const registered = publicKey.export({ type: 'spki', format: 'pem' }) as string;
    const { envelope, approval, derived } = await page.evaluate(async (key) => {
      const envelope = await window.ets.signStepUp({ key, changeId: 'chg-1', action: 'reject', reason: 'No', callerId: 'bob' });
      const approval = await window.ets.signApproval({ key, approverId: 'bob', businessTransactionId: 'tx-1', action: 'sandbox:echo', scope: { field: 'value', value: 12_000 }, signals: { amount: 12_000 } });
      return { envelope, approval, derived: window.ets.ed25519PublicKeyPem(key) };
    }, pem);
    expect(derived).toBe(registered);
    expect(new Ed25519StepUpVerifier().verify(registered, envelope.payload, envelope.signature)).toBe(true);
    expect(envelope.payload).toMatchObject({ pendingPolicyChangeId: 'chg-1', action: 'reject', reason: 'No', callerId: 'bob' });
    expect(nodeVerify(null, Buffer.from(canonicalize(approval.payload)), createPublicKey(registered), Buffer.from(approval.signature, 'base64'))).toBe(true);
    expect(problems).toEqual([]);
  });
});
