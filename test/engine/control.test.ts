import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/eventually.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let endpointId: string;
beforeAll(async () => {
  t = await createTestDb();
  endpointId = (await t.service.registerEndpoint(t.actor, { name: 'ctl.target', kind: 'HANDLER', handlerName: 'none-here' })).id;
});
afterAll(() => t.close());

describe('lock keys', () => {
  it('refuses a job with LOCK_HELD, naming the holder, while another job with the key has a live execution', async () => {
    const first = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', lockKey: 'nightly-export' });
    const error = (await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', lockKey: 'nightly-export' }).catch((e) => e)) as {
      code: string;
      details: Record<string, unknown>;
      message: string;
    };
    expect(error.code).toBe('LOCK_HELD');
    expect(error.details.holderJobId).toBe(first.job.id);
    expect(error.message).toContain(first.job.id);
    // Another workspace's key is another key.
    await expect(
      t.service.createJob(t.otherActor, {
        endpointId: (await t.service.registerEndpoint(t.otherActor, { name: 'ctl.target', kind: 'HANDLER', handlerName: 'x' })).id,
        kind: 'IMMEDIATE',
        lockKey: 'nightly-export',
      }),
    ).resolves.toBeTruthy();
    // Once the holder is done, the key is free.
    await t.service.cancelJob(t.actor, first.job.id);
    await expect(t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', lockKey: 'nightly-export' })).resolves.toMatchObject({
      created: true,
    });
  });

  it('lets exactly one of many concurrent creates with one lock key through, and leaves no orphan job', async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, () => t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', lockKey: 'race-key' })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect((r.reason as { code: string }).code).toBe('LOCK_HELD');
    expect((await t.query("select count(*)::int as n from jobs where lock_key = 'race-key'")).rows[0].n).toBe(1);
  });
});

describe('triggerJob', () => {
  it('runs a job now, and a repeated requestId returns the same execution', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'CRON', cron: { expression: '0 0 1 1 *' } });
    const first = await t.service.triggerJob(t.actor, { id: job.id, requestId: 'req-1' });
    expect(first.created).toBe(true);
    expect(first.execution).toMatchObject({ status: 'PENDING', trigger: 'MANUAL' });
    const again = await t.service.triggerJob(t.actor, { id: job.id, requestId: 'req-1' });
    expect(again).toEqual({ execution: first.execution, created: false, eventCursor: expect.any(String) });
    // Without force, a second run is refused while one is live; with force it goes ahead.
    expect(await codeOf(() => t.service.triggerJob(t.actor, { id: job.id }))).toBe('CONFLICT');
    const forced = await t.service.triggerJob(t.actor, { id: job.id, force: true });
    expect(forced.execution.id).not.toBe(first.execution.id);
  });

  it('refuses a paused job unless forced, and a retired one always', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'CRON', cron: { expression: '0 0 1 1 *' } });
    await t.service.pauseJob(t.actor, job.id);
    expect(await codeOf(() => t.service.triggerJob(t.actor, { id: job.id }))).toBe('CONFLICT');
    await expect(t.service.triggerJob(t.actor, { id: job.id, force: true })).resolves.toMatchObject({ created: true });
    await t.service.cancelJob(t.actor, job.id);
    expect(await codeOf(() => t.service.triggerJob(t.actor, { id: job.id, force: true }))).toBe('RETIRED');
  });

  it('is reachable over GraphQL with the same semantics', async () => {
    const g = createTestGateway(t);
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'CRON', cron: { expression: '0 0 1 1 *' } });
    const q = `mutation ($input: TriggerJobInput!) { triggerJob(input: $input) { created execution { id status trigger } } }`;
    const a = await g.gql(q, { input: { id: job.id, requestId: 'gql-1' } });
    const b = await g.gql(q, { input: { id: job.id, requestId: 'gql-1' } });
    expect(a.data.triggerJob.created).toBe(true);
    expect(b.data.triggerJob).toEqual({ ...a.data.triggerJob, created: false });
    const cancel = await g.gql(`mutation ($id: ID!) { cancelExecution(id: $id) { status } }`, { id: a.data.triggerJob.execution.id });
    expect(cancel.data.cancelExecution.status).toBe('CANCELLED');
    const retry = await g.gql(`mutation ($id: ID!) { retryExecution(id: $id) { status } }`, { id: a.data.triggerJob.execution.id });
    expect(retry.errors![0]!.extensions).toMatchObject({ code: 'CONFLICT', status: 'CANCELLED' });
  });
});

describe('retryExecution', () => {
  it('is LOCK_HELD, naming the holder, when a concurrent transaction takes the lock key between its check and the re-drive', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', lockKey: 'redrive-key' });
    const failed = (
      await t.query<{ id: string }>("update executions set status = 'FAILED', finished_at = now() where job_id = $1 returning id", [job.id])
    ).rows[0]!.id;
    const other = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });

    // Another transaction takes the key and has not committed yet: the lock check cannot see it,
    // and the re-drive's update waits on the unique index until it commits.
    const taker = await t.database.pool.connect();
    try {
      await taker.query('begin');
      const holder = (
        await taker.query<{ id: string }>(
          `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, lock_key)
         select workspace_id, id, endpoint_id, now() + interval '1 day', now() + interval '1 day', 1, 'redrive-key' from jobs where id = $1
         returning id`,
          [other.job.id],
        )
      ).rows[0]!.id;
      const retry = t.service.retryExecution(t.actor, failed).catch((e) => e);
      await eventually(
        async () =>
          (
            await t.query(
              // The re-drive's statement, however it is spelled (a query builder quotes the table name).
              "select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query ~ '^\\s*update \"?executions\"?'",
            )
          ).rows.length > 0,
        { timeout: 5000, what: 'the re-drive to wait on the lock key' },
      );
      await taker.query('commit');
      const error = await retry;
      expect(error).toMatchObject({
        code: 'LOCK_HELD',
        details: { lockKey: 'redrive-key', holderJobId: other.job.id, holderExecutionId: holder },
      });
    } finally {
      await taker.query('rollback').catch(() => {});
      taker.release();
    }
    expect((await t.query('select status from executions where id = $1', [failed])).rows[0].status).toBe('FAILED');
    const audit = await t.query("select result_code from audit_log where action = 'execution.retry' and input->>'id' = $1", [failed]);
    expect(audit.rows).toEqual([{ result_code: 'LOCK_HELD' }]);
  });
});
