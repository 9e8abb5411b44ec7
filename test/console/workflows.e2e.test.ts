/**
 * The console's workflow screens in a real browser against a real jobgate process (gateway and
 * worker): a batch made over the GraphQL API, its counts moving live on the Batch screen as its
 * members end (no reload), its failed member's scheduled execution retried from a selection (not a newer Run now), a second batch cancelled
 * with the confirmation that counts its unfinished members (the effect read back through the API),
 * what a VIEWER is not offered, and a diamond of jobs (A before B and C, both before D) on the
 * Job screen's workflow graph, moving live too, with a member's batch, the batch an onComplete job
 * runs after and a child's parent execution; the Batches list's state tabs; an execution's child
 * jobs and their progress on its page. axe at 1400 and 390 px, light and dark; screenshots in /tmp.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import {
  ensureConsoleBuilt,
  launchChromium,
  screenshot,
  startConsoleWorld,
  type ConsoleWorld,
  signIn,
  seriousViolations,
} from '../support/console.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
let world: ConsoleWorld;
let browser: Browser;
let adminKey: string;
let viewerKey: string;
let operatorKey: string;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  ensureConsoleBuilt();
  t = await createTestDb();
  g = createTestGateway(t);
  world = await startConsoleWorld(t.url);
  browser = await launchChromium();
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'workflows e2e admin')).key;
  viewerKey = (await t.service.bootstrapKey('default', 'VIEWER', 'workflows e2e viewer')).key;
  operatorKey = (await t.service.bootstrapKey('default', 'OPERATOR', 'workflows e2e operator')).key;
  for (const [name, handlerName] of [
    ['wf.ok', 'console.ok'],
    ['wf.gated', 'console.gated'],
    ['wf.flaky', 'console.flaky'],
  ] as const)
    await t.service.registerEndpoint(t.actor, { name, kind: 'HANDLER', handlerName, maxAttempts: 1, timeoutMs: 120_000 });
}, 180_000);
afterAll(async () => {
  world.gateOpen.value = true;
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await world?.stop();
  await g?.close();
  await t?.close();
});

/** A GraphQL operation through the API (the real yoga server, as the default workspace's ADMIN); fails on any error. */
async function api<T = any>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const r = await g.gql<T>(query, variables);
  expect(r.errors ?? []).toEqual([]);
  return r.data!;
}

async function signedIn(key: string, name: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, timezoneId: 'Europe/Paris', locale: 'en-GB' });
  contexts.push(context);
  const page = await context.newPage();
  onTestFailed(async () => {
    await screenshot(page, `${name}-failed`).catch(() => {});
  });
  await signIn(page, world.origin, key);
  await expect.poll(() => page.getByTestId('live-state').textContent(), { timeout: 10_000 }).toBe('Live');
  return page;
}

/**
 * axe at 1400 and 390 px, light and dark, with no serious or critical violation, the page never
 * wider than the screen; a screenshot of each in /tmp.
 */
async function inBothWidths(page: Page, name: string) {
  for (const width of [1400, 390]) {
    for (const colorScheme of ['light', 'dark'] as const) {
      await page.setViewportSize({ width, height: 900 });
      await page.emulateMedia({ colorScheme });
      const bad = await seriousViolations(page, `${name} at ${width} px, ${colorScheme}`);
      expect(bad).toEqual([]);
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
      await page.screenshot({ path: `/tmp/workflows-${name}-${width}${colorScheme === 'dark' ? '-dark' : ''}.png`, fullPage: true });
    }
  }
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.emulateMedia({ colorScheme: 'light' });
}

const marked = (page: Page) => page.evaluate(() => (window as unknown as { marker?: number }).marker);

const CREATE_BATCH = `mutation ($input: CreateBatchInput!) { createBatch(input: $input) { batch { id onComplete { id } } } }`;
const BATCH = `query ($id: ID!) {
  batch(id: $id) { open completedAt total pending succeeded failed cancelled onComplete { id state lastExecution { status } }
    jobs(first: 20) { nodes { id name state batchOutcome lastExecution { id status } scheduledExecution { id } } } }
}`;
const member = (endpointName: string, name: string, extra: object = {}) => ({ endpointName, kind: 'IMMEDIATE', name, ...extra });

