/**
 * Priorities: due executions of a higher priority start first, the earliest due first within
 * one; delayed work of a high priority holds nothing back; one claim in every OLDEST_EVERY takes
 * the earliest due work whatever its priority, so a low priority is never starved, not even by a
 * stream of higher ones that never runs dry. Real workers and real claims; the priority reaches
 * every execution however it is created (createJob on both paths, createJobs, a cron occurrence,
 * a manual trigger) and is checked where it is given.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimExecutions, claimOrder, OLDEST_EVERY } from '../../src/db/statements/claim.js';
import { createLogger } from '../../src/log.js';
import { createCronJobScheduler } from '../../src/service/engine/cron/scheduler.js';
import { createJobService } from '../../src/service/index.js';
import { codeOf, createTestDb, TEST_SECRETS, type TestDb } from '../support/db.js';
import { engineHarness, pauseOwnCronJobs, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let h: EngineHarness;
/** Job ids whose handler started, in start order. */
const started: string[] = [];

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
  started.length = 0;
  h.handle('recorded', async (_input, ctx) => void started.push(ctx.jobId));
});
afterEach(() => h.stopAll());
afterAll(() => t?.close());

const register = (name: string, more: { defaultPriority?: number; concurrencyLimit?: number } = {}) =>
  t.service.registerEndpoint(t.actor, { name, kind: 'HANDLER', handlerName: 'recorded', ...more });
const job = async (endpointName: string, priority?: number) =>
  (await t.service.createJob(t.actor, { endpointName, kind: 'IMMEDIATE', ...(priority === undefined ? {} : { priority }) })).job.id;

describe('the claim order', () => {
  it('starts higher priorities first, the earliest due first within one', async () => {
    await register('prio.order');
    const a0 = await job('prio.order', 0);
    const b5 = await job('prio.order', 5);
    const c0 = await job('prio.order', 0);
    const d5 = await job('prio.order', 5);
    const eLow = await job('prio.order', -3);
    const f10 = await job('prio.order', 10);
    // One attempt at a time, so each claim takes one: the start order is the claim order. Six
    // claims, all before the first that takes the oldest work first.
    expect(OLDEST_EVERY).toBeGreaterThan(6);
    await h.worker({ concurrency: 1 });
    for (const id of [a0, b5, c0, d5, eLow, f10]) await settled(t, id, ['SUCCEEDED']);
    expect(started).toEqual([f10, b5, d5, a0, c0, eLow]);
  });

  it('is the same on an endpoint with a concurrency limit (claimed under its lock)', async () => {
    await register('prio.limited', { concurrencyLimit: 1 });
    const jobs = [await job('prio.limited', 0), await job('prio.limited', 2), await job('prio.limited', -1), await job('prio.limited', 2)];
    await h.worker({ concurrency: 5 });
    for (const id of jobs) await settled(t, id, ['SUCCEEDED']);
    expect(started).toEqual([jobs[1], jobs[3], jobs[0], jobs[2]]);
  });

  it('is not held back by delayed work of a higher priority', async () => {
    await register('prio.delayed');
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const delayed = [];
    for (let i = 0; i < 20; i++)
      delayed.push(
        (await t.service.createJob(t.actor, { endpointName: 'prio.delayed', kind: 'DELAYED', runAt: later, priority: 50 })).job.id,
      );
    const due = [await job('prio.delayed', 1), await job('prio.delayed', 0)];
    await h.worker({ concurrency: 1 });
    for (const id of due) await settled(t, id, ['SUCCEEDED']);
    expect(started).toEqual(due);
    const { rows } = await t.query(`select count(*)::int as n from executions where job_id = any($1::uuid[]) and status = 'PENDING'`, [
      delayed,
    ]);
    expect(rows[0]!.n).toBe(20);
  });

  it('takes the earliest due work whatever its priority once in every OLDEST_EVERY claims', async () => {
    await register('prio.oldest');
    const low = await job('prio.oldest', -100);
    const high = [];
    for (let i = 0; i < OLDEST_EVERY + 2; i++) high.push(await job('prio.oldest', 100));
    const taken: string[] = [];
    for (let n = 0; n < OLDEST_EVERY; n++) {
      const rows = await claimExecutions(t.database.pool, {
        workerId: 'prio-claimer',
        limit: 1,
        handlers: ['recorded'],
        leaseMs: 60_000,
        limitedEndpoints: false,
        order: claimOrder(n),
      });
      taken.push(...rows.map((r) => r.job_id));
    }
    // Claims 0 to OLDEST_EVERY - 2 by priority, in creation order; the last one the oldest.
    expect(taken).toEqual([...high.slice(0, OLDEST_EVERY - 1), low]);
    expect(claimOrder(OLDEST_EVERY - 1)).toBe('OLDEST');
    expect(claimOrder(OLDEST_EVERY)).toBe('PRIORITY');
  });

  it('starts a low priority while higher ones keep arriving faster than they run', async () => {
    await register('prio.stream');
    await register('prio.stream-low');
    // Each high-priority attempt creates two more: the high backlog never runs dry.
    h.handle('feeder', async (_input, ctx) => {
      started.push(ctx.jobId);
      if (started.length < 200) {
        await t.service.createJob(t.actor, { endpointName: 'prio.stream', kind: 'IMMEDIATE', priority: 100 });
        await t.service.createJob(t.actor, { endpointName: 'prio.stream', kind: 'IMMEDIATE', priority: 100 });
      }
    });
    await t.service.updateEndpoint(t.actor, { id: (await t.service.endpoint(t.actor, { name: 'prio.stream' })).id, handlerName: 'feeder' });
    for (let i = 0; i < 5; i++) await job('prio.stream', 100);
    const low = await job('prio.stream-low', -100);
    await h.worker({ concurrency: 1 });
    await settled(t, low, ['SUCCEEDED'], 30_000);
    // Claims are made one attempt at a time: it waited behind fewer than OLDEST_EVERY of them (a
    // claim that found nothing still counts, so it may come sooner, never later).
    const position = started.indexOf(low);
    expect(position).toBeGreaterThanOrEqual(0);
    expect(position).toBeLessThan(OLDEST_EVERY);
    const { rows } = await t.query(
      `select count(*)::int as n from executions e join jobs j on j.id = e.job_id where j.priority = 100 and e.status = 'PENDING'`,
    );
    // The high backlog was still there when it ran: it was not left the last.
    expect(rows[0]!.n).toBeGreaterThan(0);
  });
});

