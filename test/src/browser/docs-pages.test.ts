import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { HTTP_METHODS, OPENAPI } from '@ets/adapters-http';
import { REPO_ROOT, STORAGE_TARGETS, startTestServer, type TestServer } from '@ets/test-support';
import { distinctColours, launchChromium } from '../support/browser.js';

/**
 * The documentation pages as a person sees them, in headless Chromium: they render, navigate, log
 * no console error, and load nothing from another host (the service must work air-gapped).
 * Rendering does not depend on the store, so one (the embedded one) is enough.
 */
/** Every setting the server reads, taken from its settings module, so that a new one must be documented too. */
const SETTINGS = [
  ...new Set(readFileSync(path.join(REPO_ROOT, 'apps/server/src/config/settings.ts'), 'utf8').match(/\b(?:SVC|RATE_LIMIT)_[A-Z0-9_]+\b/g) ?? []),
].filter((name) => !name.endsWith('_'));

describe('documentation pages in Chromium', () => {
  let server: TestServer;
  let browser: Browser;
  // ETS_TEST_SCREENSHOTS=DIR keeps the screenshots there, to look at them.
  const keep = process.env.ETS_TEST_SCREENSHOTS;
  const shots = keep ?? mkdtempSync(path.join(os.tmpdir(), 'ets-screens-'));

  beforeAll(async () => {
    [server, browser] = await Promise.all([startTestServer(STORAGE_TARGETS[0]!), launchChromium()]);
  });
  afterAll(async () => {
    await browser?.close();
    await server?.destroy();
    if (!keep) rmSync(shots, { recursive: true, force: true });
  });

  /** A page that records console errors, failed requests and every request to another origin. */
  async function open(url: string): Promise<{ page: Page; problems: string[] }> {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const problems: string[] = [];
    const origin = new URL(server.url).origin;
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    // Loopback only: this server's origin, or data: URLs; nothing else is even asked for.
    page.on('request', (r) => {
      if (!r.url().startsWith(origin) && !r.url().startsWith('data:')) problems.push(`request to another host: ${r.url()}`);
    });
    page.on('requestfailed', (r) => problems.push(`failed: ${r.url()} ${r.failure()?.errorText}`));
    // Every CSP violation the page meets, also those a library would swallow without a console error.
    await page.addInitScript(
      "window.cspViolations = []; document.addEventListener('securitypolicyviolation', (e) => window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));",
    );
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`${r.status()}: ${r.url()}`);
    });
    await page.goto(`${server.url}${url}`, { waitUntil: 'networkidle' });
    return { page, problems };
  }

  async function expectNotBlank(page: Page, name: string): Promise<void> {
    const png = await page.screenshot({ fullPage: false });
    writeFileSync(path.join(shots, `${name}.png`), png);
    expect(distinctColours(png)).toBeGreaterThan(20);
  }

  it('/reference has a sidebar of every section, finds an operation by search, shows curl and @ets/client samples, and stays on this host', async () => {
    const { page, problems } = await open('/reference');
    // Sidebar: every section (tag) of the document, each opening onto its operations' summaries.
    const sidebar = page.locator('aside[aria-label^="Sidebar"]');
    await sidebar.waitFor({ timeout: 30_000 });
    for (const tag of OPENAPI.tags!) expect(`${tag.name}: ${await sidebar.getByText(tag.name, { exact: true }).count()}`).toBe(`${tag.name}: 1`);
    await sidebar.getByText('Execution', { exact: true }).click();
    const summaries = Object.values(OPENAPI.paths).flatMap((item) => HTTP_METHODS.map((m) => item[m]).filter((op) => op?.tags?.[0] === 'Execution').map((op) => op!.summary!));
    expect(summaries.length).toBeGreaterThan(5);
    for (const summary of summaries) await sidebar.getByText(summary, { exact: true }).waitFor();
    await expectNotBlank(page, 'reference');

    // Search finds an operation by a word of its summary, and shows its method and path.
    await page.getByRole('button', { name: /Search/ }).first().click();
    await page.keyboard.type('Reconcile');
    const results = page.locator('[role=dialog]');
    await results.getByText('Reconcile an intent').waitFor();
    expect(await results.innerText()).toContain('/execution-intents/{id}/resolve');
    await expectNotBlank(page, 'reference-search');
    await page.keyboard.press('Escape');

    // A deep link opens the operation, with its request sample in curl, and in @ets/client on request.
    await page.goto(`${server.url}/reference#tag/execution/POST/execute`, { waitUntil: 'networkidle' });
    const sample = page.locator('pre code, code').filter({ hasText: 'curl -X POST "$ETS_URL/execute"' });
    await sample.first().waitFor({ timeout: 15_000 });
    expect(await sample.first().innerText()).toContain('Authorization: Bearer $ETS_API_KEY');
    await page.locator('button:has-text("curl")').first().click();
    await page.getByRole('option', { name: '@ets/client' }).click();
    await page.locator('pre code, code').filter({ hasText: "client.POST('/execute'" }).first().waitFor({ timeout: 10_000 });
    await expectNotBlank(page, 'reference-execute');

    // A key typed into the page stays in the page: nothing in the browser's storage.
    await page.locator('input[placeholder="Token"]').first().fill('pk_local_typed-into-the-reference');
    expect(await page.evaluate<string>('JSON.stringify([{ ...localStorage }, { ...sessionStorage }])')).not.toContain('typed-into-the-reference');

    expect(await page.evaluate<string[]>('window.cspViolations')).toEqual([]);
    expect(problems).toEqual([]);
    await page.close();
  }, 180_000);

  it('/documentation has a table of contents whose links reach their sections, and covers what an operator needs', async () => {
    const { page, problems } = await open('/documentation');
    const toc = page.locator('nav.toc a');
    expect(await toc.count()).toBeGreaterThan(15);
    for (const href of await toc.evaluateAll((as) => as.map((a) => a.getAttribute('href')))) {
      expect(await page.locator(`[id="${href!.slice(1)}"]`).count()).toBe(1);
    }
    const target = await page.locator('nav.toc a', { hasText: 'Sandbox mode' }).getAttribute('href');
    await page.click(`nav.toc a[href="${target}"]`);
    expect(new URL(page.url()).hash).toBe(target);
    expect(await page.locator(target!).evaluate((e) => e.getBoundingClientRect().top)).toBeLessThan(100);
    await expectNotBlank(page, 'documentation');

    const text = await page.locator('main').innerText();
    expect(SETTINGS.length).toBeGreaterThan(25);
    for (const topic of ['First start', 'Sandbox mode', 'ets demo', 'chainHash', 'businessTransactionHash', 'pqSignature', ...SETTINGS]) {
      expect(`${topic}: ${text.includes(topic)}`).toBe(`${topic}: true`);
    }
    expect(problems).toEqual([]);
    await page.close();
  });

  it('the handbook form submits an address and lands on the handbook', async () => {
    const { page, problems } = await open('/handbook/download-leads');
    await page.fill('input[name=email]', 'not-an-address@');
    await page.evaluate("document.querySelector('form').setAttribute('novalidate', '')");
    await page.click('button[type=submit]');
    await page.waitForSelector('.error');
    problems.splice(0); // the 400 of the bad address is expected
    await page.fill('input[name=email]', 'reader@example.org');
    await Promise.all([page.waitForURL(`${server.url}/documentation`), page.click('button[type=submit]')]);
    expect(await page.locator('h1').first().innerText()).toContain('operator guide');
    expect(problems).toEqual([]);
    await page.close();
  });
});
