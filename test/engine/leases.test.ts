/**
 * Leases, fencing, reconciliation, cancellation, graceful shutdown and concurrency limits, with
 * real workers in this process sharing one database.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimExecutions } from '../../src/db/statements/claim.js';
import { completeExecutions, type Completion } from '../../src/db/statements/complete.js';
import { reconcileExpiredLeases } from '../../src/db/statements/lease.js';
import { reapEndedCronJobs } from '../../src/service/engine/maintenance/reaper.js';
import { adminQuery, createTestDb, cutWhileBlocked, type TestDb } from '../support/db.js';
import { QUIET, quietPeriod } from '../support/eventually.js';
import { noopObserver } from '../../src/service/kernel/observer.js';
import { attemptsOf, engineHarness, eventually, settled, type EngineHarness } from '../support/engine.js';

let t: TestDb;
let h: EngineHarness;
/** Releases every blocked handler invocation. */
let release: () => void;
let gate: Promise<void>;
const started: string[] = [];

function resetGate() {
  gate = new Promise((r) => (release = r));
}

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  h = engineHarness(t);
  resetGate();
  started.length = 0;
  // Blocks until released; ignores its signal, like a handler stuck in a call it cannot cancel.
  h.handle('stubborn', async (_input, ctx) => {
    started.push(ctx.executionId);
    await gate;
  });
  // Blocks until released or aborted.
  h.handle('polite', async (_input, ctx) => {
    started.push(ctx.executionId);
    await Promise.race([gate, new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted'))))]);
  });
  await t.service.registerEndpoint(t.actor, {
    name: 'slow.stubborn',
    kind: 'HANDLER',
    handlerName: 'stubborn',
    backoffBaseMs: 10,
    jitter: false,
  });
  await t.service.registerEndpoint(t.actor, {
    name: 'slow.polite',
    kind: 'HANDLER',
    handlerName: 'polite',
    backoffBaseMs: 10,
    jitter: false,
  });
});
afterEach(async () => {
  release();
  await h.stopAll();
});
afterAll(() => t?.close());

