/**
 * Every mutation that causes events answers with the cursor from just before them: a page that
 * subscribes `after` it sees every event the mutation caused, once, and none from before it,
 * however late it subscribes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, type EngineHarness } from '../support/engine.js';
import { collect, startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let live: LiveGateway;
let engine: EngineHarness;
let key: string;
beforeAll(async () => {
  t = await createTestDb();
  live = await startLiveGateway(t);
  engine = engineHarness(t);
  engine.handle('mts.noop', async () => {});
  key = (await t.service.bootstrapKey('default', 'OPERATOR', 'page')).key;
  await t.service.registerEndpoint(t.actor, { name: 'mts.target', kind: 'HANDLER', handlerName: 'mts.noop' });
  await engine.worker();
});
afterAll(async () => {
  await engine.stopAll();
  await live.close();
  await t.close();
});

async function gql<T = any>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const res = await fetch(live.httpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data: T; errors?: unknown[] };
  expect(body.errors).toBeUndefined();
  return body.data;
}

const statusOf = async (executionId: string) =>
  (await t.query(`select status from executions where id = $1`, [executionId])).rows[0]?.status;

const EXECUTIONS = `subscription($jobId: ID, $after: String) { executionUpdates(jobId: $jobId, after: $after) { cursor status executionId } }`;
const JOBS = `subscription($jobId: ID, $after: String) { jobEvents(jobId: $jobId, after: $after) { status previousStatus } }`;

describe('mutate, then subscribe', () => {
  it('triggerJob: replays the new execution from PENDING to SUCCEEDED, once each, and nothing of the first one', async () => {
    const { createJob } = await gql(
      `mutation { createJob(input: { endpointName: "mts.target", kind: IMMEDIATE }) { job { id lastExecution { id } } } }`,
    );
    const jobId = createJob.job.id;
    await eventually(async () => (await statusOf(createJob.job.lastExecution.id)) === 'SUCCEEDED', 10_000, 'the first execution');
    for (let round = 0; round < 3; round++) {
      const { triggerJob } = await gql(`mutation ($id: ID!) { triggerJob(input: { id: $id }) { execution { id } eventCursor } }`, {
        id: jobId,
      });
      // The worker may finish before the page subscribes: the worst case for a page.
      await eventually(async () => (await statusOf(triggerJob.execution.id)) === 'SUCCEEDED', 10_000, 'the triggered execution');
      const sub = collect<{ cursor: string; status: string; executionId: string }>(live.client(key), EXECUTIONS, {
        jobId,
        after: triggerJob.eventCursor,
      });
      const items = await sub.until((xs) => xs.some((x) => x.status === 'SUCCEEDED'), 10_000, 'SUCCEEDED');
      sub.stop();
      expect(items.map((x) => [x.executionId, x.status])).toEqual([
        [triggerJob.execution.id, 'PENDING'],
        [triggerJob.execution.id, 'RUNNING'],
        [triggerJob.execution.id, 'SUCCEEDED'],
      ]);
      expect(new Set(items.map((x) => x.cursor)).size).toBe(3);
    }
  });

  it('cancelJob: replays the retirement and the cancelled execution, and not the creation before it', async () => {
    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const { createJob } = await gql(
      `mutation ($runAt: DateTime) { createJob(input: { endpointName: "mts.target", kind: DELAYED, runAt: $runAt }) { job { id } } }`,
      { runAt },
    );
    const jobId = createJob.job.id;
    const { cancelJob } = await gql(`mutation ($id: ID!) { cancelJob(id: $id) { cancelledExecutions eventCursor } }`, { id: jobId });
    expect(cancelJob.cancelledExecutions).toBe(1);
    const jobs = collect<{ status: string; previousStatus: string | null }>(live.client(key), JOBS, {
      jobId,
      after: cancelJob.eventCursor,
    });
    const executions = collect<{ status: string }>(live.client(key), EXECUTIONS, { jobId, after: cancelJob.eventCursor });
    const jobItems = await jobs.until((xs) => xs.some((x) => x.status === 'RETIRED'), 10_000, 'RETIRED');
    const executionItems = await executions.until((xs) => xs.some((x) => x.status === 'CANCELLED'), 10_000, 'CANCELLED');
    jobs.stop();
    executions.stop();
    // Created ACTIVE and PENDING came before the cursor: a cursor from too early would replay them first.
    expect(jobItems).toEqual([{ status: 'RETIRED', previousStatus: 'ACTIVE' }]);
    expect(executionItems.map((x) => x.status)).toEqual(['CANCELLED']);
  });

  it('pauseJob and resumeJob: the returned job carries the cursor, and a stream after the pause sees PAUSED then ACTIVE', async () => {
    const { createJob } = await gql(
      `mutation { createJob(input: { endpointName: "mts.target", kind: CRON, cron: { expression: "0 3 * * *" } }) { job { id eventCursor } } }`,
    );
    const jobId = createJob.job.id;
    // A job read by a query carries no cursor.
    expect(createJob.job.eventCursor).toBeNull();
    const { pauseJob } = await gql(`mutation ($id: ID!) { pauseJob(id: $id) { status eventCursor } }`, { id: jobId });
    const { resumeJob } = await gql(`mutation ($id: ID!) { resumeJob(id: $id) { status eventCursor } }`, { id: jobId });
    expect([pauseJob.status, resumeJob.status]).toEqual(['PAUSED', 'ACTIVE']);
    const sub = collect<{ status: string; previousStatus: string | null }>(live.client(key), JOBS, { jobId, after: pauseJob.eventCursor });
    const items = await sub.until((xs) => xs.length >= 2, 10_000, 'PAUSED and ACTIVE');
    sub.stop();
    expect(items).toEqual([
      { status: 'PAUSED', previousStatus: 'ACTIVE' },
      { status: 'ACTIVE', previousStatus: 'PAUSED' },
    ]);
    const fromResume = collect<{ status: string; previousStatus: string | null }>(live.client(key), JOBS, {
      jobId,
      after: resumeJob.eventCursor,
    });
    expect(await fromResume.until((xs) => xs.length >= 1, 10_000, 'ACTIVE')).toEqual([{ status: 'ACTIVE', previousStatus: 'PAUSED' }]);
    fromResume.stop();
  });

  it('cancelExecutions (bulk): replays each cancellation once', async () => {
    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const { createJob } = await gql(
      `mutation ($runAt: DateTime) { createJob(input: { endpointName: "mts.target", kind: DELAYED, runAt: $runAt }) { job { id } } }`,
      { runAt },
    );
    const jobId = createJob.job.id;
    const { cancelExecutions } = await gql(
      `mutation ($jobId: ID) { cancelExecutions(filter: { jobId: $jobId }) { changed eventCursor } }`,
      { jobId },
    );
    expect(cancelExecutions.changed).toBe(1);
    const sub = collect<{ status: string }>(live.client(key), EXECUTIONS, { jobId, after: cancelExecutions.eventCursor });
    const items = await sub.until((xs) => xs.some((x) => x.status === 'CANCELLED'), 10_000, 'CANCELLED');
    sub.stop();
    expect(items.map((x) => x.status)).toEqual(['CANCELLED']);
  });
});
