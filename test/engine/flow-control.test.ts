/**
 * Flow control with real workers: pausing an endpoint (no new starts, across a worker restart;
 * attempts in flight finish; resume starts the backlog in order within the concurrency limit),
 * and why a PENDING execution waits (`waitingFor`), each reason produced the way it happens.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createJobgate } from '../../src/index.js';
import { createLogger } from '../../src/log.js';
import { createCronJobScheduler } from '../../src/service/engine/cron/scheduler.js';
import { createJobService } from '../../src/service/index.js';
import { codeOf, createTestDb, TEST_SECRETS, type TestDb } from '../support/db.js';
import { engineHarness, eventually, settled, type EngineHarness, pauseOwnCronJobs } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let h: EngineHarness;
/** Executions whose handler started, in start order. */
const started: string[] = [];
/** Releases the `gate` handler's attempts in flight. */
let release: () => void;
let released: Promise<void>;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
  started.length = 0;
  released = new Promise((r) => (release = r));
  h.handle('quick', async (_input, ctx) => void started.push(ctx.executionId));
  h.handle('gate', async (_input, ctx) => {
    started.push(ctx.executionId);
    await released;
  });
});
afterEach(async () => {
  release();
  await h.stopAll();
});
afterAll(() => t?.close());

const register = (name: string, handlerName: string, more: { concurrencyLimit?: number; maxAttempts?: number } = {}) =>
  t.service.registerEndpoint(t.actor, { name, kind: 'HANDLER', handlerName, ...more });
const immediate = async (endpointName: string) => (await t.service.createJob(t.actor, { endpointName, kind: 'IMMEDIATE' })).job.id;
const executionOf = async (jobId: string) => (await t.service.executions(t.actor, { jobId })).edges[0]!.node;
const waiting = async (jobId: string) => t.service.waitingFor(t.actor, (await executionOf(jobId)).id);
/** Long enough for an idle worker to have claimed anything claimable (it polls every 200 ms, and is woken at once). */
const aWhile = () => new Promise((r) => setTimeout(r, 800));

describe('pausing an endpoint', () => {
  it('starts nothing while paused, across a worker restart, then the backlog in order on resume', async () => {
    const ep = await register('flow.paused', 'quick');
    const paused = await t.service.pauseEndpoint(t.actor, ep.id);
    expect(paused.pausedAt).toBeInstanceOf(Date);
    const jobs = [await immediate('flow.paused'), await immediate('flow.paused'), await immediate('flow.paused')];
    await h.worker({ workerId: 'w1' });
    await aWhile();
    expect(started).toEqual([]);
    expect(await waiting(jobs[0]!)).toMatchObject({ reason: 'ENDPOINT_PAUSED', until: null });

    // A restart: the pause is the endpoint's, in the database, not the worker's.
    await h.stopAll();
    await h.worker({ workerId: 'w2' });
    await aWhile();
    expect(started).toEqual([]);

    // Pausing again changes nothing, not even when it was paused.
    expect((await t.service.pauseEndpoint(t.actor, ep.id)).pausedAt).toEqual(paused.pausedAt);
    const resumed = await t.service.resumeEndpoint(t.actor, ep.id);
    expect(resumed.pausedAt).toBeNull();
    for (const job of jobs) await settled(t, job, ['SUCCEEDED']);
    const order = await Promise.all(jobs.map(async (j) => (await executionOf(j)).id));
    expect(started).toEqual(order);

    const audit = await t.service.auditLog(t.actor, { targetId: ep.id });
    expect(audit.entries.map((e) => e.action)).toEqual(['endpoint.resume', 'endpoint.pause', 'endpoint.pause', 'endpoint.register']);
  });

  it('lets the attempt in flight finish, and starts the next only after the resume, within the concurrency limit', async () => {
    const ep = await register('flow.in-flight', 'gate', { concurrencyLimit: 2 });
    await h.worker({ concurrency: 10 });
    const first = await immediate('flow.in-flight');
    await eventually(() => started.length === 1, 10_000, 'the first attempt to start');
    await t.service.pauseEndpoint(t.actor, ep.id);
    const rest = [await immediate('flow.in-flight'), await immediate('flow.in-flight'), await immediate('flow.in-flight')];
    release();
    await settled(t, first, ['SUCCEEDED']);
    await aWhile();
    expect(started).toHaveLength(1);

    // A new gate for the backlog: the resume starts two (the limit), not three.
    released = new Promise((r) => (release = r));
    await t.service.resumeEndpoint(t.actor, ep.id);
    await eventually(() => started.length === 3, 10_000, 'two attempts to start after the resume');
    await aWhile();
    expect(started).toHaveLength(3);
    const third = await executionOf(rest[2]!);
    expect(third.status).toBe('PENDING');
    expect(await t.service.waitingFor(t.actor, third.id)).toMatchObject({
      reason: 'ENDPOINT_CONCURRENCY_FULL',
      detail: `2 of endpoint "flow.in-flight"'s limit of 2 attempts are in flight`,
    });
    release();
    for (const job of rest) await settled(t, job, ['SUCCEEDED']);
  });

  it('is refused for what the actor may not change, and changes nothing then', async () => {
    const ep = await register('flow.refusals', 'quick');
    expect(await codeOf(() => t.service.pauseEndpoint(t.actor, '00000000-0000-4000-8000-000000000000'))).toBe('NOT_FOUND');
    const internal = (await t.query(`select id from endpoints where type = 'INTERNAL' limit 1`)).rows[0]!.id as string;
    expect(await codeOf(() => t.service.pauseEndpoint(t.actor, internal))).toBe('FORBIDDEN');
    expect((await t.query('select paused_at from endpoints where id = $1', [internal])).rows[0]!.paused_at).toBeNull();
    await t.service.archiveEndpoint(t.actor, ep.id);
    expect(await codeOf(() => t.service.pauseEndpoint(t.actor, ep.id))).toBe('ARCHIVED');
    expect(await codeOf(() => t.service.resumeEndpoint(t.actor, ep.id))).toBe('ARCHIVED');
    expect((await t.service.endpoint(t.actor, { id: ep.id })).pausedAt).toBeNull();
  });
});

