/**
 * Alert triage in a real browser against a real jobgate process: what fires now, grouped by rule;
 * an ADMIN acknowledges one subject and silences another from the Alerts screen, and the effect
 * is checked through the API (and a silenced occurrence is recorded, shown silenced, not
 * delivered); a notification links to its subject and its delivery; the overview counts open
 * alerts beside the execution figures; a VIEWER sees the same with no action. Each screen passes
 * axe at 1400 and 390 px, light and dark, and is screenshot.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { evaluateAlerts } from '../../src/service/engine/alerts/evaluator.js';
import type { Actor } from '../../src/service/kernel/actor.js';
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
let viewerKey: string;
let admin: Actor;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  ensureConsoleBuilt();
  t = await createTestDb();
  world = await startConsoleWorld(t.url);
  browser = await launchChromium();
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'triage admin')).key;
  viewerKey = (await t.service.bootstrapKey('default', 'VIEWER', 'triage viewer')).key;
  admin = await t.service.authenticate(adminKey);
  await t.service.registerEndpoint(t.actor, { name: 'console.triage', kind: 'HANDLER', handlerName: 'console.flaky', maxAttempts: 1 });
}, 180_000);
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await world?.stop();
  await t?.close();
});

async function signedIn(key: string, name: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, timezoneId: 'Europe/Paris' });
  contexts.push(context);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  (page as Page & { problems: string[] }).problems = problems;
  onTestFailed(async () => {
    await screenshot(page, `${name}-failed`).catch(() => {});
  });
  await signIn(page, world.origin, key);
  return page;
}

async function accessible(page: Page, screen: string) {
  const bad = await seriousViolations(page, screen);
  expect(bad).toEqual([]);
}

/** axe at 1400 and 390 px, light and dark; a phone never scrolls the page sideways; a screenshot of each. */
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
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.emulateMedia({ colorScheme: 'light' });
}

/** A job on the failing handler that has run to FAILED, and the evaluator's pass over it. */
async function failedJob(name: string): Promise<string> {
  const { job } = await t.service.createJob(t.actor, { endpointName: 'console.triage', kind: 'IMMEDIATE', name });
  await expect
    .poll(async () => (await t.query(`select status from executions where job_id = $1`, [job.id])).rows[0]?.status, { timeout: 15_000 })
    .toBe('FAILED');
  await evaluateAlerts(t.database.pool, t.actor.workspaceId);
  return job.id;
}

const stateOf = async (jobId: string) =>
  (await t.service.alertStates(admin, {}, { first: 50 })).edges.find((e) => e.node.subjectId === jobId)?.node;

