/**
 * Cron occurrences written ahead of their time (the scheduler's lead, migration 000054): written
 * once, due at their time, read as the job's next fire time, and withdrawn by an edit, a pause, a
 * cancellation or a manual trigger before their time, so that they happen as if written then.
 *
 * The scheduler's clock is set 20 s before the job's next minute boundary, which the database's
 * own clock (the withdrawing trigger's now()) has not reached: the occurrence is ahead on both.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { createCronJobScheduler } from '../../src/service/engine/cron/scheduler.js';
import { createTestDb, type TestDb } from '../support/db.js';
import {
  createCronJobBefore,
  engineHarness,
  eventually,
  executionsOf,
  nextBoundary,
  pauseOwnCronJobs,
  type EngineHarness,
} from '../support/engine.js';

let t: TestDb;
let h: EngineHarness;
/** The next minute boundary at least 25 s away on the database's clock: the job's first occurrence. */
let boundary: number;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
  h.handle('noop', async () => {});
  await t.service.registerEndpoint(t.actor, { name: 'ahead.cron', kind: 'HANDLER', handlerName: 'noop' });
  boundary = await nextBoundary(t);
});
afterEach(async () => {
  await h.stopAll();
});
afterAll(() => t?.close());

type Overlap = 'SKIP' | 'QUEUE' | 'ALLOW';

/** An every-minute job whose next occurrence is `boundary`, created on a clock 30 s before it. */
async function cronJob(overlapPolicy: Overlap = 'SKIP', input: unknown = { v: 1 }) {
  const job = await createCronJobBefore(t, boundary, {
    endpointName: 'ahead.cron',
    kind: 'CRON',
    input,
    cron: { expression: '* * * * *', overlapPolicy },
  });
  expect(job.cron!.nextFireAt!.getTime()).toBe(boundary);
  return job.id;
}

/** One scheduler pass with its clock at `at` and the given lead. */
function tick(at: number, leadMs = 30_000) {
  return createCronJobScheduler({ pool: t.database.pool, log: createLogger('silent'), clock: () => new Date(at), leadMs }).tick();
}

async function jobRow(id: string) {
  return (await t.query('select next_fire_at, ahead_at, last_fired_at from jobs where id = $1', [id])).rows[0];
}