describe('leases', () => {
  it('fences a worker whose lease expired: its late outcome is not recorded, and the execution completes once', async () => {
    // One blocker per invocation, released in the order the test chooses.
    const blockers: (() => void)[] = [];
    h.handle('held', (_input, ctx) => {
      started.push(ctx.executionId);
      return new Promise<void>((r) => blockers.push(r));
    });
    await t.service.registerEndpoint(t.actor, {
      name: 'slow.held',
      kind: 'HANDLER',
      handlerName: 'held',
      backoffBaseMs: 10,
      jitter: false,
    });
    // One slot, held by its stalled attempt: the retry can only be B's.
    await h.worker({
      workerId: 'worker-a',
      concurrency: 1,
      leaseMs: 60_000,
      heartbeatMs: 60_000,
      fenceAfterMs: 60_000,
      reconcileMs: 60_000,
    });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.held', kind: 'IMMEDIATE' });
    await eventually(async () => blockers.length === 1);
    // Force A's lease to expire (as if A had stalled); B reconciles it and takes over.
    await t.query(`update executions set lease_expires_at = now() - interval '1 second' where job_id = $1`, [job.id]);
    await h.worker({ workerId: 'worker-b' });
    await eventually(async () => blockers.length === 2, 10_000, 'worker B to start the retry');
    blockers[1]!(); // B finishes first and records SUCCEEDED
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('SUCCEEDED');
    blockers[0]!(); // A wakes up late and tries to record its outcome
    await eventually(
      async () => h.logs.some((l) => l.includes(`outcome of ${ex.id} not recorded: its lease was lost`)),
      5000,
      "A's refused write",
    );
    const after = (await t.query('select status, attempt_count, lease_epoch from executions where id = $1', [ex.id])).rows[0];
    expect(after).toMatchObject({ status: 'SUCCEEDED', attempt_count: 2, lease_epoch: 2 });
    const attempts = await attemptsOf(t, ex.id);
    expect(attempts.map((x) => [x.worker_id, x.outcome])).toEqual([
      ['worker-a', 'LEASE_EXPIRED'],
      ['worker-b', 'SUCCEEDED'],
    ]);
  });

  it('records the current attempt of a batch that also carries an earlier, fenced-out attempt of the same execution', async () => {
    await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE' });
    const claim = (limit: number) =>
      claimExecutions(t.database.pool, { workerId: 'w', limit, handlers: ['stubborn'], leaseMs: 30_000, limitedEndpoints: false });
    const [first] = await claim(1);
    // Its lease expires and the reconciler retries it; the same worker claims it again, with a
    // second execution beside it.
    await t.query(`update executions set lease_expires_at = now() - interval '1 second' where id = $1`, [first!.id]);
    await reconcileExpiredLeases(t.database.pool);
    await t.query(`update executions set run_after = now() where id = $1`, [first!.id]);
    await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE' });
    const again = await claim(2);
    const second = again.find((x) => x.id === first!.id)!;
    const other = again.find((x) => x.id !== first!.id)!;
    expect(second.lease_epoch).toBe(first!.lease_epoch + 1);
    const done = (ex: { id: string }, epoch: number): Completion => ({
      executionId: ex.id,
      epoch,
      outcome: 'SUCCEEDED',
      retryable: false,
      retryDelayMs: null,
      statusCode: null,
      durationMs: 1,
      error: null,
      responseExcerpt: null,
    });
    // The stuck first attempt returns at last, in the same flush as the other two.
    const accepted = await completeExecutions(t.database.pool, 'w', [
      done(first!, first!.lease_epoch),
      done(second, second.lease_epoch),
      done(other, other.lease_epoch),
    ]);
    expect(Object.fromEntries(accepted)).toEqual({ [second.id]: 'SUCCEEDED', [other.id]: 'SUCCEEDED' });
    expect((await attemptsOf(t, first!.id)).map((a) => [a.attempt_number, a.outcome])).toEqual([
      [1, 'LEASE_EXPIRED'],
      [2, 'SUCCEEDED'],
    ]);
    expect((await attemptsOf(t, other.id)).map((a) => a.outcome)).toEqual(['SUCCEEDED']);
  });

  it('records an outcome whose first recording lost its database connection, by trying again', async () => {
    await h.worker({ workerId: 'worker-r', heartbeatMs: 200 });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE' });
    const running = await settled(t, job.id, ['RUNNING']);
    // The outcome's statement waits behind a lock on the execution's row, and its connection is cut.
    await cutWhileBlocked(
      t,
      { sql: 'select 1 from executions where id = $1 for update', values: [running.id] },
      '%with done as%',
      release,
      () => eventually(async () => h.logs.some((l) => l.includes('outcome(s) failed') && l.includes('retrying')), 5000, 'a retry'),
    );
    const ex = await settled(t, job.id);
    expect(ex).toMatchObject({ status: 'SUCCEEDED', attempt_count: 1 });
    expect((await attemptsOf(t, ex.id)).map((a) => [a.worker_id, a.outcome])).toEqual([['worker-r', 'SUCCEEDED']]);
  });

  it('records the outcome of an attempt whose lease ran out while nobody took it: expiry alone is no takeover', async () => {
    // No heartbeat, fence or reconciler of its own in the test's time: only the expiry changes.
    await h.worker({ workerId: 'worker-a', leaseMs: 60_000, heartbeatMs: 60_000, fenceAfterMs: 60_000, reconcileMs: 60_000 });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE' });
    await eventually(async () => started.length === 1);
    // As after an outage longer than the lease: the lease ran out while nobody could take it.
    await t.query(`update executions set lease_expires_at = now() - interval '1 second' where job_id = $1`, [job.id]);
    release();
    const ex = await settled(t, job.id);
    expect(ex).toMatchObject({ status: 'SUCCEEDED', attempt_count: 1, lease_epoch: 1 });
    expect((await attemptsOf(t, ex.id)).map((a) => [a.worker_id, a.outcome])).toEqual([['worker-a', 'SUCCEEDED']]);
  });

  it('reconciles an expired lease on the last attempt to FAILED with the reason "lease expired"', async () => {
    await h.worker({ workerId: 'worker-a', leaseMs: 60_000, heartbeatMs: 60_000, fenceAfterMs: 60_000, reconcileMs: 60_000 });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE', maxAttempts: 1 });
    await eventually(async () => started.length === 1);
    await t.query(`update executions set lease_expires_at = now() - interval '1 second' where job_id = $1`, [job.id]);
    await h.worker({ workerId: 'worker-b' });
    const ex = await settled(t, job.id, ['FAILED']);
    expect(ex).toMatchObject({ attempt_count: 1, last_error: 'lease expired' });
    expect((await attemptsOf(t, ex.id))[0].outcome).toBe('LEASE_EXPIRED');
    release();
  });

  it('aborts its own attempts when it cannot heartbeat before the lease runs out (self-fencing)', async () => {
    await h.worker({ workerId: 'worker-a', leaseMs: 1500, heartbeatMs: 500, fenceAfterMs: 1000 });
    await t.service.createJob(t.actor, { endpointName: 'slow.polite', kind: 'IMMEDIATE', maxAttempts: 1 });
    await eventually(async () => started.length === 1);
    // Make heartbeats fail: the worker's view of the database is gone, the row stays RUNNING.
    await t.query(`create function refuse_heartbeat() returns trigger language plpgsql as $$
      begin if new.lease_expires_at > old.lease_expires_at and new.status = 'RUNNING' then raise exception 'database unreachable (test)'; end if; return new; end $$`);
    await t.query('create trigger refuse_heartbeat before update on executions for each row execute function refuse_heartbeat()');
    await eventually(
      async () => h.logs.some((l) => /no heartbeat for \d+ ms; aborted 1 attempt/.test(l)),
      10_000,
      'the worker to fence itself',
    );
    await t.query('drop trigger refuse_heartbeat on executions');
  });

  it('aborts its own attempts at the fence time when no database connection is free for heartbeats (a saturated server is no outage), and counts each lost lease', async () => {
    const aborted: string[] = [];
    h.handle('watchful', async (_input, ctx) => {
      started.push(ctx.executionId);
      await new Promise<void>((resolve) => {
        void gate.then(resolve);
        ctx.signal.addEventListener('abort', () => {
          aborted.push(ctx.executionId);
          resolve();
        });
      });
    });
    await t.service.registerEndpoint(t.actor, { name: 'slow.watchful', kind: 'HANDLER', handlerName: 'watchful', jitter: false });
    let leasesLost = 0;
    const observer = { ...noopObserver, leaseLost: () => void leasesLost++ };
    await h.worker({ workerId: 'worker-a', leaseMs: 1500, heartbeatMs: 300, fenceAfterMs: 1000, reconcileMs: 60_000, observer });
    await t.service.createJob(t.actor, { endpointName: 'slow.watchful', kind: 'IMMEDIATE', maxAttempts: 1 });
    await eventually(async () => started.length === 1);
    // Heartbeats are refused with "too many connections" (53300); everything else answers.
    await t.query(`create function saturate_heartbeat() returns trigger language plpgsql as $$
      begin if new.lease_expires_at > old.lease_expires_at and new.status = 'RUNNING' then
        raise exception 'sorry, too many clients already (test)' using errcode = '53300'; end if; return new; end $$`);
    await t.query('create trigger saturate_heartbeat before update on executions for each row execute function saturate_heartbeat()');
    try {
      await eventually(async () => aborted.length === 1, 10_000, 'the attempt to be aborted while heartbeats find no connection');
      expect(h.logs.some((l) => /aborted 1 attempt\(s\) before their leases expire \(no database connection is free/.test(l))).toBe(true);
      expect(h.logs.some((l) => /the database is unreachable/.test(l))).toBe(false);
      expect(leasesLost).toBe(1);
    } finally {
      await t.query('drop trigger saturate_heartbeat on executions');
    }
  });

  it('counts a lease lost when a claim of the same execution proves it was taken over', async () => {
    let leasesLost = 0;
    const observer = { ...noopObserver, leaseLost: () => void leasesLost++ };
    const w = await h.worker({ workerId: 'worker-a', leaseMs: 60_000, heartbeatMs: 60_000, reconcileMs: 60_000, observer });
    await t.service.createJob(t.actor, { endpointName: 'slow.polite', kind: 'IMMEDIATE', maxAttempts: 3 });
    await eventually(async () => started.length === 1);
    // As a reconciler would after the lease ran out: the execution is due again, epoch unchanged
    // until this worker's claim takes it with a new one.
    await t.query(`update executions set status = 'PENDING', lease_owner = null, lease_expires_at = null, run_after = now()`);
    w.kick();
    await eventually(async () => started.length === 2, 10_000, 'the execution to be claimed again');
    expect(leasesLost).toBe(1);
  });

  it('aborts its own attempts at the fence time when a heartbeat hangs (a stuck statement is no known outage)', async () => {
    const aborted: string[] = [];
    h.handle('hangs', async (_input, ctx) => {
      started.push(ctx.executionId);
      await new Promise<void>((resolve) => {
        void gate.then(resolve);
        ctx.signal.addEventListener('abort', () => {
          aborted.push(ctx.executionId);
          resolve();
        });
      });
    });
    await t.service.registerEndpoint(t.actor, {
      name: 'slow.hangs',
      kind: 'HANDLER',
      handlerName: 'hangs',
      backoffBaseMs: 10,
      jitter: false,
    });
    await h.worker({ workerId: 'worker-a', leaseMs: 1500, heartbeatMs: 500, fenceAfterMs: 1000, reconcileMs: 60_000 });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.hangs', kind: 'IMMEDIATE', maxAttempts: 1 });
    await eventually(async () => started.length === 1);
    const [ex] = (await t.query<{ id: string }>('select id from executions where job_id = $1', [job.id])).rows;
    // A row lock held in an open transaction: the heartbeat's update waits on it, on the server,
    // for as long as the transaction stays open. The database answers everything else.
    const holder = await t.database.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from executions where id = $1 for update', [ex!.id]);
      // Nothing else ends the attempt within half a minute (the reconciler runs once a minute,
      // the handler never returns): aborted by the fence, not left running on.
      await eventually(async () => aborted.length === 1, 30_000, 'the attempt to be aborted while its heartbeat hangs');
      expect(h.logs.some((l) => /heartbeat got no answer within \d+ ms/.test(l))).toBe(true);
      // The fence's own account: it struck once its 1 s of silence had passed, however late a
      // loaded machine ran its timer.
      const silent = h.logs.map((l) => /no heartbeat for (\d+) ms; aborted 1 attempt/.exec(l)?.[1]).find(Boolean);
      expect(Number(silent)).toBeGreaterThanOrEqual(1000);
    } finally {
      await holder.query('rollback').catch(() => {});
      holder.release();
    }
  });
});