describe('why an execution is waiting', () => {
  it('NO_LIVE_WORKER until a worker with its handler runs; READY while that worker has no room', async () => {
    await register('flow.busy', 'gate');
    await register('flow.waiting', 'quick');
    // Due first, so the worker's one slot goes to it: a blocked attempt.
    await immediate('flow.busy');
    const job = await immediate('flow.waiting');
    expect(await waiting(job)).toEqual({
      reason: 'NO_LIVE_WORKER',
      until: null,
      detail: 'no running worker has registered handler "quick"',
      prerequisiteIds: [],
    });

    // A worker as the library starts one (it reports its presence and handlers), with one slot,
    // taken by the blocked attempt: live, with the handler, but no room.
    const gate = await createJobgate({ databaseUrl: t.url, migrate: false, poolMax: 4, log: createLogger('silent') });
    try {
      gate.handle('gate', async (_input, ctx) => {
        started.push(ctx.executionId);
        await released;
      });
      gate.handle('quick', async (_input, ctx) => void started.push(ctx.executionId));
      await gate.startWorker({ concurrency: 1 });
      await eventually(() => started.length === 1, 10_000, 'the blocking attempt to start');
      const w = await waiting(job);
      expect(w).toEqual({
        reason: 'READY',
        until: null,
        detail: 'due: the next worker with room takes it, in due order',
        prerequisiteIds: [],
      });
      release();
      await settled(t, job, ['SUCCEEDED']);
      expect(await waiting(job)).toBeNull();
    } finally {
      release();
      await gate.close();
    }
  });

  it('NOT_DUE and RETRY_BACKOFF until a time; JOB_PAUSED; ENDPOINT_PAUSED first of all', async () => {
    await register('flow.later', 'quick');
    const runAt = new Date(Date.now() + 3_600_000);
    const { job } = await t.service.createJob(t.actor, { endpointName: 'flow.later', kind: 'DELAYED', runAt });
    const w = await waiting(job.id);
    expect(w).toMatchObject({ reason: 'NOT_DUE', detail: `due at ${w!.until!.toISOString()}` });
    expect(Math.abs(w!.until!.getTime() - runAt.getTime())).toBeLessThan(1000);

    await t.service.pauseJob(t.actor, job.id);
    expect(await waiting(job.id)).toMatchObject({ reason: 'JOB_PAUSED', until: null });
    const ep = await t.service.endpoint(t.actor, { name: 'flow.later' });
    await t.service.pauseEndpoint(t.actor, ep.id);
    expect((await waiting(job.id))?.reason).toBe('ENDPOINT_PAUSED');

    // A failed attempt with attempts left waits out its backoff.
    h.handle('fails', async () => {
      throw new Error('not yet');
    });
    await t.service.registerEndpoint(t.actor, {
      name: 'flow.retry',
      kind: 'HANDLER',
      handlerName: 'fails',
      maxAttempts: 3,
      backoffBaseMs: 3_600_000,
      backoffMaxMs: 3_600_000,
    });
    const retried = await immediate('flow.retry');
    await h.worker();
    await eventually(
      async () => (await executionOf(retried)).attemptCount === 1 && (await executionOf(retried)).status === 'PENDING',
      10_000,
      'the first attempt to fail',
    );
    const r = await waiting(retried);
    expect(r).toMatchObject({ reason: 'RETRY_BACKOFF' });
    expect(r!.detail).toBe(`attempt 1 of 3 failed; the next may start at ${r!.until!.toISOString()}`);
    expect(r!.until!.getTime()).toBeGreaterThan(Date.now());
  });

  it('PREVIOUS_OCCURRENCE for a QUEUE cron job whose earlier occurrence is waiting', async () => {
    await register('flow.queue', 'absent');
    const dbNow = (await t.query<{ now: Date }>('select now() as now')).rows[0]!.now.getTime();
    let now = Math.floor(dbNow / 60_000) * 60_000 - 10 * 60_000;
    const clock = () => new Date(now);
    const service = createJobService({ db: t.db, defaultMaxAttempts: 5, secrets: TEST_SECRETS, clock: async () => clock() });
    const { job } = await service.createJob(t.actor, {
      endpointName: 'flow.queue',
      kind: 'CRON',
      cron: { expression: '* * * * *', overlapPolicy: 'QUEUE' },
    });
    const scheduler = createCronJobScheduler({ pool: t.database.pool, log: createLogger('silent'), clock });
    for (let i = 0; i < 2; i++) {
      now += 60_000;
      await scheduler.tick();
    }
    const { edges } = await t.service.executions(t.actor, { jobId: job.id, order: 'OLDEST_FIRST' });
    expect(edges).toHaveLength(2);
    expect((await t.service.waitingFor(t.actor, edges[0]!.node.id))?.reason).toBe('NO_LIVE_WORKER');
    expect(await t.service.waitingFor(t.actor, edges[1]!.node.id)).toMatchObject({ reason: 'PREVIOUS_OCCURRENCE', until: null });
  });
});

