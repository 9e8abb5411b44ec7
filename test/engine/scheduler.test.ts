/**
 * The cron scheduler, stepped through simulated time with an injected clock.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { nextOccurrences } from '../../src/service/cron/expressions.js';
import { reapEndedCronJobs } from '../../src/service/engine/maintenance/reaper.js';
import { createCronJobScheduler } from '../../src/service/engine/cron/scheduler.js';
import { createJobService } from '../../src/service/index.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway } from '../support/graphql.js';
import { pauseOwnCronJobs } from '../support/engine.js';

const MIN = 60_000;
const log = createLogger('silent');
let t: TestDb;
let endpointId: string;

// A database per test: each test has its own clock, and a scheduler sees every due job.
beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  endpointId = (await t.service.registerEndpoint(t.actor, { name: 'cron.target', kind: 'HANDLER', handlerName: 'nobody' })).id;
  // The reapers' schedules start at the real now; these tests run in other years.
  await pauseOwnCronJobs(t);
});
afterAll(() => t?.close());

/** A service and schedulers sharing one movable clock. */
function clockAt(start: string) {
  let now = new Date(start).getTime();
  const clock = () => new Date(now);
  return {
    clock,
    service: createJobService({ db: t.db, defaultMaxAttempts: 5, clock: async () => clock() }),
    scheduler: () => createCronJobScheduler({ pool: t.database.pool, log, clock, batchSize: 200 }),
    set: (iso: string) => void (now = new Date(iso).getTime()),
    advance: (ms: number) => void (now += ms),
    get now() {
      return now;
    },
  };
}

const firedOf = async (jobId: string) =>
  (await t.query('select scheduled_for from executions where job_id = $1 order by scheduled_for', [jobId])).rows.map((r) =>
    (r.scheduled_for as Date).toISOString(),
  );

