/**
 * A mutation that Postgres aborts to break a deadlock (or for a serialization failure) is tried
 * again whole, and succeeds once the other side has gone; one that stays in conflict is refused
 * with CONFLICT, never an internal error, and changes nothing. The deadlock is a real one: another
 * session locks the job's pending execution, the mutation locks the job and waits for that
 * execution, then the other session asks for the job.
 */
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { adminQuery, codeOf, createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/eventually.js';

let t: TestDb;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await t.service.registerEndpoint(t.actor, { name: 'conflicts.target', kind: 'HANDLER', handlerName: 'absent' });
});
afterAll(() => t?.close());

/** A delayed job with its one pending execution. */
async function delayedJob() {
  const { job } = await t.service.createJob(t.actor, {
    endpointName: 'conflicts.target',
    kind: 'DELAYED',
    runAt: new Date(Date.now() + 3_600_000),
  });
  return job.id;
}

/** Waits until a backend of the test database waits on a lock. */
const someoneWaits = () =>
  eventually(
    async () =>
      (await adminQuery(`select 1 from pg_stat_activity where datname = $1 and wait_event_type = 'Lock'`, [t.name])).rows.length > 0,
    { timeout: 5_000, what: 'a backend waiting on a lock' },
  );

/**
 * Another session that takes the job's execution, then, once the mutation waits for it, the job:
 * a cycle. Its own deadlock_timeout is long, so the mutation's backend, checking after the
 * server's second, is the one Postgres aborts. `holdFor`: how long it keeps both locks after.
 */
async function deadlockWith(jobId: string, mutation: () => Promise<unknown>, holdFor = 0) {
  const other = new pg.Client({ connectionString: t.url });
  await other.connect();
  try {
    await other.query('begin');
    await other.query(`set local deadlock_timeout = '30s'`);
    await other.query(`select 1 from executions where job_id = $1 for update`, [jobId]);
    const done = mutation().then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    await someoneWaits();
    await other.query(`select 1 from jobs where id = $1 for update`, [jobId]);
    await new Promise((r) => setTimeout(r, holdFor));
    await other.query('commit');
    return await done;
  } finally {
    await other.end();
  }
}

describe('a mutation in a deadlock', () => {
  it('is tried again once Postgres breaks the cycle, and succeeds: one OK audit row, the change made once', async () => {
    const id = await delayedJob();
    const result = await deadlockWith(id, () => t.service.updateJob(t.actor, { id, maxAttempts: 7 }));
    expect(result).not.toHaveProperty('error');
    expect((result as { value: { maxAttempts: number } }).value.maxAttempts).toBe(7);
    expect((await t.query(`select max_attempts from executions where job_id = $1`, [id])).rows[0].max_attempts).toBe(7);
    const audit = await t.query(`select result_code from audit_log where action = 'job.update' and target_id = $1`, [id]);
    expect(audit.rows.map((r) => r.result_code)).toEqual(['OK']);
  });

  it('is refused with CONFLICT, changing nothing, when the other side keeps it in conflict every time', async () => {
    const id = await delayedJob();
    // Every try meets a serialization failure (a trigger standing for a write that keeps losing).
    await t.query(`
      create function conflicts_always() returns trigger language plpgsql as $$
      begin raise exception 'could not serialize access' using errcode = '40001'; end $$`);
    await t.query(`create trigger conflicts_always before update on jobs for each row execute function conflicts_always()`);
    try {
      expect(await codeOf(() => t.service.updateJob(t.actor, { id, name: 'renamed' }))).toBe('CONFLICT');
    } finally {
      await t.query(`drop trigger conflicts_always on jobs`);
      await t.query(`drop function conflicts_always()`);
    }
    expect((await t.query(`select name from jobs where id = $1`, [id])).rows[0].name).not.toBe('renamed');
    const audit = await t.query(`select result_code from audit_log where action = 'job.update' and target_id = $1`, [id]);
    expect(audit.rows.map((r) => r.result_code)).toEqual(['CONFLICT']);
  });
});
