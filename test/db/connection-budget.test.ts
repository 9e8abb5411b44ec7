/**
 * The connections a jobgate process holds, as docs/operating.md (Connections) counts them for
 * `max_connections`: at most DATABASE_POOL_MAX in its pool, plus one LISTEN connection per role
 * (the gateway's live hub, the worker's wake-ups), whatever the load; nothing else.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { startApp, type AppRoles, type RunningApp } from '../../src/app.js';
import { createDatabase } from '../../src/db/pool.js';
import { parseConfig } from '../../src/environment.js';
import { createLogger } from '../../src/log.js';
import { createJobService } from '../../src/service/index.js';
import { adminQuery, createEmptyDatabase } from '../support/db.js';
import { eventually } from '../support/eventually.js';

const POOL_MAX = 4;
const JOBS = 300;
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/**
 * The client connections to `database` now, by application_name. Postgres' own workers on it (an
 * autovacuum worker analyzing the jobs just written shows the database's name and no application
 * name) are not connections anyone opened.
 */
async function connections(database: string): Promise<Record<string, number>> {
  const { rows } = await adminQuery<{ name: string; n: number }>(
    `select application_name as name, count(*)::int as n from pg_stat_activity
     where datname = $1 and backend_type = 'client backend' group by 1`,
    [database],
  );
  return Object.fromEntries(rows.map((r) => [r.name, r.n]));
}

async function start(roles: AppRoles) {
  const db = await createEmptyDatabase();
  closers.push(() => db.drop());
  const config = parseConfig({
    DATABASE_URL: db.url,
    PORT: '0',
    DATABASE_POOL_MAX: String(POOL_MAX),
    JOBGATE_DEMO_HANDLERS: 'on',
    JOBGATE_WORKER_CONCURRENCY: '20',
  });
  const app: RunningApp = await startApp({ config, log: createLogger('silent'), roles });
  closers.push(() => app.stop());
  return { db, app };
}

describe('connections per process', () => {
  it('jobgate start under load: at most DATABASE_POOL_MAX in the pool, one LISTEN connection per role, nothing else', async () => {
    const { db } = await start({ gateway: true, worker: true });
    // Work for the worker, written on a connection of the test's own, closed before counting.
    const direct = createDatabase({ connectionString: db.url, max: 2, applicationName: 'budget-test' });
    const service = createJobService({ db: direct.db, pool: direct.pool, defaultMaxAttempts: 1 });
    const actor = { workspaceId: await service.workspaceIdOf('default'), kind: 'library' as const, role: 'ADMIN' as const };
    await service.registerEndpoint(actor, { name: 'echo', kind: 'HANDLER', handlerName: 'demo.echo' });
    await service.createJobs(
      actor,
      Array.from({ length: JOBS }, (_, i) => ({ kind: 'IMMEDIATE' as const, endpointName: 'echo', input: { i } })),
    );
    await direct.close();
    // Its backends may take a moment to go after the client closed.
    await eventually(async () => !('budget-test' in (await connections(db.name))), 10_000, 'the setup connections to close');

    // The test's own reader, named apart and left out of the count.
    const reader = new pg.Client({ connectionString: db.url, application_name: 'budget-test' });
    await reader.connect();
    closers.push(() => reader.end());
    const seen: Record<string, number>[] = [];
    await eventually(
      async () => {
        const { 'budget-test': _reader, ...now } = await connections(db.name);
        seen.push(now);
        const { rows } = await reader.query(`select count(*)::int as n from executions e join endpoints en on en.id = e.endpoint_id
           where en.name = 'echo' and e.status = 'SUCCEEDED'`);
        return rows[0].n === JOBS;
      },
      60_000,
      `the ${JOBS} executions to finish`,
    );
    const most = (name: string) => Math.max(0, ...seen.map((s) => s[name] ?? 0));
    expect(most('jobgate')).toBeGreaterThan(1); // the pool was used in parallel
    expect(most('jobgate')).toBeLessThanOrEqual(POOL_MAX);
    for (const s of seen) {
      // Both listeners, all along; and no connection of any other name.
      expect(s).toMatchObject({ 'jobgate-live': 1, 'jobgate-worker-listen': 1 });
      expect(Object.keys(s).filter((name) => !['jobgate', 'jobgate-live', 'jobgate-worker-listen'].includes(name))).toEqual([]);
    }
  });

  it('a gateway alone holds its live hub as its only LISTEN connection; a worker alone its wake-ups', async () => {
    const gateway = await start({ gateway: true, worker: false });
    const worker = await start({ gateway: false, worker: true });
    await eventually(async () => (await connections(gateway.db.name))['jobgate-live'] === 1, 10_000, 'the live hub to listen');
    await eventually(async () => (await connections(worker.db.name))['jobgate-worker-listen'] === 1, 10_000, 'the worker to listen');
    expect(await connections(gateway.db.name)).not.toHaveProperty('jobgate-worker-listen');
    expect(await connections(worker.db.name)).not.toHaveProperty('jobgate-live');
  });
});
