/**
 * Batches: members created together or added while open, counted once each as they end, and an
 * onComplete job released exactly once when the closed batch's last member ends, with the counts
 * in its input. Real workers and claims; three workers finishing 300 members race for the last.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, pauseOwnCronJobs, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let h: EngineHarness;
const runs: { jobId: string; input: any; startedAt: number; endedAt?: number }[] = [];

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
  runs.length = 0;
  h.handle('part', async (input: { ms?: number; fail?: boolean }, ctx) => {
    const run: (typeof runs)[number] = { jobId: ctx.jobId, input, startedAt: Date.now() };
    runs.push(run);
    await new Promise((r) => setTimeout(r, input?.ms ?? 0));
    run.endedAt = Date.now();
    if (input?.fail) throw new Error('part failed on purpose');
  });
  await t.service.registerEndpoint(t.actor, { name: 'fan.part', kind: 'HANDLER', handlerName: 'part', maxAttempts: 1 });
});
afterEach(() => h.stopAll());
afterAll(() => t?.close());

const member = (input: object = {}) => ({ endpointName: 'fan.part', kind: 'IMMEDIATE' as const, input });
const onComplete = { endpointName: 'fan.part', kind: 'IMMEDIATE' as const, name: 'fan-in', input: { report: true } };
const ranOf = (jobId: string) => runs.filter((r) => r.jobId === jobId);
const counts = async () =>
  (
    await t.query(`select (select count(*)::int from jobs) as jobs, (select count(*)::int from executions) as executions,
                          (select count(*)::int from batches) as batches`)
  ).rows[0];

describe('a batch', () => {
  it('runs its onComplete job once, after every member ended, with the counts in its input', async () => {
    const { batch, created } = await t.service.createBatch(t.actor, {
      name: 'nightly',
      jobs: [member({ ms: 100 }), member({ ms: 300 }), member({ fail: true }), member(), member({ ms: 200 })],
      onComplete,
    });
    expect(created).toBe(true);
    expect(batch).toMatchObject({ open: false, total: 5, succeeded: 0, failed: 0, cancelled: 0, completedAt: null });
    const fanIn = batch.onCompleteJobId!;
    const waiting = await t.query(`select id from executions where job_id = $1`, [fanIn]);
    expect((await t.service.waitingFor(t.actor, waiting.rows[0].id))?.reason).toBe('PREREQUISITES');

    await h.worker({ concurrency: 5 });
    await settled(t, fanIn, ['SUCCEEDED']);
    const members = (await t.service.batchJobs(t.actor, batch.id, { first: 10 })).edges.map((e) => e.node);
    expect(members).toHaveLength(5);
    const lastEnd = Math.max(...members.map((m) => ranOf(m.id)[0]!.endedAt!));
    const [fan] = ranOf(fanIn);
    expect(ranOf(fanIn)).toHaveLength(1);
    expect(fan!.startedAt).toBeGreaterThanOrEqual(lastEnd);
    expect(fan!.input).toEqual({ report: true, batch: { id: batch.id, total: 5, succeeded: 4, failed: 1, cancelled: 0 } });
    const done = await t.service.batch(t.actor, batch.id);
    expect(done).toMatchObject({ total: 5, succeeded: 4, failed: 1, cancelled: 0, completedAt: expect.any(Date) });
    expect(members.map((m) => m.batchId)).toEqual(members.map(() => batch.id));
    const failed = (await t.service.batchJobs(t.actor, batch.id, {}, 'FAILED')).edges.map((e) => e.node.id);
    expect(failed).toHaveLength(1);
    expect(ranOf(failed[0]!)[0]!.input).toEqual({ fail: true });
  });

  it('open: takes members from createJob and createJobs until closed, and completes only once closed', async () => {
    const { batch } = await t.service.createBatch(t.actor, { open: true, onComplete });
    await h.worker({ concurrency: 5 });
    await t.service.createJob(t.actor, { ...member(), batchId: batch.id });
    await t.service.createJobs(t.actor, [
      { ...member(), batchId: batch.id },
      { ...member(), batchId: batch.id },
    ]);
    await eventually(async () => (await t.service.batch(t.actor, batch.id)).succeeded === 3, 10_000, 'the three members to succeed');
    // Every member ended, but the batch is open: the onComplete job still waits.
    await new Promise((r) => setTimeout(r, 300));
    expect(ranOf(batch.onCompleteJobId!)).toEqual([]);
    const closed = await t.service.closeBatch(t.actor, batch.id);
    expect(closed).toMatchObject({ open: false, total: 3, succeeded: 3, completedAt: expect.any(Date) });
    await settled(t, batch.onCompleteJobId!, ['SUCCEEDED']);
    expect(ranOf(batch.onCompleteJobId!)[0]!.input.batch).toMatchObject({ total: 3, succeeded: 3 });
    // Closed: no more members, and closing again changes nothing.
    expect(await codeOf(() => t.service.createJob(t.actor, { ...member(), batchId: batch.id }))).toBe('CONFLICT');
    expect(await t.service.closeBatch(t.actor, batch.id)).toMatchObject({ open: false, total: 3 });
  });

  it('empty and closed: completes at once; members cancelled count as cancelled', async () => {
    await h.worker();
    const { batch: empty } = await t.service.createBatch(t.actor, { onComplete });
    expect(empty.completedAt).not.toBeNull();
    await settled(t, empty.onCompleteJobId!, ['SUCCEEDED']);
    expect(ranOf(empty.onCompleteJobId!)[0]!.input.batch).toEqual({ id: empty.id, total: 0, succeeded: 0, failed: 0, cancelled: 0 });

    const { batch } = await t.service.createBatch(t.actor, {
      jobs: [member(), { ...member(), kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) }],
      onComplete,
    });
    const later = (await t.service.batchJobs(t.actor, batch.id, {}, null)).edges.map((e) => e.node);
    await eventually(async () => (await t.service.batch(t.actor, batch.id)).succeeded === 1, 10_000);
    expect(later.map((j) => j.kind)).toContain('DELAYED');
    await t.service.cancelJob(t.actor, later.find((j) => j.kind === 'DELAYED')!.id);
    await settled(t, batch.onCompleteJobId!, ['SUCCEEDED']);
    expect(await t.service.batch(t.actor, batch.id)).toMatchObject({ total: 2, succeeded: 1, cancelled: 1 });
  });

  it('counts a member once: a re-driven failed member does not count again', async () => {
    const { batch } = await t.service.createBatch(t.actor, { jobs: [member({ fail: true })], onComplete });
    await h.worker();
    await settled(t, batch.onCompleteJobId!, ['SUCCEEDED']);
    const [m] = (await t.service.batchJobs(t.actor, batch.id)).edges.map((e) => e.node);
    const { rows } = await t.query(`select id from executions where job_id = $1`, [m!.id]);
    // Its next attempt succeeds: the input is changed before the retry, so no worker can take the old one.
    await t.query(`update executions set input = '{}' where id = $1`, [rows[0].id]);
    await t.service.retryExecution(t.actor, rows[0].id);
    await settled(t, m!.id, ['SUCCEEDED']);
    expect(await t.service.batch(t.actor, batch.id)).toMatchObject({ total: 1, succeeded: 0, failed: 1 });
    expect(ranOf(batch.onCompleteJobId!)).toHaveLength(1);
    expect(await t.service.batchOutcome(t.actor, m!.id)).toBe('FAILED');
  });

  it('cancelBatch: closes it, cancels its onComplete job and its unfinished members, and leaves ended ones alone', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    h.handle('held', async (_input: unknown, ctx) => {
      await Promise.race([held, new Promise((r) => ctx.signal.addEventListener('abort', r))]);
    });
    await t.service.registerEndpoint(t.actor, { name: 'fan.held', kind: 'HANDLER', handlerName: 'held', maxAttempts: 1 });
    const { batch } = await t.service.createBatch(t.actor, {
      open: true,
      jobs: [
        member(),
        { endpointName: 'fan.held', kind: 'IMMEDIATE' },
        { ...member(), kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) },
      ],
      onComplete,
    });
    await h.worker({ concurrency: 4 });
    await eventually(async () => (await t.service.batch(t.actor, batch.id)).succeeded === 1, 10_000, 'the quick member to succeed');
    await eventually(
      async () =>
        (
          await t.query(
            `select count(*)::int as n from executions e join jobs j on j.id = e.job_id where j.batch_id = $1 and e.status = 'RUNNING'`,
            [batch.id],
          )
        ).rows[0].n === 1,
      10_000,
      'the held member to run',
    );

    const { batch: cancelled, cancelledJobs } = await t.service.cancelBatch(t.actor, batch.id);
    expect(cancelledJobs).toBe(2);
    expect(cancelled.open).toBe(false);
    // The pending member at once; the running one once its attempt returns (asked to abort).
    await eventually(async () => (await t.service.batch(t.actor, batch.id)).completedAt !== null, 10_000, 'the batch to complete');
    release();
    expect(await t.service.batch(t.actor, batch.id)).toMatchObject({ total: 3, succeeded: 1, cancelled: 2, failed: 0 });
    expect((await t.query(`select status from executions where job_id = $1`, [batch.onCompleteJobId])).rows[0].status).toBe('CANCELLED');
    await new Promise((r) => setTimeout(r, 300));
    expect(ranOf(batch.onCompleteJobId!)).toEqual([]);
    expect(await codeOf(() => t.service.createJob(t.actor, { ...member(), batchId: batch.id }))).toBe('CONFLICT');
    // Again: nothing left to cancel.
    expect((await t.service.cancelBatch(t.actor, batch.id)).cancelledJobs).toBe(0);
  });

  it('is idempotent by key: a repeat returns the batch and creates nothing', async () => {
    const first = await t.service.createBatch(t.actor, { key: 'import-42', jobs: [member(), member()], onComplete });
    const before = await counts();
    const again = await t.service.createBatch(t.actor, { key: 'import-42', jobs: [member(), member(), member()], onComplete });
    expect(again).toMatchObject({ created: false, batch: { id: first.batch.id, total: 2 } });
    expect(await counts()).toEqual(before);
  });

  it('releases its onComplete job exactly once when three workers finish 300 members', async () => {
    const { batch } = await t.service.createBatch(t.actor, {
      jobs: Array.from({ length: 300 }, (_, i) => member({ ms: i % 7 })),
      onComplete,
    });
    await Promise.all([h.worker({ concurrency: 10 }), h.worker({ concurrency: 10 }), h.worker({ concurrency: 10 })]);
    await settled(t, batch.onCompleteJobId!, ['SUCCEEDED'], 60_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(ranOf(batch.onCompleteJobId!)).toHaveLength(1);
    const done = await t.service.batch(t.actor, batch.id);
    expect(done).toMatchObject({ total: 300, succeeded: 300 });
    const memberEnds = runs.filter((r) => r.jobId !== batch.onCompleteJobId).map((r) => r.endedAt!);
    expect(memberEnds).toHaveLength(300);
    expect(ranOf(batch.onCompleteJobId!)[0]!.startedAt).toBeGreaterThanOrEqual(Math.max(...memberEnds));
  });
});

describe('bad batches', () => {
  it('are refused with a code, naming the job, and change nothing', async () => {
    const { batch: closed } = await t.service.createBatch(t.actor, {});
    await t.service.registerEndpoint(t.otherActor, { name: 'other.part', kind: 'HANDLER', handlerName: 'part' });
    const { batch: theirs } = await t.service.createBatch(t.otherActor, { open: true });
    const before = await counts();
    const refused = (input: Parameters<TestDb['service']['createBatch']>[1]) => t.service.createBatch(t.actor, input).catch((e) => e);
    const cron = { endpointName: 'fan.part', kind: 'CRON' as const, cron: { expression: '0 0 * * *' } };
    expect(await refused({ jobs: [member(), cron] })).toMatchObject({
      code: 'VALIDATION_FAILED',
      details: { issues: [{ path: ['jobs', 1, 'batchId'] }] },
    });
    expect(await refused({ onComplete: cron })).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(await refused({ jobs: [member(), { ...member(), endpointName: 'no.such' }] })).toMatchObject({
      code: 'NOT_FOUND',
      details: { path: ['jobs', 1] },
    });
    expect(await refused({ key: '' })).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(await refused({ jobs: Array.from({ length: 1001 }, () => member()) })).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(await codeOf(() => t.service.createJob(t.actor, { ...member(), batchId: theirs.id }))).toBe('NOT_FOUND');
    expect(await codeOf(() => t.service.createJob(t.actor, { ...member(), batchId: closed.id }))).toBe('CONFLICT');
    expect(await codeOf(() => t.service.closeBatch(t.actor, theirs.id))).toBe('NOT_FOUND');
    expect(await codeOf(() => t.service.cancelBatch(t.actor, theirs.id))).toBe('NOT_FOUND');
    expect(await codeOf(() => t.service.batch(t.actor, theirs.id))).toBe('NOT_FOUND');
    expect(await counts()).toEqual(before);
  });
});

describe('over GraphQL', () => {
  it('creates a batch, reads its live counts, members and onComplete, and finds it by node(id:)', async () => {
    const gw = createTestGateway(t);
    try {
      const made = await gw.gql(
        `mutation { createBatch(input: { name: "g", jobs: [{ endpointName: "fan.part", kind: IMMEDIATE }, { endpointName: "fan.part", kind: IMMEDIATE, input: { fail: true } }],
                                          onComplete: { endpointName: "fan.part", kind: IMMEDIATE } }) {
           created batch { id name open total pending succeeded completedAt onComplete { id batch { id } } jobs(first: 5) { nodes { id batch { id } } } } } }`,
      );
      expect(made.errors).toBeUndefined();
      const b = made.data.createBatch.batch;
      expect(b).toMatchObject({
        name: 'g',
        open: false,
        total: 2,
        pending: 2,
        succeeded: 0,
        completedAt: null,
        onComplete: { batch: null },
      });
      expect(b.jobs.nodes.map((n: any) => n.batch.id)).toEqual([b.id, b.id]);
      await h.worker();
      await settled(t, b.onComplete.id, ['SUCCEEDED']);
      const read = await gw.gql(
        `query($id: ID!) { node(id: $id) { __typename ... on Batch { pending succeeded failed completedAt jobs(outcome: FAILED) { nodes { batchOutcome } } } } batches(first: 5) { nodes { id } } }`,
        { id: b.id },
      );
      expect(read.errors).toBeUndefined();
      expect(read.data.node).toMatchObject({
        __typename: 'Batch',
        pending: 0,
        succeeded: 1,
        failed: 1,
        jobs: { nodes: [{ batchOutcome: 'FAILED' }] },
      });
      expect(read.data.batches.nodes).toEqual([{ id: b.id }]);
      const bad = await gw.gql(
        `mutation { createBatch(input: { onComplete: { endpointName: "fan.part", kind: CRON, cron: { expression: "0 0 * * *" } } }) { created } }`,
      );
      expect(bad.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
    } finally {
      await gw.close();
    }
  });

  it('names the batch an onComplete job completes (completesBatch), null for members and other jobs', async () => {
    const gw = createTestGateway(t);
    try {
      const a = await t.service.createBatch(t.actor, { name: 'a', jobs: [member()], onComplete, open: true });
      const b = await t.service.createBatch(t.actor, { name: 'b', jobs: [], onComplete: { ...onComplete, name: 'fan-in b' } });
      const plain = await t.service.createJob(t.actor, member());
      const read = await gw.gql(
        `query($a: ID!, $b: ID!) { a: batch(id: $a) { onComplete { completesBatch { id name } } jobs(first: 5) { nodes { completesBatch { id } } } }
                                   b: batch(id: $b) { onComplete { completesBatch { id name } } } }`,
        { a: a.batch.id, b: b.batch.id },
      );
      expect(read.errors).toBeUndefined();
      expect(read.data.a.onComplete.completesBatch).toEqual({ id: a.batch.id, name: 'a' });
      expect(read.data.a.jobs.nodes).toEqual([{ completesBatch: null }]);
      expect(read.data.b.onComplete.completesBatch).toEqual({ id: b.batch.id, name: 'b' });
      const other = await gw.gql(`query($id: ID!) { job(id: $id) { completesBatch { id } } }`, { id: plain.job.id });
      expect(other.errors).toBeUndefined();
      expect(other.data.job.completesBatch).toBeNull();
    } finally {
      await gw.close();
    }
  });

  it('lists batches by state: OPEN, CLOSED (not completed) and COMPLETED, each page newest first', async () => {
    const gw = createTestGateway(t);
    try {
      const open = await t.service.createBatch(t.actor, { name: 'open', jobs: [member()], open: true });
      const closed = await t.service.createBatch(t.actor, { name: 'closed', jobs: [member()] });
      const done = await t.service.createBatch(t.actor, { name: 'done', jobs: [] });
      const done2 = await t.service.createBatch(t.actor, { name: 'done 2', jobs: [] });
      const names = async (state?: string) => {
        const r = await gw.gql(`query($state: BatchState) { batches(first: 10, state: $state) { nodes { id } } }`, { state });
        expect(r.errors).toBeUndefined();
        return r.data.batches.nodes.map((n: { id: string }) => n.id);
      };
      expect(await names('OPEN')).toEqual([open.batch.id]);
      expect(await names('CLOSED')).toEqual([closed.batch.id]);
      expect(await names('COMPLETED')).toEqual([done2.batch.id, done.batch.id]);
      expect(await names()).toHaveLength(4);
      const page = await gw.gql(`{ batches(first: 1, state: COMPLETED) { nodes { id } pageInfo { endCursor } } }`);
      const next = await gw.gql(`query($after: String) { batches(first: 1, after: $after, state: COMPLETED) { nodes { id } } }`, {
        after: page.data.batches.pageInfo.endCursor,
      });
      expect(next.data.batches.nodes).toEqual([{ id: done.batch.id }]);
      const bad = await gw.gql(`{ batches(state: DONE) { nodes { id } } }`);
      expect(bad.errors).toBeDefined();
    } finally {
      await gw.close();
    }
  });

  it("reads a member's scheduled execution, the one its batch counts, not a newer Run now", async () => {
    const gw = createTestGateway(t);
    try {
      const { batch } = await t.service.createBatch(t.actor, { jobs: [member({ fail: true })], onComplete });
      await h.worker();
      await settled(t, batch.onCompleteJobId!, ['SUCCEEDED']);
      const [m] = (await t.service.batchJobs(t.actor, batch.id)).edges.map((e) => e.node);
      const { rows } = await t.query(`select id from executions where job_id = $1`, [m!.id]);
      const { execution: runNow } = await t.service.triggerJob(t.actor, { id: m!.id, force: true });
      const read = await gw.gql(
        `query($id: ID!) { batch(id: $id) { jobs(first: 5) { nodes { batchOutcome scheduledExecution { id status trigger } lastExecution { id } } } } }`,
        { id: batch.id },
      );
      expect(read.errors).toBeUndefined();
      expect(read.data.batch.jobs.nodes).toEqual([
        {
          batchOutcome: 'FAILED',
          scheduledExecution: { id: rows[0].id, status: 'FAILED', trigger: 'SCHEDULE' },
          lastExecution: { id: runNow.id },
        },
      ]);
    } finally {
      await gw.close();
    }
  });
});
