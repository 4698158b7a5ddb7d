import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash, generateKeyPairSync, randomUUID } from 'node:crypto';
import { canonicalize } from '@ets/adapters-crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import request from 'supertest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { apiKeysEnv, bearer, businessTransaction, envelope, EXEC_POLICY, heldApproval, makeKey, REPO_ROOT, STORAGE_TARGETS, startTestServer, type TestKey, type TestServer } from '@ets/test-support';
import { launchChromium } from '../support/browser.js';
import { agent as mcpAgent, registerMcpServer, scripted, stdioServersFile, toolNames } from '../mcp/support.js';

/**
 * The approvers' console in headless Chromium (Debian's), on both stores, against the service's
 * real routes (nothing mocked): sign-in (the key never reaches the browser's storage), a policy
 * change reviewed with its diff and the impact preview the service computes over decisions made
 * here (exact counts, an example opening its record), approved with a key file; an agent's MCP
 * call (the SDK's own client) held until bob approves it here, after which the agent's call
 * returns the tool's result; a held REST transaction rejected with a reason (its Refusal Record);
 * an MCP-server registration approved; one's own proposals and held transactions shown but not
 * decidable; deep links opened before sign-in; a record verified in the browser and a tampered
 * copy shown red; the log's health and an alarm for a rewritten log; sign-out. axe-core finds no
 * serious or critical violation on any page state, and a held transaction is approved with the key
 * file using the keyboard alone. Nothing is loaded from another host, and no CSP violation occurs.
 * Screenshots go to test-artifacts/console/ (git-ignored), kept as artifacts of the run.
 */
const ARTIFACTS = path.join(REPO_ROOT, 'test-artifacts', 'console');
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], tenants: ['t1'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['sandbox:echo', 'mcp-scripted:echo', 'mcp-notes:echo'], tenants: ['t1'] });
const FLOW_TIMEOUT = 240_000;

/** The impact preview's policy: exec-test's rules under a name of its own, so its decisions are only the test's. */
const IMPACT_POLICY = { ...EXEC_POLICY, name: 'impact-test' };
/** The MCP servers' policy: a text that publishes something waits for a human. */
const MCP_POLICY = {
  name: 'mcp-echo',
  policyVersion: '1.0.0',
  description: 'console tests: MCP calls',
  signalsSchema: { text: { type: 'string' as const } },
  rules: [
    { id: 'needs-a-human', when: "has(signals.text) && signals.text.startsWith('publish')", action: 'approve' as const, requires_override: true, reason: 'Publishing needs a second look' },
    { id: 'ok', when: 'true', action: 'approve' as const, reason: 'Harmless' },
  ],
  default: { action: 'reject' as const, reason: 'No rule matched' },
};
type ToolResult = { content: { type: string; text?: string }[]; isError?: boolean; _meta?: Record<string, Record<string, unknown>> };

