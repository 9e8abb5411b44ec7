/**
 * Scheduled recoverable jobs: each tick calls the idempotent triggerRun; a tick that lands on an
 * active run starts nothing and is counted; cron ticks follow the cron walk in their time zone.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createJobgate } from '../../src/index.js';
import { createLogger } from '../../src/log.js';
import { HandlerRegistry } from '../../src/service/engine/delivery/handler-registry.js';
import { createEngineHost, type EngineHost } from '../../src/service/engine/runtime/host.js';
import { IntervalRegistry } from '../../src/service/engine/intervals/intervals.js';
import { outcome, RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { createRunScheduleTicker } from '../../src/service/engine/runs/schedule-ticker.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let host: EngineHost | undefined;
let release: () => void = () => {};
let atGate = 0;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  host = undefined;
  atGate = 0;
});
afterEach(async () => {
  release();
  await host?.stop({ graceMs: 1000 });
});
afterAll(() => t?.close());

const scheduleRow = async (name: string) =>
  (
    await t.query(`select * from run_schedules where name = $1 and workspace_id = (select id from workspaces where slug = 'default')`, [
      name,
    ])
  ).rows[0];
const makeDue = (name: string) => t.query(`update run_schedules set next_due_at = now() - interval '1 second' where name = $1`, [name]);

describe('scheduled recoverable jobs', () => {
  it('a scheduled recoverable job whose tick lands on an active run returns the same run and starts no second one', async () => {
    let gate = new Promise<void>((r) => (release = r));
    const recoverables = new RecoverableRegistry();
    recoverables.register({
      name: 'audit-scan',
      schedule: { everyMs: 3_600_000, params: { n: 2 } },
      async run(store, params: { n: number }) {
        for (let i = 0; i < params.n; i++) {
          atGate++;
          await gate;
          await store.checkpoint({ next: i + 1 }, { processed: 1, total: params.n });
        }
        return outcome.completed();
      },
    });
    host = createEngineHost({
      pool: t.database.pool,
      log: createLogger('silent'),
      handlers: new HandlerRegistry(),
      recoverables,
      intervals: new IntervalRegistry(),
      triggerRun: t.service.triggerRun,
      staleMs: 1000,
      pollMs: 50,
    });
    await host.start();
    // Registered in the default workspace, first tick a period away.
    await eventually(async () => scheduleRow('audit-scan'));
    expect(Number((await scheduleRow('audit-scan')).ticks)).toBe(0);

    await makeDue('audit-scan');
    await eventually(async () => Number((await scheduleRow('audit-scan')).ticks) === 1);
    const first = await scheduleRow('audit-scan');
    expect(first.last_tick_outcome).toBe('STARTED');
    const runId = first.last_tick_run_id as string;
    await eventually(async () => atGate === 1); // the run is active, inside its handler

    await makeDue('audit-scan');
    await eventually(async () => Number((await scheduleRow('audit-scan')).ticks) === 2);
    const second = await scheduleRow('audit-scan');
    expect(second).toMatchObject({ last_tick_outcome: 'ACTIVE', last_tick_run_id: runId, ticks_on_active: 1 });
    expect((await t.query(`select id from runs where name = 'audit-scan'`)).rows).toEqual([{ id: runId }]);
    // Each tick went through triggerRun, audited as jobgate itself.
    expect((await t.query(`select actor_kind, result_code from audit_log where action = 'run.trigger'`)).rows).toEqual([
      { actor_kind: 'system', result_code: 'OK' },
      { actor_kind: 'system', result_code: 'OK' },
    ]);

    // The note is visible in the catalogue, for this workspace only.
    const g = createTestGateway(t);
    const query = `{ handlers(kind: RECOVERABLE) { name cadence { everyMs } schedule { ticks ticksOnActiveRun lastTickOutcome lastTickRunId nextDueAt } lastRun { id status } } }`;
    const mine = await g.gql(query);
    expect(mine.data.handlers).toEqual([
      {
        name: 'audit-scan',
        cadence: { everyMs: 3_600_000 },
        schedule: { ticks: 2, ticksOnActiveRun: 1, lastTickOutcome: 'ACTIVE', lastTickRunId: runId, nextDueAt: expect.any(String) },
        lastRun: { id: runId, status: 'RUNNING' },
      },
    ]);
    const theirs = await g.gql(query, {}, t.otherActor);
    expect(theirs.data.handlers).toEqual([{ name: 'audit-scan', cadence: null, schedule: null, lastRun: null }]);

    // Once the run has finished, the next tick starts a fresh one.
    gate = Promise.resolve();
    release();
    await eventually(async () => (await t.service.run(t.actor, runId)).status === 'COMPLETED');
    await makeDue('audit-scan');
    await eventually(async () => Number((await scheduleRow('audit-scan')).ticks) === 3);
    const third = await scheduleRow('audit-scan');
    expect(third.last_tick_outcome).toBe('STARTED');
    expect(third.last_tick_run_id).not.toBe(runId);
    expect(Number(third.ticks_on_active)).toBe(1);
  });

  it('a scheduled tick leaves a run an operator cancelled paused (HELD), resumes one paused by a crash, and an operator trigger resumes either', async () => {
    const gates: (() => void)[] = [];
    const recoverables = new RecoverableRegistry();
    recoverables.register({
      name: 'deep-scan',
      schedule: { everyMs: 3_600_000 },
      async run(store) {
        for (;;) {
          if ((await store.status()) === 'CANCEL_REQUESTED') return outcome.paused({ at: 1 });
          atGate++;
          await new Promise<void>((r) => gates.push(r));
        }
      },
    });
    release = () => gates.splice(0).forEach((f) => f());
    host = createEngineHost({
      pool: t.database.pool,
      log: createLogger('silent'),
      handlers: new HandlerRegistry(),
      recoverables,
      intervals: new IntervalRegistry(),
      triggerRun: t.service.triggerRun,
      staleMs: 1000,
      pollMs: 50,
    });
    await host.start();
    await eventually(async () => scheduleRow('deep-scan'));
    await makeDue('deep-scan');
    await eventually(async () => Number((await scheduleRow('deep-scan')).ticks) === 1);
    const runId = (await scheduleRow('deep-scan')).last_tick_run_id as string;
    await eventually(async () => atGate === 1);

    // An operator stops it: PAUSED, kind CANCELLED.
    await t.service.cancelRun(t.actor, runId);
    release();
    await eventually(async () => (await t.service.run(t.actor, runId)).status === 'PAUSED');
    expect(await t.service.run(t.actor, runId)).toMatchObject({ pauseKind: 'CANCELLED', pauseReason: 'cancelled by an operator' });
    // The schedule's next tick leaves it paused.
    await makeDue('deep-scan');
    await eventually(async () => Number((await scheduleRow('deep-scan')).ticks) === 2);
    expect(await scheduleRow('deep-scan')).toMatchObject({ last_tick_outcome: 'HELD', last_tick_run_id: runId, ticks_on_active: 0 });
    expect(await t.service.run(t.actor, runId)).toMatchObject({ status: 'PAUSED', pauseKind: 'CANCELLED' });

    // An operator's trigger resumes it, over GraphQL as through the library.
    const g = createTestGateway(t);
    const resumed = await g.gql(`mutation { triggerRun(input: { name: "deep-scan" }) { outcome run { id status pauseKind } } }`);
    expect(resumed.data.triggerRun).toEqual({ outcome: 'RESUMED', run: { id: runId, status: 'RUNNING', pauseKind: null } });
    await eventually(async () => atGate === 2);

    // Paused by a crash (what the sweep leaves): the schedule's tick resumes it.
    await host.runner.stop({ graceMs: 0 }); // no runner takes it again here: the row is what this checks
    await t.query(
      `update runs set status = 'PAUSED', owner = null, pause_kind = 'CRASHED', pause_reason = 'its worker stopped heartbeating' where id = $1`,
      [runId],
    );
    await makeDue('deep-scan');
    await eventually(async () => Number((await scheduleRow('deep-scan')).ticks) === 3);
    expect(await scheduleRow('deep-scan')).toMatchObject({ last_tick_outcome: 'RESUMED', last_tick_run_id: runId });
    expect(await t.service.run(t.actor, runId)).toMatchObject({ status: 'RUNNING', pauseKind: null, pauseReason: null });
  });

  it('ticks a cron schedule in its time zone with the cron walk: a wall time skipped by DST is shifted, missed ticks coalesce', async () => {
    let now = new Date('2026-03-07T12:00:00Z');
    const recoverables = new RecoverableRegistry();
    recoverables.register({
      name: 'nightly',
      schedule: { cron: '30 2 * * *', timezone: 'America/New_York' },
      run: async () => outcome.completed(),
    });
    const scheduler = createRunScheduleTicker({
      pool: t.database.pool,
      log: createLogger('silent'),
      registry: recoverables,
      trigger: t.service.triggerRun,
      clock: () => now,
    });
    // Left by an older registration in another workspace: this worker schedules "nightly" in default only.
    await t.query(
      `insert into run_schedules (workspace_id, name, every_ms, next_due_at) values ($1, 'nightly', 60000, '2026-01-01T00:00:00Z')`,
      [t.otherActor.workspaceId],
    );
    expect(await scheduler.tick()).toEqual([]);
    // 02:30 does not exist on 8 March 2026 in New York (spring forward): 03:30 EDT.
    expect((await scheduleRow('nightly')).next_due_at.toISOString()).toBe('2026-03-08T07:30:00.000Z');

    now = new Date('2026-03-08T07:30:00Z');
    const [tick] = await scheduler.tick();
    expect(tick).toMatchObject({ name: 'nightly', outcome: 'STARTED' });
    expect((await scheduleRow('nightly')).next_due_at.toISOString()).toBe('2026-03-09T06:30:00.000Z');

    // Down for days: one tick, which finds the (never run) run active.
    now = new Date('2026-03-12T12:00:00Z');
    const ticks = await scheduler.tick();
    expect(ticks).toEqual([{ workspaceId: t.actor.workspaceId, name: 'nightly', outcome: 'ACTIVE', runId: tick!.runId }]);
    expect(await scheduler.tick()).toEqual([]);
    const row = await scheduleRow('nightly');
    expect(row.next_due_at.toISOString()).toBe('2026-03-13T06:30:00.000Z');
    expect(row).toMatchObject({ ticks: 2, ticks_on_active: 1, cron_expression: '30 2 * * *', timezone: 'America/New_York' });
  });

  it('is registered through the library: gate.recoverable with a schedule and gate.interval appear in the catalogue', async () => {
    const gate = await createJobgate({ databaseUrl: t.url, migrate: false, poolMax: 5, log: createLogger('silent') });
    try {
      gate.recoverable('weekly-check', {
        schedule: { cron: '0 6 * * 1', timezone: 'Europe/Paris', params: { deep: true } },
        run: async () => outcome.completed(),
      });
      gate.interval('heartbeat-metrics', { everyMs: 15_000, run: async () => ({ count: 0 }) });
      await gate.startWorker({ staleMs: 1000, enginePollMs: 50 });
      await eventually(async () => scheduleRow('weekly-check'));
      const list = await gate.client.handlers();
      expect(list.find((h) => h.name === 'weekly-check')).toMatchObject({
        kind: 'RECOVERABLE',
        cadence: { cron: '0 6 * * 1', timezone: 'Europe/Paris', everyMs: null },
        schedule: { ticks: 0, ticksOnActiveRun: 0 },
      });
      expect(list.find((h) => h.name === 'heartbeat-metrics')).toMatchObject({
        kind: 'INTERVAL',
        cadence: { everyMs: 15_000 },
        interval: { timeoutMs: 60_000 },
      });
      expect((await scheduleRow('weekly-check')).params).toEqual({ deep: true });
    } finally {
      await gate.close();
    }
  });

  it('refuses an invalid schedule at registration', () => {
    const r = new RecoverableRegistry();
    const run = async () => outcome.completed();
    expect(() => r.register({ name: 'a', schedule: { cron: '61 * * * *' }, run })).toThrow(/minute field/);
    expect(() => r.register({ name: 'b', schedule: { cron: '* * * * *', timezone: 'Mars/Olympus' }, run })).toThrow(/time zone/);
    expect(() => r.register({ name: 'c', schedule: { cron: '* * * * *', everyMs: 60_000 }, run })).toThrow(/exactly one/);
    expect(() => r.register({ name: 'd', schedule: { everyMs: 10 }, run })).toThrow(/at least 1000/);
  });
});
