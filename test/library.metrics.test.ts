/**
 * Metrics from the library, as the CLI has them: `createJobgate({ metrics })` counts its workers'
 * executions, its serverless passes and operator cancels of pending executions; into an
 * application's own registry when given one. Node's process metrics are shared by the process and
 * stopped when the last Jobgate counting them closes.
 */
import perfHooks from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobgate, type Jobgate } from '../src/index.js';
import { processMetricsUsers } from '../src/metrics/process.js';
import { createTestDb, type TestDb } from './support/db.js';
import { eventually } from './support/eventually.js';
import { Scrape } from './support/prometheus.js';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(async () => {
  await t?.close();
});

const finished = (s: Scrape, outcome: string) => s.value('jobgate_executions_finished_total', { endpoint: 'lib.metrics', outcome });

describe('metrics from the library', () => {
  it("counts a serverless pass and what it ran, a worker's executions, and pending executions an operator cancels", async () => {
    const gate: Jobgate = await createJobgate({ databaseUrl: t.url, migrate: false, metrics: true });
    try {
      gate.handle('lib-metrics', async () => {});
      await gate.client.registerEndpoint({ name: 'lib.metrics', kind: 'HANDLER', handlerName: 'lib-metrics' });
      const N = 3;
      for (let i = 0; i < N; i++) await gate.client.createJob({ endpointName: 'lib.metrics', kind: 'IMMEDIATE' });
      const pass = await gate.runDue();
      // Ours, and jobgate's own internal work that was due (the reaper, the alert evaluator).
      expect(pass.executions.succeeded).toBeGreaterThanOrEqual(N);
      let s = new Scrape(await gate.metrics!.render());
      expect(s.value('jobgate_run_due_passes_total', { outcome: 'ok' })).toBe(1);
      expect(s.value('jobgate_run_due_executions_total', { outcome: 'succeeded' })).toBe(pass.executions.succeeded);

      const { job } = await gate.client.createJob({
        endpointName: 'lib.metrics',
        kind: 'DELAYED',
        runAt: new Date('2999-01-01T00:00:00Z'),
      });
      const pending = (await gate.client.executions({ jobId: job.id })).edges[0]!.node;
      await gate.client.cancelExecution(pending.id);
      s = new Scrape(await gate.metrics!.render());
      expect(finished(s, 'CANCELLED')).toBe(1);
      // Cancelling a job cancels its pending execution too.
      const later = await gate.client.createJob({ endpointName: 'lib.metrics', kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') });
      expect((await gate.client.cancelJob(later.job.id)).cancelledExecutions).toBe(1);
      s = new Scrape(await gate.metrics!.render());
      expect(finished(s, 'CANCELLED')).toBe(2);

      await gate.startWorker();
      for (let i = 0; i < N; i++) await gate.client.createJob({ endpointName: 'lib.metrics', kind: 'IMMEDIATE' });
      s = await eventually(async () => {
        const now = new Scrape(await gate.metrics!.render());
        return finished(now, 'SUCCEEDED') >= N ? now : undefined;
      });
      expect(finished(s, 'SUCCEEDED')).toBe(N);
      expect(s.has('jobgate_worker_attempts_in_flight')).toBe(true);
      expect(s.has('process_cpu_user_seconds_total')).toBe(true);
    } finally {
      await gate.close();
    }
  });

  it("counts into the application's registry when given one, leaving Node's process metrics to it", async () => {
    const registry = new Registry();
    const gate = await createJobgate({ databaseUrl: t.url, migrate: false, metrics: registry });
    try {
      expect(gate.metrics!.registry).toBe(registry);
      await gate.runDue();
      const s = new Scrape(await registry.metrics());
      expect(s.value('jobgate_run_due_passes_total', { outcome: 'ok' })).toBe(1);
      expect(s.has('process_cpu_user_seconds_total')).toBe(false);
    } finally {
      await gate.close();
    }
  });

  it('has no metrics unless asked', async () => {
    const gate = await createJobgate({ databaseUrl: t.url, migrate: false });
    expect(gate.metrics).toBeUndefined();
    await gate.close();
  });

  it("stops Node's process metrics' event-loop monitor when the last Jobgate counting them closes", async () => {
    // The monitor prom-client starts, caught as it is made.
    const made: perfHooks.IntervalHistogram[] = [];
    const original = perfHooks.monitorEventLoopDelay;
    (perfHooks as { monitorEventLoopDelay: typeof original }).monitorEventLoopDelay = (...args) => {
      const h = original(...args);
      made.push(h);
      return h;
    };
    let gates: Jobgate[] = [];
    try {
      expect(processMetricsUsers()).toBe(0);
      gates = [
        await createJobgate({ databaseUrl: t.url, migrate: false, metrics: true }),
        await createJobgate({ databaseUrl: t.url, migrate: false, metrics: true }),
      ];
      // One monitor for the process, however many Jobgates count.
      expect(made).toHaveLength(1);
      expect(processMetricsUsers()).toBe(2);
      await gates[0]!.close();
      expect(processMetricsUsers()).toBe(1);
      await gates[1]!.close();
      expect(processMetricsUsers()).toBe(0);
      // disable() answers false for a monitor that was already stopped.
      expect((made[0] as unknown as { disable(): boolean }).disable()).toBe(false);
    } finally {
      (perfHooks as { monitorEventLoopDelay: typeof original }).monitorEventLoopDelay = original;
    }
  });
});
