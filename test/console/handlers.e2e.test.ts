/**
 * The Handlers screen's run history in a real browser against a real jobgate process: a
 * recoverable handler's newest runs, each linking to its run screen, a link to all of them on the
 * Runs screen, and a new run appearing live without a reload.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
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
let page: Page;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  ensureConsoleBuilt();
  t = await createTestDb();
  world = await startConsoleWorld(t.url);
  browser = await launchChromium();
  const adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'handlers e2e admin')).key;
  // Seven ended runs of console.scan, a minute apart, the newest (processed 7) first.
  await t.query(
    `insert into runs (workspace_id, name, status, processed, total, started_at, finished_at, created_at)
     select $1, 'console.scan', case when g = 6 then 'FAILED' else 'COMPLETED' end, g, 20,
            now() - (10 - g) * interval '1 minute', now() - (10 - g) * interval '1 minute' + interval '5 seconds',
            now() - (10 - g) * interval '1 minute'
     from generate_series(1, 7) g`,
    [t.actor.workspaceId],
  );
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Europe/Paris', locale: 'en-GB' });
  contexts.push(context);
  page = await context.newPage();
  await signIn(page, world.origin, adminKey);
}, 180_000);
afterEach(async (context) => {
  if (context.task.result?.state === 'fail') await screenshot(page, `handlers-${context.task.name}-failed`).catch(() => {});
});
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await world?.stop();
  await t?.close();
});

describe("the Handlers screen's run history", { timeout: 90_000 }, () => {
  it("lists a recoverable handler's newest runs, links each to its screen and all of them to Runs, and shows a new one live", async () => {
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Handlers', exact: true }).click();
    const row = page.locator('tr[data-handler="console.scan"]');
    const recent = row.getByTestId('recent-runs').getByRole('listitem');
    await expect.poll(() => recent.count(), { timeout: 10_000 }).toBe(5);
    // Newest first: the FAILED run (the 6th) second.
    expect(await recent.nth(1).getByText('FAILED', { exact: true }).count()).toBe(1);
    expect(await recent.nth(0).textContent()).toContain('7 / 20 processed');
    // The other handlers keep no runs.
    expect(await page.locator('tr[data-handler="console.ok"] td').nth(5).textContent()).toBe('—');
    expect(await seriousViolations(page, 'handlers')).toEqual([]);
    await screenshot(page, 'handlers-recent-runs');

    // A run's link opens its screen.
    const failed = (await t.query(`select id from runs where name = 'console.scan' and processed = 6`)).rows[0].id as string;
    await recent.nth(1).getByRole('link').click();
    await page.getByRole('heading', { name: /console\.scan/ }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/console/runs/${failed}`);
    await page.goBack();

    // All of them, on the Runs screen, filtered by the handler's name.
    await row.getByRole('link', { name: 'All runs of console.scan' }).click();
    await page.getByRole('heading', { name: 'Runs', exact: true }).waitFor();
    expect(new URL(page.url()).searchParams.get('name')).toBe('console.scan');
    await page.getByTestId('runs-of').waitFor();
    await expect.poll(() => page.getByTestId('runs').locator('tbody tr').count(), { timeout: 10_000 }).toBe(7);
    await page.goBack();

    // A new run shows at the top without a reload.
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 7));
    world.scanBudget.value = 0;
    const { run } = await t.service.triggerRun(t.actor, { name: 'console.scan', force: true });
    await expect.poll(() => recent.nth(0).getByRole('link').getAttribute('href'), { timeout: 10_000 }).toBe(`/console/runs/${run.id}`);
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(7);
    // Let it finish, so nothing is left running.
    world.scanBudget.value = 100;
    await expect.poll(async () => (await t.service.run(t.actor, run.id)).status, { timeout: 20_000 }).toBe('COMPLETED');
  });

  it('starts a run with parameters typed as JSON, and sends nothing while the text is not JSON', async () => {
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Handlers', exact: true }).click();
    const row = page.locator('tr[data-handler="console.scan"]');
    const runsOfScan = async () => Number((await t.query(`select count(*) from runs where name = 'console.scan'`)).rows[0].count);
    const before = await runsOfScan();
    const open = row.getByRole('button', { name: 'Start a run of console.scan' });
    await open.click();
    const form = page.getByRole('form', { name: 'Start a run of console.scan' });
    const params = form.getByLabel('Parameters (JSON, optional)');
    // The form opens with the focus in its text.
    await expect.poll(() => params.evaluate((el) => el === document.activeElement)).toBe(true);

    // Not JSON: said at the field, and nothing is sent.
    await params.fill('{"since": "2026-01-01", "limit": 3');
    await form.getByRole('button', { name: 'Start run', exact: true }).click();
    const refusal = form.getByRole('alert');
    expect(await refusal.textContent()).toMatch(/^The parameters are not valid JSON: .+\.$/);
    expect(await params.getAttribute('aria-invalid')).toBe('true');
    expect(await runsOfScan()).toBe(before);
    expect(await seriousViolations(page, 'start run, params not JSON')).toEqual([]);
    for (const width of [1400, 390]) {
      await page.setViewportSize({ width, height: 900 });
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
      await screenshot(page, `handlers-start-run-invalid-${width}`);
    }
    await page.setViewportSize({ width: 1280, height: 900 });

    // Corrected, the message goes as the text becomes JSON; the run starts with those parameters.
    world.scanBudget.value = 0;
    await params.fill('{"since": "2026-01-01", "limit": 3, "tags": ["a", "b"]}');
    await refusal.waitFor({ state: 'detached' });
    await form.getByRole('button', { name: 'Start run', exact: true }).click();
    const started = page.getByTestId('run-started');
    await started.waitFor();
    expect(await started.textContent()).toBe('Started a run of console.scan. Open the run');
    // The form closes and the focus goes back to the button that opened it.
    expect(await form.count()).toBe(0);
    await expect.poll(() => open.evaluate((el) => el === document.activeElement)).toBe(true);
    const runId = (await started.getByRole('link').getAttribute('href'))!.split('/').pop()!;
    const run = await t.service.run(t.actor, runId);
    expect(run.params).toEqual({ since: '2026-01-01', limit: 3, tags: ['a', 'b'] });
    expect(await runsOfScan()).toBe(before + 1);
    // Let it finish, so nothing is left running.
    world.scanBudget.value = 100;
    await expect.poll(async () => (await t.service.run(t.actor, runId)).status, { timeout: 20_000 }).toBe('COMPLETED');
  });
});
