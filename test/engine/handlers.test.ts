import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { UnrecoverableError } from '../../src/service/engine/delivery/handler-registry.js';
import { opaqueWorkerId } from '../../src/service/kernel/models.js';
import { databaseTimeIn, untilDatabaseTimePasses } from '../support/clock.js';
import { QUIET, quietPeriod } from '../support/eventually.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { attemptsOf, engineHarness, eventually, settled, type EngineHarness } from '../support/engine.js';

let t: TestDb;
let h: EngineHarness;
const seen: { input: unknown; attempt: number }[] = [];
let failuresLeft = 0;
let openGate: () => void = () => {};
let gate = Promise.resolve();

beforeAll(async () => {
  t = await createTestDb();
  h = engineHarness(t);
  h.handle('echo', (input, ctx) => void seen.push({ input, attempt: ctx.attempt }));
  h.handle('flaky', () => {
    if (failuresLeft-- > 0) throw new Error('not yet');
  });
  h.handle('doomed', () => {
    throw new UnrecoverableError('cannot ever work');
  });
  h.handlers.register('typed', z.object({ n: z.number() }), () => {});
  h.handle('gated', () => gate);
  for (const [name, handlerName] of [
    ['h.echo', 'echo'],
    ['h.flaky', 'flaky'],
    ['h.doomed', 'doomed'],
    ['h.typed', 'typed'],
    ['h.gated', 'gated'],
  ] as const) {
    await t.service.registerEndpoint(t.actor, {
      name,
      kind: 'HANDLER',
      handlerName,
      backoffBaseMs: 40,
      backoffMaxMs: 1000,
      jitter: false,
      maxAttempts: 4,
    });
  }
  await h.worker();
});
afterEach(() => {
  seen.length = 0;
});
afterAll(async () => {
  await h.stopAll();
  await t.close();
});

