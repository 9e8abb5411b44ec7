/**
 * The console's Endpoints screen in a real browser against a real jobgate process: an HTTP target
 * on loopback answers 429 with Retry-After, and the screen shows the hold its target asked for
 * (until when, how long from now, which answer), then an operator lifts it from there.
 */
import { AxeBuilder } from '@axe-core/playwright';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';
import { ensureConsoleBuilt, launchChromium, screenshot, startConsoleWorld, type ConsoleWorld } from '../support/console.js';

let t: TestDb;
let world: ConsoleWorld;
let browser: Browser;
let target: HttpTarget;
let adminKey: string;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  ensureConsoleBuilt();
  t = await createTestDb();
  world = await startConsoleWorld(t.url);
  browser = await launchChromium();
  target = await startHttpTarget();
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'endpoints e2e admin')).key;
}, 180_000);
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await world?.stop();
  await target?.close();
  await t?.close();
});

/** A fresh tab in Paris and en-GB, signed in with `key`; screenshots itself if the test fails. */
async function signedIn(key: string, name: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Europe/Paris', locale: 'en-GB' });
  contexts.push(context);
  const page = await context.newPage();
  onTestFailed(async () => {
    await screenshot(page, `${name}-failed`).catch(() => {});
  });
  await page.goto(`${world.origin}/console/`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('role').waitFor();
  return page;
}

async function accessible(page: Page, screen: string) {
  const result = await new AxeBuilder({ page }).analyze();
  const bad = result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${screen}: ${v.id} (${v.impact}) ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  expect(bad).toEqual([]);
}

describe('the Endpoints screen', { timeout: 90_000 }, () => {
  it('shows the hold a target asked for with 429 and Retry-After, until when and how long from now, and lifts it', async () => {
    target.route('/slow-down', (_req, res, n) => {
      if (n === 1) res.writeHead(429, { 'retry-after': '120' }).end('slow down');
      else res.writeHead(200).end('ok');
    });
    await t.service.registerEndpoint(t.actor, { name: 'console.held', kind: 'HTTP', url: `${target.url}/slow-down`, maxAttempts: 3 });
    await t.service.registerEndpoint(t.actor, { name: 'console.free', kind: 'HANDLER', handlerName: 'console.ok' });
    const page = await signedIn(adminKey, 'endpoint-hold');
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Endpoints', exact: true }).click();
    const row = page.getByTestId('endpoints').getByRole('row').filter({ hasText: 'console.held' });
    await row.getByText('Running').waitFor();
    expect(await row.getByTestId('endpoint-hold').count()).toBe(0);

    const { job } = await t.service.createJob(t.actor, { endpointName: 'console.held', kind: 'IMMEDIATE', name: 'held-one' });
    // The first attempt got its 429: the endpoint is held, and the screen says so without a reload.
    await expect
      .poll(async () => (await t.service.executions(t.actor, { jobId: job.id })).edges[0]!.node.attemptCount, { timeout: 20_000 })
      .toBe(1);
    const hold = row.getByTestId('endpoint-hold');
    await hold.waitFor({ timeout: 10_000 });
    const until = (await hold.locator('time').getAttribute('datetime'))!;
    const left = Date.parse(until) - Date.now();
    expect(left).toBeGreaterThan(100_000);
    expect(left).toBeLessThanOrEqual(120_000);
    expect(await hold.textContent()).toMatch(/^Held by its target until .+ \(in (1|2) min; 429 Retry-After\)$/);
    expect(await hold.locator('time').getAttribute('title')).toMatch(/ UTC$/);
    // Held, not "Running"; the other endpoint is not held.
    expect(await row.getByTestId('endpoint-state').textContent()).not.toContain('Running');
    const free = page.getByTestId('endpoints').getByRole('row').filter({ hasText: 'console.free' });
    expect(await free.getByTestId('endpoint-state').textContent()).toBe('Running');
    expect(target.hitsOf('/slow-down')).toHaveLength(1);
    // Readable in light and dark; the wide table scrolls in its box, never the page.
    for (const colorScheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme });
      await accessible(page, `endpoints (held, ${colorScheme})`);
      await screenshot(page, `endpoints-held-${colorScheme}`);
    }
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1280);

    // An operator lifts it from the screen, after saying so: a new job of the endpoint runs at once
    // (the held execution keeps its own retry time, which the same Retry-After set).
    await row.getByRole('button', { name: 'Lift the hold on console.held' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Lift the hold' }).click();
    await row.getByText('Running').waitFor();
    expect(await row.getByTestId('endpoint-hold').count()).toBe(0);
    expect((await t.service.endpoint(t.actor, { name: 'console.held' })).pausedAt).toBeNull();
    const after = (await t.service.createJob(t.actor, { endpointName: 'console.held', kind: 'IMMEDIATE', name: 'after-lift' })).job;
    await expect
      .poll(async () => (await t.service.executions(t.actor, { jobId: after.id })).edges[0]!.node.status, { timeout: 20_000 })
      .toBe('SUCCEEDED');
    expect(target.hitsOf('/slow-down')).toHaveLength(2);
  });

  it("shows an endpoint's per-key limits and its busiest keys live, and the workspace's cap", async () => {
    // Requests to /hold wait until released: each key's one attempt in flight stays there.
    const held: { end(body: string): void }[] = [];
    let releasing = false;
    target.route('/hold', (_req, res) => {
      if (releasing) res.writeHead(200).end('ok');
      else held.push(res.writeHead(200));
    });
    await t.service.updateWorkspace(t.actor, { concurrencyLimit: 50 });
    try {
      await t.service.registerEndpoint(t.actor, {
        name: 'console.keyed',
        kind: 'HTTP',
        url: `${target.url}/hold`,
        keyConcurrencyLimit: 1,
        keyRateLimit: { count: 100, periodMs: 1000 },
      });
      const page = await signedIn(adminKey, 'endpoint-keys');
      await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Endpoints', exact: true }).click();
      const row = page.getByTestId('endpoints').getByRole('row').filter({ hasText: 'console.keyed' });
      await row.waitFor();
      expect(await row.getByTestId('endpoint-busiest-keys').textContent()).toBe('—');
      expect(await page.getByTestId('workspace-cap').textContent()).toBe(
        'The workspace runs at most 50 attempts at once across its endpoints.',
      );
      expect(await row.getByTestId('endpoint-key-limits').textContent()).toBe('1 in flight100 per 1.0 s (burst 100)');

      await t.service.createJobs(
        t.actor,
        ['acme', 'acme', 'acme', 'globex', 'globex'].map((concurrencyKey) => ({
          endpointName: 'console.keyed',
          kind: 'IMMEDIATE' as const,
          concurrencyKey,
        })),
      );
      // Without a reload: one attempt of each key in flight (its per-key limit), the rest waiting.
      const keys = row.getByTestId('endpoint-busiest-keys').getByRole('listitem');
      await expect
        .poll(() => keys.allTextContents(), { timeout: 20_000 })
        .toEqual(['acme: 1 running, 2 waiting', 'globex: 1 running, 1 waiting']);
      await accessible(page, 'endpoints (keys)');
      await screenshot(page, 'endpoints-keys');
    } finally {
      releasing = true;
      for (const res of held.splice(0)) res.end('ok');
      await t.service.updateWorkspace(t.actor, { concurrencyLimit: null });
    }
  });
});