describe('cron scheduler', () => {
  // No worker runs in these tests, so executions stay pending: ALLOW keeps overlap out of the count.
  it(
    'fires each occurrence exactly once with three schedulers racing over 1,000 jobs through a DST change',
    // 1,000 jobs created, then 240 ticks of three schedulers: about 20 s on an idle machine, and
    // over two minutes on a loaded 2-core one.
    { timeout: 300_000 },
    async () => {
      const c = clockAt('2026-03-08T05:00:00Z'); // New York springs forward at 07:00Z
      const exprs = ['*/15 * * * *', '0 * * * *', '30 2 * * *', '*/10 * * * *'];
      const zones = ['America/New_York', 'Europe/London', 'UTC'];
      const jobs: { id: string; expr: string; tz: string }[] = [];
      for (let i = 0; i < 1000; i++) {
        const expr = exprs[i % exprs.length]!;
        const tz = zones[i % zones.length]!;
        const { job } = await c.service.createJob(t.actor, {
          endpointId,
          kind: 'CRON',
          name: `race-${i}`,
          cron: { expression: expr, timezone: tz, overlapPolicy: 'ALLOW' },
        });
        jobs.push({ id: job.id, expr, tz });
      }
      const schedulers = [c.scheduler(), c.scheduler(), c.scheduler()];
      const end = new Date('2026-03-08T09:00:00Z').getTime();
      let fired = 0;
      while (c.now < end) {
        c.advance(MIN);
        const results = await Promise.all(schedulers.map((s) => s.tick()));
        fired += results.reduce((n, r) => n + r.fired, 0);
      }
      const { rows } = await t.query(
        `select j.id, count(e.id)::int as n, count(distinct e.scheduled_for)::int as distinct_n, array_agg(e.scheduled_for order by e.scheduled_for) as at
       from jobs j left join executions e on e.job_id = j.id where j.name like 'race-%' group by j.id`,
      );
      const byId = new Map(rows.map((r) => [r.id, r]));
      let expectedTotal = 0;
      for (const job of jobs) {
        const expected = nextOccurrences(job.expr, job.tz, new Date('2026-03-08T05:00:00Z'), 1000, new Date(end + 1)).map((d) =>
          d.toISOString(),
        );
        expectedTotal += expected.length;
        const row = byId.get(job.id)!;
        expect(row.n).toBe(row.distinct_n);
        expect((row.at as (Date | null)[]).filter(Boolean).map((d) => d!.toISOString())).toEqual(expected);
      }
      expect(fired).toBe(expectedTotal);
    },
  );

  for (const [tz, springAt, fallAt] of [
    ['America/New_York', '2026-03-08T07:00:00Z', '2026-11-01T06:00:00Z'],
    ['Europe/London', '2026-03-29T01:00:00Z', '2026-10-25T01:00:00Z'],
  ] as const) {
    for (const [what, at] of [
      ['spring-forward', springAt],
      ['fall-back', fallAt],
    ] as const) {
      it(`fires 30 2 * * *, 0 * * * * and */15 * * * * per the DST rules across the ${what} in ${tz}, as cronPreview shows`, async () => {
        const start = new Date(new Date(at).getTime() - 5 * 3_600_000).toISOString();
        const c = clockAt(start);
        const ids: Record<string, string> = {};
        for (const expr of ['30 2 * * *', '0 * * * *', '*/15 * * * *']) {
          ids[expr] = (
            await c.service.createJob(t.actor, {
              endpointId,
              kind: 'CRON',
              cron: { expression: expr, timezone: tz, overlapPolicy: 'ALLOW' },
            })
          ).job.id;
        }
        const s = c.scheduler();
        const end = new Date(at).getTime() + 5 * 3_600_000;
        while (c.now < end) {
          c.advance(MIN);
          await s.tick();
        }
        const g = createTestGateway(t);
        for (const [expr, id] of Object.entries(ids)) {
          const preview = await g.gql(
            `query ($e: String!, $tz: String, $from: DateTime) { cronPreview(expression: $e, timezone: $tz, from: $from, count: 100) }`,
            {
              e: expr,
              tz,
              from: start,
            },
          );
          const shown = (preview.data.cronPreview as string[]).filter((x) => new Date(x).getTime() <= end);
          expect(await firedOf(id), `${expr} in ${tz}`).toEqual(shown);
        }
        // The rules, spelled out for the daily job: exactly once on the transition day.
        const daily = await firedOf(ids['30 2 * * *']!);
        expect(daily).toHaveLength(1);
        if (tz === 'America/New_York' && what === 'spring-forward') expect(daily).toEqual(['2026-03-08T07:30:00.000Z']); // 03:30 EDT
        if (tz === 'America/New_York' && what === 'fall-back') expect(daily).toEqual(['2026-11-01T07:30:00.000Z']); // 02:30 EST
        if (what === 'fall-back') {
          // The hourly job keeps real cadence through the repeated hour: one per real hour.
          const hourly = (await firedOf(ids['0 * * * *']!)).map((x) => new Date(x).getTime());
          for (let i = 1; i < hourly.length; i++) expect(hourly[i]! - hourly[i - 1]!).toBe(3_600_000);
        }
      });
    }
  }

  it('applies misfire policies after downtime: FIRE_LATEST fires one, SKIP none, FIRE_ALL each', async () => {
    const c = clockAt('2026-06-01T10:00:00Z');
    const make = async (misfirePolicy: 'FIRE_LATEST' | 'SKIP' | 'FIRE_ALL') =>
      (
        await c.service.createJob(t.actor, {
          endpointId,
          kind: 'CRON',
          cron: { expression: '*/10 * * * *', misfirePolicy, overlapPolicy: 'ALLOW' },
        })
      ).job.id;
    const latest = await make('FIRE_LATEST');
    const skip = await make('SKIP');
    const all = await make('FIRE_ALL');
    c.set('2026-06-01T12:05:00Z'); // down for two hours: 12 occurrences due (10:10 .. 12:00)
    await c.scheduler().tick();
    expect(await firedOf(latest)).toEqual(['2026-06-01T12:00:00.000Z']);
    expect(await firedOf(skip)).toEqual([]);
    expect(await firedOf(all)).toHaveLength(12);
    const rows = (await t.query('select id, missed_ticks, next_fire_at from jobs where id = any($1)', [[latest, skip, all]])).rows;
    const by = Object.fromEntries(rows.map((r) => [r.id, r]));
    expect([by[latest].missed_ticks, by[skip].missed_ticks, by[all].missed_ticks]).toEqual([11, 12, 0]);
    for (const r of rows) expect(r.next_fire_at.toISOString()).toBe('2026-06-01T12:10:00.000Z');
    // Back on time: the next occurrence fires normally under every policy.
    c.set('2026-06-01T12:10:05Z');
    await c.scheduler().tick();
    expect((await firedOf(skip)).at(-1)).toBe('2026-06-01T12:10:00.000Z');
  });

  it('skips an occurrence while the previous execution is live (overlap SKIP), and records it for operators', async () => {
    const c = clockAt('2026-07-01T10:00:30Z');
    const { job } = await c.service.createJob(t.actor, { endpointId, kind: 'CRON', cron: { expression: '* * * * *' } });
    const s = c.scheduler();
    c.set('2026-07-01T10:01:00Z');
    await s.tick(); // fires 10:01; nobody runs it, so it stays PENDING
    c.set('2026-07-01T10:02:00Z');
    const r = await s.tick();
    expect(r.skipped).toBe(1);
    expect(await firedOf(job.id)).toEqual(['2026-07-01T10:01:00.000Z']);
    const j = await t.service.job(t.actor, job.id);
    expect(j.cron).toMatchObject({ skippedTicks: 1, lastSkipAt: new Date('2026-07-01T10:02:00Z') });
    expect(j.cron!.lastSkipReason).toMatch(/^previous execution .* pending for/);
  });

  it('queues overlapping occurrences as serial executions under QUEUE, and inserts them freely under ALLOW', async () => {
    const c = clockAt('2026-07-02T10:00:30Z');
    const queue = (
      await c.service.createJob(t.actor, { endpointId, kind: 'CRON', cron: { expression: '* * * * *', overlapPolicy: 'QUEUE' } })
    ).job.id;
    const allow = (
      await c.service.createJob(t.actor, { endpointId, kind: 'CRON', cron: { expression: '* * * * *', overlapPolicy: 'ALLOW' } })
    ).job.id;
    const s = c.scheduler();
    for (const m of ['01', '02', '03']) {
      c.set(`2026-07-02T10:${m}:00Z`);
      await s.tick();
    }
    const rows = (await t.query('select job_id, serial from executions where job_id = any($1)', [[queue, allow]])).rows;
    expect(rows.filter((r) => r.job_id === queue).map((r) => r.serial)).toEqual([true, true, true]);
    expect(rows.filter((r) => r.job_id === allow).map((r) => r.serial)).toEqual([false, false, false]);
  });

  it('stops at endsAt, and the reaper retires the job', async () => {
    const c = clockAt('2026-08-01T10:00:00Z');
    const { job } = await c.service.createJob(t.actor, {
      endpointId,
      kind: 'CRON',
      cron: { expression: '0 * * * *', endsAt: new Date('2026-08-01T12:30:00Z'), overlapPolicy: 'ALLOW' },
    });
    const s = c.scheduler();
    for (let i = 0; i < 5 * 60; i += 30) {
      c.advance(30 * MIN);
      await s.tick();
    }
    expect(await firedOf(job.id)).toEqual(['2026-08-01T11:00:00.000Z', '2026-08-01T12:00:00.000Z']);
    expect((await t.service.job(t.actor, job.id)).cron!.nextFireAt).toBeNull();
    // endsAt is in the past on the database clock too; the reaper retires it, as cancelJob would.
    expect(await reapEndedCronJobs(t.database.pool, t.actor.workspaceId)).toBeGreaterThanOrEqual(1);
    expect((await t.service.job(t.actor, job.id)).status).toBe('RETIRED');
    const left = (await t.query('select status from executions where job_id = $1', [job.id])).rows.map((r) => r.status);
    expect(left).toEqual(['CANCELLED', 'CANCELLED']);
    const audit = (await t.query(`select action, actor_kind from audit_log where target_id = $1 and action = 'job.reap'`, [job.id])).rows;
    expect(audit).toEqual([{ action: 'job.reap', actor_kind: 'system' }]);
  });

  it('keeps scheduling other jobs when one schedule cannot be computed, and records the error on it', async () => {
    const c = clockAt('2026-09-01T10:00:00Z');
    const good = (await c.service.createJob(t.actor, { endpointId, kind: 'CRON', cron: { expression: '*/5 * * * *' } })).job.id;
    const bad = (await c.service.createJob(t.actor, { endpointId, kind: 'CRON', cron: { expression: '*/5 * * * *' } })).job.id;
    // A zone the runtime no longer knows (as after a tzdata change): the walk throws.
    await t.query(`update jobs set timezone = 'Gone/Nowhere' where id = $1`, [bad]);
    c.set('2026-09-01T10:05:00Z');
    const r = await c.scheduler().tick();
    expect(r.errors).toBeGreaterThanOrEqual(1);
    expect(await firedOf(good)).toEqual(['2026-09-01T10:05:00.000Z']);
    const j = await t.service.job(t.actor, bad);
    expect(j.cron!.scheduleError).toMatch(/cannot compute the schedule/);
    expect(j.cron!.nextFireAt!.toISOString()).toBe('2026-09-01T10:06:00.000Z');
    await t.query(`update jobs set timezone = 'UTC' where id = $1`, [bad]);
  });

  it('after a schedule error clears, fires the next real occurrence, not the minute it retried at', async () => {
    const c = clockAt('2026-09-02T10:00:00Z');
    const { job } = await c.service.createJob(t.actor, {
      endpointId,
      kind: 'CRON',
      cron: { expression: '*/5 * * * *', overlapPolicy: 'ALLOW' },
    });
    await t.query(`update jobs set timezone = 'Gone/Nowhere' where id = $1`, [job.id]);
    const s = c.scheduler();
    c.set('2026-09-02T10:05:00Z');
    expect((await s.tick()).errors).toBe(1); // retried at 10:06
    await t.query(`update jobs set timezone = 'UTC' where id = $1`, [job.id]);
    c.set('2026-09-02T10:06:00Z');
    await s.tick();
    c.set('2026-09-02T10:10:00Z');
    await s.tick();
    expect(await firedOf(job.id)).toEqual(['2026-09-02T10:10:00.000Z']);
    expect((await t.service.job(t.actor, job.id)).cron!.scheduleError).toBeNull();
  });

  it('keeps a due occurrence when an update changes only the policies or the end', async () => {
    const c = clockAt('2026-09-03T10:00:30Z');
    const { job } = await c.service.createJob(t.actor, {
      endpointId,
      kind: 'CRON',
      cron: { expression: '0 * * * *', misfirePolicy: 'FIRE_LATEST' },
    });
    c.set('2026-09-03T11:00:20Z'); // 11:00 is due; no scheduler has passed yet
    await c.service.updateJob(t.actor, { id: job.id, cron: { overlapPolicy: 'ALLOW', endsAt: new Date('2026-12-01T00:00:00Z') } });
    await c.scheduler().tick();
    expect(await firedOf(job.id)).toEqual(['2026-09-03T11:00:00.000Z']);
    // A changed expression is a new schedule, from now.
    c.set('2026-09-03T12:00:10Z');
    const moved = await c.service.updateJob(t.actor, { id: job.id, cron: { expression: '30 * * * *' } });
    expect(moved.cron!.nextFireAt!.toISOString()).toBe('2026-09-03T12:30:00.000Z');
    // An end moved before the next occurrence ends the schedule; moved back, it resumes from now.
    const ended = await c.service.updateJob(t.actor, { id: job.id, cron: { endsAt: new Date('2026-09-03T12:20:00Z') } });
    expect(ended.cron!.nextFireAt).toBeNull();
    const reopened = await c.service.updateJob(t.actor, { id: job.id, cron: { endsAt: null } });
    expect(reopened.cron!.nextFireAt!.toISOString()).toBe('2026-09-03T12:30:00.000Z');
  });

  it('fires nothing for a paused job, and continues from now with no backlog on resume', async () => {
    const c = clockAt('2026-10-01T10:00:00Z');
    const { job } = await c.service.createJob(t.actor, {
      endpointId,
      kind: 'CRON',
      cron: { expression: '*/10 * * * *', misfirePolicy: 'FIRE_ALL' },
    });
    await c.service.pauseJob(t.actor, job.id);
    c.set('2026-10-01T12:00:00Z');
    await c.scheduler().tick();
    expect(await firedOf(job.id)).toEqual([]);
    c.set('2026-10-01T12:03:00Z');
    await c.service.resumeJob(t.actor, job.id);
    c.set('2026-10-01T12:10:00Z');
    await c.scheduler().tick();
    expect(await firedOf(job.id)).toEqual(['2026-10-01T12:10:00.000Z']);
  });
});

