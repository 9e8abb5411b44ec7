/**
 * Every list's view is in its URL: the Runs list (status, page size, page), the Audit log (action
 * and result filters, page size, page), a run's findings (kind and severity) and the Executions
 * screen's search come back the same after a reload, and Back returns to the view before. A real browser against a real jobgate
 * process.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { ensureConsoleBuilt, launchChromium, screenshot, startConsoleWorld, type ConsoleWorld, signIn } from '../support/console.js';

let t: TestDb;
let world: ConsoleWorld;
let browser: Browser;
let adminKey: string;
let page: Page;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  ensureConsoleBuilt();
  t = await createTestDb();
  world = await startConsoleWorld(t.url);
  browser = await launchChromium();
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'list urls e2e admin')).key;
  // 14 completed runs and 3 failed ones, a second apart (newest first: list.scan-14 first).
  await t.query(
    `insert into runs (workspace_id, name, status, processed, started_at, finished_at, created_at)
     select $1, 'list.scan', case when g % 5 = 0 then 'FAILED' else 'COMPLETED' end, g,
            now() - (100 - g) * interval '1 second', now() - (100 - g) * interval '1 second',
            now() - (100 - g) * interval '1 second'
     from generate_series(1, 17) g`,
    [t.actor.workspaceId],
  );
  // 30 audit entries of one action, 10 of them refused.
  await t.query(
    `insert into audit_log (workspace_id, actor_kind, action, target_type, target_id, result_code, input)
     select $1, 'user', 'list.test', 'thing', 'thing-' || g, case when g % 3 = 0 then 'FORBIDDEN' else 'OK' end,
            jsonb_build_object('n', g)
     from generate_series(1, 30) g`,
    [t.actor.workspaceId],
  );
}, 180_000);
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await world?.stop();
  await t?.close();
});

async function signedIn(key: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Europe/Paris', locale: 'en-GB' });
  contexts.push(context);
  const p = await context.newPage();
  await signIn(p, world.origin, key);
  return p;
}

/** The first cell (the row's header) of each row of the table `testId`, once it shows `count` rows. */
async function rowsOf(testId: string, count: number): Promise<string[]> {
  const cells = page.getByTestId(testId).locator('tbody tr > :first-child');
  await expect.poll(() => cells.count(), { timeout: 10_000 }).toBe(count);
  return cells.allTextContents();
}

const search = () => new URL(page.url()).searchParams;

