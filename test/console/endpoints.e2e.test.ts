/**
 * The console's Endpoints screen in a real browser against a real jobgate process: an HTTP target
 * on loopback answers 429 with Retry-After, and the screen shows the hold its target asked for
 * (until when, how long from now, which answer), then an operator lifts it from there.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { CONSOLE_DOCUMENTS, DEFAULT_CONSOLE_DIR } from '../../src/server/console.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';
import {
  ensureConsoleBuilt,
  launchChromium,
  screenshot,
  startConsoleWorld,
  type ConsoleWorld,
  signIn,
  seriousViolations,
} from '../support/console.js';

let t: TestDb;
let world: ConsoleWorld;
let browser: Browser;
let target: HttpTarget;
let adminKey: string;
let operatorKey: string;
let viewerKey: string;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  ensureConsoleBuilt();
  t = await createTestDb();
  world = await startConsoleWorld(t.url);
  browser = await launchChromium();
  target = await startHttpTarget();
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'endpoints e2e admin')).key;
  operatorKey = (await t.service.bootstrapKey('default', 'OPERATOR', 'endpoints e2e operator')).key;
  viewerKey = (await t.service.bootstrapKey('default', 'VIEWER', 'endpoints e2e viewer')).key;
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
  await signIn(page, world.origin, key);
  return page;
}

/**
 * The workspace's cap as the GraphQL API answers it. The console's gateway runs only the documents
 * it knows by hash: this asks with the hash of the console's own Endpoints query.
 */
async function workspaceCap(): Promise<number | null> {
  const manifest = JSON.parse(readFileSync(join(DEFAULT_CONSOLE_DIR, CONSOLE_DOCUMENTS), 'utf8')) as Record<string, string>;
  const sha256Hash = Object.keys(manifest).find((hash) => manifest[hash]!.startsWith('query Endpoints '));
  const res = await fetch(`${world.origin}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${adminKey}` },
    body: JSON.stringify({ extensions: { persistedQuery: { version: 1, sha256Hash } }, variables: {} }),
  });
  const text = await res.text();
  const body = JSON.parse(text) as { data?: { workspace: { concurrencyLimit: number | null } } };
  if (!body.data) throw new Error(`${res.status} ${text}`);
  return body.data.workspace.concurrencyLimit;
}

/** The levers of an endpoint as the API answers them. */
async function levers(name: string) {
  const e = await t.service.endpoint(t.actor, { name });
  return { rateLimit: e.rateLimit, keyConcurrencyLimit: e.keyConcurrencyLimit, keyRateLimit: e.keyRateLimit };
}

async function accessible(page: Page, screen: string) {
  const bad = await seriousViolations(page, screen);
  expect(bad).toEqual([]);
}