describe('cancellation', () => {
  it('cancels a running execution: its signal fires and it ends CANCELLED', async () => {
    await h.worker();
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.polite', kind: 'IMMEDIATE' });
    await eventually(async () => started.length === 1);
    const [ex0] = (await t.query('select id from executions where job_id = $1', [job.id])).rows;
    const requested = await t.service.cancelExecution(t.actor, ex0.id);
    expect(requested.status).toBe('RUNNING');
    expect(requested.cancelRequestedAt).toBeInstanceOf(Date);
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('CANCELLED');
    expect((await attemptsOf(t, ex.id)).map((a) => a.outcome)).toEqual(['CANCELLED']);
    expect(await t.service.cancelExecution(t.actor, ex.id).catch((e) => e.code)).toBe('CONFLICT');
  });

  it('cancels a pending execution at once', async () => {
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'slow.polite',
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 60_000),
    });
    const [ex0] = (await t.query('select id from executions where job_id = $1', [job.id])).rows;
    expect((await t.service.cancelExecution(t.actor, ex0.id)).status).toBe('CANCELLED');
  });

  it('cancelJob also stops its running execution', async () => {
    await h.worker();
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.polite', kind: 'IMMEDIATE' });
    await eventually(async () => started.length === 1);
    await t.service.cancelJob(t.actor, job.id);
    expect((await settled(t, job.id)).status).toBe('CANCELLED');
  });
});

