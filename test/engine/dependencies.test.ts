/**
 * Dependencies between jobs: a job created with dependsOn starts only once each prerequisite has
 * SUCCEEDED; a prerequisite that FAILED or was CANCELLED cancels it (CANCEL) or lets it run
 * (RUN). Real workers and real claims; the races that could leave a dependent waiting for good
 * (two prerequisites ending at once, a prerequisite ending while its dependent is created) are
 * run for real, many times. Over GraphQL: dependsOn, dependents, waitingFor PREREQUISITES.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, pauseOwnCronJobs, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let h: EngineHarness;
/** Each handler run, in start order: the job and when it started and ended (host clock, one process). */
const runs: { jobId: string; startedAt: number; endedAt?: number }[] = [];

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
  runs.length = 0;
  h.handle('step', async (input: { ms?: number; fail?: boolean }, ctx) => {
    const run: (typeof runs)[number] = { jobId: ctx.jobId, startedAt: Date.now() };
    runs.push(run);
    await new Promise((r) => setTimeout(r, input?.ms ?? 0));
    run.endedAt = Date.now();
    if (input?.fail) throw new Error('step failed on purpose');
  });
  await t.service.registerEndpoint(t.actor, { name: 'flow.step', kind: 'HANDLER', handlerName: 'step', maxAttempts: 1 });
});
afterEach(() => h.stopAll());
afterAll(() => t?.close());

type Create = Parameters<TestDb['service']['createJob']>[1];
const create = async (more: Partial<Create> = {}) =>
  (await t.service.createJob(t.actor, { endpointName: 'flow.step', kind: 'IMMEDIATE', ...more } as Create)).job;
const execution = async (jobId: string) =>
  (await t.query(`select * from executions where job_id = $1 and trigger = 'SCHEDULE'`, [jobId])).rows[0];
const ranOf = (jobId: string) => runs.filter((r) => r.jobId === jobId);
const counts = async () =>
  (
    await t.query(`select (select count(*)::int from jobs) as jobs, (select count(*)::int from executions) as executions,
                         (select count(*)::int from job_dependencies) as edges`)
  ).rows[0];

