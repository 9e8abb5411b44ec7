/**
 * What the engine reports through its observer, as the Prometheus adapter exposes it: cron
 * lateness, misfires and skipped ticks; lease expiries and reconciles; LISTEN reconnections and
 * fallbacks to polling; run checkpoints; live events delivered and slow consumers cut. Real
 * scheduler, worker, runner and hub on a test database.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { createDatabaseProbes } from '../../src/service/ops/probes.js';
import { createMetrics, type Metrics } from '../../src/metrics/prometheus.js';
import { outcome, RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { createRunner } from '../../src/service/engine/runs/runner.js';
import { createCronJobScheduler } from '../../src/service/engine/cron/scheduler.js';
import { createJobService } from '../../src/service/index.js';
import { createHub } from '../../src/subscriptions/hub/hub.js';
import { adminQuery, createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, type EngineHarness, pauseOwnCronJobs } from '../support/engine.js';
import { Scrape } from '../support/prometheus.js';

let t: TestDb;
let metrics: Metrics;
let engine: EngineHarness;
const log = createLogger('silent');
const read = async () => new Scrape(await metrics.render());

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  metrics = createMetrics({
    pool: t.database.pool,
    snapshot: createDatabaseProbes(t.database.pool).clusterSnapshot,
    processMetrics: false,
  });
  engine = engineHarness(t);
  await t.service.registerEndpoint(t.actor, { name: 'e.nobody', kind: 'HANDLER', handlerName: 'registered-nowhere' });
});
afterEach(async () => {
  await engine.stopAll();
});
afterAll(() => t?.close());

describe('engine metrics', () => {
  it('count cron lateness, misfires and skipped ticks', async () => {
    // The system cron jobs start at the real now; this test runs in another year.
    await pauseOwnCronJobs(t);
    let now = new Date('2030-01-01T00:10:30Z').getTime();
    const clock = () => new Date(now);
    const service = createJobService({ db: t.db, defaultMaxAttempts: 5, clock: async () => clock() });
    await service.createJob(t.actor, {
      endpointName: 'e.nobody',
      kind: 'CRON',
      name: 'every-minute',
      cron: { expression: '* * * * *', timezone: 'UTC', misfirePolicy: 'FIRE_LATEST', overlapPolicy: 'SKIP' },
    });
    const scheduler = createCronJobScheduler({ pool: t.database.pool, log, clock, observer: metrics.observer });
    // Down from 00:10:30 to 00:15:30: 00:11 to 00:15 are due; the latest fires, 30 s late, four are missed.
    now = new Date('2030-01-01T00:15:30Z').getTime();
    expect(await scheduler.tick()).toMatchObject({ fired: 1, missed: 4 });
    // 00:16 comes while 00:15's execution is still pending (no worker runs it): skipped.
    now = new Date('2030-01-01T00:16:10Z').getTime();
    expect(await scheduler.tick()).toMatchObject({ fired: 0, skipped: 1 });
    const s = await read();
    expect(s.value('jobgate_cron_misfires_total')).toBe(4);
    expect(s.value('jobgate_cron_skipped_ticks_total')).toBe(1);
    expect(s.count('jobgate_cron_tick_lateness_seconds')).toBe(1);
    expect(s.text).toMatch(/^jobgate_cron_tick_lateness_seconds_sum 30$/m);
  });

  it('count lease expiries by outcome and reconcile passes', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'e.nobody', kind: 'IMMEDIATE' });
    // A worker that died mid-attempt: its lease ran out a second ago.
    await t.query(
      `update executions set status = 'RUNNING', lease_owner = 'dead-worker', lease_epoch = lease_epoch + 1, attempt_count = 1,
         attempt_started_at = now() - interval '1 minute', lease_expires_at = now() - interval '1 second' where job_id = $1`,
      [job.id],
    );
    await engine.worker({ observer: metrics.observer });
    const s = await eventually(
      async () => {
        const got = await read();
        return got.value('jobgate_lease_expiries_total', { outcome: 'retried' }) === 1 ? got : undefined;
      },
      10_000,
      'the expiry to be counted',
    );
    expect(s.value('jobgate_lease_expiries_total', { outcome: 'failed' })).toBe(0);
    expect(s.value('jobgate_reconciles_total')).toBeGreaterThanOrEqual(1);
    expect((await t.query('select status from executions where job_id = $1', [job.id])).rows[0].status).toBe('PENDING');
  });

  it('count LISTEN reconnections and fallbacks to polling, per connection', async () => {
    await engine.worker({ observer: metrics.observer });
    const before = await read();
    expect(before.value('jobgate_listen_reconnects_total', { connection: 'jobgate-worker-listen' })).toBe(0);
    const { rows } = await adminQuery(
      `select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and application_name = 'jobgate-worker-listen'`,
      [t.name],
    );
    expect(rows).toHaveLength(1);
    const s = await eventually(
      async () => {
        const got = await read();
        return got.value('jobgate_listen_reconnects_total', { connection: 'jobgate-worker-listen' }) === 1 ? got : undefined;
      },
      15_000,
      'the reconnection to be counted',
    );
    expect(s.value('jobgate_listen_polling_fallbacks_total', { connection: 'jobgate-worker-listen' })).toBe(1);
  });

  it('give the first endpoint names their own series and the rest one `_other` series', async () => {
    const capped = createMetrics({ endpointLabels: 2, processMetrics: false });
    for (const name of ['a.one', 'b.two', 'c.three', 'd.four', 'a.one']) capped.observer.executionRecorded(name, 'SUCCEEDED');
    const s = new Scrape(await capped.render());
    const series = s.family('jobgate_executions_finished_total')!.metrics.map((m) => [m.labels?.endpoint, Number(m.value)]);
    expect(series).toEqual([
      ['a.one', 2],
      ['b.two', 1],
      ['_other', 2],
    ]);
  });

  it('count run checkpoints', async () => {
    const registry = new RecoverableRegistry();
    registry.register({
      name: 'three-steps',
      async run(store) {
        for (let i = 1; i <= 3; i++) await store.checkpoint({ i }, { processed: 1 });
        return outcome.completed();
      },
    });
    const runner = createRunner({
      pool: t.database.pool,
      registry,
      log,
      pollMs: 50,
      heartbeatMs: 100,
      staleMs: 1000,
      observer: metrics.observer,
    });
    await runner.start();
    try {
      const { run } = await t.service.triggerRun(t.actor, { name: 'three-steps', force: true });
      await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'COMPLETED');
      expect((await read()).value('jobgate_run_checkpoints_total')).toBe(3);
    } finally {
      await runner.stop();
    }
  });
});

describe('live metrics', () => {
  it('count events delivered and a subscriber cut off for reading nothing', async () => {
    const cut: string[] = [];
    const hub = createHub({ pool: t.database.pool, connectionString: t.url, log, feedLimit: 4, stallMs: 300, observer: metrics.observer });
    await hub.start();
    try {
      const feed = hub.events(
        { workspaceId: t.actor.workspaceId, topic: 'EXECUTION' },
        undefined,
        (id) => String(id),
        () => cut.push('cut'),
      );
      // Live from now on; the client never pulls.
      await eventually(async () => hub.stats().events === 1);
      for (let i = 0; i < 10; i++) await t.service.createJob(t.actor, { endpointName: 'e.nobody', kind: 'IMMEDIATE' });
      await eventually(async () => cut.length === 1, 10_000, 'the subscriber to be cut off');
      const s = await read();
      expect(s.value('jobgate_live_slow_consumers_total')).toBe(1);
      // What reached its queue before it fell behind was delivered to it.
      expect(s.value('jobgate_live_events_delivered_total')).toBe(4);
      expect(feed.closed).toBe(true);
    } finally {
      await hub.stop();
    }
  });
});