describe('the reaper', () => {
  it('is provisioned with every workspace, on an INTERNAL endpoint users cannot touch', async () => {
    for (const actor of [t.actor, t.otherActor]) {
      const { rows } = await t.query(
        `select j.id, j.kind, j.cron_expression, en.type from jobs j join endpoints en on en.id = j.endpoint_id
         where j.workspace_id = $1 and en.name = 'jobgate.reaper'`,
        [actor.workspaceId],
      );
      expect(rows).toEqual([{ id: expect.any(String), kind: 'CRON', cron_expression: '*/5 * * * *', type: 'INTERNAL' }]);
    }
    await t.query(`update jobs set status = 'ACTIVE', next_fire_at = now() where name = 'reaper'`);
    const reaper = (
      await t.query(
        `select j.id, j.endpoint_id from jobs j join endpoints en on en.id = j.endpoint_id where en.name = 'jobgate.reaper' and j.workspace_id = $1`,
        [t.actor.workspaceId],
      )
    ).rows[0];
    expect(await codeOf(() => t.service.cancelJob(t.actor, reaper.id))).toBe('FORBIDDEN');
    expect(await codeOf(() => t.service.updateJob(t.actor, { id: reaper.id, name: 'mine' }))).toBe('FORBIDDEN');
    expect(await codeOf(() => t.service.pauseJob(t.actor, reaper.id))).toBe('FORBIDDEN');
    expect(await codeOf(() => t.service.createJob(t.actor, { endpointId: reaper.endpoint_id, kind: 'IMMEDIATE' }))).toBe(
      'INTERNAL_ENDPOINT',
    );
    // Its first occurrence is the database's now(), with microseconds: the tick's compare-and-set
    // must still match it, fire once and move on.
    const s = createCronJobScheduler({ pool: t.database.pool, log });
    const first = await s.tick();
    expect(first.fired).toBe(2); // one reaper per workspace
    expect((await s.tick()).fired).toBe(0);
    const after = (await t.query('select next_fire_at, last_fired_at from jobs where id = $1', [reaper.id])).rows[0];
    expect(after.next_fire_at.getTime()).toBeGreaterThan(after.last_fired_at.getTime());
    // Hidden from lists unless asked for.
    expect((await t.service.jobs(t.actor, {})).edges.map((e) => e.node.id)).not.toContain(reaper.id);
    expect((await t.service.jobs(t.actor, { includeInternal: true }, { first: 100 })).edges.map((e) => e.node.id)).toContain(reaper.id);
  });
});
