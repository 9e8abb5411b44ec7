/**
 * Retention from the library: the installation's windows as createJobgate options, a workspace's
 * own through the client, and a started worker pruning beside its executions, with the hook.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobgate, type Jobgate, type PrunedBatch } from '../src/index.js';
import { createTestDb, type TestDb } from './support/db.js';
import { eventually } from './support/engine.js';

let t: TestDb;
let gate: Jobgate;
const pruned: PrunedBatch[] = [];

beforeAll(async () => {
  t = await createTestDb();
  gate = await createJobgate({
    databaseUrl: t.url,
    migrate: false,
    retention: { executionsDays: 10, keepPerJob: 1, pauseMs: 0, batchSize: 3, runDueBatches: 2, onPruned: (b) => pruned.push(b) },
  });
});
afterAll(async () => {
  await gate?.close();
  await t?.close();
});

describe('retention from the library', () => {
  it("reads and sets the workspace's windows through the client, over the installation's defaults", async () => {
    expect(await gate.client.retention()).toMatchObject({
      executionsDays: 10,
      failedExecutionsDays: 90,
      keepPerJob: 1,
      overrides: { executionsDays: null },
    });
    expect(await gate.client.setRetention({ failedExecutionsDays: 20 })).toMatchObject({
      executionsDays: 10,
      failedExecutionsDays: 20,
      overrides: { failedExecutionsDays: 20 },
    });
    const audit = (await t.query(`select actor_kind, result_code from audit_log where action = 'workspace.setRetention'`)).rows;
    expect(audit).toEqual([{ actor_kind: 'library', result_code: 'OK' }]);
  });

  /** `n` IMMEDIATE jobs whose one execution SUCCEEDED 15 days ago (past the 10-day window), with an attempt each. */
  async function finishedOneOffs(n: number): Promise<string[]> {
    const endpoint =
      (await t.query(`select id from endpoints where name = 'lib.oneoff'`)).rows[0]?.id ??
      (await gate.client.registerEndpoint({ name: 'lib.oneoff', kind: 'HANDLER', handlerName: 'noop' })).id;
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push((await gate.client.createJob({ endpointId: endpoint, kind: 'IMMEDIATE' })).job.id);
    await t.query(
      `update executions set status = 'SUCCEEDED', attempt_count = 1, finished_at = now() - interval '15 days',
         created_at = now() - interval '15 days 1 minute' where job_id = any($1::uuid[])`,
      [ids],
    );
    await t.query(
      `insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, started_at, finished_at, outcome)
       select workspace_id, id, 1, 1, 'w', created_at, finished_at, 'SUCCEEDED' from executions where job_id = any($1::uuid[])`,
      [ids],
    );
    await t.query(`update jobs set created_at = now() - interval '15 days 2 minutes' where id = any($1::uuid[])`, [ids]);
    return ids;
  }
  const jobsLeft = async (ids: string[]) =>
    (await t.query(`select count(*)::int as n from jobs where id = any($1::uuid[])`, [ids])).rows[0].n as number;

  it('runDue() prunes a bounded slice per call: finished one-off jobs go over several passes', async () => {
    const ids = await finishedOneOffs(7);
    const perCall: number[] = [];
    for (let i = 0; i < 20 && (await jobsLeft(ids)) > 0; i++) {
      const result = await gate.runDue();
      perCall.push(result.pruned.removed.jobs);
    }
    expect(await jobsLeft(ids)).toBe(0);
    // At most two batches of three rows a pass, so seven jobs took more than one pass.
    expect(perCall.every((n) => n <= 6)).toBe(true);
    expect(perCall.length).toBeGreaterThan(1);
    expect(perCall.reduce((a, b) => a + b, 0)).toBe(7);
    expect((await t.query(`select count(*)::int as n from executions where job_id = any($1::uuid[])`, [ids])).rows[0].n).toBe(0);
  });

  it('gate.prune() prunes the workspace now, due or not, and answers what went', async () => {
    const ids = await finishedOneOffs(4);
    const report = await gate.prune({ maxBatches: 50 });
    expect(report).toMatchObject({ complete: true, removed: { jobs: 4, executions: 4, attempts: 4 } });
    expect(await jobsLeft(ids)).toBe(0);
    const audit = (await t.query(`select actor_kind, result_code from audit_log where action = 'workspace.pruneHistory'`)).rows;
    expect(audit).toEqual([{ actor_kind: 'library', result_code: 'OK' }]);
  });

  it('a started worker prunes by those windows and reports each batch to the hook', async () => {
    const endpoint = await gate.client.registerEndpoint({ name: 'lib.ret', kind: 'HANDLER', handlerName: 'noop' });
    const { job } = await gate.client.createJob({ endpointId: endpoint.id, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') });
    // Finished 15 days ago: past the library's 10-day window (the built-in default is 30).
    const { rows } = await t.query(
      `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, status, max_attempts, run_after, finished_at, created_at)
       select workspace_id, id, endpoint_id, now() - interval '15 days' + i * interval '1 ms', 'SUCCEEDED', 5, now(), now() - interval '15 days', now() - interval '15 days' + i * interval '1 ms'
       from jobs, generate_series(1, 5) i where id = $1 returning id`,
      [job.id],
    );
    gate.handle('noop', () => {});
    // The passes above finished every slice (next due in ten minutes): due again now.
    await t.query(`update retention_slices set next_due_at = now()`);
    const seenBefore = pruned.length;
    await gate.startWorker();
    await eventually(
      async () =>
        (await t.query(`select count(*)::int as n from executions where id = any($1::uuid[])`, [rows.map((r) => r.id)])).rows[0].n === 0,
      20_000,
      'the old executions to be pruned',
    );
    expect(
      pruned
        .slice(seenBefore)
        .filter((b) => b.kind === 'EXECUTIONS')
        .reduce((a, b) => a + b.rows.executions, 0),
    ).toBe(5);
    // The job's live execution is untouched.
    expect((await t.query(`select status from executions where job_id = $1`, [job.id])).rows).toEqual([{ status: 'PENDING' }]);
  });
});
