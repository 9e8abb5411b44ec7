/**
 * Jobs and executions get ids that grow with time (UUID version 7, migration 000058), whichever
 * path writes them: createJob's one statement, its full path, createJobs, a trigger of a cron job
 * (an insert that takes the table's default, as the scheduler's does), a plain insert. The ids of
 * rows made before the migration stay as they were (upgrade.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { madeAt } from '../support/ids.js';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
  await t.service.registerEndpoint(t.actor, { name: 'ids.target', kind: 'HANDLER', handlerName: 'absent' });
});
afterAll(() => t.close());

const dbNow = async () => Number((await t.query(`select floor(extract(epoch from clock_timestamp()) * 1000)::bigint as ms`)).rows[0].ms);
const executionIdsOf = async (jobId: string) =>
  (await t.query(`select id from executions where job_id = $1`, [jobId])).rows.map((r) => r.id as string);

describe('ids of jobs and executions', () => {
  it('are version 7, made at the database clock, by every path that creates them', async () => {
    const before = await dbNow();
    const quick = await t.service.createJob(t.actor, { endpointName: 'ids.target', kind: 'IMMEDIATE', input: {} });
    // An idempotency key takes the full path (several statements), not the one statement.
    const full = await t.service.createJob(t.actor, { endpointName: 'ids.target', kind: 'IMMEDIATE', input: {}, idempotencyKey: 'k-1' });
    const many = await t.service.createJobs(t.actor, [
      { endpointName: 'ids.target', kind: 'IMMEDIATE', input: { n: 1 } },
      { endpointName: 'ids.target', kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000).toISOString(), input: { n: 2 } },
    ]);
    const cron = await t.service.createJob(t.actor, {
      endpointName: 'ids.target',
      kind: 'CRON',
      cron: { expression: '0 0 1 1 *' },
      input: {},
    });
    // A cron job's execution is written by the scheduler or a trigger, by a plain insert.
    const triggered = await t.service.triggerJob(t.actor, { id: cron.job.id });
    const after = await dbNow();

    const jobs = [quick.job.id, full.job.id, ...many.map((r) => r.job.id), cron.job.id];
    const executions = (await Promise.all(jobs.map(executionIdsOf))).flat();
    expect(executions).toContain(triggered.execution.id);
    // Every job has its first execution: the one-off jobs theirs, the cron job the triggered one.
    expect(executions).toHaveLength(jobs.length);
    for (const id of [...jobs, ...executions]) {
      const ms = madeAt(id);
      expect(ms, `${id} is a version 7 id`).toBeDefined();
      expect(ms!).toBeGreaterThanOrEqual(before);
      expect(ms!).toBeLessThanOrEqual(after);
    }
  });

  it('sort by when they were made', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await t.service.createJob(t.actor, { endpointName: 'ids.target', kind: 'IMMEDIATE', input: { i } })).job.id);
      await new Promise((r) => setTimeout(r, 3));
    }
    expect([...ids].sort()).toEqual(ids);
    const { rows } = await t.query(`select id::text from jobs where id = any($1::uuid[]) order by id`, [ids]);
    expect(rows.map((r) => r.id)).toEqual(ids);
  });
});