describe("a list's view in its URL", { timeout: 90_000 }, () => {
  beforeAll(async () => {
    page = await signedIn(adminKey);
  });
  afterEach(async (context) => {
    if (context.task.result?.state === 'fail') await screenshot(page, `list-urls-${context.task.name}-failed`).catch(() => {});
  });

  it('shows the same runs after a reload: the status, the page size and the page', async () => {
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Runs', exact: true }).click();
    await page.getByRole('heading', { name: 'Runs', exact: true }).waitFor();
    await rowsOf('runs', 17);
    await page.getByLabel('Status').selectOption('COMPLETED');
    await page.getByLabel('Per page').selectOption('10');
    await rowsOf('runs', 10);
    await page.getByRole('button', { name: 'Older →' }).click();
    await page.getByText('Page 2').waitFor();
    const second = await rowsOf('runs', 4);
    expect(search().get('status')).toBe('COMPLETED');
    expect(search().get('size')).toBe('10');
    expect(search().get('after')).toBeTruthy();

    await page.reload();
    await page.getByText('Page 2').waitFor();
    expect(await rowsOf('runs', 4)).toEqual(second);
    expect(await page.getByLabel('Status').inputValue()).toBe('COMPLETED');
    expect(await page.getByLabel('Per page').inputValue()).toBe('10');
    expect(await page.getByTestId('runs').getByText('FAILED', { exact: true }).count()).toBe(0);
    await screenshot(page, 'runs-from-url');

    // Back returns to the first page of the same view, and changing a filter starts from the first page.
    await page.goBack();
    await page.getByText('Page 1').waitFor();
    await rowsOf('runs', 10);
    await page.getByRole('button', { name: 'Older →' }).click();
    await page.getByText('Page 2').waitFor();
    await page.getByLabel('Status').selectOption('FAILED');
    await page.getByText('Page 1').waitFor();
    await rowsOf('runs', 3);
    expect(search().get('after')).toBeNull();
  });

  it('shows the same audit entries after a reload: the filters, the page size and the page', async () => {
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Audit log', exact: true }).click();
    await page.getByRole('heading', { name: 'Audit log', exact: true }).waitFor();
    await page.getByLabel('Action').fill('list.test');
    await page.getByLabel('Result').fill('OK');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.getByLabel('Per page').selectOption('10');
    await rowsOf('audit', 10);
    const entries = () => page.getByTestId('audit').locator('tbody tr').allTextContents();
    const first = await entries();
    await page.getByRole('button', { name: 'Older →' }).click();
    await page.getByText('Page 2').waitFor();
    await expect.poll(async () => (await entries()).join(), { timeout: 10_000 }).not.toBe(first.join());
    const second = await entries();
    expect(second).toHaveLength(10);
    expect(second.every((r) => r.includes('list.test') && r.includes('OK'))).toBe(true);
    expect(Object.fromEntries(search())).toMatchObject({ action: 'list.test', result: 'OK', size: '10' });

    await page.reload();
    await page.getByText('Page 2').waitFor();
    await rowsOf('audit', 10);
    expect(await entries()).toEqual(second);
    expect(await page.getByLabel('Action').inputValue()).toBe('list.test');
    expect(await page.getByLabel('Result').inputValue()).toBe('OK');
    expect(await page.getByLabel('Per page').inputValue()).toBe('10');
    await screenshot(page, 'audit-from-url');
  });

  it('shows the same findings of a run after a reload: their kind and severity', async () => {
    const run = (await t.query(`select id from runs where name = 'list.scan' and processed = 17`)).rows[0].id as string;
    await t.query(
      `insert into findings (workspace_id, run_id, kind, severity, resource_id)
       select $1, $2, case when g % 2 = 0 then 'orphan' else 'stale' end, case when g % 3 = 0 then 'ERROR' else 'INFO' end, 'r-' || g
       from generate_series(1, 12) g`,
      [t.actor.workspaceId, run],
    );
    await page.goto(`${world.origin}/console/runs/${run}`);
    await rowsOf('findings', 12);
    await page.getByLabel('Kind').selectOption('orphan');
    await page.getByLabel('Severity').selectOption('ERROR');
    // orphan (even) and ERROR (multiple of 3): r-6 and r-12.
    await rowsOf('findings', 2);
    expect(Object.fromEntries(search())).toEqual({ kind: 'orphan', severity: 'ERROR' });
    await page.reload();
    await rowsOf('findings', 2);
    expect(await page.getByLabel('Kind').inputValue()).toBe('orphan');
    expect(await page.getByLabel('Severity').inputValue()).toBe('ERROR');
    expect((await page.getByTestId('findings').locator('tbody tr').allTextContents()).join()).toMatch(/r-6.*r-12|r-12.*r-6/);
  });

  it("shows a run's params and its cursor, decoded", async () => {
    const run = (await t.query(`select id from runs where name = 'list.scan' and processed = 16`)).rows[0].id as string;
    await t.query(
      `update runs set params = '{"table": "orders", "dryRun": true}', cursor = convert_to('{"next": 40}', 'UTF8') where id = $1`,
      [run],
    );
    await page.goto(`${world.origin}/console/runs/${run}`);
    await expect
      .poll(() => page.getByTestId('run-params').textContent(), { timeout: 10_000 })
      .toBe('{\n  "table": "orders",\n  "dryRun": true\n}');
    expect(await page.getByTestId('run-cursor').textContent()).toBe('{\n  "next": 40\n}');
  });

  it('finds executions with the search syntax and shows the same search after a reload', async () => {
    for (const name of ['url.billing', 'url.mail']) await t.service.registerEndpoint(t.actor, { name, kind: 'HANDLER', handlerName: name });
    const later = new Date(Date.now() + 3_600_000);
    const failed = async (endpointName: string, name: string, error: string) => {
      const { job } = await t.service.createJob(t.actor, { endpointName, kind: 'DELAYED', runAt: later, name });
      await t.query(`update executions set status = 'FAILED', attempt_count = 1, last_error = $2 where job_id = $1`, [job.id, error]);
    };
    await failed('url.billing', 'nightly invoices', 'HTTP 504: gateway timeout');
    await failed('url.billing', 'nightly refunds', 'connect ECONNREFUSED');
    await failed('url.mail', 'nightly digest', 'smtp gateway timeout');
    await failed('url.billing', 'weekly invoices', 'HTTP 504: gateway timeout');
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Executions', exact: true }).click();
    await page.getByRole('heading', { name: 'Executions', exact: true }).waitFor();
    const box = page.getByRole('searchbox', { name: /Job name or key/ });
    await box.fill('status:failed endpoint:billing error:"gateway timeout" nightly');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.getByRole('heading', { name: 'Dead-letter queue' }).waitFor();
    const jobs = () => page.getByTestId('executions').locator('tbody tr td:nth-child(3)').allTextContents();
    await expect.poll(jobs, { timeout: 10_000 }).toEqual(['nightly invoices']);
    const billing = (await t.query(`select id from endpoints where name = 'url.billing'`)).rows[0].id as string;
    expect(Object.fromEntries(search())).toEqual({ status: 'FAILED', endpoint: billing, error: 'gateway timeout', q: 'nightly' });
    expect(await box.inputValue()).toBe('error:"gateway timeout" nightly');

    await page.reload();
    await expect.poll(jobs, { timeout: 10_000 }).toEqual(['nightly invoices']);
    expect(await box.inputValue()).toBe('error:"gateway timeout" nightly');
    expect(await page.getByRole('combobox', { name: /^Endpoint/ }).inputValue()).toBe(billing);
    await screenshot(page, 'executions-searched');
    // Clearing the search keeps the status and endpoint, which have their own controls.
    await box.fill('');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await expect.poll(jobs, { timeout: 10_000 }).toEqual(['weekly invoices', 'nightly refunds', 'nightly invoices']);
  });
});
