/**
 * Overlap policies with a real worker and a slow handler: QUEUE runs occurrences one after
 * another in order, ALLOW runs them side by side, SKIP records a skip while one runs.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { createCronJobScheduler } from '../../src/service/engine/cron/scheduler.js';
import { createJobService } from '../../src/service/index.js';
import { createTestDb, TEST_SECRETS, type TestDb } from '../support/db.js';
import { engineHarness, eventually, type EngineHarness, pauseOwnCronJobs } from '../support/engine.js';

let t: TestDb;
let h: EngineHarness;
const runs: { job: string; scheduledFor: string; start: number; end: number }[] = [];
let started = 0;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
  runs.length = 0;
  started = 0;
  h.handle('slow', async (_input, ctx) => {
    started++;
    const start = performance.now();
    const { rows } = await t.query('select scheduled_for from executions where id = $1', [ctx.executionId]);
    await new Promise((r) => setTimeout(r, 250));
    runs.push({ job: ctx.jobId, scheduledFor: (rows[0].scheduled_for as Date).toISOString(), start, end: performance.now() });
  });
  await t.service.registerEndpoint(t.actor, { name: 'slow.cron', kind: 'HANDLER', handlerName: 'slow' });
  await h.worker({ concurrency: 10 });
});
afterEach(async () => {
  await h.stopAll();
});
afterAll(() => t?.close());

/** Occurrences in the recent past (so a worker runs them at once), fired one minute at a time. */
async function fire(overlapPolicy: 'QUEUE' | 'ALLOW' | 'SKIP', minutes: number) {
  const dbNow = (await t.query<{ now: Date }>('select now() as now')).rows[0]!.now.getTime();
  let now = Math.floor(dbNow / 60_000) * 60_000 - 20 * 60_000;
  const clock = () => new Date(now);
  const service = createJobService({ db: t.db, defaultMaxAttempts: 5, secrets: TEST_SECRETS, clock: async () => clock() });
  const { job } = await service.createJob(t.actor, {
    endpointName: 'slow.cron',
    kind: 'CRON',
    cron: { expression: '* * * * *', overlapPolicy },
  });
  const scheduler = createCronJobScheduler({ pool: t.database.pool, log: createLogger('silent'), clock });
  const results = [];
  for (let i = 0; i < minutes; i++) {
    now += 60_000;
    results.push(await scheduler.tick());
    // The later occurrences come due while the first one runs.
    if (i === 0) await eventually(async () => started > 0, 10_000, 'the worker to start the first occurrence');
  }
  return { jobId: job.id, results };
}

const overlapping = (a: { start: number; end: number }, b: { start: number; end: number }) => a.start < b.end && b.start < a.end;

describe('overlap policies with a slow handler', () => {
  it('QUEUE: runs every occurrence, one at a time, in order', async () => {
    const { jobId } = await fire('QUEUE', 3);
    await eventually(async () => runs.length === 3, 10_000);
    const mine = runs.filter((r) => r.job === jobId);
    expect(mine.map((r) => r.scheduledFor)).toEqual([...mine.map((r) => r.scheduledFor)].sort());
    for (let i = 1; i < mine.length; i++) expect(overlapping(mine[i - 1]!, mine[i]!)).toBe(false);
  });

  it('ALLOW: runs occurrences side by side', async () => {
    const { jobId } = await fire('ALLOW', 3);
    await eventually(async () => runs.length === 3, 10_000);
    const mine = runs.filter((r) => r.job === jobId);
    expect(mine.some((r, i) => mine.some((o, j) => i !== j && overlapping(r, o)))).toBe(true);
  });

  it('SKIP: fires nothing while the previous one runs, and says how long it has been running', async () => {
    const { jobId, results } = await fire('SKIP', 2);
    expect(results.map((r) => [r.fired, r.skipped])).toEqual([
      [1, 0],
      [0, 1],
    ]);
    const job = await t.service.job(t.actor, jobId);
    expect(job.cron!.lastSkipReason).toMatch(/^previous execution .* (running|pending) for/);
  });
});
