/**
 * The console's Alerts screen in a real browser against a real jobgate process: the empty state,
 * an ADMIN's read-only list of the rules, a real alert (an execution that ends FAILED under an
 * EXECUTION_FAILED rule, the evaluator run as the alert tests run it) appearing live without a
 * reload, what a VIEWER sees (never the rules), keyboard navigation and axe-core's rules.
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
  withDocuments,
  type ConsoleWorld,
  signIn,
  seriousViolations,
} from '../support/console.js';

let t: TestDb;
let world: ConsoleWorld;
let browser: Browser;
let adminKey: string;
let viewerKey: string;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  ensureConsoleBuilt();
  t = await createTestDb();
  world = await startConsoleWorld(t.url);
  browser = await launchChromium();
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'alerts e2e admin')).key;
  viewerKey = (await t.service.bootstrapKey('default', 'VIEWER', 'alerts e2e viewer')).key;
  await t.service.registerEndpoint(t.actor, { name: 'console.alerting', kind: 'HANDLER', handlerName: 'console.flaky', maxAttempts: 1 });
}, 180_000);
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await world?.stop();
  await t?.close();
});

/** A fresh tab signed in with `key`, recording the GraphQL operations it sends. */
async function signedIn(key: string, name: string): Promise<{ page: Page; sent: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Europe/Paris' });
  contexts.push(context);
  const page = await context.newPage();
  const sent: string[] = [];
  page.on('request', (r) => {
    if (r.url().endsWith('/graphql') && r.method() === 'POST') sent.push(withDocuments(r.postData() ?? ''));
  });
  page.on('websocket', (ws) => ws.on('framesent', (f) => sent.push(withDocuments(String(f.payload)))));
  onTestFailed(async () => {
    await screenshot(page, `${name}-failed`).catch(() => {});
  });
  await signIn(page, world.origin, key);
  return { page, sent };
}

async function accessible(page: Page, screen: string) {
  const bad = await seriousViolations(page, screen);
  expect(bad).toEqual([]);
}

describe('the Alerts screen', { timeout: 90_000 }, () => {
  it('shows the empty state and the rules, then a real alert arriving live without a reload; a VIEWER sees it but never asks for the rules', async () => {
    await t.service.createAlertRule(t.actor, { name: 'console failures', condition: 'EXECUTION_FAILED', email: true });
    const { page: admin } = await signedIn(adminKey, 'alerts-admin');
    await expect.poll(() => admin.getByTestId('live-state').textContent(), { timeout: 10_000 }).toBe('Live');
    await admin.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Alerts', exact: true }).click();
    await admin.getByRole('heading', { name: 'Alerts', level: 1 }).waitFor();
    await admin.getByTestId('alerts-empty').getByText('when an ADMIN creates alert rules').waitFor();
    // The ADMIN's read-only list of rules, with condition and destinations.
    const rules = admin.getByTestId('alert-rules');
    await rules.getByText('console failures').waitFor();
    expect(await rules.textContent()).toContain('EXECUTION_FAILED');
    expect(await rules.textContent()).toContain('Email to the default recipients');
    await accessible(admin, 'alerts (empty)');

    // A real alert: an execution that ends FAILED, and the evaluator's pass.
    await admin.evaluate(() => ((window as unknown as { marker: number }).marker = 7));
    await t.service.createJob(t.actor, { endpointName: 'console.alerting', kind: 'IMMEDIATE', name: 'alerting-job' });
    const table = admin.getByTestId('alerts');
    await expect
      .poll(
        async () => {
          await evaluateAlerts(t.database.pool, t.actor.workspaceId);
          return table.getByRole('link', { name: 'alerting-job', exact: true }).count();
        },
        { timeout: 30_000, interval: 500 },
      )
      .toBeGreaterThan(0);
    expect(await admin.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(7);
    const row = table.locator('tbody tr').first();
    const text = await row.textContent();
    expect(text).toContain('FIRING');
    expect(text).toContain('EXECUTION_FAILED');
    expect(text).toContain('console failures');
    // Times in the browser's zone, the UTC instant on hover.
    expect(await row.locator('time').first().getAttribute('title')).toMatch(/ UTC$/);
    await accessible(admin, 'alerts (one alert)');
    await screenshot(admin, 'alerts');

    // The alert's own page, from the list.
    await row.getByRole('link', { name: /^FIRING alert/ }).click();
    await admin.getByRole('heading', { name: /Alert FIRING EXECUTION_FAILED/ }).waitFor();
    const facts = admin.getByTestId('alert-facts');
    expect(await facts.textContent()).toContain('console failures');
    await facts.getByRole('link', { name: 'alerting-job', exact: true }).waitFor();
    expect(await admin.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(7);
    await accessible(admin, 'alert');
    await screenshot(admin, 'alert');

    // A VIEWER, by keyboard: the alert, no rules, and no request for them.
    const { page: viewer, sent } = await signedIn(viewerKey, 'alerts-viewer');
    await viewer.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Alerts', exact: true }).focus();
    await viewer.keyboard.press('Enter');
    await viewer.getByTestId('alerts').getByRole('link', { name: 'alerting-job', exact: true }).waitFor();
    expect(await viewer.getByRole('heading', { name: 'Alert rules' }).count()).toBe(0);
    expect(await viewer.getByRole('alert').count()).toBe(0);
    expect(sent.some((s) => s.includes('alertRules'))).toBe(false);
    expect(sent.some((s) => s.includes('alertRaised'))).toBe(true);
    await accessible(viewer, 'alerts (viewer)');
  });

  it("shows a findings alert's findings grouped by severity and kind, worst first, and how long it has held", async () => {
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'scan findings',
      condition: 'FINDING',
      minSeverity: 'WARNING',
      handlerNames: ['console.scan'],
      email: true,
    });
    world.scanBudget.value = 100;
    const { run } = await t.service.triggerRun(t.actor, { name: 'console.scan' });
    await expect.poll(async () => (await t.service.run(t.actor, run.id)).status, { timeout: 30_000 }).toBe('COMPLETED');
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    const { rows } = await t.query(`select id from alert_notifications where rule_id = $1`, [rule.id]);
    expect(rows).toHaveLength(1);
    const { page: admin } = await signedIn(adminKey, 'alerts-findings');
    await admin.goto(`${world.origin}/console/alerts/${rows[0].id}`);
    const groups = admin.getByTestId('finding-groups');
    await groups.waitFor();
    // console.scan records a finding for every third item of 20: 3 ERROR "stale", 4 WARNING "orphan".
    const cells = await groups
      .locator('tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].slice(0, 3).map((td) => td.textContent)));
    expect(cells).toEqual([
      ['ERROR', 'stale', '3'],
      ['WARNING', 'orphan', '4'],
    ]);
    await groups.getByRole('link', { name: 'r-3' }).waitFor();
    expect(await admin.getByTestId('alert-facts').textContent()).toContain('Elapsed since first seen');
    await accessible(admin, 'alert (findings)');
  });
});