describe('alert triage in the console', { timeout: 180_000 }, () => {
  it('acknowledges one subject and silences another from the Alerts screen, with the effect in the API; the notification links to its subject and delivery; the overview counts open alerts', async () => {
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'on call failures',
      condition: 'EXECUTION_FAILED',
      email: true,
      rateLimitMs: 1000,
    });
    const jobA = await failedJob('triage-a');
    const jobB = await failedJob('triage-b');

    const page = await signedIn(adminKey, 'triage-admin');
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Alerts', exact: true }).click();
    const group = page.locator('[data-testid="firing-rule"][data-rule="on call failures"]');
    const rowA = group.locator('tr[data-subject="triage-a"]');
    const rowB = group.locator('tr[data-subject="triage-b"]');
    await rowA.waitFor();
    await rowB.waitFor();
    expect(await rowA.textContent()).toContain('OPEN');
    await inEveryView(page, 'alerts-firing');

    // Acknowledge triage-a.
    await rowA.getByRole('button', { name: 'Acknowledge on call failures on triage-a' }).click();
    await expect.poll(() => rowA.textContent(), { timeout: 10_000 }).toContain('ACKNOWLEDGED');
    expect(await rowA.textContent()).toContain('by triage admin');
    expect(await rowA.getByRole('button', { name: /^Acknowledge/ }).count()).toBe(0);
    expect(await stateOf(jobA)).toMatchObject({ status: 'ACKNOWLEDGED', acknowledgedBy: 'triage admin' });
    expect(await stateOf(jobB)).toMatchObject({ status: 'OPEN' });

    // Silence triage-b for a day.
    await rowB.getByLabel('Silence on call failures on triage-b for').selectOption({ label: '1 day' });
    await rowB.getByRole('button', { name: 'Silence on call failures on triage-b', exact: true }).click();
    await page.getByTestId('silences').getByRole('link', { name: 'triage-b' }).waitFor();
    await expect.poll(() => rowB.textContent(), { timeout: 10_000 }).toContain('Silenced until');
    const silences = (await t.service.alertSilences(admin, { activeOnly: true })).edges.map((e) => e.node);
    expect(silences).toHaveLength(1);
    expect(silences[0]).toMatchObject({
      ruleId: rule.id,
      subjectType: 'JOB',
      subjectId: jobB,
      subjectName: 'triage-b',
      createdBy: 'triage admin',
      active: true,
    });
    expect(silences[0]!.endsAt.getTime() - silences[0]!.startsAt.getTime()).toBe(86_400_000);
    await inEveryView(page, 'alerts-triaged');

    // triage-b fails again under the silence: recorded (a digest once the rate limit's window ends), not delivered.
    await t.service.triggerJob(t.actor, { id: jobB, force: true });
    let silencedId: string | undefined;
    await expect
      .poll(
        async () => {
          await evaluateAlerts(t.database.pool, t.actor.workspaceId);
          const alerts = (await t.service.alerts(admin, { ruleId: rule.id }, { first: 20 })).edges.map((e) => e.node);
          silencedId = alerts.find((a) => a.subjectId === jobB && a.silenceId)?.id;
          return silencedId;
        },
        { timeout: 30_000, interval: 300 },
      )
      .toBeDefined();
    const silenced = await t.service.alert(admin, silencedId!);
    expect(silenced).toMatchObject({ emailJobId: null, webhookJobId: null, emailDelivery: 'NONE' });
    await page.goto(`${world.origin}/console/alerts/${silencedId}`);
    await page.getByTestId('alert-delivery').getByText('Recorded, not delivered').waitFor();
    await inEveryView(page, 'alert-silenced');

    // triage-a's notification: its subject, its delivery job, and its state.
    const first = (await t.service.alerts(admin, { ruleId: rule.id }, { first: 20 })).edges
      .map((e) => e.node)
      .find((a) => a.subjectId === jobA)!;
    await page.goto(`${world.origin}/console/alerts/${first.id}`);
    const facts = page.getByTestId('alert-facts');
    await facts.getByRole('link', { name: 'triage-a', exact: true }).waitFor();
    expect(await page.getByTestId('alert-state').textContent()).toContain('ACKNOWLEDGED');
    await facts.getByRole('link', { name: 'The failed execution' }).waitFor();
    await inEveryView(page, 'alert-delivered');
    await facts.getByRole('link', { name: /^Email delivery job/ }).click();
    await page.waitForURL(`**/console/jobs/${first.emailJobId}`);

    // Lift the silence from the Alerts screen.
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Alerts', exact: true }).click();
    await page.getByRole('button', { name: 'Lift the silence of on call failures on triage-b' }).click();
    await expect.poll(() => page.getByTestId('silences').count(), { timeout: 10_000 }).toBe(0);
    expect((await t.service.alertSilences(admin, { activeOnly: true })).edges).toHaveLength(0);
    expect((await t.service.alertSilence(admin, silences[0]!.id)).endedBy).toBe('triage admin');

    // The overview: open alerts (triage-b; triage-a is acknowledged) beside the execution figures.
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Overview', exact: true }).click();
    const tiles = page.getByTestId('overview-tiles');
    await expect.poll(() => tiles.getByRole('link', { name: /Open alerts/ }).textContent(), { timeout: 10_000 }).toMatch(/^1\D/);
    expect(await tiles.textContent()).toContain('Failing interval handlers');
    expect(await tiles.textContent()).toContain('Failed runs');
    expect(await tiles.textContent()).toContain('Failed (dead-letter)');
    await inEveryView(page, 'overview');
    expect((page as Page & { problems: string[] }).problems).toEqual([]);
  });

  it('shows a VIEWER what fires, acknowledged by whom, with no action', async () => {
    const page = await signedIn(viewerKey, 'triage-viewer');
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Alerts', exact: true }).click();
    const rowA = page.locator('tr[data-subject="triage-a"]');
    await rowA.waitFor();
    expect(await rowA.textContent()).toContain('by triage admin');
    expect(await page.getByRole('button', { name: /^(Acknowledge|Silence|Lift)/ }).count()).toBe(0);
    await inEveryView(page, 'alerts-viewer');
  });
});