type AxeResult = { violations: { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[] };
declare const axe: { run(context: unknown, options: unknown): Promise<AxeResult> };
// The page's globals, as the functions given to page.evaluate use them (the tests' own lib has no DOM).
/* eslint-disable @typescript-eslint/no-explicit-any */
declare const document: any;
declare const localStorage: any;
declare const sessionStorage: any;
declare const indexedDB: any;
declare const getComputedStyle: any;
type HTMLElement = { dataset: Record<string, string | undefined>; tagName: string; id: string; textContent: string | null; getAttribute(name: string): string | null };

describe.each(STORAGE_TARGETS)('approvers\' console in Chromium on $name', (factory) => {
  let server: TestServer;
  let browser: Browser;
  const problems: string[] = [];
  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${factory.name}-${name}.png`), fullPage: true });

  let stdio: { file: string; dir: string };
  /** The agent: the MCP SDK's own client over Streamable HTTP, with agent-7's bearer key. */
  let mcp: Client;
  /** The transactions impact-test 1.0.0 decided, oldest first: approved, refused, approved, approved. */
  const impactDecisions: string[] = [];

  const post = (p: string, key: TestKey, body: unknown) => request(server.url).post(p).set('authorization', bearer(key)).send(body as object);
  const get = (p: string) => request(server.url).get(p).set('authorization', bearer(bob));
  /** A transaction POST /execute answers held (202 PENDING_OVERRIDE): exec-test sends amounts above 10000 to a human. */
  async function heldRest(caller: TestKey, signals: Record<string, unknown>): Promise<string> {
    const tx = businessTransaction({ signals, authority: { principalId: caller.record.callerId, authorityId: 'auth-1' } });
    const res = await post('/execute', caller, tx);
    expect([res.status, res.body.executionStatus ?? res.body.status]).toEqual([202, 'PENDING_OVERRIDE']);
    return tx.businessTransactionId as string;
  }
  /** The pending held transaction that `match` picks, once the service lists it. */
  async function heldWhere(match: (h: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
    for (const until = Date.now() + 30_000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
      const found = ((await get('/overrides?status=PENDING&pageSize=100')).body.items as Record<string, unknown>[]).find(match);
      if (found) return found;
    }
    throw new Error('no such held transaction');
  }
  /** A first version of a policy, proposed by alice and approved by bob through the API. */
  async function published(doc: Record<string, unknown>): Promise<void> {
    const proposed = await post(`/policies/${doc.name}/${doc.policyVersion}/pending-changes`, alice, { proposedContent: doc, reason: 'first version' });
    expect(proposed.status).toBe(201);
    expect((await post(`/policies/pending-changes/${proposed.body.id}/approve`, bob, envelope(bob, proposed.body.id, 'approve'))).status).toBe(200);
  }
  async function proposal(doc: Record<string, unknown>, base: string, reason: string): Promise<string> {
    const res = await post(`/policies/${doc.name}/${base}/pending-changes`, alice, { proposedContent: doc, reason });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  /** A context of its own (cookies, storage), every page watched for problems. */
  async function newPage(context?: BrowserContext): Promise<Page> {
    const ctx = context ?? (await browser.newContext({ viewport: { width: 1280, height: 900 } }));
    const page = await ctx.newPage();
    const origin = new URL(server.url).origin;
    page.on('console', (m) => m.type() === 'error' && !/Failed to load resource: the server responded with a status of 4\d\d/.test(m.text()) && problems.push(`console: ${m.text()}`));
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('request', (r) => !r.url().startsWith(origin) && !r.url().startsWith('data:') && problems.push(`request to another host: ${r.url()}`));
    return page;
  }

  async function expectAccessible(page: Page, name: string): Promise<void> {
    // Once per document: the console is one page, so axe stays loaded across its views.
    if (!(await page.evaluate(() => typeof axe !== 'undefined'))) await page.evaluate(AXE);
    const result = await page.evaluate(() => axe.run(document, { resultTypes: ['violations'] }));
    const serious = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.help} at ${v.nodes.map((n) => JSON.stringify(n.target)).join(', ')}`);
    expect(`${name}: ${serious.join('\n')}`).toBe(`${name}: `);
    await shot(page, name);
  }

  async function signIn(page: Page, key: TestKey): Promise<void> {
    await page.goto(`${server.url}/console`);
    await page.getByLabel('API key').fill(key.raw);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByTestId('caller').innerText()).resolves.toBe(key.record.callerId);
  }

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    stdio = stdioServersFile((dir) => ({ scripted: scripted(path.join(dir, 'scripted.log')) }));
    [server, browser] = await Promise.all([
      startTestServer(factory, { ...apiKeysEnv(alice, bob, agent), SVC_SANDBOX: 'true', SVC_MCP_STDIO_SERVERS: stdio.file, SVC_MCP_HOLD_SECONDS: '120' }),
      launchChromium(),
    ]);
    for (const doc of [EXEC_POLICY, IMPACT_POLICY, MCP_POLICY]) await published({ ...doc });
    for (const signals of [{ amount: 120, country: 'FR' }, { amount: 50, country: 'KP' }, { amount: 9000, country: 'DE' }]) {
      const res = await post('/execute', agent, businessTransaction({ signals }));
      expect([200, 403]).toContain(res.status);
    }
    for (const signals of [{ amount: 120, country: 'FR' }, { amount: 50, country: 'KP' }, { amount: 9000, country: 'DE' }, { amount: 7000, country: 'US' }]) {
      const tx = businessTransaction({ signals, policy: { name: 'impact-test', version: '1.0.0' } });
      expect((await post('/execute', agent, tx)).status).toBe(signals.country === 'KP' ? 403 : 200);
      impactDecisions.push(tx.businessTransactionId as string);
    }
    await registerMcpServer(server.url, alice, bob, { name: 'scripted', stdio: 'scripted', policyName: 'mcp-echo', tools: ['echo'] });
    mcp = await mcpAgent(server.url, agent);
    // A cold start: the first listing of a stdio server may end before its process is up.
    await toolNames(mcp, (names) => names.includes('scripted__echo'));
  }, FLOW_TIMEOUT);
  afterAll(async () => {
    await mcp?.close();
    await browser?.close();
    await server?.destroy();
    if (stdio) rmSync(stdio.dir, { recursive: true, force: true });
  });

  it('serves the page under a strict CSP with every asset from this service', async () => {
    const page = await request(server.url).get('/console');
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    );
    expect(page.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page.text).not.toMatch(/<style|style=/);
    for (const asset of page.text.match(/\/console\/assets\/[^"]+/g) ?? []) expect((await request(server.url).get(asset)).status).toBe(200);
  });

  it(
    'signs in (the key kept nowhere in the browser), reviews a policy change with its diff and impact, approves it with a key file, shows a refusal plainly, and signs out',
    async () => {
      const changed = { ...EXEC_POLICY, policyVersion: '1.1.0', rules: EXEC_POLICY.rules.map((r) => (r.id === 'large' ? { ...r, when: 'has(signals.amount) && signals.amount > 5000' } : r)) };
      const changeId = await proposal(changed, '1.0.0', 'Second look from 5000');
      const page = await newPage();
      await page.goto(`${server.url}/console`);
      await expectAccessible(page, 'sign-in');
      await signIn(page, bob);

      // The key is nowhere in the browser: not in any storage, not in a cookie a script can read.
      const stored = await page.evaluate(async () => ({
        local: JSON.stringify({ ...localStorage }),
        session: JSON.stringify({ ...sessionStorage }),
        cookie: document.cookie,
        idb: JSON.stringify(await indexedDB.databases()),
      }));
      expect(JSON.stringify(stored)).not.toContain(bob.raw);
      expect(stored.cookie).not.toContain('ets_session');
      const cookies = await page.context().cookies();
      expect(cookies.find((c) => c.name === 'ets_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
      expect(JSON.stringify(cookies)).not.toContain(bob.raw);

      // The inbox lists the change (and the shipped policy waiting since start), newest first.
      const row = page.locator(`tr[data-kind="policy"][data-id="${changeId}"]`);
      await row.waitFor();
      expect(await row.innerText()).toContain('Policy exec-test 1.0.0 → 1.1.0');
      const kinds = await page.locator('table.inbox tbody tr').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.id));
      expect(kinds[0]).toBe(changeId);
      await expectAccessible(page, 'inbox');

      await row.getByRole('link').click();
      await page.getByRole('heading', { name: 'What changes' }).waitFor();
      const diff = page.locator('table.diff');
      await diff.locator('tr[data-change="changed"]').first().waitFor();
      expect(await diff.locator('tr[data-change="changed"] td.del').allInnerTexts()).toEqual(expect.arrayContaining([expect.stringContaining('"policyVersion": "1.0.0"'), expect.stringContaining('10000')]));
      expect(await diff.locator('tr[data-change="changed"] td.ins').allInnerTexts()).toEqual(expect.arrayContaining([expect.stringContaining('"policyVersion": "1.1.0"'), expect.stringContaining('5000')]));
      await page.getByTestId('impact-summary').waitFor();
      // exec-test decided three (beforeAll); from 5000, the one of 9000 would wait for a human.
      expect(await page.getByTestId('impact-summary').innerText()).toBe('Replayed the last 3 decisions of exec-test (1.0.0) with 1.1.0: 1 would change.');
      await expectAccessible(page, 'policy-change');

      // A key file that is not bob's registered step-up key: refused, and said so plainly.
      const stranger = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
      await page.getByLabel('Approve').check();
      await page.getByLabel(/Your step-up key file/).setInputFiles({ name: 'wrong.pem', mimeType: 'application/x-pem-file', buffer: Buffer.from(stranger) });
      await page.getByRole('button', { name: 'Prepare what to sign' }).click();
      await page.getByRole('button', { name: 'Sign and approve' }).click();
      await expect(page.getByTestId('refusal').innerText()).resolves.toMatch(/signature does not verify with the step-up key registered for you/);
      await shot(page, 'refused');

      // Bob's own key file: the exact payload is shown before it is signed, then it is approved.
      await page.getByLabel('Approve').check();
      await page.getByLabel(/Your step-up key file/).setInputFiles({ name: 'bob.pem', mimeType: 'application/x-pem-file', buffer: Buffer.from(bob.stepUpPrivateKeyPem!) });
      await page.getByRole('button', { name: 'Prepare what to sign' }).click();
      const payload = JSON.parse(await page.getByTestId('payload').innerText()) as Record<string, unknown>;
      expect(payload).toEqual({ pendingPolicyChangeId: changeId, action: 'approve', callerId: 'bob', expiresAt: expect.any(String), nonce: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
      expect(Date.parse(payload.expiresAt as string) - Date.now()).toBeLessThanOrEqual(15 * 60_000);
      await expectAccessible(page, 'review-payload');
      await page.getByRole('button', { name: 'Sign and approve' }).click();
      await page.getByTestId('decided').waitFor();
      // The item is read again after the decision: its status follows.
      await page.locator('[data-testid="status"]', { hasText: 'APPROVED' }).waitFor();
      const inEffect = await request(server.url).get('/policies/in-effect').set('authorization', bearer(alice));
      expect(inEffect.body).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'exec-test', version: '1.1.0', approvedBy: 'bob' })]));
      // Nothing of the key file stayed in the page or its storage.
      expect(await page.evaluate(() => document.body.innerHTML)).not.toContain('PRIVATE KEY');
      expect(await page.evaluate(() => JSON.stringify({ ...localStorage, ...sessionStorage }))).not.toContain('PRIVATE KEY');
      await shot(page, 'approved');

      // Sign-out: the form again, and the cookie the browser held no longer works anywhere.
      const cookie = (await page.context().cookies()).find((c) => c.name === 'ets_session')!;
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByLabel('API key').waitFor();
      expect((await request(server.url).get('/callers/me').set('cookie', `ets_session=${cookie.value}`)).status).toBe(401);
      expect(problems).toEqual([]);
      await page.context().close();
    },
    FLOW_TIMEOUT,
  );

  it(
    'shows the impact preview the service computes over known decisions, with exact counts, its example opening a record that verifies',
    async () => {
      // impact-test 1.0.0 decided four transactions (beforeAll); 1.1.0 sends amounts above 5000 to a human.
      const changed = { ...IMPACT_POLICY, policyVersion: '1.1.0', rules: IMPACT_POLICY.rules.map((r) => (r.id === 'large' ? { ...r, when: 'has(signals.amount) && signals.amount > 5000' } : r)) };
      const changeId = await proposal(changed, '1.0.0', 'Second look from 5000');
      const page = await newPage();
      await signIn(page, bob);
      await page.locator(`tr[data-id="${changeId}"]`).getByRole('link').click();
      const impact = page.getByTestId('impact');
      await page.getByTestId('impact-summary').waitFor();
      expect(await page.getByTestId('impact-summary').innerText()).toBe('Replayed the last 4 decisions of impact-test (1.0.0) with 1.1.0: 2 would change.');
      const rows = async (caption: string) =>
        impact.locator('table', { has: page.locator('caption', { hasText: caption }) }).locator('tbody tr').evaluateAll((trs) => trs.map((tr) => (tr as HTMLElement).textContent!.trim()));
      expect(await rows('How they would change')).toEqual(['approve → needs a human2']);
      expect((await rows('Rule deciding under 1.1.0')).sort()).toEqual(['large2', 'ok1', 'sanctioned1']);
      // The examples: the two that change, newest first.
      const examples = await impact.locator('table.examples tbody tr').evaluateAll((trs) => trs.map((tr) => (tr as HTMLElement).textContent!.trim()));
      expect(examples).toEqual([`${impactDecisions[3]}approve (ok)needs a human (large)`, `${impactDecisions[2]}approve (ok)needs a human (large)`]);
      await expectAccessible(page, 'impact');
      await impact.getByRole('link', { name: impactDecisions[2] }).click();
      await page.waitForURL(new RegExp(`#/records/${impactDecisions[2]}$`));
      await page.locator('[data-testid="verdict"][data-valid="true"]').waitFor({ timeout: 30_000 });
      await expectAccessible(page, 'impact-example-record');
      expect(problems).toEqual([]);
      await page.context().close();
    },
    FLOW_TIMEOUT,
  );

  it(
    "holds an agent's MCP call until bob approves it in the console with his key file; the agent's call then returns the tool's result, and its record verifies",
    async () => {
      const text = `publish the quarterly report ${randomUUID()}`;
      let settled = false;
      const answer = mcp.callTool({ name: 'scripted__echo', arguments: { text } }, undefined, { timeout: FLOW_TIMEOUT }).finally(() => (settled = true)) as Promise<ToolResult>;
      const held = await heldWhere((h) => (h.parameters as { text?: string }).text === text);
      const id = held.businessTransactionId as string;
      expect(held).toMatchObject({ callerId: 'agent-7', action: 'mcp-scripted:echo', status: 'PENDING' });

      const page = await newPage();
      await signIn(page, bob);
      const row = page.locator(`tr[data-kind="held"][data-id="${id}"]`);
      await row.waitFor();
      expect(await row.innerText()).toMatch(/MCP call scripted → echo[\s\S]*needs-a-human: Publishing needs a second look[\s\S]*agent-7[\s\S]*in (1|2) min/);
      await expectAccessible(page, 'inbox-held-mcp-call');
      await row.getByRole('link').click();
      await page.getByText('tool echo of server scripted').waitFor();
      const facts = await page.locator('dl.facts').innerText();
      expect(facts).toMatch(/Decision\s+approve \(needs a human\)/);
      expect(facts).toMatch(/Rule\s+needs-a-human/);
      expect(facts).toContain(createHash('sha256').update(canonicalize({ text })).digest('hex'));
      expect(JSON.parse(await page.getByLabel('Parameters').innerText())).toEqual({ text });
      expect(JSON.parse(await page.getByLabel('Signals').innerText())).toEqual({ text });
      expect(await page.locator('.status-line').innerText()).toMatch(/PENDING asked by agent-7 .* decided by expiry in (1|2) min/);
      await expectAccessible(page, 'held-mcp-call');
      expect(settled).toBe(false);

      await page.getByLabel('Approve').check();
      await page.getByLabel(/Your step-up key file/).setInputFiles({ name: 'bob.pem', mimeType: 'application/x-pem-file', buffer: Buffer.from(bob.stepUpPrivateKeyPem!) });
      await page.getByRole('button', { name: 'Prepare what to sign' }).click();
      const payload = JSON.parse(await page.getByTestId('payload').innerText()) as Record<string, unknown>;
      // mcp-echo names no approvalScope: the approval scopes the transaction itself; its signalsHash is the signals'.
      expect(payload).toMatchObject({ approverId: 'bob', businessTransactionId: id, action: 'mcp-scripted:echo', scope: { field: 'resourceId', resourceId: id } });
      expect(payload.signalsHash).toBe(held.signalsHash);
      await expectAccessible(page, 'held-mcp-call-payload');
      await page.getByRole('button', { name: 'Sign and approve' }).click();
      await page.getByTestId('decided').waitFor();
      await page.locator('[data-testid="status"]', { hasText: 'APPROVED' }).waitFor();

      // The agent's call, waiting all along, returns what the tool answered, with its Trust Record.
      const result = await answer;
      expect(result.isError).toBeUndefined();
      expect(result.content).toEqual([{ type: 'text', text: `echo: ${text}` }]);
      expect(result._meta!['ets/trustRecord']).toMatchObject({ businessTransactionId: id });
      const record = (await get(`/trust-records/${id}`)).body as { override: { approverId: string }; executions: unknown[] };
      expect(record.override.approverId).toBe('bob');
      expect(record.executions).toHaveLength(1);
      await shot(page, 'held-mcp-call-approved');
      await page.getByRole('link', { name: 'Its record' }).click();
      await page.locator('[data-testid="verdict"][data-valid="true"]').waitFor({ timeout: 30_000 });
      expect(await page.locator('dl.facts').innerText()).toMatch(/Outcome\s+EXECUTED/);
      await expectAccessible(page, 'held-mcp-call-record');
      expect(problems).toEqual([]);
      await page.context().close();
    },
    FLOW_TIMEOUT,
  );

  it(
    'rejects a held REST transaction in the console with a reason: it is refused with a signed Refusal Record, which verifies in the browser',
    async () => {
      const id = await heldRest(agent, { amount: 25_000, country: 'FR' });
      const page = await newPage();
      await signIn(page, bob);
      const row = page.locator(`tr[data-kind="held"][data-id="${id}"]`);
      await row.waitFor();
      expect(await row.innerText()).toMatch(/Held sandbox:echo[\s\S]*large: Large transfer needs a second look/);
      await row.getByRole('link').click();
      await page.getByRole('heading', { name: 'Parameters' }).waitFor();
      await page.getByLabel('Reject', { exact: true }).check();
      await page.getByLabel(/Reason/).fill('Not before the audit');
      await page.getByLabel(/Your step-up key file/).setInputFiles({ name: 'bob.pem', mimeType: 'application/x-pem-file', buffer: Buffer.from(bob.stepUpPrivateKeyPem!) });
      await page.getByRole('button', { name: 'Prepare what to sign' }).click();
      const payload = JSON.parse(await page.getByTestId('payload').innerText()) as Record<string, unknown>;
      expect(payload).toEqual({ businessTransactionId: id, action: 'reject', callerId: 'bob', reason: 'Not before the audit', expiresAt: expect.any(String), nonce: expect.any(String) });
      await expectAccessible(page, 'held-rest-reject-payload');
      await page.getByRole('button', { name: 'Sign and reject' }).click();
      await page.getByTestId('decided').waitFor();
      await page.locator('[data-testid="status"]', { hasText: 'REJECTED' }).waitFor();
      await expectAccessible(page, 'held-rest-rejected');

      const refusal = await get(`/refusal/${id}`);
      expect(refusal.status).toBe(200);
      expect(refusal.body).toMatchObject({ recordType: 'refusal-record', matchedRuleId: 'override-rejected' });
      expect(JSON.stringify(refusal.body)).toContain('Not before the audit');
      expect((await get(`/overrides/${id}`)).body).toMatchObject({ status: 'REJECTED', decidedBy: 'bob' });
      // The transaction's own page: the Refusal Record, verified here.
      await page.locator('dl.facts').getByRole('link', { name: id }).click();
      await page.locator('[data-testid="verdict"][data-valid="true"]').waitFor({ timeout: 30_000 });
      expect(await page.locator('dl.facts').innerText()).toMatch(/Record\s+Refusal Record/);
      await expectAccessible(page, 'held-rest-refusal-record');
      expect(problems).toEqual([]);
      await page.context().close();
    },
    FLOW_TIMEOUT,
  );

  it(
    'approves an MCP-server registration in the console; the agent then sees its tools',
    async () => {
      const proposed = await post('/mcp-servers/changes', alice, { kind: 'register', name: 'notes', stdio: 'scripted', policyName: 'mcp-echo', tools: ['echo'], reason: 'Notes for the agents' });
      expect(proposed.status).toBe(201);
      const changeId = proposed.body.id as string;
      const page = await newPage();
      await signIn(page, bob);
      const row = page.locator(`tr[data-kind="mcp-server"][data-id="${changeId}"]`);
      await row.waitFor();
      expect(await row.innerText()).toMatch(/MCP server register notes[\s\S]*scripted — “Notes for the agents”[\s\S]*alice/);
      await row.getByRole('link').click();
      await page.getByRole('button', { name: 'Prepare what to sign' }).waitFor();
      const facts = await page.locator('dl.facts').innerText();
      expect(facts).toMatch(/stdio\s+scripted/);
      expect(facts).toMatch(/policyName\s+mcp-echo/);
      expect(facts).toMatch(/tools\s+\["echo"\]/);
      await expectAccessible(page, 'mcp-server-change');
      await page.getByLabel('Approve').check();
      await page.getByLabel(/Your step-up key file/).setInputFiles({ name: 'bob.pem', mimeType: 'application/x-pem-file', buffer: Buffer.from(bob.stepUpPrivateKeyPem!) });
      await page.getByRole('button', { name: 'Prepare what to sign' }).click();
      expect(JSON.parse(await page.getByTestId('payload').innerText())).toEqual({ pendingPolicyChangeId: changeId, action: 'approve', callerId: 'bob', expiresAt: expect.any(String), nonce: expect.any(String) });
      await page.getByRole('button', { name: 'Sign and approve' }).click();
      await page.getByTestId('decided').waitFor();
      await page.locator('[data-testid="status"]', { hasText: 'APPROVED' }).waitFor();
      await expectAccessible(page, 'mcp-server-approved');
      expect((await get('/mcp-servers')).body.items).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'notes', proposer: 'alice', approvedBy: 'bob' })]));
      expect(await toolNames(mcp, (names) => names.includes('notes__echo'))).toContain('notes__echo');
      expect(problems).toEqual([]);
      await page.context().close();
    },
    FLOW_TIMEOUT,
  );

  it(
    "shows a person's own policy proposal, MCP-server proposal and held transaction as theirs, with nothing to decide (and the service refuses them too); the inbox and an open item follow what happens meanwhile",
    async () => {
      const id = await heldRest(alice, { amount: 30_000, country: 'FR' });
      const server2 = await post('/mcp-servers/changes', alice, { kind: 'register', name: 'own-notes', stdio: 'scripted', policyName: 'mcp-echo', tools: ['echo'], reason: 'mine' });
      expect(server2.status).toBe(201);
      const policy = await proposal({ ...EXEC_POLICY, name: 'own-test', policyVersion: '1.0.0' }, '1.0.0', 'mine');
      const page = await newPage();
      await signIn(page, alice);
      for (const [kind, itemId] of [['policy', policy], ['mcp-server', server2.body.id as string], ['held', id]] as const) {
        await page.goto(`${server.url}/console#/inbox`);
        const row = page.locator(`tr[data-kind="${kind}"][data-id="${itemId}"]`);
        await row.waitFor();
        expect(await row.innerText()).toContain('yours');
        await row.getByRole('link').click();
        await page.getByTestId('own').waitFor();
        expect(await page.getByRole('button', { name: 'Prepare what to sign' }).count()).toBe(0);
        expect(await page.locator('[data-testid="status"]').innerText()).toMatch(/PENDING/);
        await expectAccessible(page, `own-${kind}`);
      }
      // Not a matter of the page only: the service refuses alice's own decisions.
      const held = (await get(`/overrides/${id}`)).body as Record<string, unknown>;
      expect((await post(`/overrides/${id}/approve`, alice, heldApproval(alice, { businessTransactionId: id, intent: { action: held.action }, signals: held.signals }))).status).toBe(403);
      expect((await post(`/mcp-servers/changes/${server2.body.id}/approve`, alice, envelope(alice, server2.body.id, 'approve'))).status).toBe(403);
      expect((await post(`/policies/pending-changes/${policy}/approve`, alice, envelope(alice, policy, 'approve'))).status).toBe(403);

      // Meanwhile, left open: the inbox in another tab shows a change proposed now, and the held
      // transaction's page shows bob's rejection, both without a reload.
      const inbox = await newPage(page.context());
      await inbox.goto(`${server.url}/console#/inbox`);
      await inbox.locator(`tr[data-id="${policy}"]`).waitFor();
      const later = await proposal({ ...EXEC_POLICY, name: 'later-test', policyVersion: '1.0.0' }, '1.0.0', 'later');
      expect((await post(`/overrides/${id}/reject`, bob, envelope(bob, id, 'reject', { pendingPolicyChangeId: undefined, businessTransactionId: id, reason: 'Not yours to run' }))).status).toBe(200);
      await Promise.all([
        inbox.locator(`tr[data-id="${later}"]`).waitFor({ timeout: 45_000 }),
        page.locator('[data-testid="status"]', { hasText: 'REJECTED' }).waitFor({ timeout: 45_000 }),
      ]);
      expect(await page.locator('dl.facts').innerText()).toMatch(/Decided by\s+bob — “Not yours to run”/);
      expect(await page.getByTestId('own').count()).toBe(0);
      await expectAccessible(page, 'own-held-rejected-meanwhile');
      expect(problems).toEqual([]);
      await page.context().close();
    },
    FLOW_TIMEOUT,
  );

  it(
    'opens a deep link to an item or a record directly: after sign-in the page shows what the link names',
    async () => {
      const id = await heldRest(agent, { amount: 40_000, country: 'FR' });
      const page = await newPage();
      await page.goto(`${server.url}/console#/item/held/${id}`);
      await page.getByLabel('API key').fill(bob.raw);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1, name: 'Held sandbox:echo' }).waitFor();
      expect(await page.locator('dl.facts').innerText()).toContain(id);
      await page.getByRole('button', { name: 'Prepare what to sign' }).waitFor();
      await expectAccessible(page, 'deep-link-held');
      // A link to a record, opened in a new tab of the same browser (the session is the cookie's).
      const tab = await newPage(page.context());
      await tab.goto(`${server.url}/console#/records/${impactDecisions[0]}`);
      await tab.locator('[data-testid="verdict"][data-valid="true"]').waitFor({ timeout: 30_000 });
      await expectAccessible(tab, 'deep-link-record');
      // The held transaction is found among the records by its outcome, and its record page leads to the decision.
      await tab.goto(`${server.url}/console#/records?outcome=HELD`);
      await tab.locator('table.records tbody').getByRole('link', { name: id }).click();
      await tab.getByTestId('held-notice').waitFor();
      await expectAccessible(tab, 'held-record');
      await tab.getByTestId('held-notice').getByRole('link', { name: 'Open it to decide' }).click();
      await tab.getByRole('button', { name: 'Prepare what to sign' }).waitFor();
      // And one opened before sign-in in a fresh browser.
      const fresh = await newPage();
      await fresh.goto(`${server.url}/console#/records/${impactDecisions[1]}`);
      await fresh.getByLabel('API key').fill(bob.raw);
      await fresh.getByRole('button', { name: 'Sign in' }).click();
      await fresh.locator('[data-testid="verdict"][data-valid="true"]').waitFor({ timeout: 30_000 });
      expect(await fresh.locator('dl.facts').innerText()).toMatch(/Record\s+Refusal Record/);
      expect(problems).toEqual([]);
      await page.context().close();
      await fresh.context().close();
    },
    FLOW_TIMEOUT,
  );

  it(
    'finds a record by caller and outcome, verifies it in the browser with every check shown, and shows a tampered copy red',
    async () => {
      const page = await newPage();
      await signIn(page, bob);
      await page.getByRole('link', { name: 'Records' }).click();
      await page.getByLabel('Caller').fill('agent-7');
      await page.getByLabel('Outcome').selectOption('EXECUTED');
      await page.getByRole('button', { name: 'Find' }).click();
      await page.waitForURL(/#\/records\?callerId=agent-7&outcome=EXECUTED/);
      // The filtered list replaces the unfiltered one the page opened with.
      const executed = (await get('/transactions?callerId=agent-7&outcome=EXECUTED')).body.total as number;
      expect(executed).toBeGreaterThan(1);
      await page.getByText(`${executed} transactions found`).waitFor();
      const links = page.locator('table.records tbody a');
      expect(await page.locator('table.records tbody tr').count()).toBe(Math.min(executed, 25));
      await expectAccessible(page, 'records');
      await links.first().click();

      const verdict = page.getByTestId('verdict');
      await verdict.waitFor({ timeout: 30_000 });
      expect(await verdict.getAttribute('data-valid')).toBe('true');
      const checks = await verdict.locator('li.check').evaluateAll((lis) => lis.map((li) => [(li as HTMLElement).dataset.check, (li as HTMLElement).dataset.ok]));
      expect(checks).toEqual(expect.arrayContaining([['signature', 'true'], ['fields', 'true'], ['executionChain', 'true'], ['transparency log inclusion', 'true']]));
      await expectAccessible(page, 'record-verified');

      // A copy with one word changed: red, and its signature check fails.
      const id = decodeURIComponent(page.url().split('/').pop()!);
      const served = await request(server.url).get(`/transactions/${id}`).set('authorization', bearer(bob));
      const tampered = { ...served.body.trustRecord, decision: { ...served.body.trustRecord.decision, reason: 'Approved by someone else' } };
      await page.getByLabel('Signed record (JSON)').fill(JSON.stringify(tampered));
      await page.getByRole('button', { name: 'Verify this copy' }).click();
      const copy = page.getByTestId('copy-verdict');
      await copy.waitFor({ timeout: 30_000 });
      expect(await copy.getAttribute('data-valid')).toBe('false');
      expect(await copy.locator('li.check[data-check="signature"]').getAttribute('data-ok')).toBe('false');
      expect(await copy.locator('.verdict-line').innerText()).toMatch(/^NOT VALID/);
      expect(await copy.evaluate((e) => getComputedStyle(e).borderColor)).toBe('rgb(164, 22, 26)');
      await expectAccessible(page, 'record-tampered');
      // The exact copy verifies.
      await page.getByLabel('Signed record (JSON)').fill(JSON.stringify(served.body.trustRecord));
      await page.getByRole('button', { name: 'Verify this copy' }).click();
      await page.locator('[data-testid="copy-verdict"][data-valid="true"]').waitFor({ timeout: 30_000 });
      expect(problems).toEqual([]);
      await page.context().close();
    },
    FLOW_TIMEOUT,
  );

  it(
    "checks the log's checkpoint against the one this browser saw last, and raises an alarm for a rewritten log",
    async () => {
      const page = await newPage();
      await signIn(page, bob);
      await page.getByRole('link', { name: 'Log health' }).click();
      await page.getByTestId('log-first').waitFor({ timeout: 30_000 });
      await expectAccessible(page, 'log-first-visit');
      const seen = JSON.parse((await page.evaluate(() => localStorage.getItem('ets-console.last-checkpoint')))!) as { note: string; treeSize: number };
      expect(seen.treeSize).toBeGreaterThan(0);

      // The log grows; the next visit proves the new checkpoint extends the one kept.
      expect((await post('/execute', agent, businessTransaction())).status).toBe(200);
      await new Promise((r) => setTimeout(r, 1500));
      await page.reload();
      await page.getByTestId('log-ok').waitFor({ timeout: 30_000 });
      const grown = Number(await page.getByTestId('tree-size').innerText());
      expect(grown).toBeGreaterThan(seen.treeSize);

      // A browser that saw another history of the same log: the alarm, and the checkpoint kept is not replaced.
      const lines = seen.note.split('\n');
      lines[2] = Buffer.alloc(32, 7).toString('base64');
      const forged = JSON.stringify({ ...seen, note: lines.join('\n') });
      await page.evaluate((v) => localStorage.setItem('ets-console.last-checkpoint', v), forged);
      await page.reload();
      await page.getByTestId('log-alarm').waitFor({ timeout: 30_000 });
      expect(await page.evaluate(() => localStorage.getItem('ets-console.last-checkpoint'))).toBe(forged);
      await expectAccessible(page, 'log-alarm');
      expect(problems).toEqual([]);
      await page.context().close();
    },
    FLOW_TIMEOUT,
  );

  it(
    'works with the keyboard alone: sign in, open a held transaction from the inbox, approve it with the key file; it is executed',
    async () => {
      const id = await heldRest(agent, { amount: 15_000, country: 'FR' });
      const page = await newPage();
      await page.goto(`${server.url}/console`);
      const focused = () => page.evaluate(() => {
        const e = document.activeElement as HTMLElement | null;
        return e ? `${e.tagName.toLowerCase()}|${e.getAttribute('name') ?? e.id}|${e.textContent?.trim().slice(0, 60)}|${e.getAttribute('href') ?? ''}` : '';
      });
      /** Tab until the focused element matches, at most `max` presses. */
      const tabTo = async (pattern: RegExp, max = 60) => {
        for (let i = 0; i < max; i++) {
          await page.keyboard.press('Tab');
          if (pattern.test(await focused())) return;
        }
        throw new Error(`${pattern} never got the focus; last: ${await focused()}`);
      };
      await tabTo(/^input\|apiKey/);
      await page.keyboard.type(bob.raw);
      await page.keyboard.press('Enter');
      await page.getByTestId('caller').waitFor();
      await page.locator(`tr[data-id="${id}"]`).waitFor();
      await tabTo(new RegExp(`^a\\|\\|Held sandbox:echo\\|#/item/held/${id}$`));
      await page.keyboard.press('Enter');
      await page.getByRole('button', { name: 'Prepare what to sign' }).waitFor();
      await tabTo(/^input\|action/);
      await page.keyboard.press('Space');
      expect(await page.getByLabel('Approve').isChecked()).toBe(true);
      // The key file's input, opened with the space bar: the file chooser answers with bob's file.
      await tabTo(/^input\|keyFile/);
      // Under load a first press may come before the browser intercepts file choosers (Playwright
      // asks for that when the listener is added): the press is made again, still on the input.
      const chooser = await (async () => {
        for (let attempt = 0; attempt < 3; attempt++) {
          expect(await focused()).toMatch(/^input\|keyFile/);
          const opened = page.waitForEvent('filechooser', { timeout: 10_000 }).catch(() => undefined);
          await page.keyboard.press('Space');
          const found = await opened;
          if (found) return found;
        }
        throw new Error('the key file input opened no file chooser on Space');
      })();
      await chooser.setFiles({ name: 'bob.pem', mimeType: 'application/x-pem-file', buffer: Buffer.from(bob.stepUpPrivateKeyPem!) });
      await tabTo(/^button\|\|Prepare what to sign/);
      await page.keyboard.press('Enter');
      await page.getByTestId('payload').waitFor();
      await tabTo(/^button\|\|Sign and approve/);
      await page.keyboard.press('Enter');
      await page.getByTestId('decided').waitFor();
      // The item is read again after the decision: its status follows.
      await page.locator('[data-testid="status"]', { hasText: 'APPROVED' }).waitFor();
      expect(await page.locator('.notice.ok').innerText()).toContain('The transaction: EXECUTED.');
      expect((await get(`/transactions/${id}`)).body).toMatchObject({ outcome: 'EXECUTED' });
      await shot(page, 'keyboard-approved');
      expect(problems).toEqual([]);
      await page.context().close();
    },
    FLOW_TIMEOUT,
  );
});

// Written so a reviewer can see what the run kept.
afterAll(() => writeFileSync(path.join(ARTIFACTS, 'README.txt'), 'Screenshots of the console browser test (test/src/browser/console.test.ts), one per page and store. Not committed.\n'));
