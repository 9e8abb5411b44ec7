/**
 * POST (or GET) /jobs/run-due over real HTTP: expired leases reconciled, one scheduler pass and a
 * bounded drain, behind a secret. And the same pass from the library, gate.runDue().
 */
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/environment.js';
import { createLogger } from '../../src/log.js';
import { claimExecutions } from '../../src/db/statements/claim.js';
import { createJobgate } from '../../src/index.js';
import { runDuePass } from '../../src/service/engine/serverless/run-due.js';
import { createAvailability } from '../../src/service/engine/runtime/availability.js';
import { HandlerRegistry } from '../../src/service/engine/delivery/handler-registry.js';
import { createCronJobScheduler } from '../../src/service/engine/cron/scheduler.js';
import { startGateway, type RunningGateway } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { pauseOwnCronJobs } from '../support/engine.js';

const SECRET = 'a-cron-secret-that-is-long-enough-123';
let t: TestDb;
let gw: RunningGateway;
let base: string;
let runs = 0;

beforeAll(async () => {
  t = await createTestDb();
  await pauseOwnCronJobs(t);
  const handlers = new HandlerRegistry();
  handlers.register('count', undefined, () => void runs++);
  const log = createLogger('silent');
  const scheduler = createCronJobScheduler({ pool: t.database.pool, log });
  gw = await startGateway({
    service: t.service,
    authenticate: async () => t.actor,
    log,
    host: '127.0.0.1',
    port: 0,
    runDue: {
      secret: SECRET,
      log,
      run: async () => ({ ...(await runDuePass({ pool: t.database.pool, handlers, scheduler, defaultTimeoutMs: 5000 })) }),
    },
  });
  base = `http://127.0.0.1:${(gw.server.address() as AddressInfo).port}`;
  const ep = await t.service.registerEndpoint(t.actor, { name: 'sls.count', kind: 'HANDLER', handlerName: 'count' });
  // Yearly, and due now (as if this year's occurrence had come): firing it leaves the next a year
  // away. An every-minute job fired again when the test ran across a minute boundary.
  const { job } = await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'CRON', cron: { expression: '0 0 1 1 *' } });
  await t.query(`update jobs set next_fire_at = date_trunc('year', now() at time zone 'UTC') at time zone 'UTC' where id = $1`, [job.id]);
  for (let i = 0; i < 3; i++) await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE' });
});
afterAll(async () => {
  await gw.close();
  await t.close();
});

const call = (auth?: string) => fetch(`${base}/jobs/run-due`, { method: 'POST', headers: auth ? { authorization: auth } : {} });