/** Waits until `n` backends of this test's database wait on a lock. */
async function waitingOnLock(n: number): Promise<void> {
  await eventually(
    async () =>
      (
        await adminQuery<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = $1 and wait_event_type = 'Lock'`, [
          t.name,
        ])
      ).rows[0]!.n >= n,
    5000,
    `${n} statement(s) to wait on a lock`,
  );
}

/**
 * Orders two writers of one execution: a row lock of the test's own holds both, `first` queued
 * behind it before `second`, and they go in that order when it is released.
 */
async function inOrderBehindRowLock<A, B>(executionId: string, first: () => Promise<A>, second: () => Promise<B>): Promise<[A, B]> {
  const holder = await t.database.pool.connect();
  try {
    await holder.query('begin');
    await holder.query('select 1 from executions where id = $1 for update', [executionId]);
    const a = first();
    await waitingOnLock(1);
    const b = second();
    await waitingOnLock(2);
    await holder.query('commit');
    return [await a, await b];
  } finally {
    holder.release();
  }
}

describe('cancellation racing with the outcome', () => {
  const retryableFailure = (ex: { id: string; lease_epoch: number }): Completion => ({
    executionId: ex.id,
    epoch: ex.lease_epoch,
    outcome: 'FAILED',
    retryable: true,
    retryDelayMs: null,
    statusCode: null,
    durationMs: 1,
    error: 'boom',
    responseExcerpt: null,
  });

  it("cancelJob while the running attempt's retry is being scheduled: the execution ends CANCELLED and frees its lock key", async () => {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE', lockKey: 'nightly' });
    const [ex] = await claimExecutions(t.database.pool, {
      workerId: 'w',
      limit: 1,
      handlers: ['stubborn'],
      leaseMs: 30_000,
      limitedEndpoints: false,
    });
    // The attempt's outcome (a retryable failure, so PENDING again) commits first, while
    // cancelJob's transaction is under way.
    const [completed] = await inOrderBehindRowLock(
      ex!.id,
      () => completeExecutions(t.database.pool, 'w', [retryableFailure(ex!)]),
      () => t.service.cancelJob(t.actor, job.id),
    );
    expect(Object.fromEntries(completed)).toEqual({ [ex!.id]: 'PENDING' });
    const [after] = (await t.query('select status from executions where id = $1', [ex!.id])).rows;
    expect(after.status).toBe('CANCELLED');
    await expect(
      t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE', lockKey: 'nightly' }),
    ).resolves.toMatchObject({ created: true });
  });

  it("pauseJob or resumeJob while the running attempt's retry is being scheduled: the retry waits while the job is paused, and runs once resumed", async () => {
    const claim = () =>
      claimExecutions(t.database.pool, { workerId: 'w', limit: 1, handlers: ['stubborn'], leaseMs: 30_000, limitedEndpoints: false });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE' });
    const [ex] = await claim();
    // The retry (PENDING again) commits first, while the pause is under way: the pause waits for it.
    await inOrderBehindRowLock(
      ex!.id,
      () => completeExecutions(t.database.pool, 'w', [retryableFailure(ex!)]),
      () => t.service.pauseJob(t.actor, job.id),
    );
    await t.query(`update executions set run_after = now() where id = $1`, [ex!.id]);
    expect(await claim()).toEqual([]);

    // And the other way round: claimed again once resumed, its retry racing with a pause and resume.
    await t.service.resumeJob(t.actor, job.id);
    const [again] = await claim();
    expect(again!.id).toBe(ex!.id);
    await t.service.pauseJob(t.actor, job.id);
    await inOrderBehindRowLock(
      ex!.id,
      () => completeExecutions(t.database.pool, 'w', [retryableFailure(again!)]),
      () => t.service.resumeJob(t.actor, job.id),
    );
    await t.query(`update executions set run_after = now() where id = $1`, [ex!.id]);
    expect((await claim()).map((c) => c.id)).toEqual([ex!.id]);
  });

  it("the reaper retiring a cron job while its running attempt's retry is being scheduled: the execution ends CANCELLED", async () => {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'CRON', cron: { expression: '0 0 1 1 *' } });
    await t.query(
      `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, serial)
       select workspace_id, id, endpoint_id, now(), now(), 5, false from jobs where id = $1`,
      [job.id],
    );
    const [ex] = await claimExecutions(t.database.pool, {
      workerId: 'w',
      limit: 1,
      handlers: ['stubborn'],
      leaseMs: 30_000,
      limitedEndpoints: false,
    });
    await t.query(`update jobs set ends_at = now() - interval '1 second' where id = $1`, [job.id]);
    const [completed, reaped] = await inOrderBehindRowLock(
      ex!.id,
      () => completeExecutions(t.database.pool, 'w', [retryableFailure(ex!)]),
      () => reapEndedCronJobs(t.database.pool, t.actor.workspaceId),
    );
    expect(Object.fromEntries(completed)).toEqual({ [ex!.id]: 'PENDING' });
    expect(reaped).toBe(1);
    const [after] = (await t.query('select status, last_error from executions where id = $1', [ex!.id])).rows;
    expect(after).toEqual({ status: 'CANCELLED', last_error: 'job ended (endsAt passed)' });
  });
});

describe('graceful shutdown', () => {
  it('lets attempts in flight finish within the grace period', async () => {
    const w = await h.worker();
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE' });
    await eventually(async () => started.length === 1);
    const stopping = w.stop({ graceMs: 5000 });
    // Released once the worker says it waits for it (its grace period has begun).
    await eventually(async () => h.logs.some((l) => l.includes('waiting up to 5000 ms for 1 attempt(s)')), 5000, 'the stop to wait');
    release();
    await stopping;
    expect((await settled(t, job.id)).status).toBe('SUCCEEDED');
  });

  it('releases what did not finish in time, uncounted, so another worker picks it up at once', async () => {
    const w = await h.worker({ workerId: 'leaving' });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE' });
    await eventually(async () => started.length === 1);
    await w.stop({ graceMs: 100 });
    const [ex] = (await t.query('select * from executions where job_id = $1', [job.id])).rows;
    expect(ex).toMatchObject({ status: 'PENDING', attempt_count: 0, lease_owner: null });
    expect(await attemptsOf(t, ex.id)).toEqual([]);
    release();
    resetGate();
    release();
    await h.worker({ workerId: 'staying' });
    const done = await settled(t, job.id);
    expect(done).toMatchObject({ status: 'SUCCEEDED', attempt_count: 1 });
    expect((await attemptsOf(t, ex.id)).map((a) => a.worker_id)).toEqual(['staying']);
  });
  it('hands back, uncounted, an attempt whose lease ran out while nobody took it over (expiry alone is no takeover)', async () => {
    const w = await h.worker({ workerId: 'leaving', reconcileMs: 600_000 });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE' });
    await eventually(async () => started.length === 1);
    // As a database outage longer than the lease leaves it: same epoch, still RUNNING, expired.
    await t.query(`update executions set lease_expires_at = now() - interval '1 second' where job_id = $1`, [job.id]);
    await w.stop({ graceMs: 100 });
    const [ex] = (await t.query('select * from executions where job_id = $1', [job.id])).rows;
    expect(ex).toMatchObject({ status: 'PENDING', attempt_count: 0, lease_owner: null });
    expect(await attemptsOf(t, ex.id)).toEqual([]);
  });
});

describe('graceful shutdown and a claim in flight', () => {
  it('hands back, without starting it, what a claim in flight at stop claims, instead of running it after the worker stopped', async () => {
    const w = await h.worker({ workerId: 'leaving', reconcileMs: 600_000 });
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'slow.stubborn',
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 60_000),
    });
    await t.service.pauseJob(t.actor, job.id);
    await t.query('update executions set run_after = now() where job_id = $1', [job.id]);
    // The claim that the resumed job sets off waits on a table lock of the test's own: on configs,
    // which the claim reads (an endpoint's) and resuming does not (it writes executions' flags).
    const holder = await t.database.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('lock table configs in access exclusive mode');
      await t.service.resumeJob(t.actor, job.id);
      await waitingOnLock(1);
    } catch (error) {
      holder.release();
      throw error;
    }
    let returned = false;
    const stopping = w.stop({ graceMs: 100 }).then(() => void (returned = true));
    // The negative this test rests on: stop() waits for the claim in flight. One that did not
    // would return within a few ms (nothing held, a 100 ms grace), and the claim would then
    // commit leases on a stopped worker.
    await quietPeriod(QUIET.stopReturn);
    expect(returned).toBe(false);
    await holder.query('commit');
    holder.release();
    await stopping;
    // Claimed after stop began: a stopping worker starts nothing more, so it went back unstarted
    // (and uncounted) with what waits for a slot.
    const [ex] = (await t.query('select * from executions where job_id = $1', [job.id])).rows;
    expect(ex).toMatchObject({ status: 'PENDING', attempt_count: 0, lease_owner: null });
    // The late claim did take it, and stop gave it back.
    expect(h.logs.some((l) => /worker leaving: released 1 execution\(s\) to other workers/.test(l))).toBe(true);
    await quietPeriod(QUIET.claim);
    expect(started).toEqual([]);
    expect(await attemptsOf(t, ex.id)).toEqual([]);
  });
});

describe('graceful shutdown and cancellation', () => {
  it('ends CANCELLED at once an execution whose cancellation the stopping worker had not seen yet, rather than leaving it RUNNING until its lease expires', async () => {
    const w = await h.worker({ workerId: 'leaving', leaseMs: 60_000, heartbeatMs: 60_000, fenceAfterMs: 60_000 });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.stubborn', kind: 'IMMEDIATE' });
    await eventually(async () => started.length === 1);
    // Cancellation requested, its notification lost (a hint only) and no heartbeat since to carry it.
    await t.query('update executions set cancel_requested_at = now() where job_id = $1', [job.id]);
    await w.stop({ graceMs: 100 });
    const [ex] = (await t.query('select * from executions where job_id = $1', [job.id])).rows;
    expect(ex).toMatchObject({ status: 'CANCELLED', lease_owner: null });
    expect((await attemptsOf(t, ex.id)).map((a) => [a.worker_id, a.outcome])).toEqual([['leaving', 'CANCELLED']]);
  });
});

describe('concurrency limits', () => {
  it('never runs more attempts of an endpoint at once than its limit, across workers', async () => {
    let running = 0;
    let peak = 0;
    h.handle('counted', async () => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, 60));
      running--;
    });
    await t.service.registerEndpoint(t.actor, { name: 'limited.target', kind: 'HANDLER', handlerName: 'counted', concurrencyLimit: 2 });
    await Promise.all([h.worker({ concurrency: 5 }), h.worker({ concurrency: 5 })]);
    const jobs = await Promise.all(
      Array.from({ length: 12 }, () => t.service.createJob(t.actor, { endpointName: 'limited.target', kind: 'IMMEDIATE' })),
    );
    for (const { job } of jobs) expect((await settled(t, job.id)).status).toBe('SUCCEEDED');
    expect(peak).toBe(2);
  });
});
