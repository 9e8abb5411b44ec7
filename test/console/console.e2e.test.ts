/**
 * The console in a real browser (Debian's Chromium, headless, through playwright-core) against a
 * real jobgate process (gateway and worker) on a real Postgres: sign-in, creating through the UI,
 * live updates without reloads, the dead-letter queue, a run's live progress and findings, what a
 * VIEWER sees, a revoked key, and axe-core's accessibility rules on every screen.
 */
import type { Browser, BrowserContext, Page, WebSocketRoute } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
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
let adminKey: string;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  ensureConsoleBuilt();
  t = await createTestDb();
  world = await startConsoleWorld(t.url);
  browser = await launchChromium();
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'console e2e admin')).key;
}, 180_000);
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await world?.stop();
  await t?.close();
});

/**
 * A fresh tab (its own sessionStorage), signed in with `key`; screenshots itself if the test fails.
 * The browser runs in Europe/Paris, in `locale` (default en-GB: the console writes times in the
 * browser's locale, and a test should not read whichever the machine has).
 */
async function signedIn(key: string, name: string, prepare?: (context: BrowserContext) => Promise<void>, locale = 'en-GB'): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Europe/Paris', locale });
  contexts.push(context);
  await prepare?.(context);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/.test(m.text())) problems.push(m.text());
  });
  // Nothing the console loads is missing (the browser asks for /favicon.ico unless the page names its icon).
  page.on('response', (r) => {
    if (r.status() === 404) problems.push(`404: ${r.url()}`);
  });
  // Every GraphQL request names its document by hash alone (persisted documents), never by its text.
  page.on('request', (r) => {
    if (new URL(r.url()).pathname !== '/graphql' || r.method() !== 'POST') return;
    const body = r.postDataJSON() as { query?: unknown; extensions?: { persistedQuery?: { sha256Hash?: unknown } } } | null;
    if (body?.query !== undefined || typeof body?.extensions?.persistedQuery?.sha256Hash !== 'string')
      problems.push(`a document sent as text: ${r.postData()}`);
  });
  (page as Page & { problems: string[] }).problems = problems;
  onTestFailed(async () => {
    await screenshot(page, `${name}-failed`).catch(() => {});
  });
  await signIn(page, world.origin, key);
  return page;
}

interface ParisClock {
  h: number;
  mm: string;
  ss: string;
}

/** The wall clock in Paris (where the test's browsers run) of an ISO or "YYYY-MM-DD hh:mm:ss UTC" instant. */
function parisClock(instant: string): ParisClock {
  const d = new Date(instant.replace(' UTC', 'Z').replace(' ', 'T'));
  const parts = new Intl.DateTimeFormat('en-GB', {
    timeZone: 'Europe/Paris',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(d);
  const part = (type: string) => parts.find((p) => p.type === type)!.value;
  return { h: Number(part('hour')), mm: part('minute'), ss: part('second') };
}

const problemsOf = (page: Page) => (page as Page & { problems: string[] }).problems;

async function go(page: Page, section: string) {
  await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: section, exact: true }).click();
}

/** axe-core on the page as shown: no serious or critical violation. */
async function accessible(page: Page, screen: string) {
  const bad = await seriousViolations(page, screen);
  expect(bad).toEqual([]);
}

/** A GraphQL request with the admin key, as any client of the API would make it. */
/**
 * The page as shown at 1400 and 390 px wide, light and dark: axe passes in each, a phone never
 * scrolls the page sideways (tables scroll inside their box), and each is screenshot.
 */
