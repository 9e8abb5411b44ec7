/**
 * Gated executions (migration 000044): a pending execution of an endpoint with a limit is flagged
 * `gated`, claimed only by the limited path, and the unlimited claim never reads past it. The flag
 * must agree with the endpoint's committed limits whatever commits in between: set and cleared
 * with the limits, recomputed when an execution goes back to PENDING, and right when a create and
 * a change of limits race (each waits for the other). And an unlimited endpoint's work is claimed
 * at once beside a limited endpoint's backlog.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { adminQuery, createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, pauseOwnCronJobs, settled, type EngineHarness } from '../support/engine.js';

let t: TestDb;
let h: EngineHarness;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
});
afterEach(() => h.stopAll());
afterAll(() => t?.close());

const register = (name: string, more: { concurrencyLimit?: number; keyConcurrencyLimit?: number } = {}) =>
  t.service.registerEndpoint(t.actor, { name, kind: 'HANDLER', handlerName: 'gated.noop', ...more });
const create = async (endpointName: string, runAt?: string) =>
  (await t.service.createJob(t.actor, { endpointName, kind: runAt ? 'DELAYED' : 'IMMEDIATE', ...(runAt ? { runAt } : {}) })).job.id;
const gatedOf = async (jobId: string) =>
  (await t.query<{ gated: boolean }>(`select gated from executions where job_id = $1`, [jobId])).rows.map((r) => r.gated);
/** Pending executions whose flag disagrees with their endpoint's limits: always none. */
const mismatched = async () =>
  (
    await t.query<{ n: number }>(
      `select count(*)::int as n from executions e join endpoints en on en.id = e.endpoint_id
       where e.status = 'PENDING' and e.gated <> jobgate_endpoint_limited(en)`,
    )
  ).rows[0]!.n;
const later = () => new Date(Date.now() + 3_600_000).toISOString();

/** Waits until a backend of the test database waits on a lock running a statement like `like`. */
async function blockedOn(like: string) {
  for (const until = Date.now() + 5000; ;) {
    const { rows } = await adminQuery(`select 1 from pg_stat_activity where datname = $1 and wait_event_type = 'Lock' and query ilike $2`, [
      t.name,
      like,
    ]);
    if (rows.length > 0) return;
    if (Date.now() > until) throw new Error(`nothing like ${like} waited on a lock`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the gated flag', () => {
  it('follows the endpoint: set on its pending executions with a limit, cleared with it, and pinned on new ones', async () => {
    const ep = await register('gated.follow');
    const before = await create('gated.follow', later());
    expect(await gatedOf(before)).toEqual([false]);
    await t.service.updateEndpoint(t.actor, { id: ep.id, concurrencyLimit: 3 });
    const during = await create('gated.follow', later());
    expect([...(await gatedOf(before)), ...(await gatedOf(during))]).toEqual([true, true]);
    // A per-key limit alone gates too; clearing every limit ungates all of them.
    await t.service.updateEndpoint(t.actor, { id: ep.id, concurrencyLimit: null, keyConcurrencyLimit: 2 });
    expect(await gatedOf(before)).toEqual([true]);
    await t.service.updateEndpoint(t.actor, { id: ep.id, keyConcurrencyLimit: null });
    const after = await create('gated.follow', later());
    expect([...(await gatedOf(before)), ...(await gatedOf(during)), ...(await gatedOf(after))]).toEqual([false, false, false]);
    // Another endpoint's executions are not touched.
    await register('gated.other');
    const other = await create('gated.other', later());
    await t.service.updateEndpoint(t.actor, { id: ep.id, concurrencyLimit: 1 });
    expect(await gatedOf(other)).toEqual([false]);
    expect(await mismatched()).toBe(0);
  });

  it('is read again when an execution goes back to PENDING: a retry after the endpoint got a limit is gated', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let attempts = 0;
    h.handle('gated.noop', async () => {
      if (++attempts === 1) {
        await released;
        throw new Error('first attempt fails');
      }
    });
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'gated.retry',
      kind: 'HANDLER',
      handlerName: 'gated.noop',
      backoffBaseMs: 60_000,
      backoffMaxMs: 60_000,
      jitter: false,
    });
    const job = await create('gated.retry');
    await h.worker({ workerId: 'gated-1', concurrency: 1 });
    await settled(t, job, ['RUNNING'], 10_000);
    // Limited while its attempt runs (RUNNING executions keep their flag until they are PENDING again).
    await t.service.updateEndpoint(t.actor, { id: ep.id, concurrencyLimit: 5 });
    release();
    await settled(t, job, ['PENDING'], 10_000);
    expect(await gatedOf(job)).toEqual([true]);
    expect(await mismatched()).toBe(0);
  });

  it('is right when a create and a change of limits race, whichever goes first', async () => {
    const ep = await register('gated.race');
    const creator = new pg.Client({ connectionString: t.url });
    const changer = new pg.Client({ connectionString: t.url });
    await Promise.all([creator.connect(), changer.connect()]);
    const insert = (c: pg.Client) =>
      c.query(
        `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
         select workspace_id, id, endpoint_id, now(), now() + interval '1 hour', 1 from jobs where endpoint_id = $1 order by created_at desc limit 1`,
        [ep.id],
      );
    try {
      // The job to give executions to (its own first execution is set aside).
      const job = await create('gated.race', later());
      await t.query(`update executions set status = 'CANCELLED', finished_at = now() where job_id = $1`, [job]);

      // The create first, open while the limit is set: the change waits for it, then flags it.
      await creator.query('begin');
      await insert(creator);
      const change = changer.query('update endpoints set concurrency_limit = 2 where id = $1', [ep.id]);
      await blockedOn('update endpoints set concurrency_limit%');
      await creator.query('commit');
      await change;
      expect(await mismatched()).toBe(0);

      // The change first, open while an execution is created: the create waits for it, then reads the cleared limit.
      await changer.query('begin');
      await changer.query('update endpoints set concurrency_limit = null where id = $1', [ep.id]);
      const created = insert(creator);
      await blockedOn('%insert into executions%');
      await changer.query('commit');
      await created;
      expect(await mismatched()).toBe(0);
      const flags = await t.query<{ gated: boolean }>(`select gated from executions where job_id = $1 and status = 'PENDING'`, [job]);
      expect(flags.rows.map((r) => r.gated)).toEqual([false, false]);
    } finally {
      await Promise.all([creator.end(), changer.end()]);
    }
  });
});