describe('POST /jobs/run-due', () => {
  it('refuses a missing or wrong secret with 401 and does nothing', async () => {
    expect((await call()).status).toBe(401);
    expect((await call('Bearer not-the-secret')).status).toBe(401);
    expect(runs).toBe(0);
    expect((await fetch(`${base}/jobs/run-due`)).status).toBe(401);
    expect((await fetch(`${base}/jobs/run-due`, { headers: { authorization: 'Bearer not-the-secret' } })).status).toBe(401);
    expect((await fetch(`${base}/jobs/run-due`, { method: 'PUT', headers: { authorization: `Bearer ${SECRET}` } })).status).toBe(405);
  });

  it('fires due cron occurrences and drains due executions, once, even when called twice at once', async () => {
    const [a, b] = await Promise.all([call(`Bearer ${SECRET}`), call(`Bearer ${SECRET}`)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const bodies = [await a.json(), await b.json()] as { schedule: { fired: number }; executions: { succeeded: number } }[];
    expect(bodies.reduce((n, x) => n + x.schedule.fired, 0)).toBe(1);
    expect(
      bodies.reduce((n, x) => n + x.executions.succeeded, 0) +
        (await call(`Bearer ${SECRET}`).then((r) => r.json() as Promise<{ executions: { succeeded: number } }>)).executions.succeeded,
    ).toBe(4);
    expect(runs).toBe(4);
    const { rows } = await t.query(`select status, count(*)::int as n from executions group by status`);
    expect(rows).toEqual([{ status: 'SUCCEEDED', n: 4 }]);
  });

  it('accepts GET with the secret, as Vercel Cron sends it', async () => {
    const ep = await t.service.registerEndpoint(t.actor, { name: 'sls.count-get', kind: 'HANDLER', handlerName: 'count' });
    await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE' });
    const before = runs;
    const res = await fetch(`${base}/jobs/run-due`, { headers: { authorization: `Bearer ${SECRET}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { executions: { succeeded: number } }).executions.succeeded).toBe(1);
    expect(runs).toBe(before + 1);
  });

  it('reconciles an attempt whose runner died (lease expired), so it is retried rather than left RUNNING', async () => {
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'sls.killed',
      kind: 'HANDLER',
      handlerName: 'count',
      backoffBaseMs: 1,
      backoffMaxMs: 1,
      jitter: false,
      maxAttempts: 3,
    });
    const { job } = await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE' });
    // A pass claimed it, then its function instance was killed: RUNNING, with no one to finish it.
    const [claimed] = await claimExecutions(t.database.pool, {
      workerId: 'run-due:killed',
      limit: 1,
      handlers: ['count'],
      leaseMs: 60_000,
      limitedEndpoints: false,
    });
    expect(claimed!.job_id).toBe(job.id);
    await t.query(`update executions set lease_expires_at = now() - interval '1 second' where id = $1`, [claimed!.id]);
    const res = await fetch(`${base}/jobs/run-due`, { method: 'POST', headers: { authorization: `Bearer ${SECRET}` } });
    expect(((await res.json()) as { reconciled: { retrying: number } }).reconciled.retrying).toBe(1);
    // The retry runs on this pass or the next (its backoff is 1 ms).
    for (let i = 0; i < 20; i++) {
      const { rows } = await t.query(`select status from executions where id = $1`, [claimed!.id]);
      if (rows[0].status === 'SUCCEEDED') break;
      await fetch(`${base}/jobs/run-due`, { method: 'POST', headers: { authorization: `Bearer ${SECRET}` } });
    }
    const { rows } = await t.query(`select outcome, worker_id from attempts where execution_id = $1 order by attempt_number`, [
      claimed!.id,
    ]);
    expect(rows.map((r) => [r.worker_id, r.outcome])).toEqual([
      ['run-due:killed', 'LEASE_EXPIRED'],
      [expect.stringMatching(/^run-due:/), 'SUCCEEDED'],
    ]);
  });

  it('holds off reconciling for a lease after an outage, as the worker does, so an attempt that ran through it is not taken from its worker', async () => {
    const ep = await t.service.registerEndpoint(t.actor, { name: 'sls.outage', kind: 'HANDLER', handlerName: 'elsewhere', maxAttempts: 3 });
    await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE' });
    // A worker elsewhere runs it; its lease ran out while nobody could reach the database.
    const [claimed] = await claimExecutions(t.database.pool, {
      workerId: 'worker:through-outage',
      limit: 1,
      handlers: ['elsewhere'],
      leaseMs: 60_000,
      limitedEndpoints: false,
    });
    await t.query(`update executions set lease_expires_at = now() - interval '1 second' where id = $1`, [claimed!.id]);
    const availability = createAvailability(createLogger('silent'));
    availability.unreachable(Object.assign(new Error('terminating connection'), { code: '57P01' }), 'test');
    availability.reached(performance.now());
    const deps = {
      pool: t.database.pool,
      handlers: new HandlerRegistry(),
      scheduler: { tick: async () => ({}) as never },
      defaultTimeoutMs: 5000,
    };
    const within = await runDuePass({ ...deps, availability, leaseMs: 60_000 });
    expect(within.reconciled).toEqual({ retrying: 0, failed: 0, cancelled: 0 });
    const { rows } = await t.query(`select status, lease_owner from executions where id = $1`, [claimed!.id]);
    expect(rows[0]).toEqual({ status: 'RUNNING', lease_owner: 'worker:through-outage' });
    // Once the grace is over (a lease of 0 here), its lease is reconciled as any.
    const after = await runDuePass({ ...deps, availability, leaseMs: 0 });
    expect(after.reconciled.retrying).toBe(1);
  });

  it('is gate.runDue() in the library: the same pass, with the handlers registered there and no worker started', async () => {
    const gate = await createJobgate({ databaseUrl: t.url, migrate: false });
    try {
      const seen: unknown[] = [];
      gate.handle('lib-count', (input) => void seen.push(input));
      await gate.client.registerEndpoint({ name: 'sls.library', kind: 'HANDLER', handlerName: 'lib-count' });
      await gate.client.createJob({ endpointName: 'sls.library', kind: 'IMMEDIATE', input: { n: 1 } });
      const result = await gate.runDue();
      expect(result.executions).toMatchObject({ claimed: 1, succeeded: 1 });
      expect(result.reconciled).toEqual({ retrying: 0, failed: 0, cancelled: 0 });
      expect(seen).toEqual([{ n: 1 }]);
    } finally {
      await gate.close();
    }
  });

  it('does not exist unless JOBGATE_CRON_SECRET is set, and refuses a short secret', () => {
    expect(parseConfig({}).cronSecret).toBeUndefined();
    expect(() => parseConfig({ JOBGATE_CRON_SECRET: 'short' })).toThrow(/JOBGATE_CRON_SECRET: must be at least 32 characters/);
  });
});