async function inEveryView(page: Page, name: string) {
  for (const width of [1400, 390]) {
    for (const colorScheme of ['light', 'dark'] as const) {
      await page.setViewportSize({ width, height: 900 });
      await page.emulateMedia({ colorScheme });
      await accessible(page, `${name} at ${width} px, ${colorScheme}`);
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
      await screenshot(page, `${name}-${width}-${colorScheme}`);
    }
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

describe('the console', { timeout: 90_000 }, () => {
  let admin: Page;
  afterEach(async (context) => {
    if (context.task.result?.state === 'fail' && admin) await screenshot(admin, `admin-${context.task.name}-failed`).catch(() => {});
  });

  it('signs in with an ADMIN key and shows its role and workspace, live', async () => {
    admin = await signedIn(adminKey, 'sign-in');
    await expect.poll(() => admin.getByTestId('role').textContent()).toBe('ADMIN');
    await expect.poll(() => admin.getByTestId('who').textContent()).toContain('default');
    await expect.poll(() => admin.getByTestId('live-state').textContent(), { timeout: 10_000 }).toBe('Live');
    // The key is kept in this tab's sessionStorage only.
    expect(await admin.evaluate(() => [sessionStorage.length, localStorage.length, document.cookie])).toEqual([1, 0, '']);
    await admin.getByRole('heading', { name: 'Overview' }).waitFor();
    await accessible(admin, 'overview (empty)');
    await screenshot(admin, 'overview-empty');
  });

  it('registers an endpoint and creates a job through the UI, then shows its execution reach SUCCEEDED without a reload; its actions', async () => {
    await go(admin, 'Endpoints');
    await accessible(admin, 'endpoints');
    await admin.getByLabel(/^Name/).fill('console.greet');
    await admin.getByLabel('HANDLER').check();
    await admin.getByLabel('Handler name').fill('console.ok');
    await admin.getByRole('button', { name: 'Register endpoint' }).click();
    await admin.getByText('Registered console.greet').waitFor();
    await admin.getByTestId('endpoints').getByText('console.greet').waitFor();

    await admin.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
    await go(admin, 'Jobs');
    await admin.getByRole('link', { name: 'New job' }).click();
    await accessible(admin, 'new job');
    await admin.getByLabel('Name (optional)').fill('hello-from-console');
    await admin.getByLabel('Input (JSON)').fill('{"who":"console"}');
    await admin.getByLabel(/^Priority/).fill('7');
    await admin.getByRole('button', { name: 'Create job' }).click();
    await admin.getByRole('heading', { name: /hello-from-console/ }).waitFor();
    expect((await t.query(`select priority from jobs where name = 'hello-from-console'`)).rows).toEqual([{ priority: 7 }]);
    const executions = admin.getByTestId('job-executions');
    await executions.getByText('SUCCEEDED', { exact: true }).waitFor({ timeout: 20_000 });
    expect(await executions.textContent()).toContain('#1 SUCCEEDED');
    // The same document all along: no reload happened.
    expect(await admin.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);
    await accessible(admin, 'job');
    await screenshot(admin, 'job-succeeded');

    // The job's actions: pause, resume, trigger now (a second execution, live), edit.
    await admin.getByRole('button', { name: 'Pause' }).click();
    await admin
      .getByRole('heading', { name: /hello-from-console/ })
      .getByText('PAUSED', { exact: true })
      .waitFor();
    await admin.getByRole('button', { name: 'Resume' }).click();
    await admin.getByRole('button', { name: 'Pause' }).waitFor();
    await admin.getByRole('button', { name: 'Trigger now' }).click();
    await expect.poll(() => executions.getByText('SUCCEEDED', { exact: true }).count(), { timeout: 20_000 }).toBe(2);
    await admin.getByRole('button', { name: 'Edit' }).click();
    await admin.getByLabel('Name', { exact: true }).fill('x'.repeat(201));
    await admin.getByLabel('Max attempts').fill('3');
    await admin.getByRole('button', { name: 'Save' }).click();
    // Refused by the API with its code and the field named; nothing changed.
    await admin.getByRole('alert').getByText('VALIDATION_FAILED').waitFor();
    expect(await admin.getByRole('alert').textContent()).toContain('name:');
    await admin.getByLabel('Name', { exact: true }).fill('hello-renamed');
    await admin.getByRole('button', { name: 'Save' }).click();
    await admin.getByRole('heading', { name: /hello-renamed/ }).waitFor();
    const { rows } = await t.query(`select name, max_attempts, status from jobs where name = 'hello-renamed'`);
    expect(rows).toEqual([{ name: 'hello-renamed', max_attempts: 3, status: 'ACTIVE' }]);
    await admin.getByRole('button', { name: 'Edit' }).click();
    await admin.getByLabel('Name', { exact: true }).fill('hello-from-console');
    await admin.getByRole('button', { name: 'Save' }).click();
    await admin.getByRole('heading', { name: /hello-from-console/ }).waitFor();
  });

  it('pauses an endpoint from its screen: a new job waits, its page says why, and it runs once the endpoint is resumed', async () => {
    await go(admin, 'Endpoints');
    const row = admin.getByTestId('endpoints').getByRole('row').filter({ hasText: 'console.greet' });
    await row.getByRole('button', { name: 'Pause console.greet' }).click();
    await admin.getByRole('dialog').getByRole('button', { name: 'Pause endpoint' }).click();
    await row.getByText('Paused since').waitFor();
    await inEveryView(admin, 'endpoints-paused');
    await admin.setViewportSize({ width: 1280, height: 900 });
    const { rows: paused } = await t.query(`select paused_at from endpoints where name = 'console.greet' and archived_at is null`);
    expect(paused[0].paused_at).toBeInstanceOf(Date);

    const { job } = await t.service.createJob(t.actor, { endpointName: 'console.greet', kind: 'IMMEDIATE', name: 'waits-for-resume' });
    const execution = (await t.service.executions(t.actor, { jobId: job.id })).edges[0]!.node;
    await admin.goto(`${world.origin}/console/executions/${execution.id}`);
    await expect.poll(() => admin.getByTestId('waiting-for').textContent(), { timeout: 10_000 }).toContain('Endpoint paused');
    await accessible(admin, 'execution (waiting)');
    await screenshot(admin, 'execution-waiting');
    // The overview says why its backlog grows, beside it; on a phone the note wraps under the name
    // instead of pushing the backlog out of sight.
    await go(admin, 'Overview');
    const overviewRow = admin.getByTestId('by-endpoint').getByRole('row').filter({ hasText: 'console.greet' });
    await overviewRow.getByTestId('endpoint-paused').waitFor({ timeout: 10_000 });
    expect(await overviewRow.getByTestId('endpoint-paused').textContent()).toMatch(/^paused since /);
    await admin.setViewportSize({ width: 390, height: 900 });
    const pending = (await overviewRow.getByRole('cell').first().boundingBox())!;
    expect(pending.x + pending.width).toBeLessThanOrEqual(390);
    await screenshot(admin, 'overview-endpoint-paused-390');
    await admin.setViewportSize({ width: 1280, height: 900 });

    // The endpoint's screen counts what waits, live, and sets its concurrency limit in place.
    await go(admin, 'Endpoints');
    await expect.poll(() => row.getByTestId('endpoint-pending').textContent(), { timeout: 10_000 }).toBe('1');
    await row.getByLabel('Concurrency limit of console.greet (empty: unlimited)').fill('3');
    await row.getByRole('button', { name: 'Save the concurrency limit of console.greet' }).click();
    await expect.poll(async () => (await t.service.endpoint(t.actor, { name: 'console.greet' })).concurrencyLimit).toBe(3);
    // 0 is no limit a form sends: the browser holds it back, and nothing changes.
    const limit = row.getByLabel('Concurrency limit of console.greet (empty: unlimited)');
    await limit.fill('0');
    await row.getByRole('button', { name: 'Save the concurrency limit of console.greet' }).click();
    expect(await limit.evaluate((el) => (el as HTMLInputElement).validity.valid)).toBe(false);
    expect((await t.service.endpoint(t.actor, { name: 'console.greet' })).concurrencyLimit).toBe(3);
    await row.getByLabel('Concurrency limit of console.greet (empty: unlimited)').fill('');
    await row.getByRole('button', { name: 'Save the concurrency limit of console.greet' }).click();
    await expect.poll(async () => (await t.service.endpoint(t.actor, { name: 'console.greet' })).concurrencyLimit).toBeNull();
    await row.getByRole('button', { name: 'Resume console.greet' }).click();
    await row.getByText('Running').waitFor();
    await expect.poll(async () => (await t.service.execution(t.actor, execution.id)).status, { timeout: 20_000 }).toBe('SUCCEEDED');
  });

  it('shows a failed execution in the dead-letter queue as it fails, and re-drives it from there', async () => {
    await t.service.registerEndpoint(t.actor, { name: 'console.fragile', kind: 'HANDLER', handlerName: 'console.flaky', maxAttempts: 1 });
    await admin.goto(`${world.origin}/console/executions?status=FAILED`);
    await admin.getByRole('heading', { name: 'Dead-letter queue' }).waitFor();
    await admin.getByText('The dead-letter queue is empty').waitFor();
    const { job } = await t.service.createJob(t.actor, { endpointName: 'console.fragile', kind: 'IMMEDIATE', name: 'fragile-one' });
    const row = admin.getByTestId('executions').getByRole('row', { name: /fragile-one/ });
    await row.getByText('FAILED', { exact: true }).waitFor({ timeout: 20_000 });
    await accessible(admin, 'dead-letter queue');
    await screenshot(admin, 'dead-letter');
    world.flakyHealthy.value = true;
    await row.getByRole('button', { name: /^Retry execution/ }).click();
    // Re-driven, it leaves the dead-letter view, and succeeds.
    await admin.getByText('The dead-letter queue is empty').waitFor({ timeout: 20_000 });
    await admin.getByRole('link', { name: 'Succeeded' }).click();
    await admin
      .getByTestId('executions')
      .getByRole('row', { name: /fragile-one/ })
      .getByText('SUCCEEDED', { exact: true })
      .waitFor({ timeout: 20_000 });
    const { rows } = await t.query(`select status, attempt_count from executions where job_id = $1`, [job.id]);
    expect(rows).toEqual([{ status: 'SUCCEEDED', attempt_count: 2 }]);

    // Retry all that match: two failures of the endpoint, re-driven in one go.
    world.flakyHealthy.value = false;
    await admin.getByRole('link', { name: 'Failed (dead-letter)' }).click();
    await admin.getByText('The dead-letter queue is empty').waitFor();
    for (const name of ['fragile-a', 'fragile-b'])
      await t.service.createJob(t.actor, { endpointName: 'console.fragile', kind: 'IMMEDIATE', name });
    await admin
      .getByTestId('executions')
      .getByRole('row', { name: /fragile-b/ })
      .getByText('FAILED', { exact: true })
      .waitFor({ timeout: 20_000 });
    await admin
      .getByTestId('executions')
      .getByRole('row', { name: /fragile-a/ })
      .getByText('FAILED', { exact: true })
      .waitFor({ timeout: 20_000 });
    world.flakyHealthy.value = true;
    await admin.getByRole('button', { name: 'Retry all matching' }).click();
    await admin.getByRole('dialog').getByText('Retry all 2 failed executions that match?').waitFor();
    await admin.getByRole('dialog').getByRole('button', { name: 'Retry 2 executions' }).click();
    await admin.getByTestId('bulk-bar').getByText('Re-drove 2 of 2 failed executions.').waitFor();
    await admin.getByText('The dead-letter queue is empty').waitFor({ timeout: 20_000 });
    const audit = await t.query(`select count(*)::int as n from audit_log where action like 'execution%retry%'`);
    expect(audit.rows[0].n).toBeGreaterThanOrEqual(3);
  });

  // Eight axe passes per screen (two widths, two schemes) take a while on a busy machine.
  it(
    'acts on a selection: retries the chosen failed executions and pauses every job that matches, each after a confirmation stating the count',
    { timeout: 400_000 },
    async () => {
      world.flakyHealthy.value = false;
      const endpoint = await t.service.registerEndpoint(t.actor, {
        name: 'console.bulk',
        kind: 'HANDLER',
        handlerName: 'console.flaky',
        maxAttempts: 1,
      });
      const names = ['bulk-a', 'bulk-b', 'bulk-c'];
      for (const name of names) await t.service.createJob(t.actor, { endpointName: 'console.bulk', kind: 'IMMEDIATE', name });
      // Read through the service: the console's gateway runs persisted documents only.
      const statusesByJob = async () => {
        const { edges } = await t.service.executions(t.actor, { endpointId: endpoint.id }, { first: 10 });
        const byJob: Record<string, string> = {};
        for (const { node } of edges) byJob[(await t.service.job(t.actor, node.jobId)).name ?? node.jobId] = node.status;
        return byJob;
      };
      await expect.poll(statusesByJob, { timeout: 20_000 }).toEqual({ 'bulk-a': 'FAILED', 'bulk-b': 'FAILED', 'bulk-c': 'FAILED' });

      const page = await signedIn(adminKey, 'bulk');
      await page.goto(`${world.origin}/console/executions?status=FAILED&endpoint=${endpoint.id}`);
      const table = page.getByTestId('executions');
      await table.getByRole('row', { name: /bulk-b/ }).waitFor();
      for (const name of ['bulk-a', 'bulk-c'])
        await table
          .getByRole('row', { name: new RegExp(name) })
          .getByRole('checkbox')
          .check();
      await page.getByTestId('bulk-bar').getByText('2 executions selected').waitFor();
      world.flakyHealthy.value = true;
      await page.getByRole('button', { name: 'Retry selected' }).click();
      const dialog = page.getByRole('dialog');
      await dialog.getByText(/^Retry 2 selected executions\?/).waitFor();
      await accessible(page, 'bulk confirmation');
      await dialog.getByRole('button', { name: 'Retry 2 executions' }).click();
      await page.getByTestId('bulk-bar').getByText('Re-drove 2 of 2 failed executions.').waitFor();
      // Through the API: the two chosen were re-driven (and now succeed), the third is left as it was.
      await expect.poll(statusesByJob, { timeout: 20_000 }).toEqual({ 'bulk-a': 'SUCCEEDED', 'bulk-b': 'FAILED', 'bulk-c': 'SUCCEEDED' });

      // Cancelling from the list asks first; declining changes nothing.
      await page.goto(`${world.origin}/console/executions?status=FAILED&endpoint=${endpoint.id}`);
      await table
        .getByRole('row', { name: /bulk-b/ })
        .getByRole('checkbox')
        .check();
      await page.getByRole('button', { name: 'Cancel selected' }).click();
      // Focus starts on declining: a second Enter meant for the button that opened it confirms nothing.
      await dialog.getByRole('button', { name: 'Keep as is' }).waitFor();
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Keep as is');
      await page.keyboard.press('Enter');
      expect(await dialog.count()).toBe(0);
      expect((await statusesByJob())['bulk-b']).toBe('FAILED');

      // Diagnose bulk-a: its failed attempt with the handler's error and stack, its worker, and the wait before its retry.
      const bulkA = (await t.query(`select e.id from executions e join jobs j on j.id = e.job_id where j.name = 'bulk-a'`)).rows[0].id;
      await page.goto(`${world.origin}/console/executions/${bulkA}`);
      const first = page.locator('[data-attempt="1"]');
      await first.getByText('FAILED', { exact: true }).waitFor();
      await first.getByText('UnrecoverableError: the flaky handler is down', { exact: true }).waitFor();
      expect(await first.locator('dt').allTextContents()).toEqual(
        expect.arrayContaining(['Started', 'Ended', 'Duration', 'Worker', 'Error', 'Stack', 'Wait before retry']),
      );
      await first.getByText("Show the handler's stack").click();
      await expect.poll(() => first.locator('details pre').textContent()).toMatch(/the flaky handler is down\n\s+at /);
      await page.locator('[data-attempt="2"]').getByText('SUCCEEDED', { exact: true }).waitFor();
      await inEveryView(page, 'execution-attempts');

      // Retry bulk-b from its own page: the button goes with its FAILED status, and focus goes to the heading, not the page.
      const bulkB = (await t.query(`select e.id from executions e join jobs j on j.id = e.job_id where j.name = 'bulk-b'`)).rows[0].id;
      await page.goto(`${world.origin}/console/executions/${bulkB}`);
      await page.getByRole('button', { name: 'Retry', exact: true }).click();
      await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('execution-title');
      await expect.poll(statusesByJob, { timeout: 20_000 }).toMatchObject({ 'bulk-b': 'SUCCEEDED' });

      // Jobs: filter by name (in the URL), select one, then all that match, and pause them.
      for (const name of ['sel-1', 'sel-2', 'sel-3'])
        await t.service.createJob(t.actor, {
          endpointName: 'console.bulk',
          kind: 'DELAYED',
          runAt: new Date(Date.now() + 86_400_000),
          name,
        });
      await page.goto(`${world.origin}/console/jobs`);
      await page.getByRole('heading', { name: 'Jobs', exact: true }).waitFor();
      await page.getByText('Loading…').waitFor({ state: 'detached' });
      // The search syntax: key:value terms become the filters, the rest searches names.
      await page.getByLabel('Name or idempotency key').fill('sel- status:active endpoint:console.bulk');
      await page.getByRole('button', { name: 'Search' }).click();
      await expect.poll(() => page.getByTestId('jobs').locator('tbody tr').count()).toBe(3);
      const params = new URL(page.url()).searchParams;
      expect([params.get('q'), params.get('status'), params.get('endpoint')]).toEqual(['sel-', 'ACTIVE', endpoint.id]);
      // A reload shows the same view.
      await page.reload();
      await expect.poll(() => page.getByTestId('jobs').locator('tbody tr').count(), { timeout: 10_000 }).toBe(3);
      expect(await page.getByLabel('Name or idempotency key').inputValue()).toBe('sel-');
      await page.getByTestId('jobs').getByRole('row', { name: /sel-2/ }).getByRole('checkbox').check();
      await page.getByRole('button', { name: 'Select all 3 matching' }).click();
      await page.getByTestId('bulk-bar').getByText('3 jobs selected').waitFor();
      await inEveryView(page, 'jobs-selected');
      await page.setViewportSize({ width: 1280, height: 900 });
      await page.getByRole('button', { name: 'Pause selected' }).click();
      await dialog.getByText(/^Pause 3 selected jobs\?/).waitFor();
      await dialog.getByRole('button', { name: 'Pause 3 jobs' }).click();
      await page.getByTestId('bulk-bar').getByText('Paused 3 of 3 jobs.').waitFor();
      const paused = await t.service.jobs(t.actor, { search: 'sel-' });
      expect(paused.edges.map((e) => e.node.status)).toEqual(['PAUSED', 'PAUSED', 'PAUSED']);

      // On a phone: the sections behind a menu button; following a link lands focus on the new heading.
      await page.setViewportSize({ width: 390, height: 844 });
      const sections = page.getByRole('navigation', { name: 'Sections' });
      expect(await sections.isVisible()).toBe(false);
      await page.getByRole('button', { name: 'Menu' }).click();
      await sections.getByRole('link', { name: 'Executions', exact: true }).click();
      await page.getByRole('heading', { name: 'Executions', exact: true }).waitFor();
      await expect
        .poll(() => page.evaluate(() => document.activeElement?.tagName + ':' + document.activeElement?.textContent))
        .toBe('H1:Executions');
      expect(await sections.isVisible()).toBe(false);
      await inEveryView(page, 'executions');
      // The other screens an operator opens most, in every view too.
      const sel1 = (await t.query(`select id from jobs where name = 'sel-1'`)).rows[0].id as string;
      await page.goto(`${world.origin}/console/jobs/${sel1}`);
      await page.getByRole('heading', { name: /sel-1/ }).waitFor();
      await inEveryView(page, 'job');
      await page.goto(`${world.origin}/console/`);
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      await page.getByText('Loading…').waitFor({ state: 'detached' });
      await inEveryView(page, 'overview');
      expect(problemsOf(page)).toEqual([]);
    },
  );

  it("moves a recoverable run's progress bar and streams its findings as the run records them", async () => {
    await go(admin, 'Handlers');
    const scanRow = admin.getByTestId('handlers').getByRole('row', { name: /console\.scan/ });
    await accessible(admin, 'handlers');
    await scanRow.getByRole('button', { name: 'Start a run of console.scan' }).click();
    await admin.getByRole('form', { name: 'Start a run of console.scan' }).getByRole('button', { name: 'Start run', exact: true }).click();
    await admin.getByTestId('run-started').waitFor();
    await go(admin, 'Runs');
    await admin.getByTestId('runs').getByRole('link', { name: 'console.scan' }).click();
    await admin.getByRole('heading', { name: /console\.scan/ }).waitFor();
    const bar = admin.getByTestId('run-progress').getByRole('progressbar');
    const valueNow = async () => Number((await bar.getAttribute('aria-valuenow')) ?? '0');
    expect(await valueNow()).toBe(0);
    world.scanBudget.value = 2;
    await expect.poll(() => admin.getByTestId('run-processed').textContent(), { timeout: 20_000 }).toBe('4 / 20');
    expect(await valueNow()).toBe(20);
    // Findings r-0 and r-3, streamed in.
    await admin.getByTestId('findings').getByText('r-3').waitFor();
    world.scanBudget.value = 3;
    await expect.poll(() => admin.getByTestId('run-processed').textContent(), { timeout: 20_000 }).toBe('10 / 20');
    expect(await valueNow()).toBe(50);
    await admin.getByTestId('findings').getByText('r-9').waitFor();
    expect(await admin.getByTestId('findings').getByRole('row').count()).toBe(1 + 4);
    await accessible(admin, 'run');
    await screenshot(admin, 'run-progress');
    world.scanBudget.value = 100;
    await admin
      .getByRole('heading', { name: /console\.scan/ })
      .getByText('COMPLETED', { exact: true })
      .waitFor({ timeout: 20_000 });
    expect(await valueNow()).toBe(100);
    await go(admin, 'Overview');
    await admin.getByTestId('by-endpoint').getByText('console.greet').waitFor();
    await accessible(admin, 'overview');
    await screenshot(admin, 'overview');
  });

  it("counts the workspace's endpoints on the overview, and jobgate's internal ones apart, labelled", async () => {
    await t.service.registerEndpoint(
      t.systemActor,
      { name: 'jobgate.console-internal', kind: 'HANDLER', handlerName: 'console.internal' },
      { type: 'INTERNAL' },
    );
    await t.service.createJob(t.systemActor, {
      endpointName: 'jobgate.console-internal',
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 86_400_000),
    });
    await admin.goto(`${world.origin}/console/`);
    await admin.getByTestId('internal-endpoints').getByText('jobgate.console-internal').waitFor({ timeout: 10_000 });
    expect(await admin.getByTestId('by-endpoint').textContent()).not.toContain('jobgate.console-internal');
    await admin.getByRole('heading', { name: "jobgate's own work" }).waitFor();
    await accessible(admin, 'overview (internal endpoints)');
  });

  it('shows the handler catalogue live: a worker registering a handler, its tick, and its worker leaving, without a reload', async () => {
    await go(admin, 'Handlers');
    const table = admin.getByTestId('handlers');
    await table.getByRole('row', { name: /console\.scan/ }).waitFor();
    expect(await admin.getByRole('button', { name: 'Refresh' }).count()).toBe(0);
    await admin.evaluate(() => ((window as unknown as { marker: number }).marker = 18));
    await t.query(`insert into workers (id, host, pid, stale_ms, handlers) values ('console-live-worker', 'h', 1, 60000, $1)`, [
      JSON.stringify([{ kind: 'INTERVAL', name: 'console.live-tick', everyMs: 3_600_000 }]),
    ]);
    await t.query(
      `insert into interval_handlers (name, every_ms, next_due_at) values ('console.live-tick', 3600000, now() + interval '1 hour')`,
    );
    const row = table.locator('tr[data-handler="console.live-tick"]');
    await row.waitFor({ timeout: 10_000 });
    expect(await row.textContent()).toContain('(0 ok, 0 errors)');
    await t.query(
      `update interval_handlers set last_status = 'OK', last_started_at = now(), last_finished_at = now(), ok_runs = ok_runs + 1 where name = 'console.live-tick'`,
    );
    await expect.poll(() => row.textContent(), { timeout: 10_000 }).toContain('(1 ok, 0 errors)');
    // A tick's count is shown to every key; its extra (installation-wide) to installation admins only.
    await t.query(
      `update interval_handlers set last_count = 7, last_extra = '{"tables":2}', ok_runs = ok_runs + 1 where name = 'console.live-tick'`,
    );
    await expect.poll(() => row.textContent(), { timeout: 10_000 }).toContain('(2 ok, 0 errors)');
    expect(await row.textContent()).toContain('count 7');
    expect(await row.getByTestId('tick-extra').count()).toBe(0);
    // Registered opted out of alerts: the row says so.
    await t.query(`update workers set handlers = $1 where id = 'console-live-worker'`, [
      JSON.stringify([{ kind: 'INTERVAL', name: 'console.live-tick', everyMs: 3_600_000, alertsOptOut: true }]),
    ]);
    await expect.poll(() => row.textContent(), { timeout: 10_000 }).toContain('alerts off');
    await t.query(`delete from workers where id = 'console-live-worker'`);
    await row.waitFor({ state: 'detached', timeout: 10_000 });
    expect(await admin.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(18);
  });

  it("pages a job's executions, newest first, twenty at a time", async () => {
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'console.greet',
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 86_400_000),
      name: 'many-executions',
    });
    for (let i = 0; i < 24; i++) await t.service.triggerJob(t.actor, { id: job.id, force: true });
    await admin.goto(`${world.origin}/console/jobs/${job.id}`);
    const rows = admin.getByTestId('job-executions').locator('tbody tr');
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(20);
    const firstPageIds = await rows.locator('th a').allTextContents();
    await admin.getByRole('button', { name: 'Older →' }).click();
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(5);
    const secondPageIds = await rows.locator('th a').allTextContents();
    expect(new Set([...firstPageIds, ...secondPageIds]).size).toBe(25);
    expect(await admin.getByRole('button', { name: 'Older →' }).isDisabled()).toBe(true);
    await admin.getByRole('button', { name: '← Newer' }).click();
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(20);
    await accessible(admin, 'job (paged executions)');
  });

  it('pauses a run with "Pause run" and says why it is paused; an ended run shows no empty bar and says it found nothing; a paused cron job lists no fire times', async () => {
    world.scanBudget.value = 0;
    const { run } = await t.service.triggerRun(t.actor, { name: 'console.scan', force: true });
    await admin.goto(`${world.origin}/console/runs/${run.id}`);
    await admin
      .getByRole('heading', { name: /console\.scan/ })
      .getByText('RUNNING', { exact: true })
      .waitFor({ timeout: 20_000 });
    await admin.getByRole('button', { name: 'Pause run' }).click();
    await admin
      .getByRole('heading', { name: /console\.scan/ })
      .getByText('PAUSED', { exact: true })
      .waitFor({ timeout: 20_000 });
    await expect.poll(() => admin.getByTestId('run-paused').textContent(), { timeout: 10_000 }).toMatch(/^\w/);
    const paused = (await t.query(`select pause_reason from runs where id = $1`, [run.id])).rows[0].pause_reason as string;
    expect(await admin.getByTestId('run-paused').textContent()).toBe(paused);
    await admin.getByRole('button', { name: 'Resume run' }).waitFor();
    // The overview counts it under "Paused runs", marked a problem once it is a crash that paused it.
    await admin.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Overview', exact: true }).click();
    const pausedTile = admin.getByTestId('overview-tiles').getByRole('link', { name: /Paused runs/ });
    await expect.poll(() => pausedTile.textContent(), { timeout: 10_000 }).toMatch(/^[1-9]/);
    expect(await pausedTile.locator('.tile-value.bad').count()).toBe(0);
    // Paused by an operator: something to look at, not a problem; and "Runs in progress" points to it.
    expect(await pausedTile.locator('.tile-value.warn').count()).toBe(1);
    await expect.poll(() => admin.getByRole('link', { name: /^\d+ paused$/ }).count(), { timeout: 10_000 }).toBeGreaterThan(0);
    await t.query(`update runs set pause_kind = 'CRASHED' where id = $1`, [run.id]);
    await admin.reload();
    await expect.poll(() => pausedTile.locator('.tile-value.bad').count(), { timeout: 10_000 }).toBe(1);
    // Ended without a total and without findings.
    const ended = (await t.service.triggerRun(t.actor, { name: 'console.paged-scan', force: true })).run;
    await t.query(`update runs set status = 'FAILED', finished_at = now(), error = 'it broke', total = null where id = $1`, [ended.id]);
    await admin.goto(`${world.origin}/console/runs/${ended.id}`);
    await admin.getByText('No findings: the run recorded none.').waitFor({ timeout: 10_000 });
    expect(await admin.getByTestId('run-progress').getByRole('progressbar').count()).toBe(0);
    await screenshot(admin, 'run-failed');
    // A failed run resumes from its last checkpoint, from its page.
    // (triggerRun wants a live worker that has the handler: one is listed for it.)
    await t.query(`insert into workers (id, host, pid, stale_ms, handlers) values ('console-run-worker', 'h', 1, 60000, $1)`, [
      JSON.stringify([{ kind: 'RECOVERABLE', name: 'console.paged-scan' }]),
    ]);
    await admin.getByRole('button', { name: 'Resume from its checkpoint' }).click();
    await expect.poll(async () => (await t.service.run(t.actor, ended.id)).status, { timeout: 20_000 }).not.toBe('FAILED');
    await t.service.cancelRun(t.actor, ended.id).catch(() => {});
    await t.query(`delete from workers where id = 'console-run-worker'`);
    // A run waiting to retry says which retry, of how many, and when.
    const waiting = (await t.service.triggerRun(t.actor, { name: 'console.scan', force: true })).run;
    await t.query(
      `update runs set owner = null, status = 'RUNNING', retry_attempts = 1, retry_budget = 3, error = 'Error: blip',
         resume_after = now() + interval '1 hour' where id = $1`,
      [waiting.id],
    );
    await admin.goto(`${world.origin}/console/runs/${waiting.id}`);
    await expect
      .poll(() => admin.getByTestId('run-retry').textContent(), { timeout: 10_000 })
      .toMatch(/retry 1 of 3 from its last checkpoint/);
    await t.query(`update runs set status = 'PAUSED', pause_kind = 'CANCELLED', resume_after = null where id = $1`, [waiting.id]);
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'console.greet',
      kind: 'CRON',
      name: 'paused-cron',
      cron: { expression: '*/5 * * * *' },
    });
    await admin.goto(`${world.origin}/console/jobs/${job.id}`);
    await expect.poll(() => admin.getByTestId('cron-preview').locator('li').count(), { timeout: 10_000 }).toBe(5);
    await t.service.pauseJob(t.actor, job.id);
    await admin.goto(`${world.origin}/console/jobs/${job.id}`);
    await admin
      .getByTestId('cron-preview')
      .getByText(/None while the job is paused/)
      .waitFor({ timeout: 10_000 });
    expect(await admin.getByTestId('cron-preview').locator('li').count()).toBe(0);
  });

  it("pages all of a run's findings, then appends new ones live, none missed and none twice", async () => {
    const { run } = await t.service.triggerRun(t.actor, { name: 'console.paged-scan', force: true });
    await t.query(
      `insert into findings (workspace_id, run_id, kind, severity, resource_id)
       select $1, $2, 'many', 'INFO', 'p-' || lpad(g::text, 3, '0') from generate_series(1, 130) g`,
      [t.actor.workspaceId, run.id],
    );
    await admin.goto(`${world.origin}/console/runs/${run.id}`);
    const rows = admin.getByTestId('findings').locator('tbody tr');
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(100);
    // Recorded while the pages are not complete: shown once the pages reach it, not before.
    await t.query(`insert into findings (workspace_id, run_id, kind, severity, resource_id) values ($1, $2, 'many', 'INFO', 'p-131')`, [
      t.actor.workspaceId,
      run.id,
    ]);
    await admin.getByRole('button', { name: 'Load more findings' }).click();
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(131);
    expect(await admin.getByRole('button', { name: 'Load more findings' }).count()).toBe(0);
    await t.query(`insert into findings (workspace_id, run_id, kind, severity, resource_id) values ($1, $2, 'many', 'ERROR', 'p-132')`, [
      t.actor.workspaceId,
      run.id,
    ]);
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(132);
    const resources = await rows.locator('td:nth-child(3)').allTextContents();
    expect(resources).toEqual(Array.from({ length: 132 }, (_, i) => `p-${String(i + 1).padStart(3, '0')}`));
    await accessible(admin, 'run (paged findings)');
  });

  it('shows an OPERATOR only the actions it may take: none of the changes to a job another key created', async () => {
    // An endpoint and jobs of its own, delayed a day: the execution it looks for stays PENDING, and no
    // other test's executions (nor the worker's pace at running them) decide what the list shows.
    const endpoint = await t.service.registerEndpoint(t.actor, { name: 'console.operator', kind: 'HANDLER', handlerName: 'console.ok' });
    const tomorrow = () => new Date(Date.now() + 86_400_000);
    const theirs = (
      await t.service.createJob(t.actor, { endpointName: 'console.operator', kind: 'DELAYED', runAt: tomorrow(), name: 'admins-own' })
    ).job;
    const { key } = await t.service.createApiKey(t.actor, { name: 'console operator', role: 'OPERATOR' });
    const operatorActor = await t.service.authenticate(key);
    const mine = (
      await t.service.createJob(operatorActor, {
        endpointName: 'console.operator',
        kind: 'DELAYED',
        runAt: tomorrow(),
        name: 'operators-own',
      })
    ).job;
    const operator = await signedIn(key, 'operator');
    await expect.poll(() => operator.getByTestId('role').textContent()).toBe('OPERATOR');
    const buttonsOn = async (path: string) => {
      await operator.goto(`${world.origin}/console/${path}`);
      await operator.getByRole('heading', { level: 1 }).waitFor();
      await operator.getByText('Loading…').waitFor({ state: 'detached' });
      return (await operator.locator('.actions').getByRole('button').allTextContents()).filter((b) => b !== 'Save');
    };
    expect(await buttonsOn(`jobs/${theirs.id}`)).toEqual(['Trigger now']);
    expect(await buttonsOn(`jobs/${mine.id}`)).toEqual(['Trigger now', 'Pause', 'Edit', 'Cancel job']);
    // A pending execution of a job another key created: no Cancel in the list.
    const pending = (await t.service.executions(t.actor, { jobId: theirs.id })).edges[0]!.node;
    expect(pending.status).toBe('PENDING');
    await operator.goto(`${world.origin}/console/executions?status=PENDING&endpoint=${encodeURIComponent(endpoint.id)}`);
    const row = operator.locator(`tr[data-execution="${pending.id}"]`);
    await row.waitFor({ timeout: 10_000 });
    await operator.getByText('Loading…').waitFor({ state: 'detached' });
    expect(await row.getByRole('button').count()).toBe(0);
    await accessible(operator, 'job (operator)');
  });

  it("lists a delayed job's start as next while it is ahead, and no next once the job is cancelled", async () => {
    await t.service.registerEndpoint(t.actor, { name: 'console.next', kind: 'HANDLER', handlerName: 'console.ok' });
    const later = () => ({ endpointName: 'console.next', kind: 'DELAYED' as const, runAt: new Date(Date.now() + 86_400_000) });
    const ahead = (await t.service.createJob(t.actor, later())).job;
    const cancelled = (await t.service.createJob(t.actor, later())).job;
    await t.service.cancelJob(t.actor, cancelled.id);
    const page = await signedIn(adminKey, 'next');
    await page.goto(`${world.origin}/console/jobs`);
    const row = (id: string) => page.locator(`tr[data-job="${id}"]`);
    await row(ahead.id).waitFor({ timeout: 10_000 });
    // Its start and its creation; the cancelled one only its creation.
    expect(await row(ahead.id).locator('time').count()).toBe(2);
    expect(await row(cancelled.id).locator('time').count()).toBe(1);
  });

  it('isolates text others wrote, so a bidirectional override in a job name reverses nothing around it', async () => {
    await t.service.registerEndpoint(t.actor, { name: 'console.bidi', kind: 'HANDLER', handlerName: 'console.ok' });
    const name = 'x\u202Eevil.target no';
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'console.bidi',
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 86_400_000),
      name: 'bidi',
    });
    // As a name stored before names refused bidirectional controls (and as any text others wrote).
    await t.query('update jobs set name = $2 where id = $1', [job.id, name]);
    const execution = (await t.service.executions(t.actor, { jobId: job.id })).edges[0]!.node;
    const page = await signedIn(adminKey, 'bidi');
    await page.goto(`${world.origin}/console/executions/${execution.id}`);
    const link = page.getByRole('link', { name });
    await link.waitFor({ timeout: 10_000 });
    // The link's text is isolated from " on console.bidi" after it, as a <bdi> would be.
    expect(await link.evaluate((a) => getComputedStyle(a).unicodeBidi)).toBe('isolate');
    // What made it, in words: a one-off job's creation, not "SCHEDULE".
    expect(await page.getByTestId('execution-trigger').textContent()).toBe("Its job's creation (DELAYED)");
    // When it is due, as the page's other times: local, with the UTC instant on hover.
    const due = page.getByTestId('waiting-for').locator('time');
    expect(await due.getAttribute('datetime')).toMatch(/^\d{4}-\d{2}-\d{2}T.*Z$/);
    expect(await page.getByTestId('waiting-for').textContent()).not.toMatch(/\d{4}-\d{2}-\d{2}T/);
    await screenshot(page, 'execution-bidi-name');
    await page.goto(`${world.origin}/console/jobs/${job.id}`);
    await page.locator('#job-title bdi').waitFor({ timeout: 10_000 });
    expect(await page.locator('#job-title bdi').textContent()).toBe(name);
  });

  it('passes axe on the remaining screens: executions, jobs, audit log and API keys', async () => {
    for (const [section, heading] of [
      ['Executions', 'Executions'],
      ['Jobs', 'Jobs'],
      ['Runs', 'Runs'],
      ['Audit log', 'Audit log'],
      ['API keys', 'API keys'],
    ] as const) {
      await go(admin, section);
      await admin.getByRole('heading', { name: heading, exact: true }).waitFor();
      await admin.getByText('Loading…').waitFor({ state: 'detached' });
      await accessible(admin, section);
    }
    await screenshot(admin, 'audit-and-keys');
    expect(problemsOf(admin)).toEqual([]);
  });

  it("is driven by the keyboard alone, and shows times in the viewer's zone with the UTC instant on hover", async () => {
    // A tab of its own and a job of its own: what the keys reach does not depend on what the tests
    // before it did in the shared admin tab, nor on their jobs (the test runs alone with -t too).
    await t.service.registerEndpoint(t.actor, { name: 'console.keyboard', kind: 'HANDLER', handlerName: 'console.ok' });
    await t.service.createJob(t.actor, { endpointName: 'console.keyboard', kind: 'IMMEDIATE', name: 'keyboard-one' });
    const page = await signedIn(adminKey, 'keyboard');
    await page.goto(`${world.origin}/console/`);
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    // The screen is settled (its data shown, its subscriptions live) and nothing holds the focus: the
    // first Tab starts from the top of the page, not from wherever a late render put it.
    await expect.poll(() => page.getByText('Loading…').count()).toBe(0);
    await expect.poll(() => page.getByTestId('live-state').textContent(), { timeout: 10_000 }).toBe('Live');
    expect(await page.evaluate(() => document.activeElement === document.body)).toBe(true);
    // Tab from the top: the skip link first, then on to the navigation's Jobs link, then Enter.
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    for (let i = 0; i < 20; i++) {
      if ((await page.evaluate(() => document.activeElement?.textContent)) === 'Jobs') break;
      await page.keyboard.press('Tab');
    }
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Jobs', exact: true }).waitFor();
    const time = page.getByTestId('jobs').locator('time').first();
    const iso = (await time.getAttribute('datetime'))!;
    // The browser runs in Europe/Paris: the text is Paris time, the title the UTC instant.
    expect(await time.getAttribute('title')).toBe(`${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')} UTC`);
    const paris = new Intl.DateTimeFormat('en-GB', {
      timeZone: 'Europe/Paris',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    }).format(new Date(iso));
    expect(await time.textContent()).toContain(paris);
  });

  it("writes times in the viewer's locale, one clock for a table and a chart's axis: 12-hour in en-US, 24-hour in de-DE", async () => {
    for (const [locale, clockOf] of [
      // h:mm AM/PM (ICU may put a narrow no-break space before the period: \s matches it).
      ['en-US', (c: ParisClock, seconds: string) => new RegExp(`^${c.h % 12 || 12}:${c.mm}${seconds}\\s${c.h < 12 ? 'AM' : 'PM'}$`)],
      ['de-DE', (c: ParisClock, seconds: string) => new RegExp(`^${String(c.h).padStart(2, '0')}:${c.mm}${seconds}$`)],
    ] as const) {
      const page = await signedIn(adminKey, `locale-${locale}`, undefined, locale);
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      const axis = page.locator('figure.chart').first().locator('g.axis-time').last();
      const axisText = (await axis.locator('text').textContent())!;
      const axisInstant = (await axis.locator('title').textContent())!;
      expect(axisInstant).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:00 UTC$/);
      expect({ locale, axisText }).toEqual({ locale, axisText: expect.stringMatching(clockOf(parisClock(axisInstant), '')) });
      await screenshot(page, `overview-${locale}`);

      await go(page, 'Jobs');
      const time = page.getByTestId('jobs').locator('time').first();
      await time.waitFor();
      const iso = (await time.getAttribute('datetime'))!;
      const cell = (await time.textContent())!;
      const c = parisClock(iso);
      // The table's time of day is the axis's, with its seconds: the same clock.
      const timeOfDay = cell.slice(cell.lastIndexOf(', ') + 2);
      expect({ locale, timeOfDay }).toEqual({ locale, timeOfDay: expect.stringMatching(clockOf(c, `:${c.ss}`)) });
      expect(await time.getAttribute('title')).toBe(`${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')} UTC`);
      await screenshot(page, `jobs-${locale}`);
      await page.context().close();
    }
  });

  it('shows a VIEWER no action it may not take', async () => {
    const { key } = await t.service.createApiKey(t.actor, { name: 'console viewer', role: 'VIEWER' });
    const viewer = await signedIn(key, 'viewer');
    await expect.poll(() => viewer.getByTestId('role').textContent()).toBe('VIEWER');
    const nav = viewer.getByRole('navigation', { name: 'Sections' });
    expect(await nav.getByRole('link', { name: 'API keys' }).count()).toBe(0);
    expect(await nav.getByRole('link', { name: 'Audit log' }).count()).toBe(0);
    const job = (await t.query(`select id from jobs where name = 'hello-from-console'`)).rows[0].id as string;
    const run = (await t.query(`select id from runs where name = 'console.scan'`)).rows[0].id as string;
    // A failed execution to show in the dead-letter view.
    world.flakyHealthy.value = false;
    await t.service.createJob(t.actor, { endpointName: 'console.fragile', kind: 'IMMEDIATE', name: 'fragile-two' });
    await t
      .query(`update runs set status = 'PAUSED', pause_kind = 'CANCELLED', pause_reason = 'for the viewer test' where id = $1`, [run])
      .catch(() => {});
    const actions = /trigger|pause|resume|cancel|edit|retry|revoke|create|register|start run|run now|new job/i;
    for (const path of [
      '',
      'jobs',
      `jobs/${job}`,
      'executions?status=FAILED',
      'executions',
      'runs',
      `runs/${run}`,
      'handlers',
      'endpoints',
      'jobs/new',
    ]) {
      await viewer.goto(`${world.origin}/console/${path}`);
      await viewer.getByTestId('role').waitFor();
      await viewer.getByText('Loading…').waitFor({ state: 'detached' });
      if (path === 'executions?status=FAILED') {
        await viewer.getByTestId('executions').getByText('fragile-two').waitFor({ timeout: 20_000 });
        await screenshot(viewer, 'viewer-dead-letter');
      }
      const buttons = await viewer.getByRole('button').allTextContents();
      expect({ path, buttons: buttons.filter((b) => actions.test(b)) }).toEqual({ path, buttons: [] });
      expect({ path, links: await viewer.getByRole('link', { name: /new job|create a job|register/i }).allTextContents() }).toEqual({
        path,
        links: [],
      });
    }
  });

  it('says "reconnecting" while its socket is down, polls meanwhile, and is live again when the socket is back', async () => {
    const gate = { down: false, open: [] as WebSocketRoute[] };
    const page = await signedIn(adminKey, 'reconnecting', async (context) => {
      await context.routeWebSocket(/\/graphql$/, (ws) => {
        if (gate.down) return ws.close({ code: 1012, reason: 'down for the test' });
        ws.connectToServer();
        gate.open.push(ws);
      });
    });
    await go(page, 'Executions');
    await page.getByTestId('executions').waitFor();
    await expect.poll(() => page.getByTestId('live-state').textContent(), { timeout: 10_000 }).toBe('Live');
    gate.down = true;
    for (const ws of gate.open.splice(0)) await ws.close({ code: 1012, reason: 'cut by the test' });
    await expect.poll(() => page.getByTestId('live-state').textContent(), { timeout: 10_000 }).toBe('Reconnecting… (polling)');
    // No event can arrive: the new execution shows up through polling.
    await t.service.createJob(t.actor, { endpointName: 'console.greet', kind: 'IMMEDIATE', name: 'seen-by-polling' });
    await page
      .getByTestId('executions')
      .getByRole('row', { name: /seen-by-polling/ })
      .waitFor({ timeout: 20_000 });
    await screenshot(page, 'reconnecting');
    gate.down = false;
    await expect.poll(() => page.getByTestId('live-state').textContent(), { timeout: 20_000 }).toBe('Live');
  });

  it('creates a key that it shows once, and signs a tab out, saying why, when that key is revoked', async () => {
    await go(admin, 'API keys');
    await admin.getByLabel('Name').fill('console soon revoked');
    await admin.getByLabel('Role').selectOption('OPERATOR');
    await admin.getByRole('button', { name: 'Create key' }).click();
    const key = (await admin.getByTestId('new-key').textContent())!;
    expect(key).toMatch(/^jg_/);
    await admin.getByRole('button', { name: 'I have copied it' }).click();
    expect(await admin.getByTestId('new-key').count()).toBe(0);
    const page = await signedIn(key, 'revoked');
    await expect.poll(() => page.getByTestId('role').textContent()).toBe('OPERATOR');
    await expect.poll(() => page.getByTestId('live-state').textContent(), { timeout: 10_000 }).toBe('Live');
    await admin.getByRole('button', { name: 'Revoke key console soon revoked' }).click();
    await admin.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).click();
    await admin
      .getByTestId('keys')
      .getByRole('row', { name: /console soon revoked/ })
      .getByText('REVOKED', { exact: true })
      .waitFor();
    await page
      .getByRole('alert')
      .getByText(/revoked/)
      .waitFor({ timeout: 10_000 });
    await page.getByLabel('API key').waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem('jobgate.console.key'))).toBeNull();
    await screenshot(page, 'revoked');
    // Over HTTP too: a key the API answers UNAUTHENTICATED when it is typed in signs the tab out,
    // saying it was not accepted (not that it was revoked: a mistyped key never was valid).
    for (const typed of [key, 'jg_wrongkey']) {
      await page.getByLabel('API key').fill(typed);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page
        .getByRole('alert')
        .getByText(/That API key was not accepted/)
        .waitFor({ timeout: 10_000 });
      await page.getByLabel('API key').waitFor();
      expect(await page.getByRole('alert').textContent()).not.toMatch(/revoked/);
    }
  });
});
