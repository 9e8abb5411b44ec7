/**
 * A page that creates a job and then subscribes to it misses nothing: createJob answers with an
 * event cursor from before the job's first event, and a subscription `after` it replays the job
 * from its creation, each event once, however late it starts.
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
  engine.handle('cts.noop', async () => {});
  key = (await t.service.bootstrapKey('default', 'OPERATOR', 'page')).key;
  await t.service.registerEndpoint(t.actor, { name: 'cts.target', kind: 'HANDLER', handlerName: 'cts.noop' });
  await engine.worker();
});
afterAll(async () => {
  await engine.stopAll();
  await live.close();
  await t.close();
});

async function createJob(): Promise<{ id: string; cursor: string }> {
  const res = await fetch(live.httpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({
      query: 'mutation { createJob(input: { endpointName: "cts.target", kind: IMMEDIATE }) { job { id } eventCursor } }',
    }),
  });
  const body = (await res.json()) as { data: { createJob: { job: { id: string }; eventCursor: string } } };
  return { id: body.data.createJob.job.id, cursor: body.data.createJob.eventCursor };
}

const EXECUTIONS = `subscription($jobId: ID, $after: String) { executionUpdates(jobId: $jobId, after: $after) { cursor status executionNow { status } } }`;
const JOBS = `subscription($jobId: ID, $after: String) { jobEvents(jobId: $jobId, after: $after) { status previousStatus } }`;

describe('create, then subscribe', () => {
  it('replays the execution from PENDING to SUCCEEDED, once each, for a subscription that starts after the job finished', async () => {
    for (let round = 0; round < 5; round++) {
      const job = await createJob();
      // The worker may finish the execution before the page subscribes: the worst case for a page.
      await eventually(
        async () => (await t.query(`select status from executions where job_id = $1`, [job.id])).rows[0]?.status === 'SUCCEEDED',
        10_000,
        'the execution to succeed',
      );
      const sub = collect<{ cursor: string; status: string; executionNow: { status: string } }>(live.client(key), EXECUTIONS, {
        jobId: job.id,
        after: job.cursor,
      });
      const items = await sub.until((xs) => xs.some((x) => x.status === 'SUCCEEDED'), 10_000, 'SUCCEEDED');
      sub.stop();
      expect(items.map((x) => x.status)).toEqual(['PENDING', 'RUNNING', 'SUCCEEDED']);
      expect(new Set(items.map((x) => x.cursor)).size).toBe(3);
      // Each event says its own moment; `executionNow` is the row as it is at delivery.
      expect(items.map((x) => x.executionNow.status)).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']);
    }
  });

  it('gives each job of a createJobs a cursor from before its own creation', async () => {
    // The results' cursors are read together, in one query for the call: each must still be its own job's.
    const res = await fetch(live.httpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({
        query: 'mutation($jobs: [CreateJobInput!]!) { createJobs(input: { jobs: $jobs }) { results { job { id } eventCursor } } }',
        variables: { jobs: Array.from({ length: 20 }, (_, i) => ({ endpointName: 'cts.target', kind: 'IMMEDIATE', input: { i } })) },
      }),
    });
    const body = (await res.json()) as { data: { createJobs: { results: { job: { id: string }; eventCursor: string }[] } } };
    const results = body.data.createJobs.results;
    expect(results).toHaveLength(20);
    // Cursors of jobs created in one statement are close together, but not all the same.
    expect(new Set(results.map((r) => r.eventCursor)).size).toBeGreaterThan(1);
    for (const r of results) {
      const sub = collect<{ status: string; previousStatus: string | null }>(live.client(key), JOBS, {
        jobId: r.job.id,
        after: r.eventCursor,
      });
      const items = await sub.until((xs) => xs.length >= 1, 10_000, 'the creation');
      sub.stop();
      expect(items[0], r.job.id).toEqual({ status: 'ACTIVE', previousStatus: null });
    }
  });

  it("replays the job's own creation to jobEvents too", async () => {
    const job = await createJob();
    const sub = collect<{ status: string; previousStatus: string | null }>(live.client(key), JOBS, { jobId: job.id, after: job.cursor });
    const items = await sub.until((xs) => xs.length >= 1, 10_000, 'the creation');
    sub.stop();
    expect(items[0]).toEqual({ status: 'ACTIVE', previousStatus: null });
  });
});
