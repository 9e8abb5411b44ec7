/**
 * POST /jobs/run-due over real HTTP: one scheduler pass and a bounded drain, behind a secret.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { drainDue } from '../../src/service/engine/drain.js';
import { HandlerRegistry } from '../../src/service/engine/handlers.js';
import { createScheduler } from '../../src/service/engine/scheduler.js';
import { startGateway, type RunningGateway } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../support/db.js';

const SECRET = 'a-cron-secret-that-is-long-enough-123';
let t: TestDb;
let gw: RunningGateway;
let base: string;
let runs = 0;

beforeAll(async () => {
  t = await createTestDb();
  await t.query(`update jobs set status = 'PAUSED', next_fire_at = null where name in ('reaper', 'alerts')`);
  const handlers = new HandlerRegistry();
  handlers.register('count', undefined, () => void runs++);
  const log = createLogger('silent');
  const scheduler = createScheduler({ pool: t.database.pool, log });
  gw = await startGateway({
    service: t.service,
    authenticate: async () => t.actor,
    log,
    host: '127.0.0.1',
    port: 0,
    runDue: {
      secret: SECRET,
      log,
      run: async () => ({
        schedule: await scheduler.tick(),
        executions: await drainDue(t.database.pool, handlers, { limit: 100, defaultTimeoutMs: 5000 }),
      }),
    },
  });
  base = `http://127.0.0.1:${(gw.server.address() as AddressInfo).port}`;
  const ep = await t.service.registerEndpoint(t.actor, { name: 'sls.count', kind: 'HANDLER', handlerName: 'count' });
  const { job } = await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'CRON', cron: { expression: '* * * * *' } });
  // Due now: as if its minute had come.
  await t.query(`update jobs set next_fire_at = date_trunc('minute', now()) where id = $1`, [job.id]);
  for (let i = 0; i < 3; i++) await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE' });
});
afterAll(async () => {
  await gw.close();
  await t.close();
});

const call = (auth?: string) =>
  fetch(`${base}/jobs/run-due`, { method: 'POST', headers: auth ? { authorization: auth } : {} });

describe('POST /jobs/run-due', () => {
  it('refuses a missing or wrong secret with 401 and does nothing', async () => {
    expect((await call()).status).toBe(401);
    expect((await call('Bearer not-the-secret')).status).toBe(401);
    expect(runs).toBe(0);
    expect((await fetch(`${base}/jobs/run-due`)).status).toBe(405);
  });

  it('fires due cron occurrences and drains due executions, once, even when called twice at once', async () => {
    const [a, b] = await Promise.all([call(`Bearer ${SECRET}`), call(`Bearer ${SECRET}`)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const bodies = [await a.json(), await b.json()] as { schedule: { fired: number }; executions: { succeeded: number } }[];
    expect(bodies.reduce((n, x) => n + x.schedule.fired, 0)).toBe(1);
    expect(bodies.reduce((n, x) => n + x.executions.succeeded, 0) + (await call(`Bearer ${SECRET}`).then((r) => r.json() as Promise<{ executions: { succeeded: number } }>)).executions.succeeded).toBe(4);
    expect(runs).toBe(4);
    const { rows } = await t.query(`select status, count(*)::int as n from executions group by status`);
    expect(rows).toEqual([{ status: 'SUCCEEDED', n: 4 }]);
  });

  it('does not exist unless JOBGATE_CRON_SECRET is set, and refuses a short secret', () => {
    expect(parseConfig({}).cronSecret).toBeUndefined();
    expect(() => parseConfig({ JOBGATE_CRON_SECRET: 'short' })).toThrow(/JOBGATE_CRON_SECRET: must be at least 32 characters/);
  });
});