describe('over GraphQL', () => {
  it('pauses and resumes an endpoint, and reads why each listed execution waits', async () => {
    const g = createTestGateway(t);
    try {
      const ep = await register('flow.graphql', 'absent');
      await immediate('flow.graphql');
      await immediate('flow.graphql');
      const paused = await g.gql('mutation ($id: ID!) { pauseEndpoint(id: $id) { id pausedAt } }', { id: ep.id });
      expect(paused.errors).toBeUndefined();
      expect(typeof paused.data.pauseEndpoint.pausedAt).toBe('string');
      const list = `query ($e: ID) { executions(filter: { endpointId: $e }) { nodes { status waitingFor { reason until detail } } } }`;
      const read = await g.gql(list, { e: ep.id });
      expect(read.errors).toBeUndefined();
      expect(read.data.executions.nodes).toEqual([
        {
          status: 'PENDING',
          waitingFor: { reason: 'ENDPOINT_PAUSED', until: null, detail: expect.stringContaining('"flow.graphql" is paused') },
        },
        {
          status: 'PENDING',
          waitingFor: { reason: 'ENDPOINT_PAUSED', until: null, detail: expect.stringContaining('"flow.graphql" is paused') },
        },
      ]);
      const resumed = await g.gql('mutation ($id: ID!) { resumeEndpoint(id: $id) { pausedAt } }', { id: ep.id });
      expect(resumed.data.resumeEndpoint).toEqual({ pausedAt: null });
      const after = await g.gql(list, { e: ep.id });
      expect(after.data.executions.nodes.map((n: { waitingFor: { reason: string } }) => n.waitingFor.reason)).toEqual([
        'NO_LIVE_WORKER',
        'NO_LIVE_WORKER',
      ]);
      // A viewer reads, and may not pull the lever.
      const viewer = await t.service.authenticate((await t.service.createApiKey(t.actor, { name: 'flow viewer', role: 'VIEWER' })).key);
      const refused = await g.gql('mutation ($id: ID!) { pauseEndpoint(id: $id) { id } }', { id: ep.id }, viewer);
      expect(refused.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      expect((await t.service.endpoint(t.actor, { id: ep.id })).pausedAt).toBeNull();
    } finally {
      await g.close();
    }
  });
});