// The guard against a hang only (the waits inside name what they await: 15 s polls, Playwright's
// 30 s per action). The Batch screen's first test runs 20 axe passes and full-page screenshots: 36 s
// alone on 2 cores, 117 s in the process group beside two other files, and past 120 s once in CI.
const HANG_GUARD_MS = 300_000;

describe('the Batch screen', { timeout: HANG_GUARD_MS }, () => {
  it("shows the counts moving live as members end, the onComplete job linked, retries a failed member from a selection, and a member's Job screen names its batch", async () => {
    world.gateOpen.value = false;
    world.flakyHealthy.value = false;
    const { createBatch } = await api(CREATE_BATCH, {
      input: {
        name: 'nightly import',
        jobs: [member('wf.gated', 'part-1'), member('wf.gated', 'part-2'), member('wf.gated', 'part-3'), member('wf.flaky', 'part-4')],
        onComplete: { endpointName: 'wf.ok', kind: 'IMMEDIATE', name: 'import report' },
      },
    });
    const batchId: string = createBatch.batch.id;
    const admin = await signedIn(adminKey, 'workflows-batch');

    // The Batches screen lists it; its row leads to the Batch screen.
    await admin.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Batches', exact: true }).click();
    await admin.getByRole('heading', { name: 'Batches', level: 1 }).waitFor();
    const row = admin.locator(`[data-batch="${batchId}"]`);
    await row.getByRole('link', { name: 'nightly import' }).waitFor();
    expect(await row.textContent()).toContain('CLOSED');
    await inBothWidths(admin, 'batches');
    // The state tabs filter the list, in the address.
    const states = admin.getByRole('navigation', { name: 'State' });
    await states.getByRole('link', { name: 'Open' }).click();
    await admin.getByText('No open batch: every batch is closed.').waitFor();
    expect(new URL(admin.url()).searchParams.get('state')).toBe('OPEN');
    await states.getByRole('link', { name: 'Closed' }).click();
    await row.getByRole('link', { name: 'nightly import' }).waitFor();
    expect(await states.getByRole('link', { name: 'Closed' }).getAttribute('aria-current')).toBe('page');
    await admin.reload();
    await row.getByRole('link', { name: 'nightly import' }).waitFor();
    expect(await admin.getByRole('table', { name: 'Closed batches, newest first' }).count()).toBe(1);
    await inBothWidths(admin, 'batches-closed');
    await states.getByRole('link', { name: 'All' }).click();
    await expect.poll(() => new URL(admin.url()).searchParams.get('state')).toBeNull();
    await admin.evaluate(() => ((window as unknown as { marker: number }).marker = 7));
    await row.getByRole('link', { name: 'nightly import' }).click();
    await admin.getByRole('heading', { name: /nightly import/, level: 1 }).waitFor();

    // The failing member ends at once; the three gated ones hold.
    const counts = admin.getByTestId('batch-counts');
    await expect.poll(() => counts.textContent(), { timeout: 15_000 }).toBe('4 in all: 3 not ended, 0 succeeded, 1 failed, 0 cancelled');
    expect(await admin.getByTestId('batch-facts').textContent()).toContain('import report');
    await inBothWidths(admin, 'batch-running');

    // The members end: the counts move without a reload, and the batch completes.
    world.gateOpen.value = true;
    await expect.poll(() => counts.textContent(), { timeout: 15_000 }).toBe('4 in all: 0 not ended, 3 succeeded, 1 failed, 0 cancelled');
    await admin.getByRole('heading', { name: /nightly import COMPLETED/, level: 1 }).waitFor();
    expect(await admin.getByRole('progressbar').first().getAttribute('aria-valuenow')).toBe('100');
    expect(await marked(admin)).toBe(7);
    const onCompleteId: string = createBatch.batch.onComplete.id;
    const report = admin.getByTestId('batch-facts').getByRole('link', { name: 'import report' });
    expect(await report.getAttribute('href')).toBe(`/console/jobs/${onCompleteId}`);
    expect(await admin.getByTestId('batch-actions').count()).toBe(0);

    // An operator's "Run now" of the failed member fails too: its newest execution is not the one the batch counted.
    const failed = (await api(BATCH, { id: batchId })).batch.jobs.nodes.find((j: { name: string }) => j.name === 'part-4');
    const runNow = (
      await api(`mutation ($id: ID!) { triggerJob(input: { id: $id, force: true }) { execution { id } } }`, { id: failed.id })
    ).triggerJob.execution.id as string;
    const statusOf = async (id: string) => (await api(`query ($id: ID!) { execution(id: $id) { status } }`, { id })).execution.status;
    await expect.poll(() => statusOf(runNow), { timeout: 15_000 }).toBe('FAILED');

    // The failed member, retried from the Failed tab's selection: its scheduled execution runs again, not the Run now.
    world.flakyHealthy.value = true;
    await admin.getByRole('navigation', { name: 'Members' }).getByRole('link', { name: 'Failed' }).click();
    await expect.poll(() => admin.getByTestId('batch-members').locator('tbody tr').count()).toBe(1);
    await admin.getByRole('checkbox', { name: 'Select member part-4' }).check();
    await admin.getByRole('button', { name: 'Retry failed selected' }).click();
    expect(await admin.locator('dialog[open]').textContent()).toContain('Retry the 1 member selected?');
    await admin.getByRole('button', { name: 'Retry 1 member' }).click();
    await admin.getByTestId('bulk-bar').getByText('Re-drove 1 of 1 failed members.').waitFor();
    const part4 = (await api(BATCH, { id: batchId })).batch.jobs.nodes.find((j: { name: string }) => j.name === 'part-4');
    expect(part4.scheduledExecution.id).not.toBe(runNow);
    await expect.poll(() => statusOf(part4.scheduledExecution.id), { timeout: 15_000 }).toBe('SUCCEEDED');
    expect(await statusOf(runNow)).toBe('FAILED');
    // The batch keeps the outcome it counted.
    expect((await api(BATCH, { id: batchId })).batch).toMatchObject({ succeeded: 3, failed: 1, completedAt: expect.any(String) });
    await inBothWidths(admin, 'batch-completed');

    // A member's Job screen names its batch and how it was counted, linked back.
    await admin.getByTestId('batch-members').getByRole('link', { name: 'part-4', exact: true }).click();
    const membership = admin.getByTestId('job-graph').getByTestId('graph-this');
    await membership.getByRole('link', { name: 'nightly import' }).waitFor();
    expect(await membership.textContent()).toContain('Member ofnightly import COMPLETED counted FAILED');
    expect(await membership.getByRole('link', { name: 'nightly import' }).getAttribute('href')).toBe(`/console/batches/${batchId}`);

    // The onComplete job's Job screen names the batch it ran after, linked back.
    await admin.goto(`${world.origin}/console/jobs/${onCompleteId}`);
    const completes = admin.getByTestId('job-graph').getByTestId('graph-this');
    await completes.getByRole('link', { name: 'nightly import' }).waitFor();
    expect(await completes.textContent()).toContain(
      'Runs when this batch completesnightly import COMPLETED completed: this job was released',
    );
    expect(await completes.getByRole('link', { name: 'nightly import' }).getAttribute('href')).toBe(`/console/batches/${batchId}`);
    await inBothWidths(admin, 'graph-on-complete');

    // The Completed tab lists the batch now.
    await admin.goto(`${world.origin}/console/batches?state=COMPLETED`);
    await admin.locator(`[data-batch="${batchId}"]`).getByRole('link', { name: 'nightly import' }).waitFor();
  });

  it('cancels a batch after a confirmation that counts its unfinished members; the API shows the effect; a VIEWER is offered no action', async () => {
    world.gateOpen.value = true;
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const { createBatch } = await api(CREATE_BATCH, {
      input: {
        name: 'weekly export',
        open: true,
        jobs: [
          member('wf.ok', 'export-now'),
          ...[1, 2, 3].map((i) => member('wf.ok', `export-later-${i}`, { kind: 'DELAYED', runAt: later })),
        ],
        onComplete: { endpointName: 'wf.ok', kind: 'IMMEDIATE', name: 'export report' },
      },
    });
    const batchId: string = createBatch.batch.id;

    // A VIEWER sees the batch, no action and no selection.
    const viewer = await signedIn(viewerKey, 'workflows-viewer');
    await viewer.goto(`${world.origin}/console/batches/${batchId}`);
    await viewer.getByRole('heading', { name: /weekly export OPEN/, level: 1 }).waitFor();
    await viewer.getByTestId('batch-members').waitFor();
    expect(await viewer.getByRole('button', { name: /Cancel batch|Close batch|Retry/ }).count()).toBe(0);
    expect(await viewer.getByRole('checkbox').count()).toBe(0);

    // An OPERATOR key that did not create it is offered neither closing nor cancelling it (both FORBIDDEN to it).
    const operator = await signedIn(operatorKey, 'workflows-operator');
    await operator.goto(`${world.origin}/console/batches/${batchId}`);
    await operator.getByRole('heading', { name: /weekly export OPEN/, level: 1 }).waitFor();
    await operator.getByTestId('batch-members').waitFor();
    expect(await operator.getByRole('button', { name: /Cancel batch|Close batch/ }).count()).toBe(0);

    const admin = await signedIn(adminKey, 'workflows-cancel');
    await admin.goto(`${world.origin}/console/batches/${batchId}`);
    const counts = admin.getByTestId('batch-counts');
    await expect.poll(() => counts.textContent(), { timeout: 15_000 }).toBe('4 in all: 3 not ended, 1 succeeded, 0 failed, 0 cancelled');
    await admin.getByRole('button', { name: 'Cancel batch' }).click();
    const dialog = admin.locator('dialog[open]');
    expect(await dialog.textContent()).toContain('Cancel weekly export? Its 3 members not ended are cancelled');
    expect(await dialog.textContent()).toContain('The 1 member that ended stays as it ended.');
    await inBothWidths(admin, 'batch-cancel-confirm');
    await admin.getByRole('button', { name: 'Cancel batch and 3 members' }).click();
    await admin.getByText('Cancelled 3 members; the batch is closed.').waitFor();
    await expect.poll(() => counts.textContent(), { timeout: 15_000 }).toBe('4 in all: 0 not ended, 1 succeeded, 0 failed, 3 cancelled');

    const { batch } = await api(BATCH, { id: batchId });
    expect(batch).toMatchObject({ open: false, total: 4, pending: 0, succeeded: 1, failed: 0, cancelled: 3 });
    // Its onComplete job is cancelled: nothing fans in.
    expect(batch.onComplete).toMatchObject({ state: 'RETIRED', lastExecution: { status: 'CANCELLED' } });
    const byName = Object.fromEntries(batch.jobs.nodes.map((j: { name: string }) => [j.name, j]));
    expect(byName['export-now']).toMatchObject({ batchOutcome: 'SUCCEEDED', lastExecution: { status: 'SUCCEEDED' } });
    for (const i of [1, 2, 3])
      expect(byName[`export-later-${i}`]).toMatchObject({ batchOutcome: 'CANCELLED', lastExecution: { status: 'CANCELLED' } });
  });
});

