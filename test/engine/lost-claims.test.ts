/**
 * Claims whose answer never reached their worker (invariant 13): the database committed the claim,
 * and a connection reset swallowed its answer. Through a real TCP proxy in front of Postgres
 * (test/support/pg-proxy.ts) that drops the claim's answer after the commit and resets the
 * worker's connections. The lease is long (60 s) and every wait well below it, so an execution
 * that runs did so because its worker handed it back, not because a reconciler found its lease
 * expired (which would also have counted the attempt).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimExecutions, handBackLostClaims } from '../../src/db/statements/claim.js';
import { reconcileExpiredLeases } from '../../src/db/statements/lease.js';
import { createDatabase, type Database } from '../../src/db/pool.js';
import { isConnectionError } from '../../src/db/unavailable.js';
import { drainDue } from '../../src/service/engine/serverless/claim-and-run.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { attemptsOf, engineHarness, eventually, executionsOf, settled, type EngineHarness } from '../support/engine.js';
import { startPgProxy, type PgProxy } from '../support/pg-proxy.js';

const LEASE_MS = 60_000;
/** Well below the lease: a success within it cannot be the reconciler's doing. */
const BACK_WITHIN_MS = 20_000;

let t: TestDb;
let h: EngineHarness;
let proxy: PgProxy;
let proxied: Database;
/** Executions whose handler ran, once per run. */
const ran: string[] = [];

beforeEach(async () => {
  t = await createTestDb();
  h = engineHarness(t);
  proxy = await startPgProxy(t.url);
  proxied = createDatabase({ connectionString: proxy.url, max: 4, connectionTimeoutMs: 2000 });
  ran.length = 0;
  h.handle('once', async (_input, ctx) => {
    ran.push(ctx.executionId);
  });
  await t.service.registerEndpoint(t.actor, { name: 'lost.once', kind: 'HANDLER', handlerName: 'once', maxAttempts: 1 });
});
afterEach(async () => {
  await h.stopAll();
  await proxied.close();
  await proxy.close();
  await t.close();
});

/** A worker whose statements go through the proxy (its LISTEN connection too). */
const proxiedWorker = (workerId: string) =>
  h.worker({ workerId, pool: proxied.pool, connectionString: proxy.url, leaseMs: LEASE_MS, concurrency: 2 });

async function expectOneRealAttempt(jobId: string, workerId: string) {
  const ex = await settled(t, jobId, ['SUCCEEDED', 'FAILED', 'CANCELLED'], BACK_WITHIN_MS);
  expect(ex).toMatchObject({ status: 'SUCCEEDED', attempt_count: 1, max_attempts: 1 });
  const attempts = await attemptsOf(t, ex.id);
  expect(attempts.map((a) => [a.attempt_number, a.worker_id, a.outcome])).toEqual([[1, workerId, 'SUCCEEDED']]);
  expect(ran).toEqual([ex.id]);
  return ex;
}

/**
 * The cut, or a failure naming it within CUT_WITHIN_MS (rather than a hang to vitest's timeout).
 * Once, a claim sent before the cut was armed but answered after the job was created went through
 * uncut (the proxy decided at send time); it decides on the answer now (test/support/pg-proxy.ts).
 */
