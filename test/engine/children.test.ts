/**
 * Child jobs: a handler creates children of its execution in its fenced transaction, the
 * parent's progress is theirs, and cancelling the parent cancels its unfinished children (and
 * theirs). A child created while its parent is being cancelled is refused or cancelled, never
 * left to run on its own: the two race for real, many times.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createJobgate, type Jobgate } from '../../src/index.js';
import { createLogger } from '../../src/log.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { eventually, pauseOwnCronJobs, settled } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let gate: Jobgate;
const later = () => new Date(Date.now() + 3_600_000);

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  gate = await createJobgate({ databaseUrl: t.url, migrate: false, poolMax: 8, log: createLogger('silent') });
  for (const name of ['kids.parent', 'kids.child'])
    await t.service.registerEndpoint(t.actor, { name, kind: 'HANDLER', handlerName: name.replace('.', '-'), maxAttempts: 1 });
});
afterEach(() => gate?.close());
afterAll(() => t?.close());

const scheduled = async (jobId: string) =>
  (await t.query(`select * from executions where job_id = $1 and trigger = 'SCHEDULE'`, [jobId])).rows[0];

describe('child jobs', () => {
  it("are created by a handler in its fenced transaction, and the parent's progress is theirs", async () => {
    gate.handle('kids-parent', async (_input: unknown, ctx) => {
      await ctx.transaction(async (client) => {
        for (let i = 0; i < 3; i++)
          await gate
            .inTransaction(client)
            .createJob({ endpointName: 'kids.child', kind: 'IMMEDIATE', input: { i }, parentExecutionId: ctx.executionId });
      });
    });
    gate.handle('kids-child', async () => {});
    const { job: parent } = await t.service.createJob(t.actor, { endpointName: 'kids.parent', kind: 'IMMEDIATE' });
    await gate.startWorker({ concurrency: 4 });
    const parentExecution = (await settled(t, parent.id, ['SUCCEEDED'])).id as string;
    await eventually(
      async () => (await t.service.childProgress(t.actor, parentExecution)).succeeded === 3,
      10_000,
      'three children to succeed',
    );
    expect(await t.service.childProgress(t.actor, parentExecution)).toEqual({
      total: 3,
      pending: 0,
      running: 0,
      succeeded: 3,
      failed: 0,
      cancelled: 0,
    });
    const children = (await t.service.executionChildren(t.actor, parentExecution)).edges.map((e) => e.node);
    expect(children.map((c) => c.parentExecutionId)).toEqual([parentExecution, parentExecution, parentExecution]);
    expect(children.map((c) => (c.input as { i: number }).i).sort()).toEqual([0, 1, 2]);
  });

  it('a handler whose lease was lost cannot add children: its fenced transaction rolls them back', async () => {
    let tried = false;
    gate.handle('kids-parent', async (_input: unknown, ctx) => {
      // Another worker took the lease over (as the reconciler would): the fence refuses the commit.
      await t.query(`update executions set lease_epoch = lease_epoch + 1 where id = $1`, [ctx.executionId]);
      await ctx
        .transaction((client) =>
          gate.inTransaction(client).createJob({ endpointName: 'kids.child', kind: 'IMMEDIATE', parentExecutionId: ctx.executionId }),
        )
        .catch(() => (tried = true));
    });
    const { job: parent } = await t.service.createJob(t.actor, { endpointName: 'kids.parent', kind: 'IMMEDIATE' });
    await gate.startWorker();
    await eventually(() => tried, 10_000, 'the handler to try');
    expect((await t.query(`select count(*)::int as n from jobs where parent_execution_id is not null`)).rows[0].n).toBe(0);
    expect(parent.id).toBeDefined();
  });

  it('cancelling a parent cancels its unfinished children and theirs, and leaves ended ones alone', async () => {
    const { job: parent } = await t.service.createJob(t.actor, { endpointName: 'kids.parent', kind: 'DELAYED', runAt: later() });
    const p = (await scheduled(parent.id)).id;
    const child = (
      await t.service.createJob(t.actor, { endpointName: 'kids.child', kind: 'DELAYED', runAt: later(), parentExecutionId: p })
    ).job;
    const done = (await t.service.createJob(t.actor, { endpointName: 'kids.child', kind: 'DELAYED', runAt: later(), parentExecutionId: p }))
      .job;
    await t.query(`update executions set status = 'SUCCEEDED', finished_at = now() where job_id = $1`, [done.id]);
    const c = (await scheduled(child.id)).id;
    const grandchild = (await t.service.createJob(t.actor, { endpointName: 'kids.child', kind: 'IMMEDIATE', parentExecutionId: c })).job;

    await t.service.cancelJob(t.actor, parent.id);
    expect(await scheduled(child.id)).toMatchObject({ status: 'CANCELLED', last_error: `parent execution ${p} was cancelled` });
    expect(await scheduled(grandchild.id)).toMatchObject({ status: 'CANCELLED', last_error: `parent execution ${c} was cancelled` });
    expect((await scheduled(done.id)).status).toBe('SUCCEEDED');
    expect((await t.service.job(t.actor, child.id)).status).toBe('RETIRED');
    expect(await t.service.childProgress(t.actor, p)).toMatchObject({ total: 2, succeeded: 1, cancelled: 1 });
  });

  it('a running child is asked to abort when its parent is cancelled, and ends CANCELLED', async () => {
    let childStarted = false;
    gate.handle('kids-child', async (_input: unknown, ctx) => {
      childStarted = true;
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    });
    const { job: parent } = await t.service.createJob(t.actor, { endpointName: 'kids.parent', kind: 'DELAYED', runAt: later() });
    const p = (await scheduled(parent.id)).id;
    const { job: child } = await t.service.createJob(t.actor, { endpointName: 'kids.child', kind: 'IMMEDIATE', parentExecutionId: p });
    await gate.startWorker();
    await eventually(() => childStarted, 10_000, 'the child to start');
    await t.service.cancelExecution(t.actor, p);
    await settled(t, child.id, ['CANCELLED']);
  });

  it('created while its parent is being cancelled: refused or cancelled, never left running on its own (30 races)', async () => {
    for (let round = 0; round < 30; round++) {
      const { job: parent } = await t.service.createJob(t.actor, { endpointName: 'kids.parent', kind: 'DELAYED', runAt: later() });
      const p = (await scheduled(parent.id)).id;
      let childId: string | undefined;
      const creating = t.db
        .transaction()
        .execute(async (trx) => {
          childId = (
            await gate.inTransaction(trx).createJob({ endpointName: 'kids.child', kind: 'DELAYED', runAt: later(), parentExecutionId: p })
          ).job.id;
          await new Promise((r) => setTimeout(r, round % 3 === 0 ? 0 : 15));
        })
        .then(
          () => 'created',
          (e: { code?: string }) => e.code,
        );
      const cancelling = new Promise((r) => setTimeout(r, round % 2 === 0 ? 0 : 5)).then(() => t.service.cancelJob(t.actor, parent.id));
      const [created] = await Promise.all([creating, cancelling]);
      if (created === 'created') {
        expect({ round, status: (await scheduled(childId!)).status }).toEqual({ round, status: 'CANCELLED' });
      } else {
        expect({ round, created }).toEqual({ round, created: 'CONFLICT' });
      }
    }
  });

  it('are refused with a code for a parent that is not live or not theirs, and change nothing', async () => {
    const { job: parent } = await t.service.createJob(t.actor, { endpointName: 'kids.parent', kind: 'DELAYED', runAt: later() });
    const p = (await scheduled(parent.id)).id;
    await t.service.registerEndpoint(t.otherActor, { name: 'other.kid', kind: 'HANDLER', handlerName: 'kids-child' });
    const { job: theirs } = await t.service.createJob(t.otherActor, { endpointName: 'other.kid', kind: 'DELAYED', runAt: later() });
    const theirExecution = (await scheduled(theirs.id)).id;
    const { job: ended } = await t.service.createJob(t.actor, { endpointName: 'kids.parent', kind: 'DELAYED', runAt: later() });
    await t.query(`update executions set status = 'FAILED', finished_at = now() where job_id = $1`, [ended.id]);
    const endedExecution = (await scheduled(ended.id)).id;
    const before = (await t.query(`select count(*)::int as n from jobs`)).rows[0].n;
    const child =
      (parentExecutionId: string, more: object = {}) =>
      () =>
        t.service.createJob(t.actor, { endpointName: 'kids.child', kind: 'IMMEDIATE', parentExecutionId, ...more });
    expect(await codeOf(child(theirExecution))).toBe('NOT_FOUND');
    expect(await codeOf(child('00000000-0000-4000-8000-000000000000'))).toBe('NOT_FOUND');
    expect(await codeOf(child('nope'))).toBe('NOT_FOUND');
    expect(await codeOf(child(endedExecution))).toBe('CONFLICT');
    expect(await codeOf(child(p, { kind: 'CRON', cron: { expression: '0 0 * * *' } }))).toBe('VALIDATION_FAILED');
    expect((await t.query(`select count(*)::int as n from jobs`)).rows[0].n).toBe(before);
  });

  it('are read over GraphQL: children, childProgress and parentExecution', async () => {
    const { job: parent } = await t.service.createJob(t.actor, { endpointName: 'kids.parent', kind: 'DELAYED', runAt: later() });
    const p = (await scheduled(parent.id)).id;
    const gw = createTestGateway(t);
    try {
      const made = await gw.gql(
        `mutation($p: ID!) { createJob(input: { endpointName: "kids.child", kind: DELAYED, runAt: "2099-01-01T00:00:00Z", parentExecutionId: $p }) {
           job { id parentExecution { id } } } }`,
        { p },
      );
      expect(made.errors).toBeUndefined();
      expect(made.data.createJob.job.parentExecution).toEqual({ id: p });
      const read = await gw.gql(`query($p: ID!) { execution(id: $p) { children { nodes { id } } childProgress { total pending } } }`, {
        p,
      });
      expect(read.data.execution).toEqual({
        children: { nodes: [{ id: made.data.createJob.job.id }] },
        childProgress: { total: 1, pending: 1 },
      });
    } finally {
      await gw.close();
    }
  });
});