describe('the Endpoints screen', { timeout: 180_000 }, () => {
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
      // An ADMIN reads the per-key limits in their fields (a VIEWER's reading is tested below).
      const keyLimits = row.getByTestId('endpoint-key-limits');
      expect(await keyLimits.getByLabel('Per-key concurrency limit of console.keyed (empty: none)', { exact: true }).inputValue()).toBe(
        '1',
      );
      expect(
        await Promise.all(
          ['starts per period (empty: none)', 'period in seconds (empty: 1)', 'burst (empty: the count)'].map((field) =>
            keyLimits.getByLabel(`Per-key rate limit of console.keyed: ${field}`, { exact: true }).inputValue(),
          ),
        ),
      ).toEqual(['100', '1', '100']);

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

  it("lets an operator set, change and remove an endpoint's rate limit and per-key limits, and an admin the workspace's cap; a refused value is shown at its field and changes nothing", async () => {
    // An OPERATOR changes what its key created: the endpoint is the operator's.
    const operator = await t.service.authenticate(operatorKey);
    await t.service.registerEndpoint(operator, { name: 'console.levers', kind: 'HANDLER', handlerName: 'console.ok' });
    await t.service.registerEndpoint(t.actor, { name: 'console.admins', kind: 'HANDLER', handlerName: 'console.ok' });
    const page = await signedIn(operatorKey, 'endpoint-levers');
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Endpoints', exact: true }).click();
    const row = page.getByTestId('endpoints').getByRole('row').filter({ hasText: 'console.levers' });
    const field = (label: string) => row.getByLabel(label, { exact: true });
    const save = (what: string) => row.getByRole('button', { name: `Save the ${what} of console.levers`, exact: true });
    await field('Rate limit of console.levers: starts per period (empty: unlimited)').waitFor();
    // The workspace's cap is an ADMIN's: an operator has no control for it.
    expect(await page.getByLabel(/Workspace cap/).count()).toBe(0);
    // Another key's endpoint: this OPERATOR may not change it (the API refuses), so it has no lever.
    const theirs = page.getByTestId('endpoints').getByRole('row').filter({ hasText: 'console.admins' });
    await theirs.waitFor();
    expect(await theirs.locator('input, button').count()).toBe(0);

    // The endpoint's rate limit: 5 starts per 2 s in bursts of 10.
    await field('Rate limit of console.levers: starts per period (empty: unlimited)').fill('5');
    await field('Rate limit of console.levers: period in seconds (empty: 1)').fill('2');
    await field('Rate limit of console.levers: burst (empty: the count)').fill('10');
    await save('rate limit').click();
    await expect.poll(async () => (await levers('console.levers')).rateLimit).toEqual({ count: 5, periodMs: 2000, burst: 10 });
    // Saved: the button goes, and the focus it had stays in the form, on its first field.
    await save('rate limit').waitFor({ state: 'detached' });
    expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).toBe(
      'Rate limit of console.levers: starts per period (empty: unlimited)',
    );

    // Per key: 2 in flight, and 3 starts a second (period and burst left to their defaults).
    await field('Per-key concurrency limit of console.levers (empty: none)').fill('2');
    await save('per-key concurrency limit').click();
    await expect.poll(async () => (await levers('console.levers')).keyConcurrencyLimit).toBe(2);
    await field('Per-key rate limit of console.levers: starts per period (empty: none)').fill('3');
    await save('per-key rate limit').click();
    await expect.poll(async () => (await levers('console.levers')).keyRateLimit).toEqual({ count: 3, periodMs: 1000, burst: 3 });
    await expect.poll(() => field('Per-key rate limit of console.levers: burst (empty: the count)').inputValue()).toBe('3');

    // Changed: 7 starts per 2 s, the burst kept.
    await field('Rate limit of console.levers: starts per period (empty: unlimited)').fill('7');
    await save('rate limit').click();
    await expect.poll(async () => (await levers('console.levers')).rateLimit).toEqual({ count: 7, periodMs: 2000, burst: 10 });

    // A value the API refuses (over 10,000 per key): said at the field, in words, and nothing changes.
    const keyLimit = field('Per-key concurrency limit of console.levers (empty: none)');
    await keyLimit.fill('20000');
    await save('per-key concurrency limit').click();
    const refusal = row.getByRole('alert');
    await refusal.waitFor();
    const said = (await refusal.textContent())!;
    expect(said).toContain('Not changed');
    expect(said).toContain('VALIDATION_FAILED');
    expect(said).toContain('keyConcurrencyLimit');
    // Said once: the list of issues is not repeated under a message that already says them.
    expect(said.split('keyConcurrencyLimit')).toHaveLength(2);
    expect(said).not.toMatch(/\bat \S+ \(/); // no stack
    expect(await keyLimit.getAttribute('aria-invalid')).toBe('true');
    expect(await keyLimit.evaluate((el) => document.getElementById(el.getAttribute('aria-describedby')!)?.textContent)).toBe(said);
    expect(await levers('console.levers')).toEqual({
      rateLimit: { count: 7, periodMs: 2000, burst: 10 },
      keyConcurrencyLimit: 2,
      keyRateLimit: { count: 3, periodMs: 1000, burst: 3 },
    });
    await accessible(page, 'endpoints (a refused limit)');
    for (const width of [1400, 390]) {
      await page.setViewportSize({ width, height: 900 });
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
      await screenshot(page, `endpoints-levers-refused-${width}`);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
    // Put back as saved, the refusal goes with the refused value.
    await keyLimit.fill('2');
    await refusal.waitFor({ state: 'detached' });
    expect(await keyLimit.getAttribute('aria-invalid')).toBeNull();
    await field('Per-key rate limit of console.levers: starts per period (empty: none)').fill('');
    await save('per-key rate limit').click();
    // Removed: an empty count clears the per-key rate limit.
    await expect.poll(async () => (await levers('console.levers')).keyRateLimit).toBeNull();
    await expect.poll(() => field('Per-key rate limit of console.levers: burst (empty: the count)').inputValue()).toBe('');

    // Typed and not saved, a value stays when the server's value under it changes (another operator's
    // change, read at the screen's next reload, which an execution of the endpoint brings), and so does
    // its Save button, the same element, which saves what was typed; a field with nothing typed follows.
    const rateCount = field('Rate limit of console.levers: starts per period (empty: unlimited)');
    await rateCount.fill('9');
    const typedSave = (await save('rate limit').elementHandle())!;
    const { id } = await t.service.endpoint(operator, { name: 'console.levers' });
    await t.service.updateEndpoint(operator, { id, rateLimit: { count: 8, periodMs: 1000 }, keyConcurrencyLimit: 6 });
    await t.service.createJob(operator, { endpointName: 'console.levers', kind: 'IMMEDIATE', name: 'levers-reload' });
    await expect.poll(() => field('Per-key concurrency limit of console.levers (empty: none)').inputValue(), { timeout: 10_000 }).toBe('6');
    expect(await rateCount.inputValue()).toBe('9');
    expect(await field('Rate limit of console.levers: period in seconds (empty: 1)').inputValue()).toBe('2');
    expect(await typedSave.evaluate((el) => el.isConnected)).toBe(true);
    await typedSave.click();
    await expect.poll(async () => (await levers('console.levers')).rateLimit).toEqual({ count: 9, periodMs: 2000, burst: 10 });
    await save('rate limit').waitFor({ state: 'detached' });
    // Back as the rest of the test reads them.
    await t.service.updateEndpoint(operator, { id, rateLimit: { count: 7, periodMs: 2000, burst: 10 }, keyConcurrencyLimit: 2 });

    // A VIEWER reads the levers, with no control.
    const viewer = await signedIn(viewerKey, 'endpoint-levers-viewer');
    await viewer.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Endpoints', exact: true }).click();
    const seen = viewer.getByTestId('endpoints').getByRole('row').filter({ hasText: 'console.levers' });
    await seen.waitFor();
    expect(await seen.getByTestId('endpoint-rate-limit').textContent()).toBe('7 per 2.0 s (burst 10)');
    expect(await seen.getByTestId('endpoint-key-limits').textContent()).toBe('2 in flight');
    expect(await seen.getByRole('spinbutton').count()).toBe(0);
    expect(await viewer.getByLabel(/Workspace cap/).count()).toBe(0);

    // An ADMIN sets the workspace's cap, is refused one over 100,000, and clears it.
    const admin = await signedIn(adminKey, 'endpoint-levers-admin');
    await admin.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Endpoints', exact: true }).click();
    const cap = admin.getByLabel('Workspace cap on attempts in flight (empty: no cap)', { exact: true });
    const saveCap = admin.getByRole('button', { name: 'Save the workspace cap', exact: true });
    try {
      await cap.fill('40');
      await saveCap.click();
      await expect.poll(workspaceCap).toBe(40);
      await admin.getByTestId('workspace-cap').getByText('at most 40 attempts').waitFor();
      await cap.fill('200000');
      await saveCap.click();
      const capRefusal = admin.locator('form.workspace-cap').getByRole('alert');
      await capRefusal.waitFor();
      expect(await capRefusal.textContent()).toContain('VALIDATION_FAILED');
      expect(await workspaceCap()).toBe(40);
      await cap.fill('');
      await saveCap.click();
      await expect.poll(workspaceCap).toBeNull();
      // The screen says so once its reload is in: asked again until then, not read once.
      await expect.poll(() => admin.getByTestId('workspace-cap').count(), { timeout: 10_000 }).toBe(0);
      await saveCap.waitFor({ state: 'detached' });
      await accessible(admin, 'endpoints (an admin, the levers)');
      for (const width of [1400, 390]) {
        await admin.setViewportSize({ width, height: 900 });
        expect(await admin.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
        await screenshot(admin, `endpoints-levers-admin-${width}`);
      }
    } finally {
      await t.service.updateWorkspace(t.actor, { concurrencyLimit: null });
    }
  });
});