const CUT_WITHIN_MS = 30_000;
async function cutWithin(cut: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the proxy saw no claim to cut within ${CUT_WITHIN_MS} ms`)), CUT_WITHIN_MS);
  });
  try {
    await Promise.race([cut, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('a claim whose answer was lost', () => {
  it('is handed back uncounted when the database answers again, and its one attempt succeeds long before its lease would expire', async () => {
    await proxiedWorker('worker-a');
    // The claim commits, its answer is dropped, every connection is reset, and the "database" stays
    // away until the worker has knocked a few times: it learns of the outage before it can recover.
    const cut = proxy.cutNextClaim({ refuse: true });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'lost.once', kind: 'IMMEDIATE' });
    await cutWithin(cut);
    const [held] = await executionsOf(t, job.id);
    expect(held).toMatchObject({ status: 'RUNNING', lease_owner: 'worker-a', attempt_count: 1, lease_epoch: 1 });
    await eventually(() => proxy.refused() >= 2, 10_000, 'the worker to find the database gone');
    expect(ran).toEqual([]);
    proxy.reopen();

    const ex = await expectOneRealAttempt(job.id, 'worker-a');
    // Claimed (1), handed back (2: a write carrying the lost claim's epoch stays fenced out), claimed again (3).
    expect(ex.lease_epoch).toBe(3);
    expect(h.logs.some((l) => /handed back 1 execution\(s\) a claim took whose answer was lost/.test(l))).toBe(true);
    expect(h.logs.some((l) => l.includes('reconciled'))).toBe(false);
  });

  it('is handed back by stop() when the worker stops before it could recover it', async () => {
    const a = await proxiedWorker('worker-a');
    // Stopped at the very moment of the cut: its claim loop learns of the lost answer only once it
    // no longer runs, so the hand-back is stop's to do.
    let stopping: Promise<void> | undefined;
    const cut = proxy.cutNextClaim({ onCut: () => void (stopping = a.stop({ graceMs: 5000 })) });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'lost.once', kind: 'IMMEDIATE' });
    await cutWithin(cut);
    await stopping;
    const [back] = await executionsOf(t, job.id);
    expect(back).toMatchObject({ status: 'PENDING', lease_owner: null, lease_expires_at: null, attempt_count: 0, lease_epoch: 2 });
    expect(ran).toEqual([]);

    await h.worker({ workerId: 'worker-b', leaseMs: LEASE_MS });
    await expectOneRealAttempt(job.id, 'worker-b');
  });

  it('is handed back by a serverless pass before it reports the lost connection', async () => {
    const cut = proxy.cutNextClaim();
    const { job } = await t.service.createJob(t.actor, { endpointName: 'lost.once', kind: 'IMMEDIATE' });
    const failed = await drainDue(proxied.pool, h.handlers, { limit: 10, defaultTimeoutMs: 5000 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    await cutWithin(cut);
    expect(isConnectionError(failed)).toBe(true);
    const [back] = await executionsOf(t, job.id);
    expect(back).toMatchObject({ status: 'PENDING', lease_owner: null, attempt_count: 0, lease_epoch: 2 });
    expect(ran).toEqual([]);
  });

  it('is handed back only while that claim still holds it: a lease taken over since, or a token not its, is left alone', async () => {
    await t.service.createJob(t.actor, { endpointName: 'lost.once', kind: 'IMMEDIATE' });
    const claim = (workerId: string, token: string) =>
      claimExecutions(t.database.pool, { workerId, token, limit: 1, handlers: ['once'], leaseMs: LEASE_MS, limitedEndpoints: false });
    const lostToken = '00000000-0000-4000-8000-000000000001';
    const [first] = await claim('worker-a', lostToken);
    // Its lease expires, the reconciler retries it (the attempt counted), and worker B claims it.
    await t.query(`update executions set lease_expires_at = now() - interval '1 second', max_attempts = 2 where id = $1`, [first!.id]);
    await reconcileExpiredLeases(t.database.pool);
    await t.query(`update executions set run_after = now() where id = $1`, [first!.id]);
    const [second] = await claim('worker-b', '00000000-0000-4000-8000-000000000002');
    expect(second).toMatchObject({ id: first!.id, attempt_count: 2 });

    expect(await handBackLostClaims(t.database.pool, 'worker-a', [lostToken])).toEqual([]);
    // Worker B's own token, asked for by another worker: not that worker's lease.
    expect(await handBackLostClaims(t.database.pool, 'worker-a', ['00000000-0000-4000-8000-000000000002'])).toEqual([]);
    const [row] = (await t.query('select status, lease_owner, attempt_count, lease_epoch from executions where id = $1', [first!.id])).rows;
    expect(row).toEqual({ status: 'RUNNING', lease_owner: 'worker-b', attempt_count: 2, lease_epoch: 2 });
  });

  it('ends CANCELLED, uncounted, when a cancellation was asked for while the lost claim held it', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'lost.once', kind: 'IMMEDIATE' });
    const token = '00000000-0000-4000-8000-000000000003';
    const [ex] = await claimExecutions(t.database.pool, {
      workerId: 'worker-a',
      token,
      limit: 1,
      handlers: ['once'],
      leaseMs: LEASE_MS,
      limitedEndpoints: false,
    });
    // cancelJob retires the job: handed back PENDING, the execution would wait for good.
    await t.service.cancelJob(t.actor, job.id);
    expect(await handBackLostClaims(t.database.pool, 'worker-a', [token])).toEqual([{ id: ex!.id, status: 'CANCELLED', token }]);
    const [row] = await executionsOf(t, job.id);
    expect(row).toMatchObject({ status: 'CANCELLED', attempt_count: 0, lease_owner: null });
    expect(row.finished_at).not.toBeNull();
    expect(await attemptsOf(t, ex!.id)).toEqual([]);
  });
});