describe("the Job screen's workflow graph", { timeout: HANG_GUARD_MS }, () => {
  it('shows a diamond (A before B and C, both before D): what each waits on with the outcomes, what waits on it, live; a child job names its parent execution', async () => {
    world.gateOpen.value = false;
    const create = async (name: string, endpointName: string, dependsOn: string[] = []) =>
      (
        await api(`mutation ($input: CreateJobInput!) { createJob(input: $input) { job { id } } }`, {
          input: { name, endpointName, kind: 'IMMEDIATE', ...(dependsOn.length ? { dependsOn } : {}) },
        })
      ).createJob.job.id as string;
    const a = await create('diamond A', 'wf.ok');
    const b = await create('diamond B', 'wf.ok', [a]);
    const c = await create('diamond C', 'wf.gated', [a]);
    const d = await create('diamond D', 'wf.ok', [b, c]);
    const state = async (id: string) => (await api(`query ($id: ID!) { job(id: $id) { state } }`, { id })).job.state;
    await expect.poll(() => state(b), { timeout: 15_000 }).toBe('COMPLETED');

    const admin = await signedIn(adminKey, 'workflows-graph');
    await admin.goto(`${world.origin}/console/jobs/${d}`);
    const graph = admin.getByTestId('job-graph');
    await graph.waitFor();
    const node = (column: string, id: string) => graph.getByTestId(column).locator(`[data-job="${id}"]`);
    await expect.poll(() => node('graph-waits-on', b).textContent()).toBe('diamond B COMPLETEDended SUCCEEDED');
    expect(await node('graph-waits-on', c).textContent()).toBe('diamond C ACTIVEnot ended yet');
    expect(await node('graph-this', d).textContent()).toBe('diamond D ACTIVE');
    expect(await graph.getByTestId('graph-dependents').textContent()).toContain('No job waits on it.');
    expect(await graph.textContent()).toContain('Waits on 2 jobs (1 ended); no job waits on it.');
    expect(await node('graph-waits-on', c).getByRole('link', { name: 'diamond C' }).getAttribute('href')).toBe(`/console/jobs/${c}`);
    expect(await node('graph-waits-on', c).getAttribute('class')).toContain('state-active');
    await inBothWidths(admin, 'graph-waiting');

    // A child job of C's running execution names its parent execution and that execution's job.
    const cExecution = (await api(`query ($id: ID!) { job(id: $id) { lastExecution { id status } } }`, { id: c })).job.lastExecution;
    expect(cExecution.status).toBe('RUNNING');
    const child = (
      await api(`mutation ($input: CreateJobInput!) { createJob(input: $input) { job { id } } }`, {
        input: { name: 'diamond C child', endpointName: 'wf.ok', kind: 'IMMEDIATE', parentExecutionId: cExecution.id },
      })
    ).createJob.job.id as string;
    await admin.goto(`${world.origin}/console/jobs/${child}`);
    const parent = graph.getByTestId('graph-this');
    await parent.getByRole('link', { name: 'diamond C' }).waitFor();
    expect(await parent.textContent()).toContain(`Child ofexecution ${cExecution.id.slice(-8)} RUNNING of diamond C`);
    expect(await parent.getByRole('link', { name: `execution ${cExecution.id.slice(-8)}` }).getAttribute('href')).toBe(
      `/console/executions/${cExecution.id}`,
    );

    // C's execution lists its child and how its children stand; an execution without children shows no such section.
    await parent.getByRole('link', { name: `execution ${cExecution.id.slice(-8)}` }).click();
    const children = admin.getByTestId('execution-children');
    await expect
      .poll(() => children.getByTestId('child-progress').textContent(), { timeout: 15_000 })
      .toBe('1 of 1 ended: 0 pending, 0 running, 1 succeeded, 0 failed, 0 cancelled');
    expect(await children.getByRole('heading', { name: 'Child jobs (1)' }).count()).toBe(1);
    expect(await children.getByRole('link', { name: 'diamond C child', exact: true }).getAttribute('href')).toBe(`/console/jobs/${child}`);
    expect(await children.locator(`[data-child="${child}"]`).textContent()).toContain('COMPLETED');
    expect(await children.getByRole('progressbar').getAttribute('aria-valuenow')).toBe('100');
    await inBothWidths(admin, 'execution-children');
    const bExecution = (await api(`query ($id: ID!) { job(id: $id) { lastExecution { id } } }`, { id: b })).job.lastExecution.id;
    await admin.goto(`${world.origin}/console/executions/${bExecution}`);
    await admin.getByRole('heading', { name: /Attempts/ }).waitFor();
    await admin.getByTestId('execution-attempts').waitFor();
    expect(await admin.getByTestId('execution-children').count()).toBe(0);

    // A: nothing before it; B and C wait on it.
    await admin.goto(`${world.origin}/console/jobs/${a}`);
    await node('graph-dependents', b).waitFor();
    expect(await node('graph-dependents', b).textContent()).toBe('diamond B COMPLETED');
    expect(await node('graph-dependents', c).textContent()).toBe('diamond C ACTIVE');
    expect(await graph.getByTestId('graph-waits-on').textContent()).toContain('Nothing: it starts when due.');

    // C ends: D's graph follows without a reload, and D runs.
    await admin.goto(`${world.origin}/console/jobs/${d}`);
    await node('graph-waits-on', c).waitFor();
    await admin.evaluate(() => ((window as unknown as { marker: number }).marker = 9));
    world.gateOpen.value = true;
    await expect.poll(() => node('graph-waits-on', c).textContent(), { timeout: 15_000 }).toBe('diamond C COMPLETEDended SUCCEEDED');
    await expect.poll(() => node('graph-this', d).textContent(), { timeout: 15_000 }).toBe('diamond D COMPLETED');
    expect(await marked(admin)).toBe(9);
    expect(await state(d)).toBe('COMPLETED');
    await inBothWidths(admin, 'graph-done');
  });
});
