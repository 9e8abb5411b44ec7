/**
 * Fenced domain writes: a handler's ctx.transaction commits only while its lease is held, and with
 * `complete: true` records the execution's success in the same commit. Worker processes are
 * stopped past their lease with real signals.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { reconcileExpiredLeases } from '../../src/db/statements/lease.js';
import { LeaseLostError } from '../../src/index.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { attemptsOf, engineHarness, eventually, settled, type EngineHarness } from '../support/engine.js';
import { childProgram } from '../support/children.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
let t: TestDb;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  t = await createTestDb();
  await t.query(`create table ledger (id serial primary key, execution_id uuid not null, worker_id text not null)`);
  await t.query(`create table inside (id serial primary key, execution_id uuid not null, worker_id text not null)`);
  await t.query(`create table refusals (id serial primary key, execution_id uuid not null, worker_id text not null, code text not null)`);
  await t.service.registerEndpoint(t.actor, {
    name: 'fenced.ledger',
    kind: 'HANDLER',
    handlerName: 'ledger',
    backoffBaseMs: 10,
    jitter: false,
    maxAttempts: 3,
  });
});
afterEach(async () => {
  for (const c of children) {
    c.kill('SIGCONT');
    c.kill('SIGKILL');
  }
  children.clear();
  await t.query(`truncate ledger, inside, refusals`);
});
afterAll(async () => {
  await t?.close();
});

function startWorker(id: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, [childProgram('fenced-worker-process')], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: t.url, WORKER_ID: id, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => c.toString().includes('ready') && resolve(child));
    child.once('exit', (code) => reject(new Error(`worker ${id} exited (${code}) before ready:\n${err}`)));
  });
}

const rows = async (table: string) => (await t.query(`select worker_id from ${table} order by id`)).rows.map((r) => r.worker_id);

describe.each([
  ['recording the success in the same commit', '1'],
  ['leaving the outcome to the worker', '0'],
])('a worker stopped past its lease inside ctx.transaction (%s)', (_what, complete) => {
  // Two worker processes start (a second or more each on a loaded machine), then up
  // to 70 s of waits: the budget is theirs, so a slow start cannot time the test out half-way.
  it(
    'cannot commit its domain write after SIGCONT: LEASE_LOST, and only the worker that took over wrote',
    { timeout: 150_000 },
    async () => {
      // A holds inside its transaction until released (SIGUSR2): it is still inside when stopped,
      // however long the stop takes to arrive.
      const a = await startWorker('a', { LEASE_MS: '1500', HEARTBEAT_MS: '300', COMPLETE: complete, HOLD: '1' });
      const { job } = await t.service.createJob(t.actor, { endpointName: 'fenced.ledger', kind: 'IMMEDIATE', input: {} });
      await eventually(async () => (await rows('inside')).includes('a'), 20_000, 'a inside its transaction');
      a.kill('SIGSTOP');
      await startWorker('b', { LEASE_MS: '30000', HEARTBEAT_MS: '1000', RECONCILE_MS: '200', COMPLETE: complete });
      const ex = await settled(t, job.id, ['SUCCEEDED', 'FAILED', 'CANCELLED'], 30_000);
      expect(ex.status).toBe('SUCCEEDED');
      expect(await rows('ledger')).toEqual(['b']);
      a.kill('SIGCONT');
      a.kill('SIGUSR2');
      // A wakes inside its transaction, finishes its work and tries to commit: refused.
      await eventually(
        async () => (await t.query(`select code from refusals where worker_id = 'a'`)).rows[0]?.code,
        20_000,
        "a's refused commit",
      ).then((code) => expect(code).toBe('LEASE_LOST'));
      expect(await rows('ledger')).toEqual(['b']);
      const attempts = await attemptsOf(t, ex.id);
      expect(attempts.map((x) => [x.worker_id, x.outcome])).toEqual([
        ['a', 'LEASE_EXPIRED'],
        ['b', 'SUCCEEDED'],
      ]);
      expect((await t.query(`select status from executions where id = $1`, [ex.id])).rows[0].status).toBe('SUCCEEDED');
    },
  );
});

describe('ctx.transaction in process', () => {
  let h: EngineHarness;
  beforeAll(() => {
    h = engineHarness(t);
  });
  afterAll(async () => {
    await h.stopAll();
  });

  it('with complete: true commits the domain write and the success together, and a later throw changes nothing', async () => {
    const seen: unknown[] = [];
    h.handle('complete-then-throw', async (_input, ctx) => {
      const n = await ctx.transaction(
        async (client) => {
          await client.query(`insert into ledger (execution_id, worker_id) values ($1, 'in-process')`, [ctx.executionId]);
          return 7;
        },
        { complete: true },
      );
      seen.push(n);
      // Seen as the execution's outcome, this would retry it; it was recorded already.
      throw new Error('after the commit');
    });
    await t.service.registerEndpoint(t.actor, {
      name: 'fenced.complete',
      kind: 'HANDLER',
      handlerName: 'complete-then-throw',
      maxAttempts: 3,
    });
    const worker = await h.worker({ workerId: 'in-process' });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'fenced.complete', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('SUCCEEDED');
    // The success is visible from the commit on, before the handler goes on to its throw: stopping
    // the worker waits for the handler to end and for the worker to take its outcome.
    await worker.stop({ graceMs: 5000 });
    expect(seen).toEqual([7]);
    expect(await rows('ledger')).toEqual(['in-process']);
    expect((await attemptsOf(t, ex.id)).map((a) => [a.worker_id, a.outcome])).toEqual([['in-process', 'SUCCEEDED']]);
    // Its lease went with the commit: the worker did not try to record it again.
    expect(h.logs.filter((l) => l.includes(`outcome of ${ex.id} not recorded`))).toEqual([]);
  });

  it('commits under a lease that ran out while nobody took it over, renewing it; the success is recorded once', async () => {
    let proceed!: () => void;
    const waiting = new Promise<void>((r) => (proceed = r));
    let inside = false;
    h.handle('outlives-lease', async (_input, ctx) => {
      await ctx.transaction(
        async (client) => {
          await client.query(`insert into ledger (execution_id, worker_id) values ($1, 'outliver')`, [ctx.executionId]);
          inside = true;
          await waiting;
        },
        { complete: true },
      );
    });
    await t.service.registerEndpoint(t.actor, { name: 'fenced.outlives', kind: 'HANDLER', handlerName: 'outlives-lease', maxAttempts: 3 });
    await h.stopAll(); // only this test's worker claims
    await h.worker({ workerId: 'outliver', leaseMs: 60_000, heartbeatMs: 60_000, fenceAfterMs: 60_000, reconcileMs: 60_000 });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'fenced.outlives', kind: 'IMMEDIATE' });
    await eventually(async () => inside);
    // The lease lapses (as through a database outage longer than the lease); nobody takes it.
    await t.query(`update executions set lease_expires_at = now() - interval '1 second' where job_id = $1`, [job.id]);
    proceed();
    const ex = await settled(t, job.id);
    expect(ex).toMatchObject({ status: 'SUCCEEDED', attempt_count: 1, lease_epoch: 1 });
    expect((await t.query(`select worker_id from ledger where execution_id = $1`, [ex.id])).rows).toEqual([{ worker_id: 'outliver' }]);
    expect((await attemptsOf(t, ex.id)).map((a) => [a.worker_id, a.outcome])).toEqual([['outliver', 'SUCCEEDED']]);
  });

  it('renews the lease it locks, so a commit without the outcome leaves no expired lease behind', async () => {
    let proceed!: () => void;
    const waiting = new Promise<void>((r) => (proceed = r));
    let inside = false;
    const expiresAfter: boolean[] = [];
    h.handle('renews-lease', async (_input, ctx) => {
      await ctx.transaction(async (client) => {
        inside = true;
        await waiting;
        return client;
      });
      expiresAfter.push(
        (
          await t.query(`select lease_expires_at > now() + interval '30 seconds' as renewed from executions where id = $1`, [
            ctx.executionId,
          ])
        ).rows[0].renewed,
      );
    });
    await t.service.registerEndpoint(t.actor, { name: 'fenced.renews', kind: 'HANDLER', handlerName: 'renews-lease', maxAttempts: 3 });
    await h.stopAll();
    await h.worker({ workerId: 'renewer', leaseMs: 60_000, heartbeatMs: 60_000, fenceAfterMs: 60_000, reconcileMs: 60_000 });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'fenced.renews', kind: 'IMMEDIATE' });
    await eventually(async () => inside);
    await t.query(`update executions set lease_expires_at = now() - interval '1 second' where job_id = $1`, [job.id]);
    proceed();
    const ex = await settled(t, job.id);
    expect(ex).toMatchObject({ status: 'SUCCEEDED', attempt_count: 1 });
    expect(expiresAfter).toEqual([true]);
  });

  it('refuses with LeaseLostError and rolls back when the lease was taken over before the commit', async () => {
    let proceed!: () => void;
    const waiting = new Promise<void>((r) => (proceed = r));
    let inside = false;
    const thrown: unknown[] = [];
    h.handle('loses-lease', async (_input, ctx) => {
      try {
        await ctx.transaction(async (client) => {
          await client.query(`insert into ledger (execution_id, worker_id) values ($1, 'loser')`, [ctx.executionId]);
          inside = true;
          await waiting;
        });
      } catch (error) {
        thrown.push(error);
      }
    });
    await t.service.registerEndpoint(t.actor, { name: 'fenced.loses', kind: 'HANDLER', handlerName: 'loses-lease', maxAttempts: 1 });
    await h.worker({ workerId: 'loser', leaseMs: 60_000, heartbeatMs: 60_000, fenceAfterMs: 60_000, reconcileMs: 60_000 });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'fenced.loses', kind: 'IMMEDIATE' });
    await eventually(async () => inside);
    // The lease lapses (as if the worker had stalled) and a reconciler takes the execution over
    // (its last attempt: FAILED), then the handler tries to commit.
    await t.query(`update executions set lease_expires_at = now() - interval '1 second' where job_id = $1`, [job.id]);
    expect((await reconcileExpiredLeases(t.database.pool)).map((r) => r.status)).toEqual(['FAILED']);
    proceed();
    await eventually(async () => thrown.length === 1);
    expect(thrown[0]).toBeInstanceOf(LeaseLostError);
    expect(thrown[0]).toMatchObject({ code: 'LEASE_LOST' });
    expect(await rows('ledger')).not.toContain('loser');
  });
});
