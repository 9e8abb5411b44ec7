/**
 * Workers as real processes, killed and stopped with real signals: no execution is lost, a lost
 * attempt counts, a stalled worker's late writes are refused, and no execution ever has two
 * overlapping attempts.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { QUIET, quietPeriod } from '../support/eventually.js';
import { eventually, pauseOwnCronJobs } from '../support/engine.js';
import { workerProcesses } from '../support/children.js';

let t: TestDb;
const workers = workerProcesses(() => t.url);
const startWorker = workers.start;

async function createWork(n: number, ms: number) {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'crash.work', kind: 'IMMEDIATE', input: { ms } });
    ids.push(job.id);
  }
  return ids;
}

const allSucceeded = async (n: number) =>
  (await t.query(`select count(*)::int as n from executions where status = 'SUCCEEDED'`)).rows[0].n === n;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  // The worker processes run the scheduler too; keep the reapers out of these counts.
  await pauseOwnCronJobs(t);
  await t.query(`create table side_effects (
    id bigserial primary key, execution_id uuid not null, worker_id text not null, attempt int not null,
    started_at timestamptz not null, finished_at timestamptz)`);
  await t.service.registerEndpoint(t.actor, {
    name: 'crash.work',
    kind: 'HANDLER',
    handlerName: 'work',
    backoffBaseMs: 10,
    backoffMaxMs: 10,
    jitter: false,
    maxAttempts: 5,
  });
});
afterEach(async () => {
  await workers.killAll();
});
afterAll(() => t?.close());

describe('worker processes', { timeout: 60_000 }, () => {
  it('SIGKILL with executions in flight: a second worker finishes all of them, and the killed attempts count', async () => {
    const a = await startWorker('a', { LEASE_MS: '2000', HEARTBEAT_MS: '500', CONCURRENCY: '5' });
    await createWork(5, 60_000);
    await eventually(async () => (await t.query(`select count(*)::int as n from side_effects where worker_id = 'a'`)).rows[0].n === 5);
    a.kill('SIGKILL');
    // b's handler also sleeps input.ms: shorten the work before b can claim it. The input is the
    // execution's own (pinned at creation, migration 000018), so it is changed there: editing the
    // job would reach only executions created after the edit.
    await t.query(`update executions set input = '{"ms": 50}'`);
    await startWorker('b', { LEASE_MS: '2000', HEARTBEAT_MS: '500', RECONCILE_MS: '200', CONCURRENCY: '5' });
    await eventually(() => allSucceeded(5), 30_000, 'all five to succeed');
    const { rows } = await t.query(`
      select e.attempt_count, array_agg(a.outcome order by a.attempt_number) as outcomes, array_agg(a.worker_id order by a.attempt_number) as workers
      from executions e join attempts a on a.execution_id = e.id group by e.id, e.attempt_count`);
    expect(rows).toHaveLength(5);
    for (const r of rows) {
      expect(r.attempt_count).toBe(2);
      expect(r.outcomes).toEqual(['LEASE_EXPIRED', 'SUCCEEDED']);
      expect(r.workers).toEqual(['a', 'b']);
    }
  });

  it('SIGKILL with executions waiting for a slot (claimed ahead): a second worker finishes all of them, and the waiting ones never ran on the first', async () => {
    const a = await startWorker('a', { LEASE_MS: '2000', HEARTBEAT_MS: '500', CONCURRENCY: '2', BATCH_SIZE: '6' });
    await createWork(6, 60_000);
    await eventually(async () => (await t.query(`select count(*)::int as n from side_effects where worker_id = 'a'`)).rows[0].n === 2);
    // All six are a's leases: two running, four waiting in a for a slot.
    await eventually(
      async () =>
        (await t.query(`select count(*)::int as n from executions where status = 'RUNNING' and lease_owner = 'a'`)).rows[0].n === 6,
    );
    a.kill('SIGKILL');
    await t.query(`update executions set input = '{"ms": 50}'`);
    await startWorker('b', { LEASE_MS: '2000', HEARTBEAT_MS: '500', RECONCILE_MS: '200', CONCURRENCY: '6' });
    await eventually(() => allSucceeded(6), 30_000, 'all six to succeed');
    const { rows } = await t.query(`
      select array_agg(a.outcome order by a.attempt_number) as outcomes, array_agg(a.worker_id order by a.attempt_number) as workers
      from executions e join attempts a on a.execution_id = e.id group by e.id`);
    expect(rows).toHaveLength(6);
    for (const r of rows) {
      expect(r.outcomes).toEqual(['LEASE_EXPIRED', 'SUCCEEDED']);
      expect(r.workers).toEqual(['a', 'b']);
    }
    const ran = await t.query(`select worker_id, count(*)::int as n from side_effects group by worker_id order by worker_id`);
    expect(ran.rows).toEqual([
      { worker_id: 'a', n: 2 },
      { worker_id: 'b', n: 6 },
    ]);
  });

  it("SIGSTOP past the lease, takeover, SIGCONT: none of the stalled worker's late writes is accepted", async () => {
    const a = await startWorker('a', { LEASE_MS: '1500', HEARTBEAT_MS: '300', CONCURRENCY: '4' });
    await createWork(4, 1000);
    await eventually(async () => (await t.query(`select count(*)::int as n from side_effects where worker_id = 'a'`)).rows[0].n === 4);
    a.kill('SIGSTOP');
    await startWorker('b', { LEASE_MS: '1500', HEARTBEAT_MS: '300', RECONCILE_MS: '200', CONCURRENCY: '4' });
    await eventually(() => allSucceeded(4), 30_000, 'b to finish all four');
    const before = (await t.query(`select id, status, lease_epoch, updated_at, finished_at from executions order by id`)).rows;
    const attemptsBefore = (await t.query(`select * from attempts order by execution_id, attempt_number`)).rows;
    a.kill('SIGCONT');
    // A wakes: its handlers finish (at-least-once: they ran), its outcomes are refused.
    await eventually(
      async () =>
        (await t.query(`select count(*)::int as n from side_effects where worker_id = 'a' and finished_at is not null`)).rows[0].n === 4,
      15_000,
    );
    await quietPeriod(QUIET.lateOutcome);
    expect((await t.query(`select id, status, lease_epoch, updated_at, finished_at from executions order by id`)).rows).toEqual(before);
    expect((await t.query(`select * from attempts order by execution_id, attempt_number`)).rows).toEqual(attemptsBefore);
    const { rows } = await t.query(`select execution_id, count(*) filter (where outcome = 'SUCCEEDED')::int as ok,
      array_agg(worker_id || ':' || outcome order by attempt_number) as attempts from attempts group by execution_id`);
    for (const r of rows) {
      expect(r.ok).toBe(1);
      expect(r.attempts).toEqual(['a:LEASE_EXPIRED', 'b:SUCCEEDED']);
    }
  });

  it.each<[string, Record<string, string>]>([
    ['of their free slots', { CONCURRENCY: '10' }],
    ['ahead of their slots', { CONCURRENCY: '10', BATCH_SIZE: '40' }],
  ])('two workers claiming %s on 500 executions: every execution succeeds once, with no two overlapping attempts', async (_, env) => {
    await Promise.all([startWorker('w1', env), startWorker('w2', env)]);
    const values = Array.from({ length: 500 }, (_, i) => `($1, $2, 'IMMEDIATE', '{"ms": ${i % 5}}', 5)`).join(',');
    const endpoint = (await t.query(`select id from endpoints where name = 'crash.work'`)).rows[0].id;
    // Bulk insert: jobs then one execution each, as createJob would.
    await t.query(`insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts) values ${values}`, [
      t.actor.workspaceId,
      endpoint,
    ]);
    await t.query(`insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
      select workspace_id, id, endpoint_id, now(), now(), 5 from jobs`);
    await eventually(() => allSucceeded(500), 45_000, 'all 500 to succeed');
    const perExecution = await t.query(`select count(*)::int as n from attempts group by execution_id having count(*) <> 1`);
    expect(perExecution.rows).toEqual([]);
    const overlaps = await t.query(`select count(*)::int as n from side_effects s1 join side_effects s2
      on s1.execution_id = s2.execution_id and s1.id < s2.id
      and tstzrange(s1.started_at, coalesce(s1.finished_at, 'infinity')) && tstzrange(s2.started_at, coalesce(s2.finished_at, 'infinity'))`);
    expect(overlaps.rows[0].n).toBe(0);
    expect((await t.query(`select count(*)::int as n from side_effects`)).rows[0].n).toBe(500);
    const byWorker = (await t.query(`select worker_id, count(*)::int as n from attempts group by worker_id`)).rows;
    expect(byWorker).toHaveLength(2);
  });
});
