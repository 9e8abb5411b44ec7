/**
 * An endpoint's page in a real browser against a real jobgate process: an OPERATOR edits its own
 * endpoint (a refused value said at its field, changing nothing), pauses, resumes and archives it
 * after a confirmation; another key's endpoint shows it no lever; the counts follow a new job live.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
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
let operatorKey: string;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  ensureConsoleBuilt();
  t = await createTestDb();
  world = await startConsoleWorld(t.url);
  browser = await launchChromium();
  operatorKey = (await t.service.bootstrapKey('default', 'OPERATOR', 'endpoint page e2e operator')).key;
}, 180_000);
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await world?.stop();
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

/** No serious or critical axe violation, in light and dark, at 1400 and 390 px wide; screenshots of each in /tmp. */
async function accessibleEverywhere(page: Page, screen: string) {
  for (const width of [1400, 390]) {
    await page.setViewportSize({ width, height: 900 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
    for (const colorScheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme });
      const bad = await seriousViolations(page, `${screen} ${width} ${colorScheme}`);
      expect(bad).toEqual([]);
      await page.screenshot({ path: `/tmp/${screen}-${width}-${colorScheme}.png`, fullPage: true });
    }
  }
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 1280, height: 900 });
}

const settings = async (name: string) => {
  const e = await t.service.endpoint(t.actor, { name });
  return { maxAttempts: e.maxAttempts, timeoutMs: e.timeoutMs, description: e.description };
};