describe('where a priority comes from', () => {
  it("is the job's own, else its endpoint's default, pinned on every execution however it is made", async () => {
    const ep = await register('prio.defaults', { defaultPriority: 7 });
    expect(ep.defaultPriority).toBe(7);
    const own = await t.service.createJob(t.actor, { endpointName: 'prio.defaults', kind: 'IMMEDIATE', priority: -2 });
    const inherited = await t.service.createJob(t.actor, { endpointName: 'prio.defaults', kind: 'IMMEDIATE' });
    // The full path (a lock key) and the one-statement path resolve the default alike.
    const locked = await t.service.createJob(t.actor, { endpointName: 'prio.defaults', kind: 'IMMEDIATE', lockKey: 'k' });
    const many = await t.service.createJobs(t.actor, [
      { endpointName: 'prio.defaults', kind: 'IMMEDIATE', priority: 3 },
      { endpointName: 'prio.defaults', kind: 'IMMEDIATE' },
    ]);
    expect([own.job.priority, inherited.job.priority, locked.job.priority]).toEqual([-2, 7, 7]);
    expect(many.map((r) => r.job.priority)).toEqual([3, 7]);
    const manual = await t.service.triggerJob(t.actor, { id: own.job.id, force: true });
    // A cron job created on a clock a few minutes back, ticked on the scheduler's clock a minute on.
    const dbNow = (await t.query<{ now: Date }>('select now() as now')).rows[0]!.now.getTime();
    let now = Math.floor(dbNow / 60_000) * 60_000 - 5 * 60_000;
    const clock = () => new Date(now);
    const service = createJobService({ db: t.db, defaultMaxAttempts: 5, secrets: TEST_SECRETS, clock: async () => clock() });
    const cron = await service.createJob(t.actor, {
      endpointName: 'prio.defaults',
      kind: 'CRON',
      priority: 9,
      cron: { expression: '* * * * *' },
    });
    now += 60_000;
    await createCronJobScheduler({ pool: t.database.pool, log: createLogger('silent'), clock }).tick();
    const { rows } = await t.query<{ job_id: string; priority: number; trigger: string }>(
      `select job_id, priority, trigger from executions where job_id = any($1::uuid[]) order by created_at`,
      [[own.job.id, inherited.job.id, locked.job.id, cron.job.id, ...many.map((r) => r.job.id)]],
    );
    const byJob = (id: string) => rows.filter((r) => r.job_id === id).map((r) => r.priority);
    expect(byJob(own.job.id)).toEqual([-2, -2]);
    expect(rows.find((r) => r.job_id === own.job.id && r.trigger === 'MANUAL')!.priority).toBe(-2);
    expect(manual.execution.priority).toBe(-2);
    expect(byJob(inherited.job.id)).toEqual([7]);
    expect(byJob(locked.job.id)).toEqual([7]);
    expect(byJob(cron.job.id).length).toBeGreaterThan(0);
    expect(new Set(byJob(cron.job.id))).toEqual(new Set([9]));
    expect(byJob(many[0]!.job.id)).toEqual([3]);

    // The endpoint's default changes jobs created afterwards only.
    await t.service.updateEndpoint(t.actor, { id: ep.id, defaultPriority: null });
    expect((await t.service.createJob(t.actor, { endpointName: 'prio.defaults', kind: 'IMMEDIATE' })).job.priority).toBe(0);
    expect((await t.service.job(t.actor, inherited.job.id)).priority).toBe(7);
  });

  it('refuses a priority out of range, and a reused idempotency key with another one, writing nothing', async () => {
    await register('prio.bad');
    const before = (await t.query(`select count(*)::int as n from jobs`)).rows[0]!.n;
    for (const priority of [101, -101, 1.5])
      expect(await codeOf(() => t.service.createJob(t.actor, { endpointName: 'prio.bad', kind: 'IMMEDIATE', priority }))).toBe(
        'VALIDATION_FAILED',
      );
    expect(await codeOf(() => register('prio.bad-default', { defaultPriority: 500 }))).toBe('VALIDATION_FAILED');
    expect((await t.query(`select count(*)::int as n from jobs`)).rows[0]!.n).toBe(before);
    expect((await t.query(`select count(*)::int as n from endpoints where name = 'prio.bad-default'`)).rows[0]!.n).toBe(0);

    const first = await t.service.createJob(t.actor, { endpointName: 'prio.bad', kind: 'IMMEDIATE', idempotencyKey: 'once', priority: 4 });
    const again = await t.service.createJob(t.actor, { endpointName: 'prio.bad', kind: 'IMMEDIATE', idempotencyKey: 'once', priority: 4 });
    expect(again.job.id).toBe(first.job.id);
    expect(again.outcome).toBe('EXISTING');
    expect(
      await codeOf(() =>
        t.service.createJob(t.actor, { endpointName: 'prio.bad', kind: 'IMMEDIATE', idempotencyKey: 'once', priority: 5 }),
      ),
    ).toBe('CONFLICT');
  });

  it('is read and written over GraphQL', async () => {
    const gw = createTestGateway(t);
    try {
      const reg = await gw.gql(
        `mutation { registerEndpoint(input: { name: "prio.api", kind: HANDLER, handlerName: "recorded", defaultPriority: -4 }) { id defaultPriority } }`,
      );
      expect(reg.errors).toBeUndefined();
      expect(reg.data!.registerEndpoint.defaultPriority).toBe(-4);
      const made = await gw.gql(
        `mutation { createJob(input: { endpointName: "prio.api", kind: IMMEDIATE, priority: 12 }) { job { priority executions(first: 1) { nodes { priority } } } } }`,
      );
      expect(made.errors).toBeUndefined();
      expect(made.data!.createJob.job).toEqual({ priority: 12, executions: { nodes: [{ priority: 12 }] } });
      const bad = await gw.gql(
        `mutation { createJob(input: { endpointName: "prio.api", kind: IMMEDIATE, priority: 1000 }) { job { id } } }`,
      );
      expect(bad.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
    } finally {
      await gw.close();
    }
  });
});