describe('HANDLER executions', () => {
  it('runs the handler with the job input and records one succeeded attempt', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'h.echo', kind: 'IMMEDIATE', input: { hello: 'world' } });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('SUCCEEDED');
    expect(seen).toEqual([{ input: { hello: 'world' }, attempt: 1 }]);
    const attempts = await attemptsOf(t, ex.id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ attempt_number: 1, outcome: 'SUCCEEDED', error: null });
    expect(attempts[0].finished_at).toBeInstanceOf(Date);
  });

  it('lists the attempt in progress from its execution, under the id its row keeps once it ends', async () => {
    gate = new Promise<void>((r) => (openGate = r));
    const { job } = await t.service.createJob(t.actor, { endpointName: 'h.gated', kind: 'IMMEDIATE' });
    const running = await settled(t, job.id, ['RUNNING']);
    // No row yet: the attempt is the running execution.
    expect(await attemptsOf(t, running.id)).toEqual([]);
    // A workspace's key sees the worker by digest (where workers run is the installation's).
    const [inProgress, ...more] = await t.service.attempts(t.actor, running.id);
    expect(more).toEqual([]);
    expect(inProgress).toMatchObject({
      executionId: running.id,
      attemptNumber: 1,
      workerId: opaqueWorkerId(running.lease_owner),
      finishedAt: null,
      outcome: null,
    });
    expect(inProgress!.startedAt).toEqual(running.attempt_started_at);
    // Another workspace sees nothing of it.
    expect(await t.service.attempts(t.otherActor, running.id)).toEqual([]);
    openGate();
    const ex = await settled(t, job.id);
    const [ended] = await t.service.attempts(t.actor, ex.id);
    expect(ended).toMatchObject({
      id: inProgress!.id,
      attemptNumber: 1,
      workerId: opaqueWorkerId(running.lease_owner),
      outcome: 'SUCCEEDED',
      startedAt: inProgress!.startedAt,
    });
    expect(ended!.finishedAt!.getTime()).toBeGreaterThanOrEqual(ended!.startedAt.getTime());
  });

  it('retries a throwing handler with exponential backoff until it succeeds', async () => {
    failuresLeft = 2;
    const { job } = await t.service.createJob(t.actor, { endpointName: 'h.flaky', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('SUCCEEDED');
    const attempts = await attemptsOf(t, ex.id);
    expect(attempts.map((a) => a.outcome)).toEqual(['FAILED', 'FAILED', 'SUCCEEDED']);
    expect(attempts[0].error).toBe('Error: not yet');
    // Each retry was scheduled base * 2^(n-1) after the failure (no jitter): 40 ms, then 80 ms.
    const gaps = [1, 2].map((i) => attempts[i].started_at.getTime() - attempts[i - 1].finished_at.getTime());
    expect(gaps[0]).toBeGreaterThanOrEqual(40);
    expect(gaps[1]).toBeGreaterThanOrEqual(80);
  });

  it('fails at once, without retries, on an UnrecoverableError', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'h.doomed', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex).toMatchObject({ status: 'FAILED', attempt_count: 1, last_error: 'UnrecoverableError: cannot ever work' });
  });

  it('ends FAILED after the last attempt, visible with its error, and can be re-driven with a fresh budget', async () => {
    failuresLeft = 100;
    const { job } = await t.service.createJob(t.actor, { endpointName: 'h.flaky', kind: 'IMMEDIATE', maxAttempts: 2 });
    const ex = await settled(t, job.id);
    expect(ex).toMatchObject({ status: 'FAILED', attempt_count: 2, last_error: 'Error: not yet' });
    failuresLeft = 0;
    const redriven = await t.service.retryExecution(t.actor, ex.id);
    expect(redriven).toMatchObject({ status: 'PENDING', maxAttempts: 4 });
    const after = await settled(t, job.id, ['SUCCEEDED']);
    expect(after.attempt_count).toBe(3);
    expect((await attemptsOf(t, ex.id)).map((a) => a.outcome)).toEqual(['FAILED', 'FAILED', 'SUCCEEDED']);
    expect(await t.service.retryExecution(t.actor, ex.id).catch((e) => e.code)).toBe('CONFLICT');
  });

  it("fails without retries when input does not match the handler's zod schema", async () => {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'h.typed', kind: 'IMMEDIATE', input: { n: 'one' } });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('FAILED');
    expect(ex.attempt_count).toBe(1);
    expect(ex.last_error).toMatch(/input rejected by the handler's schema: n:/);
  });

  it("records a failed attempt when the handler's schema throws something that is not an Error", async () => {
    // A refinement that throws (instead of reporting an issue) escapes zod's safeParse as it is.
    h.handlers.register(
      'odd-schema',
      z.object({}).refine(() => {
        throw undefined;
      }),
      () => {},
    );
    await t.service.registerEndpoint(t.actor, { name: 'h.odd-schema', kind: 'HANDLER', handlerName: 'odd-schema', maxAttempts: 1 });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'h.odd-schema', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('FAILED');
    expect((await attemptsOf(t, ex.id)).map((a) => [a.outcome, a.error])).toEqual([['FAILED', 'unexpected: undefined']]);
  });

  it('runs a DELAYED job at its time, not before', async () => {
    const runAt = await databaseTimeIn(t, 600);
    const { job } = await t.service.createJob(t.actor, { endpointName: 'h.echo', kind: 'DELAYED', runAt, input: { late: true } });
    const ex = await settled(t, job.id);
    const [attempt] = await attemptsOf(t, ex.id);
    expect(attempt.started_at.getTime()).toBeGreaterThanOrEqual(runAt.getTime());
  });

  it('leaves executions of paused jobs alone until resumed', async () => {
    const runAt = await databaseTimeIn(t, 300);
    const { job } = await t.service.createJob(t.actor, { endpointName: 'h.echo', kind: 'DELAYED', runAt });
    await t.service.pauseJob(t.actor, job.id);
    await untilDatabaseTimePasses(t, runAt);
    await quietPeriod(QUIET.claim);
    expect((await t.query('select status from executions where job_id = $1', [job.id])).rows[0].status).toBe('PENDING');
    await t.service.resumeJob(t.actor, job.id);
    await eventually(
      async () => (await t.query('select status from executions where job_id = $1', [job.id])).rows[0].status === 'SUCCEEDED',
    );
  });
});