describe("an endpoint's page", { timeout: 180_000 }, () => {
  it('lets an operator edit its own endpoint, says a refused value at its field, pauses, resumes and archives it', async () => {
    const operator = await t.service.authenticate(operatorKey);
    const mine = await t.service.registerEndpoint(operator, {
      name: 'page.mine',
      kind: 'HTTP',
      url: 'http://127.0.0.1:9/mine',
      maxAttempts: 3,
    });
    const page = await signedIn(operatorKey, 'endpoint-page-mine');
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Endpoints', exact: true }).click();
    // The name leads to the page; the executions have a link of their own beside it.
    const row = page.getByTestId('endpoints').getByRole('row').filter({ hasText: 'page.mine' });
    expect(await row.getByRole('link', { name: 'Executions of page.mine', exact: true }).getAttribute('href')).toBe(
      `/console/executions?endpoint=${encodeURIComponent(mine.id)}`,
    );
    await row.getByRole('link', { name: 'page.mine', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: /page\.mine/ }).waitFor();
    expect(page.url()).toBe(`${world.origin}/console/endpoints/${encodeURIComponent(mine.id)}`);
    expect(await page.getByTestId('endpoint-state').textContent()).toMatch(/^Running/);
    // The fields of its kind only: an HTTP endpoint has no handler name.
    const form = page.getByTestId('endpoint-edit');
    expect(await form.getByLabel('Handler name').count()).toBe(0);
    expect(await form.getByLabel('URL', { exact: true }).inputValue()).toBe('http://127.0.0.1:9/mine');

    const maxAttempts = form.getByLabel('Max attempts, 1 to 100 (empty: the default)', { exact: true });
    const timeout = form.getByLabel('Timeout per attempt, in milliseconds (empty: the default)', { exact: true });
    const description = form.getByLabel('Description (empty: none)', { exact: true });
    await maxAttempts.fill('7');
    await timeout.fill('2500');
    await description.fill('Sends the invoices');
    await form.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => settings('page.mine')).toEqual({ maxAttempts: 7, timeoutMs: 2500, description: 'Sends the invoices' });
    await form.getByRole('status').getByText('Saved.').waitFor();
    await expect.poll(() => page.getByTestId('endpoint-max-attempts').textContent()).toBe('7');
    expect(await page.getByTestId('endpoint-timeout').textContent()).toBe('2.5 s');
    expect(await page.getByTestId('endpoint-description').textContent()).toBe('Sends the invoices');

    // Headers that are not JSON are said at their field before anything is sent.
    const headers = form.getByLabel('Extra headers (a JSON object of name to value; empty: none)', { exact: true });
    await headers.fill('{oops');
    await form.getByRole('button', { name: 'Save changes' }).click();
    expect(await form.getByTestId('headers-error').textContent()).toContain('is not JSON');
    expect(await headers.getAttribute('aria-invalid')).toBe('true');
    await headers.fill('');
    await form.getByTestId('headers-error').waitFor({ state: 'detached' });

    // Refused (over 100 attempts): said at the field, and the description sent with it is not changed either.
    await maxAttempts.fill('500');
    await description.fill('Not saved');
    await form.getByRole('button', { name: 'Save changes' }).click();
    const refusal = form.getByTestId('maxAttempts-error');
    await refusal.waitFor();
    const said = (await refusal.textContent())!;
    expect(said).toContain('Not changed');
    expect(said).toContain('VALIDATION_FAILED');
    expect(said).toContain('maxAttempts');
    expect(await maxAttempts.getAttribute('aria-invalid')).toBe('true');
    expect(await maxAttempts.evaluate((el) => document.getElementById(el.getAttribute('aria-describedby')!)?.textContent)).toBe(said);
    expect(await description.getAttribute('aria-invalid')).toBeNull();
    expect(await settings('page.mine')).toEqual({ maxAttempts: 7, timeoutMs: 2500, description: 'Sends the invoices' });
    await accessibleEverywhere(page, 'endpoint-page-refused');
    // Put back as saved, the refusal goes.
    await maxAttempts.fill('7');
    await description.fill('Sends the invoices');
    await refusal.waitFor({ state: 'detached' });

    // Paused after a confirmation, then resumed.
    await page.getByTestId('endpoint-state').getByRole('button', { name: 'Pause' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Pause endpoint' }).click();
    await page.getByTestId('endpoint-state').getByText('Paused since').waitFor();
    expect((await t.service.endpoint(t.actor, { name: 'page.mine' })).pausedAt).not.toBeNull();
    await page.getByTestId('endpoint-state').getByRole('button', { name: 'Resume' }).click();
    await page.getByTestId('endpoint-state').getByText('Running').waitFor();
    expect((await t.service.endpoint(t.actor, { name: 'page.mine' })).pausedAt).toBeNull();

    // Archived, after a confirmation that says what it does; then shown archived, with no lever.
    await page.getByRole('button', { name: 'Archive page.mine', exact: true }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.textContent()).toContain('It takes no new jobs from now on, and its name is free for another endpoint.');
    await dialog.getByRole('button', { name: 'Archive endpoint' }).click();
    await page
      .getByTestId('endpoint-state')
      .getByText(/^Archived/)
      .waitFor();
    expect((await t.service.endpoint(t.actor, { id: mine.id })).archivedAt).not.toBeNull();
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toContain('Archived');
    expect(await page.getByTestId('endpoint-edit').count()).toBe(0);
    expect(await page.locator('main button, main input, main select, main textarea').count()).toBe(0);
    await accessibleEverywhere(page, 'endpoint-page-archived');
  });

  it("shows an OPERATOR no lever on another key's endpoint, and its counts live as a job is created", async () => {
    const theirs = await t.service.registerEndpoint(t.actor, { name: 'page.theirs', kind: 'HANDLER', handlerName: 'page.nobody' });
    const page = await signedIn(operatorKey, 'endpoint-page-theirs');
    await page.goto(`${world.origin}/console/endpoints/${encodeURIComponent(theirs.id)}`);
    await page.getByRole('heading', { level: 1, name: /page\.theirs/ }).waitFor();
    expect(await page.getByTestId('endpoint-pending').textContent()).toBe('0');
    expect(await page.getByTestId('endpoint-edit').count()).toBe(0);
    for (const name of [/^Pause/, /^Resume/, /^Archive/, /^Save/])
      expect(await page.locator('main').getByRole('button', { name }).count()).toBe(0);
    expect(await page.locator('main input, main select, main textarea').count()).toBe(0);

    // No worker serves its handler: the job's execution waits, and the page counts it without a reload.
    await t.service.createJob(t.actor, { endpointName: 'page.theirs', kind: 'IMMEDIATE', name: 'page-count' });
    await expect.poll(() => page.getByTestId('endpoint-pending').textContent(), { timeout: 10_000 }).toBe('1');
    expect(await page.getByTestId('endpoint-running').textContent()).toBe('0');
    await accessibleEverywhere(page, 'endpoint-page-theirs');
  });
});
