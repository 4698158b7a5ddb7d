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
    page.on('request', (r) => {
      if (!r.url().startsWith(origin) && !r.url().startsWith('data:')) problems.push(`request to another host: ${r.url()}`);
    });
    page.on('requestfailed', (r) => problems.push(`failed: ${r.url()} ${r.failure()?.errorText}`));
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

  it('/reference renders every operation with its fields, navigates by tag and deep link, and stays on this host', async () => {
    const { page, problems } = await open('/reference');
    await page.waitForSelector('.opblock', { timeout: 30_000 });
    const documented = Object.values(OPENAPI.paths).reduce((n, item) => n + HTTP_METHODS.filter((m) => item[m]).length, 0);
    expect(await page.locator('.opblock').count()).toBe(documented);
    await expectNotBlank(page, 'reference');

    // Open POST /execute: its request body schema and its responses are shown with their fields.
    const execute = page.locator('#operations-Execution-execute');
    await execute.locator('.opblock-summary').click();
    await execute.locator('.responses-wrapper').waitFor();
    const text = await execute.innerText();
    for (const s of ['Request body', 'businessTransactionId', '502', '429', 'Retry-After']) expect(text).toContain(s);
    await execute.locator('.model-box-control, button:has-text("Schema")').first().click();
    expect(await execute.innerText()).toMatch(/authorization|metadata/);
    await expectNotBlank(page, 'reference-execute');

    // The filter narrows the list to matching tags.
    await page.fill('.operation-filter-input', 'Policies');
    await page.locator('.opblock-tag-section').nth(1).waitFor({ state: 'detached' });
    expect(await page.locator('.opblock-tag-section').innerText()).toContain('Policies');
    expect(problems).toEqual([]);
    await page.close();

    // Navigation: a deep link opens the operation it names.
    const linked = await open('/reference#/Verification/verifyTrustRecord');
    await linked.page.locator('#operations-Verification-verifyTrustRecord .opblock-body').waitFor({ timeout: 15_000 });
    expect(await linked.page.locator('#operations-Verification-verifyTrustRecord').innerText()).toContain('executionChain');
    expect(linked.problems).toEqual([]);
    await linked.page.close();
  });

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
