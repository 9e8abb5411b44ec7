/**
 * Every screen of the console, with something on it, at 1400 and 390 px wide, in light and dark
 * (the system setting, prefers-color-scheme): axe-core finds no serious or critical violation, a
 * phone never scrolls the page sideways (tables scroll inside their box), and each view is
 * screenshot under test-artifacts/ for a person to look at; so is a phone's menu, open. The
 * Batches screen is not among them yet.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { evaluateAlerts } from '../../src/service/engine/alerts/evaluator.js';
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
/** Ids of the things the detail screens show. */
const ids = { job: '', failedExecution: '', run: '', alert: '' };

/** Waits, polling, until `probe` answers something truthy; fails after `ms`. */
async function until<T>(probe: () => Promise<T | undefined | null | false>, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  ensureConsoleBuilt();
  t = await createTestDb();
  world = await startConsoleWorld(t.url);
  browser = await launchChromium();
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'screens e2e admin')).key;
  await t.service.registerEndpoint(t.actor, { name: 'a11y.ok', kind: 'HANDLER', handlerName: 'console.ok' });
  await t.service.registerEndpoint(t.actor, { name: 'a11y.failing', kind: 'HANDLER', handlerName: 'console.flaky', maxAttempts: 1 });
  await t.service.createAlertRule(t.actor, { name: 'a11y failures', condition: 'EXECUTION_FAILED', email: true });
  ids.job = (await t.service.createJob(t.actor, { endpointName: 'a11y.ok', kind: 'IMMEDIATE', name: 'nightly invoices' })).job.id;
  await t.service.createJob(t.actor, { endpointName: 'a11y.ok', kind: 'CRON', name: 'hourly digest', cron: { expression: '0 * * * *' } });
  await t.service.createJob(t.actor, { endpointName: 'a11y.failing', kind: 'IMMEDIATE', name: 'refund sync' });
  ids.failedExecution = await until(
    async () => (await t.query(`select id from executions where status = 'FAILED' limit 1`)).rows[0]?.id as string | undefined,
    30_000,
    'a failed execution',
  );
  ids.alert = await until(
    async () => {
      await evaluateAlerts(t.database.pool, t.actor.workspaceId);
      return (await t.query(`select id from alert_notifications limit 1`)).rows[0]?.id as string | undefined;
    },
    30_000,
    'an alert',
  );
  // A run with findings and a cursor: its worker has registered its handler by the time triggerRun takes it.
  world.scanBudget.value = 4;
  ids.run = await until(async () => (await t.service.triggerRun(t.actor, { name: 'console.scan', force: true })).run.id, 30_000, 'a run');
  await until(async () => (await t.query(`select 1 from findings where run_id = $1`, [ids.run])).rows.length > 0, 30_000, 'findings');
}, 180_000);
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await world?.stop();
  await t?.close();
});

async function signedIn(key: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, timezoneId: 'Europe/Paris', locale: 'en-GB' });
  contexts.push(context);
  const page = await context.newPage();
  await signIn(page, world.origin, key);
  return page;
}

/** What axe finds serious or critical on the page as shown. */
const violations = seriousViolations;

/** The screens, by path under /console/ (read once beforeAll has made what they show), and a heading each shows once it has loaded. */
const SCREENS: { name: string; path: () => string; heading: RegExp }[] = [
  { name: 'overview', path: () => '', heading: /^Overview/ },
  { name: 'jobs', path: () => 'jobs', heading: /^Jobs/ },
  { name: 'new-job', path: () => 'jobs/new', heading: /job/i },
  { name: 'job', path: () => `jobs/${ids.job}`, heading: /nightly invoices/ },
  { name: 'executions', path: () => 'executions', heading: /^Executions/ },
  { name: 'executions-searched', path: () => 'executions?error=flaky&status=FAILED', heading: /^Dead-letter queue/ },
  { name: 'execution', path: () => `executions/${ids.failedExecution}`, heading: /Execution/ },
  { name: 'runs', path: () => 'runs', heading: /^Runs/ },
  { name: 'run', path: () => `runs/${ids.run}`, heading: /console\.scan/ },
  { name: 'handlers', path: () => 'handlers', heading: /^Handlers/ },
  { name: 'endpoints', path: () => 'endpoints', heading: /^Endpoints/ },
  { name: 'alerts', path: () => 'alerts', heading: /^Alerts/ },
  { name: 'alert', path: () => `alerts/${ids.alert}`, heading: /Alert/ },
  { name: 'audit', path: () => 'audit', heading: /Audit/ },
  { name: 'keys', path: () => 'keys', heading: /keys/i },
];

// A test per screen, each with its own time: the whole walk as one test took 177 s of its 300 on
// a loaded machine and ran out on a busier one. The screens share one signed-in page, visited in
// turn, as a person moving through the console does.
describe('every screen', () => {
  let page: Page;
  beforeAll(async () => {
    page = await signedIn(adminKey);
  });

  for (const screen of SCREENS) {
    it(`${screen.name}: passes axe at 1400 and 390 px, light and dark, and never scrolls a phone sideways`, async () => {
      onTestFailed(async () => {
        await screenshot(page, `screens-a11y-${screen.name}-failed`).catch(() => {});
      });
      const found: string[] = [];
      // In-app navigation, as a link does: the session stays, the live connection too.
      await page.evaluate((to) => {
        history.pushState(null, '', to);
        dispatchEvent(new PopStateEvent('popstate'));
      }, `/console/${screen.path()}`);
      try {
        await page.getByRole('heading', { level: 1, name: screen.heading }).waitFor({ timeout: 15_000 });
        await expect.poll(() => page.getByText('Loading…').count(), { timeout: 15_000 }).toBe(0);
        for (const width of [1400, 390]) {
          for (const colorScheme of ['light', 'dark'] as const) {
            const view = `${screen.name} at ${width} px, ${colorScheme}`;
            await page.setViewportSize({ width, height: 900 });
            await page.emulateMedia({ colorScheme });
            found.push(...(await violations(page, view)));
            const scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
            if (scrollWidth > width) found.push(`${view}: the page is ${scrollWidth} px wide`);
            await screenshot(page, `screens-${screen.name}-${width}-${colorScheme}`);
          }
        }
      } finally {
        await page.setViewportSize({ width: 1400, height: 900 });
        await page.emulateMedia({ colorScheme: 'light' });
      }
      expect(found).toEqual([]);
    });
  }

  it("a phone's menu, open, passes axe in both schemes", async () => {
    onTestFailed(async () => {
      await screenshot(page, 'screens-a11y-menu-failed').catch(() => {});
    });
    const found: string[] = [];
    await page.setViewportSize({ width: 390, height: 900 });
    await page.getByRole('button', { name: 'Menu' }).click();
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Executions', exact: true }).waitFor();
    for (const colorScheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme });
      found.push(...(await violations(page, `the open menu at 390 px, ${colorScheme}`)));
      await screenshot(page, `screens-menu-390-${colorScheme}`);
    }
    expect(found).toEqual([]);
  });
});