describe('a change of limits outside READ COMMITTED', () => {
  it('is refused, saying why, and changes nothing', async () => {
    const ep = await register('gated.isolation');
    const job = await create('gated.isolation', later());
    const c = new pg.Client({ connectionString: t.url });
    await c.connect();
    try {
      await c.query('begin isolation level repeatable read');
      await expect(c.query('update endpoints set concurrency_limit = 2 where id = $1', [ep.id])).rejects.toThrow(/READ COMMITTED/);
      await c.query('rollback');
      // Other changes of the endpoint are not refused.
      await c.query('begin isolation level repeatable read');
      await c.query(`update endpoints set description = 'read in one snapshot' where id = $1`, [ep.id]);
      await c.query('commit');
    } finally {
      await c.end();
    }
    const { rows } = await t.query(`select concurrency_limit, description from endpoints where id = $1`, [ep.id]);
    expect(rows[0]).toEqual({ concurrency_limit: null, description: 'read in one snapshot' });
    expect(await gatedOf(job)).toEqual([false]);
  });
});

describe('claims beside a limited backlog', () => {
  it("start an unlimited endpoint's work at once, and the limited endpoint's within its limit", async () => {
    h.handle('gated.noop', async () => {
      await new Promise((r) => setTimeout(r, 5));
    });
    await register('gated.limited', { concurrencyLimit: 2 });
    await register('gated.free');
    // A backlog ahead, in due order, of the unlimited endpoint's jobs.
    const backlog: string[] = [];
    for (let i = 0; i < 40; i++) backlog.push(await create('gated.limited'));
    const free: string[] = [];
    for (let i = 0; i < 5; i++) free.push(await create('gated.free'));
    await h.worker({ workerId: 'gated-2', concurrency: 10 });
    for (const id of [...free, ...backlog]) await settled(t, id, ['SUCCEEDED'], 30_000);
    // Each of the unlimited endpoint's started before the backlog was through.
    const { rows } = await t.query<{ free_last: Date; backlog_last: Date }>(
      `select max(a.started_at) filter (where en.name = 'gated.free') as free_last,
              max(a.started_at) filter (where en.name = 'gated.limited') as backlog_last
       from attempts a join executions e on e.id = a.execution_id join endpoints en on en.id = e.endpoint_id`,
    );
    expect(rows[0]!.free_last.getTime()).toBeLessThan(rows[0]!.backlog_last.getTime());
  });
});