describe('cron occurrences written ahead', () => {
  it('writes the next occurrence once, before its time, due at its time; the job reads it as its next fire time', async () => {
    const id = await cronJob();
    expect((await tick(boundary - 20_000, 0)).fired).toBe(0);
    // Outside the lead: nothing yet.
    expect((await tick(boundary - 40_000)).fired).toBe(0);

    expect((await tick(boundary - 20_000)).fired).toBe(1);
    const [ex] = await executionsOf(t, id);
    expect(ex.status).toBe('PENDING');
    expect(ex.trigger).toBe('SCHEDULE');
    expect(ex.scheduled_for.getTime()).toBe(boundary);
    expect(ex.run_after.getTime()).toBe(boundary);
    const row = await jobRow(id);
    expect(row.ahead_at.getTime()).toBe(boundary);
    expect(row.next_fire_at.getTime()).toBe(boundary + 60_000);
    const job = await t.service.job(t.actor, id);
    expect(job.cron!.nextFireAt!.getTime()).toBe(boundary);
    expect(job.cron!.lastFiredAt).toBeNull();

    // Written once: later passes before its time leave it.
    expect((await tick(boundary - 10_000)).jobs).toBe(0);
    expect(await executionsOf(t, id)).toHaveLength(1);
  });

  it('a worker starts it at its time, not before', async () => {
    const id = await cronJob();
    // Three seconds from now on the database's clock, as if the schedule said so.
    await t.query(`update jobs set next_fire_at = date_trunc('milliseconds', now() + interval '3 seconds') where id = $1`, [id]);
    const due = (await jobRow(id)).next_fire_at.getTime() as number;
    expect((await tick(due - 3_000)).fired).toBe(1);
    await h.worker();
    const ex = await eventually(
      async () => (await executionsOf(t, id)).find((e) => e.status === 'SUCCEEDED'),
      15_000,
      'the occurrence to run',
    );
    expect(ex.scheduled_for.getTime()).toBe(due);
    expect(ex.attempt_started_at.getTime()).toBeGreaterThanOrEqual(due);
  });

  it('SKIP with a live execution is not written ahead: the policy decides at its time', async () => {
    const skip = await cronJob('SKIP');
    const queue = await cronJob('QUEUE');
    await t.service.triggerJob(t.actor, { id: skip });
    await t.service.triggerJob(t.actor, { id: queue });

    const ahead = await tick(boundary - 20_000);
    expect(ahead.fired).toBe(1);
    expect((await executionsOf(t, queue)).map((e) => e.scheduled_for.getTime())).toContain(boundary);
    expect((await executionsOf(t, skip)).map((e) => e.trigger)).toEqual(['MANUAL']);
    expect((await jobRow(skip)).next_fire_at.getTime()).toBe(boundary);

    const due = await tick(boundary + 1_000);
    expect(due.skipped).toBe(1);
    expect((await t.service.job(t.actor, skip)).cron!.lastSkipReason).toMatch(/^previous execution .* pending/);
  });

  it('a pause withdraws it; a cancellation too, with nothing to cancel', async () => {
    const paused = await cronJob();
    const cancelled = await cronJob();
    expect((await tick(boundary - 20_000)).fired).toBe(2);

    await t.service.pauseJob(t.actor, paused);
    expect(await executionsOf(t, paused)).toHaveLength(0);
    expect(await jobRow(paused)).toMatchObject({ ahead_at: null, next_fire_at: null });

    const { cancelledExecutions } = await t.service.cancelJob(t.actor, cancelled);
    expect(cancelledExecutions).toBe(0);
    expect(await executionsOf(t, cancelled)).toHaveLength(0);

    // Resumed, it continues from now: whatever it writes next is the schedule's, once.
    await t.service.resumeJob(t.actor, paused);
    expect((await jobRow(paused)).next_fire_at).not.toBeNull();
  });

  it('a child of an occurrence withdrawn stays, without a parent, and the occurrence leaves no turn row behind', async () => {
    const id = await cronJob();
    expect((await tick(boundary - 20_000)).fired).toBe(1);
    const [occurrence] = await executionsOf(t, id);
    // Written ahead, the occurrence is PENDING: a child can be made on it.
    const { job: child } = await t.service.createJob(t.actor, {
      endpointName: 'ahead.cron',
      kind: 'IMMEDIATE',
      parentExecutionId: occurrence!.id,
    });
    expect(child.parentExecutionId).toBe(occurrence!.id);

    await t.service.pauseJob(t.actor, id);
    expect(await executionsOf(t, id)).toHaveLength(0);
    // Migration 000059: what the foreign keys did, the withdrawal does.
    expect((await t.service.job(t.actor, child.id)).parentExecutionId).toBeNull();
    expect(
      (await t.query(`select count(*)::int as n from execution_children where parent_execution_id = $1`, [occurrence!.id])).rows[0].n,
    ).toBe(0);
  });

  it('an input edit before its time reaches it: withdrawn, and written again as the job now is', async () => {
    const id = await cronJob('SKIP', { v: 1 });
    await tick(boundary - 20_000);
    expect((await executionsOf(t, id))[0].input).toEqual({ v: 1 });

    await t.service.updateJob(t.actor, { id, input: { v: 2 } });
    expect(await executionsOf(t, id)).toHaveLength(0);
    const row = await jobRow(id);
    expect(row.ahead_at).toBeNull();
    expect(row.next_fire_at.getTime()).toBe(boundary);
    expect((await t.service.job(t.actor, id)).cron!.nextFireAt!.getTime()).toBe(boundary);

    expect((await tick(boundary - 15_000)).fired).toBe(1);
    const [ex] = await executionsOf(t, id);
    expect(ex.input).toEqual({ v: 2 });
    expect(ex.scheduled_for.getTime()).toBe(boundary);
  });

  it('a new schedule replaces it', async () => {
    const id = await cronJob();
    await tick(boundary - 20_000);
    await t.service.updateJob(t.actor, { id, cron: { expression: '0 0 1 1 *' } });
    expect(await executionsOf(t, id)).toHaveLength(0);
    const next = (await jobRow(id)).next_fire_at as Date;
    expect([next.getUTCMonth(), next.getUTCDate(), next.getUTCHours(), next.getUTCMinutes()]).toEqual([0, 1, 0, 0]);
  });

  it('a manual trigger before its time runs now and is refused nothing; the occurrence follows the overlap policy', async () => {
    const skip = await cronJob('SKIP');
    const queue = await cronJob('QUEUE');
    await tick(boundary - 20_000);

    // Not CONFLICT: the occurrence ahead is not a run yet.
    const a = await t.service.triggerJob(t.actor, { id: skip });
    const b = await t.service.triggerJob(t.actor, { id: queue });
    expect(a.created && b.created).toBe(true);
    expect((await executionsOf(t, skip)).map((e) => e.trigger)).toEqual(['MANUAL']);
    expect((await jobRow(skip)).next_fire_at.getTime()).toBe(boundary);

    // Written again: QUEUE's waits behind the manual run; SKIP's is left to its time.
    expect((await tick(boundary - 15_000)).fired).toBe(1);
    const queued = await executionsOf(t, queue);
    expect(queued.map((e) => e.trigger).sort()).toEqual(['MANUAL', 'SCHEDULE']);
    expect(queued.find((e) => e.trigger === 'SCHEDULE').serial).toBe(true);
    expect(await executionsOf(t, skip)).toHaveLength(1);
  });

  it('once due it is an ordinary pending execution: an edit leaves it, and it counts as the last fire', async () => {
    // ALLOW: the next is written ahead beside it (under SKIP it would wait for it to end).
    const id = await cronJob('ALLOW');
    await tick(boundary - 20_000);
    // As if its time had come: the occurrence and ahead_at a second in the past.
    await t.query(
      `update executions set scheduled_for = now() - interval '1 second', run_after = now() - interval '1 second' where job_id = $1`,
      [id],
    );
    await t.query(`update jobs set ahead_at = now() - interval '1 second' where id = $1`, [id]);
    const passed = (await jobRow(id)).ahead_at as Date;

    const job = await t.service.job(t.actor, id);
    expect(job.cron!.lastFiredAt!.getTime()).toBe(passed.getTime());
    expect(job.cron!.nextFireAt!.getTime()).toBe(boundary + 60_000);

    await t.service.pauseJob(t.actor, id);
    expect((await executionsOf(t, id)).map((e) => e.status)).toEqual(['PENDING']);
    await t.service.resumeJob(t.actor, id);

    // The next write keeps it as the last fire.
    await t.query(`update jobs set next_fire_at = $2 where id = $1`, [id, new Date(boundary)]);
    expect((await tick(boundary - 20_000)).fired).toBe(1);
    expect((await jobRow(id)).last_fired_at.getTime()).toBe(passed.getTime());
  });
});
