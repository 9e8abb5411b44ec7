/**
 * Alert conditions beyond failed executions, raised by the real engine: interval handler errors
 * (N in a row, opt-out at registration), recoverable runs that fail and their findings, a dead
 * man's switch, a cron schedule error; each resolved once when it clears.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { evaluateAlerts } from '../../src/service/engine/alerts/evaluator.js';
import { createEngineHost, type EngineHost } from '../../src/service/engine/runtime/host.js';
import { IntervalRegistry } from '../../src/service/engine/intervals/intervals.js';
import { outcome, RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { registerInternalHandlers } from '../../src/service/engine/maintenance/reaper.js';
import { untilDatabaseTimePasses } from '../support/clock.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, type EngineHarness } from '../support/engine.js';

let t: TestDb;
let host: EngineHost;
let h: EngineHarness;
let webhookId: string;
let intervalFails = true;
let scanFails = true;

beforeAll(async () => {
  t = await createTestDb();
  const intervals = new IntervalRegistry();
  intervals.register({
    name: 'alerting.flaky',
    everyMs: 3_600_000,
    run: () => {
      if (intervalFails) throw new Error('flaky tick');
    },
  });
  intervals.register({
    name: 'alerting.quiet',
    everyMs: 3_600_000,
    alertsOptOut: true,
    run: () => {
      throw new Error('always fails, never alerts');
    },
  });
  const recoverables = new RecoverableRegistry();
  recoverables.register({
    name: 'alerting.scan',
    // A throw fails the run at once rather than after retries.
    retry: { budget: 0 },
    async run(store) {
      await store.recordFinding({ kind: 'orphan', severity: 'DATA_LOSS', resourceId: `r-${Date.now()}` });
      await store.recordFinding({ kind: 'note', severity: 'INFO', resourceId: `n-${Date.now()}` });
      if (scanFails) throw new Error('scan exploded');
      return outcome.completed();
    },
  });
  // Audits that record what their params say, then complete or fail.
  for (const name of ['alerting.audit', 'alerting.audit-b']) {
    recoverables.register({
      name,
      async run(store, params: { severity?: 'INFO' | 'WARNING' | 'ERROR' | 'DATA_LOSS'; count?: number; fail?: boolean }) {
        for (let i = 0; params.severity && i < (params.count ?? 1); i++)
          await store.recordFinding({ kind: 'drift', severity: params.severity, resourceId: `${store.runId}/${i}` });
        return params.fail ? outcome.failed('audit broke') : outcome.completed();
      },
    });
  }
  // Every pass is the test's own (evaluate()): a background pass between a crash and its resume,
  // or between a finding and the clean run after it, would hide what a test is about.
  await t.query(`update jobs set status = 'PAUSED', next_fire_at = null where name = 'alerts'`);
  h = engineHarness(t);
  registerInternalHandlers(h.handlers, t.database.pool);
  h.handle('alerting.ok', async () => {});
  await h.worker();
  host = createEngineHost({
    pool: t.database.pool,
    log: createLogger('silent'),
    handlers: h.handlers,
    recoverables,
    intervals,
    triggerRun: t.service.triggerRun,
    staleMs: 2000,
    pollMs: 50,
  });
  await host.start();
  // The webhook endpoint is never reached here (no worker may call out): these tests read the notification rows.
  await t.service.registerEndpoint(t.actor, { name: 'alerting.ok', kind: 'HANDLER', handlerName: 'alerting.ok' });
  webhookId = (await t.service.registerEndpoint(t.actor, { name: 'alerting.hook', kind: 'HTTP', url: 'http://127.0.0.1:9/hook' })).id;
});
afterAll(async () => {
  await host.stop({ graceMs: 1000 });
  await h.stopAll();
  await t.close();
});

const installationAdmin = () => ({ ...t.actor, installationAdmin: true });
const evaluate = () => evaluateAlerts(t.database.pool, t.actor.workspaceId);
async function sent(ruleId: string) {
  return (await t.query(`select * from alert_notifications where rule_id = $1 order by created_at, id`, [ruleId])).rows;
}

async function tick(name: string) {
  const before = (await t.query(`select ok_runs + error_runs as n from interval_handlers where name = $1`, [name])).rows[0]?.n ?? 0;
  await eventually(
    async () =>
      await t.service.triggerHandler(installationAdmin(), { name }).then(
        () => true,
        () => false,
      ),
  );
  await eventually(
    async () =>
      (await t.query(`select ok_runs + error_runs as n from interval_handlers where name = $1 and owner is null`, [name])).rows[0]?.n >
      before,
  );
}

describe('alert conditions', () => {
  it('alerts on an interval handler after N errors in a row, not about one that opted out, and resolves once', async () => {
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'intervals',
      condition: 'INTERVAL_ERROR',
      minConsecutive: 3,
      webhookEndpointId: webhookId,
    });
    await tick('alerting.flaky');
    await tick('alerting.flaky');
    await tick('alerting.quiet');
    await tick('alerting.quiet');
    await tick('alerting.quiet');
    await evaluate();
    expect(await sent(rule.id)).toEqual([]);
    await tick('alerting.flaky');
    await evaluate();
    await evaluate();
    const firing = await sent(rule.id);
    expect(firing.map((n) => [n.kind, n.subject_name])).toEqual([['FIRING', 'alerting.flaky']]);
    expect(firing[0].detail).toMatchObject({ errorsInARow: 3, cause: 'HANDLER' });
    // The handler's own error text is the installation's: not in a workspace's notification.
    expect(JSON.stringify(firing[0])).not.toContain('flaky tick');
    intervalFails = false;
    await tick('alerting.flaky');
    await evaluate();
    await evaluate();
    expect((await sent(rule.id)).map((n) => n.kind)).toEqual(['FIRING', 'RESOLVED']);
  });

  it('alerts on a failed run and on findings at or above a severity; a completed run resolves the run alert', async () => {
    const failed = await t.service.createAlertRule(t.actor, { name: 'runs', condition: 'RUN_FAILED', webhookEndpointId: webhookId });
    const findings = await t.service.createAlertRule(t.actor, {
      name: 'data loss',
      condition: 'FINDING',
      minSeverity: 'DATA_LOSS',
      webhookEndpointId: webhookId,
      handlerNames: ['alerting.scan'],
    });
    const { run } = await t.service.triggerRun(t.actor, { name: 'alerting.scan' });
    await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'FAILED');
    await evaluate();
    const [runAlert] = await sent(failed.id);
    expect(runAlert).toMatchObject({ kind: 'FIRING', subject_type: 'RECOVERABLE', subject_name: 'alerting.scan' });
    expect(runAlert.summary).toContain('scan exploded');
    const findingAlerts = await sent(findings.id);
    expect(findingAlerts).toHaveLength(1);
    expect(findingAlerts[0].detail).toMatchObject({ severity: 'DATA_LOSS', kind: 'orphan' });
    scanFails = false;
    const again = await t.service.triggerRun(t.actor, { name: 'alerting.scan' });
    await eventually(async () => (await t.service.run(t.actor, again.run.id)).status === 'COMPLETED');
    await evaluate();
    expect((await sent(failed.id)).map((n) => n.kind)).toEqual(['FIRING', 'RESOLVED']);
  });

  it('alerts on a run paused as CRASHED and resumed before the evaluator passes, once', async () => {
    // No runner here has this handler: its run stays unowned until the test makes it a stale owner's.
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'crashes',
      condition: 'RUN_FAILED',
      handlerNames: ['alerting.crashy'],
      webhookEndpointId: webhookId,
    });
    const { run } = await t.service.triggerRun(t.actor, { name: 'alerting.crashy', force: true });
    // As a worker that took it and died leaves it: owned, its heartbeat long past its window.
    await t.query(`update runs set owner = 'gone-worker', heartbeat_at = now() - interval '1 hour', stale_ms = 1000 where id = $1`, [
      run.id,
    ]);
    // The engine's own sweep pauses it as CRASHED ...
    await eventually(async () => (await t.service.run(t.actor, run.id)).pauseKind === 'CRASHED');
    // ... and it is resumed before any evaluation: by the time the evaluator passes, it is RUNNING again.
    expect((await t.service.triggerRun(t.actor, { name: 'alerting.crashy', force: true })).outcome).toBe('RESUMED');
    expect(await t.service.run(t.actor, run.id)).toMatchObject({ status: 'RUNNING', pauseKind: null });
    await evaluate();
    await evaluate();
    const notes = await sent(rule.id);
    expect(notes.map((n) => [n.kind, n.subject_name])).toEqual([['FIRING', 'alerting.crashy']]);
    expect(notes[0].detail).toMatchObject({ runId: run.id, crashed: true });
    expect(notes[0].summary).toContain('crashed');
    await t.service.cancelRun(t.actor, run.id);
  });

  it('resolves a FINDING alert once, when a later run of the handler completes with no finding at or above the severity', async () => {
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'drift',
      condition: 'FINDING',
      minSeverity: 'ERROR',
      handlerNames: ['alerting.audit'],
      webhookEndpointId: webhookId,
    });
    const audit = async (params: Record<string, unknown>, name = 'alerting.audit') => {
      const { run } = await t.service.triggerRun(t.actor, { name, params });
      await eventually(async () => ['COMPLETED', 'FAILED'].includes((await t.service.run(t.actor, run.id)).status));
      return run.id;
    };
    await audit({ severity: 'ERROR' });
    await evaluate();
    expect((await sent(rule.id)).map((n) => n.kind)).toEqual(['FIRING']);
    // A run that failed scanned nothing to the end: it clears nothing.
    await audit({ fail: true });
    await evaluate();
    // Nor does the same run, nor a clean pass with nothing new.
    await evaluate();
    expect((await sent(rule.id)).map((n) => n.kind)).toEqual(['FIRING']);
    // A finding below the rule's severity is not "as bad": this run clears it.
    const clean = await audit({ severity: 'WARNING' });
    await evaluate();
    await evaluate();
    const notes = await sent(rule.id);
    expect(notes.map((n) => n.kind)).toEqual(['FIRING', 'RESOLVED']);
    expect(notes[1]).toMatchObject({ subject_type: 'RECOVERABLE', subject_name: 'alerting.audit', window_start: notes[0].window_start });
    expect(notes[1].detail).toMatchObject({ runId: clean });
    expect(notes[1].summary).toContain('completed with no finding');
    // Another clean run: resolved already, nothing more.
    await audit({});
    await evaluate();
    expect((await sent(rule.id)).map((n) => n.kind)).toEqual(['FIRING', 'RESOLVED']);
  });

  it('fires and then resolves a FINDING alert when the finding and the clean run that follows are evaluated in one pass', async () => {
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'drift-b',
      condition: 'FINDING',
      minSeverity: 'WARNING',
      handlerNames: ['alerting.audit-b'],
      webhookEndpointId: webhookId,
    });
    for (const params of [{ severity: 'DATA_LOSS' }, { severity: 'INFO' }]) {
      const { run } = await t.service.triggerRun(t.actor, { name: 'alerting.audit-b', params });
      await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'COMPLETED');
    }
    await evaluate();
    expect((await sent(rule.id)).map((n) => n.kind)).toEqual(['FIRING', 'RESOLVED']);
  });

  it('resolves a FINDING alert only once every finding before the clean run is read, however far behind the evaluator is', async () => {
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'drift-c',
      condition: 'FINDING',
      minSeverity: 'ERROR',
      handlerNames: ['alerting.audit-b'],
      webhookEndpointId: webhookId,
    });
    for (const params of [{ severity: 'ERROR', count: 3 }, {}]) {
      const { run } = await t.service.triggerRun(t.actor, { name: 'alerting.audit-b', params });
      await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'COMPLETED');
    }
    // One finding (and one event) per pass: the clean run is in sight from the first pass, the last two findings are not.
    await evaluateAlerts(t.database.pool, t.actor.workspaceId, { batch: 1 });
    await evaluate();
    const notes = await sent(rule.id);
    expect(notes.map((n) => [n.kind, n.occurrences])).toEqual([
      ['FIRING', 1],
      ['RESOLVED', 3],
    ]);
  });

  it("fires a dead man's switch for a job with no success, once, and resolves it on the next success", async () => {
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'alerting.ok',
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 3_600_000),
    });
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'silence',
      condition: 'NO_SUCCESS',
      noSuccessMs: 1000,
      jobIds: [job.id],
      webhookEndpointId: webhookId,
    });
    await evaluate();
    expect(await sent(rule.id)).toEqual([]);
    const { rows } = await t.query(`select created_at from alert_rules where id = $1`, [rule.id]);
    await untilDatabaseTimePasses(t, new Date(rows[0].created_at.getTime() + 1000));
    await evaluate();
    await evaluate();
    expect((await sent(rule.id)).map((n) => [n.kind, n.subject_id])).toEqual([['FIRING', job.id]]);
    const { execution } = await t.service.triggerJob(t.actor, { id: job.id, force: true });
    await eventually(
      async () => (await t.query(`select status from executions where id = $1`, [execution.id])).rows[0].status === 'SUCCEEDED',
    );
    await evaluate();
    expect((await sent(rule.id)).map((n) => n.kind)).toEqual(['FIRING', 'RESOLVED']);
  });

  it("alerts on a cron job's schedule error and resolves when it computes again", async () => {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'alerting.ok', kind: 'CRON', cron: { expression: '0 3 * * *' } });
    const rule = await t.service.createAlertRule(t.actor, { name: 'schedules', condition: 'SCHEDULE_ERROR', webhookEndpointId: webhookId });
    // As the scheduler records a schedule it cannot compute (src/service/engine/cron/scheduler.ts), and clears it.
    await t.query(`update jobs set schedule_error = 'no next occurrence', schedule_error_at = now() where id = $1`, [job.id]);
    await evaluate();
    await evaluate();
    expect((await sent(rule.id)).map((n) => [n.kind, n.subject_id])).toEqual([['FIRING', job.id]]);
    expect((await sent(rule.id))[0].summary).toContain('no next occurrence');
    await t.query(`update jobs set schedule_error = null where id = $1`, [job.id]);
    await evaluate();
    await evaluate();
    expect((await sent(rule.id)).map((n) => n.kind)).toEqual(['FIRING', 'RESOLVED']);
  });

  it('shows the evaluator and the email sender in the handler catalogue, as the reaper', async () => {
    const names = (await t.service.handlers(t.actor, { kind: 'HANDLER' })).map((x) => x.name);
    expect(names).toEqual(expect.arrayContaining(['jobgate.reaper', 'jobgate.alerts', 'jobgate.alert-email']));
  });
});
