/**
 * Workflows across worker processes, one killed with SIGKILL in the middle: a diamond (A, then B
 * and C, then D) and a 1,000-member batch with an onComplete job. D and the onComplete job each run
 * exactly once, after every one of their prerequisites' successful runs ended; the batch counts
 * every member once, whatever attempts the kill cost.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { workerProcesses } from '../support/children.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually, pauseOwnCronJobs, settled } from '../support/engine.js';

let t: TestDb;
const workers = workerProcesses(() => t.url);
const startWorker = (id: string) => workers.start(id, { LEASE_MS: '2000', HEARTBEAT_MS: '500', RECONCILE_MS: '200', CONCURRENCY: '10' });

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  await t.query(`create table side_effects (
    id bigserial primary key, execution_id uuid not null, worker_id text not null, attempt int not null,
    started_at timestamptz not null, finished_at timestamptz)`);
  await t.service.registerEndpoint(t.actor, {
    name: 'flow.work',
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

/** The run of each job's scheduled execution that succeeded: its handler's start and end, on the database clock. */
async function successfulRuns(jobIds: string[]) {
  const { rows } = await t.query(
    `select e.job_id, s.started_at, s.finished_at, s.worker_id,
            (select count(*)::int from side_effects x where x.execution_id = e.id) as runs
     from executions e join side_effects s on s.execution_id = e.id and s.attempt = e.attempt_count
     where e.job_id = any($1) and e.trigger = 'SCHEDULE' and e.status = 'SUCCEEDED'`,
    [jobIds],
  );
  return new Map(rows.map((r) => [r.job_id as string, r as { started_at: Date; finished_at: Date; worker_id: string; runs: number }]));
}

describe('workflows across three worker processes, one killed', { timeout: 120_000 }, () => {
  it('runs the diamond and the fan-in job exactly once, after all their prerequisites', async () => {
    const work = (ms: number, more: object = {}) => ({ endpointName: 'flow.work', kind: 'IMMEDIATE' as const, input: { ms }, ...more });
    const { job: a } = await t.service.createJob(t.actor, work(1500));
    const { job: b } = await t.service.createJob(t.actor, work(2000, { dependsOn: [a.id] }));
    const { job: c } = await t.service.createJob(t.actor, work(6000, { dependsOn: [a.id] }));
    const { job: d } = await t.service.createJob(t.actor, work(50, { dependsOn: [b.id, c.id] }));
    const { batch } = await t.service.createBatch(t.actor, {
      jobs: Array.from({ length: 1000 }, (_, i) => work(60 + (i % 5) * 10)),
      onComplete: work(10, { name: 'fan-in' }),
    });

    const [killed] = await Promise.all([startWorker('a'), startWorker('b'), startWorker('c')]);
    // In the middle: B and C have started (C runs 6 s, so D cannot have: with 3 s, a machine at a
    // load of 10-15 saw this only once C had ended and D was running), with members running,
    // and the worker to kill has an attempt that will not end in the next 30 ms (one that merely
    // ran at the moment of looking could end before the kill, and the kill then cut nothing).
    await eventually(
      async () =>
        (
          await t.query(
            `select (select count(distinct e.job_id)::int from side_effects s join executions e on e.id = s.execution_id
                     where e.job_id = any($1)) = 2
                    and exists (select 1 from side_effects s join executions e on e.id = s.execution_id
                                where s.worker_id = 'a' and s.finished_at is null
                                  and s.started_at + make_interval(secs => (e.input->>'ms')::float8 / 1000) > clock_timestamp() + interval '30 ms') as ready`,
            [[b.id, c.id]],
          )
        ).rows[0].ready,
      30_000,
      'B and C to start, and worker a in an attempt',
    );
    killed.kill('SIGKILL');
    expect((await t.query(`select status from executions where job_id = $1`, [d.id])).rows[0].status).toBe('PENDING');
    const cut = await t.query(`select count(*)::int as n from side_effects where worker_id = 'a' and finished_at is null`);
    expect(cut.rows[0].n, 'the killed worker had attempts in flight').toBeGreaterThan(0);

    await settled(t, d.id, ['SUCCEEDED'], 60_000);
    await settled(t, batch.onCompleteJobId!, ['SUCCEEDED'], 60_000);
    // Long enough for a second run of either, were there one to come.
    await new Promise((r) => setTimeout(r, 2500));

    const diamond = await successfulRuns([a.id, b.id, c.id, d.id]);
    const [ra, rb, rc, rd] = [a, b, c, d].map((j) => diamond.get(j.id)!);
    expect(rd!.runs, 'D ran once').toBe(1);
    expect(rb!.started_at.getTime()).toBeGreaterThanOrEqual(ra!.finished_at.getTime());
    expect(rc!.started_at.getTime()).toBeGreaterThanOrEqual(ra!.finished_at.getTime());
    expect(rd!.started_at.getTime()).toBeGreaterThanOrEqual(Math.max(rb!.finished_at.getTime(), rc!.finished_at.getTime()));

    const memberIds = (await t.query(`select id from jobs where batch_id = $1`, [batch.id])).rows.map((r) => r.id as string);
    expect(memberIds).toHaveLength(1000);
    const members = await successfulRuns(memberIds);
    expect(members.size, 'every member succeeded').toBe(1000);
    const [fanIn] = (await successfulRuns([batch.onCompleteJobId!])).values();
    expect(fanIn!.runs, 'the onComplete job ran once').toBe(1);
    const lastMemberEnd = Math.max(...[...members.values()].map((m) => m.finished_at.getTime()));
    expect(fanIn!.started_at.getTime()).toBeGreaterThanOrEqual(lastMemberEnd);
    expect(await t.service.batch(t.actor, batch.id)).toMatchObject({ total: 1000, succeeded: 1000, failed: 0, cancelled: 0 });
    expect((await t.query(`select count(*)::int as n from jobs where name = 'fan-in'`)).rows[0].n).toBe(1);
  });
});