describe('a job with prerequisites', () => {
  it('runs a diamond in order: A, then B and C, then D once both ended', async () => {
    const a = await create({ name: 'A', input: { ms: 150 } });
    const b = await create({ name: 'B', input: { ms: 100 }, dependsOn: [a.id] });
    const c = await create({ name: 'C', input: { ms: 300 }, dependsOn: [a.id] });
    const d = await create({ name: 'D', dependsOn: [b.id, c.id] });
    // Nothing runs D while it waits, and it says why: both its prerequisites are open.
    const waiting = await t.service.waitingFor(t.actor, (await execution(d.id)).id);
    expect(waiting).toMatchObject({ reason: 'PREREQUISITES', prerequisiteIds: [b.id, c.id].sort() });
    expect(waiting!.detail).toContain('2 prerequisite jobs');

    await h.worker({ concurrency: 4 });
    await settled(t, d.id, ['SUCCEEDED']);
    const [ra, rb, rc, rd] = [a, b, c, d].map((j) => {
      const r = ranOf(j.id);
      expect(r, `${j.name} ran once`).toHaveLength(1);
      return r[0]!;
    });
    expect(rb!.startedAt).toBeGreaterThanOrEqual(ra!.endedAt!);
    expect(rc!.startedAt).toBeGreaterThanOrEqual(ra!.endedAt!);
    expect(rd!.startedAt).toBeGreaterThanOrEqual(Math.max(rb!.endedAt!, rc!.endedAt!));
    // B and C ran side by side: nothing held one behind the other.
    expect(rc!.startedAt).toBeLessThan(rb!.endedAt!);
    const edges = await t.service.jobDependencies(t.actor, d.id);
    expect(edges.map((e) => [e.prerequisiteId, e.outcome])).toEqual([
      [b.id, 'SUCCEEDED'],
      [c.id, 'SUCCEEDED'],
    ]);
  });

  it('under CANCEL (the default): a prerequisite that failed retires the dependent, and its own dependents after it', async () => {
    const a = await create({ name: 'A', input: { fail: true } });
    const b = await create({ name: 'B', dependsOn: [a.id] });
    const c = await create({ name: 'C', dependsOn: [b.id] });
    expect(b.onPrerequisiteFailure).toBe('CANCEL');
    await h.worker();
    await settled(t, a.id, ['FAILED']);
    const [eb, ec] = [await settled(t, b.id, ['CANCELLED']), await settled(t, c.id, ['CANCELLED'])];
    expect(eb.last_error).toBe(`prerequisite job ${a.id} ended FAILED`);
    expect(ec.last_error).toBe(`prerequisite job ${b.id} ended CANCELLED`);
    expect((await t.service.job(t.actor, b.id)).status).toBe('RETIRED');
    expect((await t.service.job(t.actor, c.id)).status).toBe('RETIRED');
    expect(ranOf(b.id).concat(ranOf(c.id))).toEqual([]);
  });

  it('under RUN: the dependent starts once every prerequisite ended, however it ended', async () => {
    const ok = await create({ input: { ms: 200 } });
    const bad = await create({ input: { fail: true } });
    const d = await create({ dependsOn: [ok.id, bad.id], onPrerequisiteFailure: 'RUN' });
    await h.worker({ concurrency: 4 });
    await settled(t, d.id, ['SUCCEEDED']);
    expect(ranOf(d.id)[0]!.startedAt).toBeGreaterThanOrEqual(ranOf(ok.id)[0]!.endedAt!);
    expect((await t.service.jobDependencies(t.actor, d.id)).map((e) => e.outcome)).toEqual(['SUCCEEDED', 'FAILED']);
  });

  it('a cancelled prerequisite counts as ended CANCELLED; cancelling a dependent leaves its prerequisites alone', async () => {
    const a = await create({ kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    const cancelled = await create({ dependsOn: [a.id] });
    const run = await create({ dependsOn: [a.id], onPrerequisiteFailure: 'RUN' });
    const dropped = await create({ dependsOn: [a.id] });
    await t.service.cancelJob(t.actor, dropped.id);
    expect((await execution(dropped.id)).blocked).toBe(false);
    expect((await execution(a.id)).status).toBe('PENDING');

    await t.service.cancelJob(t.actor, a.id);
    expect((await execution(cancelled.id)).status).toBe('CANCELLED');
    expect((await execution(cancelled.id)).last_error).toBe(`prerequisite job ${a.id} ended CANCELLED`);
    await h.worker();
    await settled(t, run.id, ['SUCCEEDED']);
  });

  it('created after its prerequisites ended: runs at once after a success, is cancelled at once after a failure', async () => {
    const ok = await create();
    const bad = await create({ input: { fail: true } });
    await h.worker();
    await settled(t, ok.id, ['SUCCEEDED']);
    await settled(t, bad.id, ['FAILED']);
    const after = await create({ dependsOn: [ok.id] });
    await settled(t, after.id, ['SUCCEEDED']);
    const doomed = await create({ dependsOn: [ok.id, bad.id] });
    expect(doomed.status).toBe('RETIRED');
    expect((await execution(doomed.id)).status).toBe('CANCELLED');
  });

  it('a DELAYED dependent starts at the later of its runAt and its prerequisites', async () => {
    const a = await create();
    const d = await create({ kind: 'DELAYED', runAt: new Date(Date.now() + 1500), dependsOn: [a.id] });
    await h.worker();
    await settled(t, a.id, ['SUCCEEDED']);
    // Released, but not due yet: waiting for its time now.
    await eventually(async () => (await t.service.waitingFor(t.actor, (await execution(d.id)).id))?.reason === 'NOT_DUE', 5000);
    await settled(t, d.id, ['SUCCEEDED']);
    expect(ranOf(d.id)[0]!.startedAt).toBeGreaterThanOrEqual(new Date(d.runAt!).getTime() - 50);
  });

  it('a "Run now" of a waiting dependent runs anyway (an operator overrides), and the scheduled one still waits', async () => {
    const a = await create({ kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    const d = await create({ dependsOn: [a.id] });
    await h.worker();
    const { execution: manual } = await t.service.triggerJob(t.actor, { id: d.id, force: true });
    await eventually(
      async () => (await t.query(`select status from executions where id = $1`, [manual.id])).rows[0].status === 'SUCCEEDED',
    );
    expect((await execution(d.id)).status).toBe('PENDING');
    expect((await t.service.waitingFor(t.actor, (await execution(d.id)).id))?.reason).toBe('PREREQUISITES');
  });
});

describe('settling under concurrency', () => {
  it('two prerequisites ending at once, in two transactions, release their dependent every time', async () => {
    const clients = [new pg.Client({ connectionString: t.url }), new pg.Client({ connectionString: t.url })];
    await Promise.all(clients.map((c) => c.connect()));
    try {
      for (let round = 0; round < 20; round++) {
        const a = await create({ kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
        const b = await create({ kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
        const d = await create({ kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000), dependsOn: [a.id, b.id] });
        // Each ends its prerequisite in its own transaction; both updates run before either commits.
        await Promise.all(clients.map((c) => c.query('begin')));
        const end = (c: pg.Client, jobId: string) =>
          c.query(`update executions set status = 'SUCCEEDED', finished_at = now() where job_id = $1`, [jobId]);
        await end(clients[0]!, a.id);
        const second = end(clients[1]!, b.id);
        await new Promise((r) => setTimeout(r, 20));
        await clients[0]!.query('commit');
        await second;
        await clients[1]!.query('commit');
        const row = await execution(d.id);
        expect({ round, blocked: row.blocked, status: row.status }).toEqual({ round, blocked: false, status: 'PENDING' });
      }
    } finally {
      await Promise.all(clients.map((c) => c.query('rollback').catch(() => {})));
      await Promise.all(clients.map((c) => c.end()));
    }
  });

  it('a prerequisite ending while its dependent is created: none is left waiting (200 pairs, two workers)', async () => {
    await h.worker({ concurrency: 10 });
    await h.worker({ concurrency: 10 });
    const dependents: string[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < 25; i++) {
          const a = await create();
          dependents.push((await create({ dependsOn: [a.id] })).id);
        }
      }),
    );
    await eventually(
      async () =>
        (await t.query(`select count(*)::int as n from executions where job_id = any($1) and status = 'SUCCEEDED'`, [dependents])).rows[0]
          .n === dependents.length,
      30_000,
      'every dependent to succeed',
    );
    for (const id of dependents) expect(ranOf(id)).toHaveLength(1);
  });
});

describe('bad prerequisites', () => {
  it('are refused with a code and change nothing', async () => {
    const cron = await t.service.createJob(t.actor, { endpointName: 'flow.step', kind: 'CRON', cron: { expression: '0 0 * * *' } });
    const a = await create();
    const { job: theirs } = await t.service
      .createJob(t.otherActor, {
        endpointName: 'jobgate.noop',
        kind: 'IMMEDIATE',
      })
      .catch(async () => {
        await t.service.registerEndpoint(t.otherActor, { name: 'other.step', kind: 'HANDLER', handlerName: 'step' });
        return t.service.createJob(t.otherActor, { endpointName: 'other.step', kind: 'IMMEDIATE' });
      });
    const before = await counts();
    const refused = async (more: Partial<Create>) => codeOf(() => create(more));
    expect(await refused({ dependsOn: [theirs.id] })).toBe('NOT_FOUND');
    expect(await refused({ dependsOn: ['00000000-0000-4000-8000-000000000000'] })).toBe('NOT_FOUND');
    expect(await refused({ dependsOn: ['not-a-uuid'] })).toBe('NOT_FOUND');
    expect(await refused({ dependsOn: [cron.job.id] })).toBe('VALIDATION_FAILED');
    expect(await refused({ dependsOn: [a.id, a.id] })).toBe('VALIDATION_FAILED');
    expect(await refused({ dependsOn: [] })).toBe('VALIDATION_FAILED');
    expect(await refused({ onPrerequisiteFailure: 'RUN' })).toBe('VALIDATION_FAILED');
    expect(await refused({ kind: 'CRON', cron: { expression: '0 0 * * *' }, dependsOn: [a.id] })).toBe('VALIDATION_FAILED');
    expect(await refused({ dependsOn: Array.from({ length: 101 }, () => a.id) })).toBe('VALIDATION_FAILED');
    expect(await counts()).toEqual(before);
    // The prerequisite was not marked by a refused create either.
    expect((await execution(a.id)).has_dependents).toBe(false);
  });

  it('an idempotent repeat returns the job; the same key with other prerequisites is CONFLICT naming dependsOn', async () => {
    const a = await create({ kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    const b = await create({ kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    const first = await t.service.createJob(t.actor, {
      endpointName: 'flow.step',
      kind: 'IMMEDIATE',
      idempotencyKey: 'k',
      dependsOn: [a.id, b.id],
    });
    const again = await t.service.createJob(t.actor, {
      endpointName: 'flow.step',
      kind: 'IMMEDIATE',
      idempotencyKey: 'k',
      dependsOn: [b.id, a.id],
    });
    expect(again).toMatchObject({ outcome: 'EXISTING', job: { id: first.job.id } });
    const error = await t.service
      .createJob(t.actor, { endpointName: 'flow.step', kind: 'IMMEDIATE', idempotencyKey: 'k', dependsOn: [a.id] })
      .catch((e) => e);
    expect(error).toMatchObject({ code: 'CONFLICT', details: { field: 'dependsOn' } });
    const policy = await t.service
      .createJob(t.actor, {
        endpointName: 'flow.step',
        kind: 'IMMEDIATE',
        idempotencyKey: 'k',
        dependsOn: [a.id, b.id],
        onPrerequisiteFailure: 'RUN',
      })
      .catch((e) => e);
    expect(policy).toMatchObject({ code: 'CONFLICT', details: { field: 'onPrerequisiteFailure' } });
  });
});

describe('over GraphQL', () => {
  it('creates with dependsOn and reads dependsOn, dependents and waitingFor PREREQUISITES', async () => {
    const gw = createTestGateway(t);
    try {
      const a = await create({ kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
      const made = await gw.gql(
        `mutation($a: ID!) { createJob(input: { endpointName: "flow.step", kind: IMMEDIATE, dependsOn: [$a], onPrerequisiteFailure: RUN }) {
           job { id onPrerequisiteFailure dependsOn { prerequisite { id } outcome settledAt }
                 lastExecution { status waitingFor { reason detail prerequisites { id } } } } } }`,
        { a: a.id },
      );
      expect(made.errors).toBeUndefined();
      const d = made.data.createJob.job;
      expect(d).toMatchObject({
        onPrerequisiteFailure: 'RUN',
        dependsOn: [{ prerequisite: { id: a.id }, outcome: null, settledAt: null }],
        lastExecution: { status: 'PENDING', waitingFor: { reason: 'PREREQUISITES', prerequisites: [{ id: a.id }] } },
      });
      const read = await gw.gql(
        `query($a: ID!) { job(id: $a) { dependents(first: 10) { nodes { id } } onPrerequisiteFailure dependsOn { outcome } } }`,
        {
          a: a.id,
        },
      );
      expect(read.errors).toBeUndefined();
      expect(read.data.job).toEqual({ dependents: { nodes: [{ id: d.id }] }, onPrerequisiteFailure: null, dependsOn: [] });
      await t.service.cancelJob(t.actor, a.id);
      const after = await gw.gql(
        `query($d: ID!) { job(id: $d) { dependsOn { outcome settledAt } lastExecution { waitingFor { reason } } } }`,
        {
          d: d.id,
        },
      );
      expect(after.data.job.dependsOn[0]).toMatchObject({ outcome: 'CANCELLED', settledAt: expect.any(String) });
      expect(after.data.job.lastExecution.waitingFor.reason).not.toBe('PREREQUISITES');
      const bad = await gw.gql(
        `mutation { createJob(input: { endpointName: "flow.step", kind: IMMEDIATE, dependsOn: ["${d.id}", "${d.id}"] }) { job { id } } }`,
      );
      expect(bad.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
    } finally {
      await gw.close();
    }
  });
});
