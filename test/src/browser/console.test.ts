import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash, createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import { canonicalize } from '@ets/adapters-crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import request from 'supertest';
import { apiKeysEnv, bearer, businessTransaction, envelope, EXEC_POLICY, makeKey, REPO_ROOT, STORAGE_TARGETS, startTestServer, type TestKey, type TestServer } from '@ets/test-support';
import { launchChromium } from '../support/browser.js';

/**
 * The approvers' console in headless Chromium (Debian's), on both stores: sign-in (the key never
 * reaches the browser's storage), a policy change reviewed with its diff and impact and approved
 * with a key file, a refusal shown plainly, one's own proposal not decidable, a record verified in
 * the browser and a tampered copy shown red, the log's health and an alarm for a rewritten log,
 * sign-out; axe-core finds no serious or critical violation on any page; and the whole approval
 * done with the keyboard alone. Nothing is loaded from another host, and no CSP violation occurs.
 * Screenshots go to test-artifacts/console/ (git-ignored), kept as artifacts of the run.
 */
const ARTIFACTS = path.join(REPO_ROOT, 'test-artifacts', 'console');
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['sandbox:echo'], tenants: ['t1'] });
const FLOW_TIMEOUT = 240_000;

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

  const post = (p: string, key: TestKey, body: unknown) => request(server.url).post(p).set('authorization', bearer(key)).send(body as object);
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
    await page.evaluate(AXE);
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
    [server, browser] = await Promise.all([startTestServer(factory, { ...apiKeysEnv(alice, bob, agent), SVC_SANDBOX: 'true' }), launchChromium()]);
    await published({ ...EXEC_POLICY });
    for (const signals of [{ amount: 120, country: 'FR' }, { amount: 50, country: 'KP' }, { amount: 9000, country: 'DE' }]) {
      const res = await post('/execute', agent, businessTransaction({ signals }));
      expect([200, 403]).toContain(res.status);
    }
  }, FLOW_TIMEOUT);
  afterAll(async () => {
    await browser?.close();
    await server?.destroy();
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
      // The impact preview: the replay when the service has it, or a plain word that it has not.
      const impact = page.getByTestId('impact');
      await impact.locator('[data-testid="impact-summary"], .notice').first().waitFor();
      expect(await impact.innerText()).toMatch(/Replayed the last \d+ decisions? of exec-test|Impact preview unavailable/);
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
    'shows an impact preview as the service answers it, its examples opening their records, and a held MCP call with what its approval binds to',
    async () => {
      // The routes of the impact preview and of held transactions are answered here as CONTRACT shapes them
      // (their own suites test the service's side): the page's rendering and signing are what is tested.
      const changeId = await proposal({ ...EXEC_POLICY, name: 'impact-test', policyVersion: '1.0.0' }, '1.0.0', 'impact');
      const example = (await request(server.url).get('/transactions?callerId=agent-7&outcome=REFUSED').set('authorization', bearer(bob))).body.items[0].businessTransactionId as string;
      const page = await newPage();
      await page.route(`**/policies/pending-changes/${changeId}/impact?limit=1000`, (route) =>
        route.fulfill({
          json: {
            policyName: 'impact-test', fromVersion: null, toVersion: '1.0.0', replayed: 40, changed: 3,
            byTransition: { 'approve->reject': 2, 'reject->approve': 1 }, byRule: { sanctioned: 2, ok: 1 },
            examples: [{ businessTransactionId: example, before: { action: 'reject', matchedRuleId: 'sanctioned' }, after: { action: 'approve', matchedRuleId: 'ok' } }],
          },
        }),
      );
      const held = {
        businessTransactionId: '0b6a3c1e-5f2d-4c8a-9e7b-1d2f3a4b5c6d', callerId: 'agent-7', action: 'mcp-files:delete-file',
        parameters: { path: '/srv/reports/q3.pdf' }, signals: { path: '/srv/reports/q3.pdf' }, signalsHash: 'e'.repeat(64), businessTransactionHash: 'f'.repeat(64),
        policy: { name: 'exec-test', version: '1.0.0', contentHash: 'a'.repeat(64) },
        decision: { action: 'approve', matchedRuleId: 'large', reason: 'Large transfer needs a second look' },
        status: 'PENDING', createdAt: new Date().toISOString(), expiresAt: new Date(Date.now() + 90_000).toISOString(),
      };
      await page.route('**/overrides?status=PENDING*', (route) => route.fulfill({ json: { items: [held], page: 1, pageSize: 100, total: 1 } }));
      await page.route(`**/overrides/${held.businessTransactionId}`, (route) => route.fulfill({ json: held }));
      await signIn(page, bob);

      await page.locator(`tr[data-id="${changeId}"]`).getByRole('link').click();
      await page.getByTestId('impact-summary').waitFor();
      expect(await page.getByTestId('impact-summary').innerText()).toMatch(/Replayed the last 40 decisions of impact-test .*: 3 would change/);
      expect(await page.getByTestId('impact').innerText()).toMatch(/approve → reject\s+2/);
      await expectAccessible(page, 'impact');
      await page.getByTestId('impact').getByRole('link', { name: example }).click();
      await page.getByTestId('verdict').waitFor({ timeout: 30_000 });

      // The held MCP call: in the inbox with its deadline, then its arguments and the approval's binding.
      await page.getByRole('link', { name: 'Inbox' }).click();
      const row = page.locator(`tr[data-kind="held"][data-id="${held.businessTransactionId}"]`);
      await row.waitFor();
      expect(await row.innerText()).toMatch(/MCP call files → delete-file[\s\S]*in (1|2) min/);
      await row.getByRole('link').click();
      await page.getByText('tool delete-file of server files').waitFor();
      await expectAccessible(page, 'held-mcp-call');
      await page.getByLabel('Approve').check();
      await page.getByLabel(/Your step-up key file/).setInputFiles({ name: 'bob.pem', mimeType: 'application/x-pem-file', buffer: Buffer.from(bob.stepUpPrivateKeyPem!) });
      await page.getByRole('button', { name: 'Prepare what to sign' }).click();
      const payload = JSON.parse(await page.getByTestId('payload').innerText()) as Record<string, unknown>;
      // exec-test names no approvalScope: the approval scopes the transaction itself; its signalsHash is the signals'.
      expect(payload).toMatchObject({ approverId: 'bob', businessTransactionId: held.businessTransactionId, action: 'mcp-files:delete-file', scope: { field: 'resourceId', resourceId: held.businessTransactionId } });
      expect(payload.signalsHash).toBe(createHash('sha256').update(canonicalize(held.signals)).digest('hex'));
      let sent: { payload: unknown; signature: string } | undefined;
      await page.route(`**/overrides/${held.businessTransactionId}/approve`, async (route) => {
        sent = route.request().postDataJSON() as typeof sent;
        await route.fulfill({ json: { businessTransactionId: held.businessTransactionId, executionStatus: 'EXECUTED' } });
      });
      await page.getByRole('button', { name: 'Sign and approve' }).click();
      await page.getByTestId('decided').waitFor();
      expect(sent!.payload).toEqual(payload);
      expect(verify(null, Buffer.from(canonicalize(payload)), createPublicKey(bob.stepUpPrivateKeyPem!), Buffer.from(sent!.signature, 'base64'))).toBe(true);
      expect(problems).toEqual([]);
      await page.context().close();
    },
    FLOW_TIMEOUT,
  );

  it(
    "shows one's own proposal, but not as one's own to decide",
    async () => {
      const own = await proposal({ ...EXEC_POLICY, name: 'own-test', policyVersion: '1.0.0' }, '1.0.0', 'mine');
      const page = await newPage();
      await signIn(page, alice);
      const row = page.locator(`tr[data-id="${own}"]`);
      await row.waitFor();
      expect(await row.innerText()).toContain('yours');
      // The inbox refreshes by itself: a change proposed now appears without a reload.
      const later = await proposal({ ...EXEC_POLICY, name: 'later-test', policyVersion: '1.0.0' }, '1.0.0', 'later');
      await page.locator(`tr[data-id="${later}"]`).waitFor({ timeout: 45_000 });
      await row.getByRole('link').click();
      await page.getByTestId('own').waitFor();
      expect(await page.getByRole('button', { name: 'Prepare what to sign' }).count()).toBe(0);
      await expectAccessible(page, 'own-proposal');
      expect(problems).toEqual([]);
      await page.context().close();
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
      await page.getByText('2 transactions found').waitFor();
      const links = page.locator('table.records tbody a');
      expect(await page.locator('table.records tbody tr').count()).toBe(2);
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
    'works with the keyboard alone: sign in, open an item from the inbox, approve it with a pasted key',
    async () => {
      const changeId = await proposal({ ...EXEC_POLICY, name: 'keyboard-test', policyVersion: '1.0.0' }, '1.0.0', 'keyboard');
      const page = await newPage();
      await page.goto(`${server.url}/console`);
      const focused = () => page.evaluate(() => {
        const e = document.activeElement as HTMLElement | null;
        return e ? `${e.tagName.toLowerCase()}|${e.getAttribute('name') ?? e.id}|${e.textContent?.trim().slice(0, 60)}` : '';
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
      await page.locator(`tr[data-id="${changeId}"]`).waitFor();
      await tabTo(/^a\|\|Policy keyboard-test/);
      await page.keyboard.press('Enter');
      await page.getByRole('button', { name: 'Prepare what to sign' }).waitFor();
      await tabTo(/^input\|action/);
      await page.keyboard.press('Space');
      expect(await page.getByLabel('Approve').isChecked()).toBe(true);
      await tabTo(/^textarea\|keyPem/);
      await page.keyboard.insertText(bob.stepUpPrivateKeyPem!);
      await tabTo(/^button\|\|Prepare what to sign/);
      await page.keyboard.press('Enter');
      await page.getByTestId('payload').waitFor();
      await tabTo(/^button\|\|Sign and approve/);
      await page.keyboard.press('Enter');
      await page.getByTestId('decided').waitFor();
      // The item is read again after the decision: its status follows.
      await page.locator('[data-testid="status"]', { hasText: 'APPROVED' }).waitFor();
      await shot(page, 'keyboard-approved');
      expect(problems).toEqual([]);
      await page.context().close();
    },
    FLOW_TIMEOUT,
  );
});

// Written so a reviewer can see what the run kept.
afterAll(() => writeFileSync(path.join(ARTIFACTS, 'README.txt'), 'Screenshots of the console browser test (test/src/browser/console.test.ts), one per page and store. Not committed.\n'));
