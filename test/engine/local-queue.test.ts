/**
 * A batch size above the concurrency: one claim takes the batch, `concurrency` attempts run at
 * once and the rest wait in the worker, their leases held and renewed, and start in the claim's
 * order as attempts end. One that is cancelled while it waits ends CANCELLED without its handler;
 * a stopping worker hands the waiting ones back at once, uncounted, while the running ones finish.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { openEngine } from '../../src/composition-root.js';
import { createLogger } from '../../src/log.js';
import { HandlerRegistry } from '../../src/service/engine/delivery/handler-registry.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, pauseOwnCronJobs, type EngineHarness } from '../support/engine.js';

let t: TestDb;
let h: EngineHarness;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
});
afterEach(() => h.stopAll());
afterAll(() => t?.close());

/** A handler whose attempts block until released, one at a time or all; it counts how many run at once. */
function gatedHandler() {
  const gates: (() => void)[] = [];
  const seen: string[] = [];
  let running = 0;
  let most = 0;
  return {
    seen,
    most: () => most,
    blocked: () => gates.length,
    releaseOne: () => gates.shift()?.(),
    releaseAll: () => gates.splice(0).forEach((g) => g()),
    fn: async (input: { n: number }) => {
      seen.push(String(input.n));
      most = Math.max(most, ++running);
      await new Promise<void>((r) => gates.push(r));
      running--;
    },
  };
}

async function backlog(n: number, maxAttempts?: number): Promise<string[]> {
  await t.service.registerEndpoint(t.actor, { name: 'queue.ep', kind: 'HANDLER', handlerName: 'queue.gated' });
  const ids: string[] = [];
  // One at a time, a millisecond apart: the claim takes them in this order (earliest due first).
  for (let i = 0; i < n; i++) {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'queue.ep', kind: 'IMMEDIATE', input: { n: i }, maxAttempts });
    ids.push((await t.query<{ id: string }>('select id from executions where job_id = $1', [job.id])).rows[0]!.id);
    await new Promise((r) => setTimeout(r, 2));
  }
  return ids;
}

const statusOf = async (ids: string[]) =>
  (
    await t.query<{ id: string; status: string; attempt_count: number; claim_token: string | null }>(
      'select id, status, attempt_count, claim_token from executions where id = any($1::uuid[]) order by id',
      [ids],
    )
  ).rows;

/** Lets `g`'s attempts end, those that start meanwhile too, until every one of `ids` succeeded. */
async function finishAll(g: ReturnType<typeof gatedHandler>, ids: string[]) {
  await eventually(
    async () => {
      g.releaseAll();
      return (await statusOf(ids)).every((r) => r.status === 'SUCCEEDED');
    },
    { what: 'all succeeded' },
  );
}

describe('a worker whose batch size is above its concurrency', () => {
  it('claims the batch in one statement, runs `concurrency` at once, and starts the rest in the claim order as slots free', async () => {
    const g = gatedHandler();
    h.handle('queue.gated', g.fn);
    const ids = await backlog(6);
    await h.worker({ workerId: 'queue-1', concurrency: 2, batchSize: 6, pollMs: 60_000 });

    await eventually(() => g.blocked() === 2, { what: 'two attempts running' });
    const claimed = await statusOf(ids);
    // All six are this worker's leases, taken by one claim; four wait for a slot.
    expect(claimed.every((r) => r.status === 'RUNNING')).toBe(true);
    expect(new Set(claimed.map((r) => r.claim_token)).size).toBe(1);
    expect(g.seen).toEqual(['0', '1']);

    for (let started = 3; started <= 6; started++) {
      g.releaseOne();
      await eventually(() => g.seen.length === started, { what: `attempt ${started} started` });
      await eventually(() => g.blocked() === 2, { what: 'two attempts running again' });
    }
    await finishAll(g, ids);
    expect(g.seen).toEqual(['0', '1', '2', '3', '4', '5']);
    expect(g.most()).toBe(2);
    expect((await statusOf(ids)).map((r) => r.attempt_count)).toEqual([1, 1, 1, 1, 1, 1]);
  });

  it("records a waiting execution's attempt as starting when it left the queue, not at its claim", async () => {
    const g = gatedHandler();
    h.handle('queue.gated', g.fn);
    const ids = await backlog(2);
    await h.worker({ workerId: 'queue-1', concurrency: 1, batchSize: 2, pollMs: 60_000 });
    await eventually(() => g.blocked() === 1, { what: 'the first attempt running, the second waiting' });
    // The second waits this long at least for the first's slot.
    const heldMs = 400;
    await new Promise((r) => setTimeout(r, heldMs));
    await finishAll(g, ids);
    const attempts = (
      await t.query<{ execution_id: string; started_ms: number; finished_ms: number; duration_ms: number }>(
        `select execution_id, (extract(epoch from started_at) * 1000)::float8 as started_ms, (extract(epoch from finished_at) * 1000)::float8 as finished_ms, duration_ms
         from attempts where execution_id = any($1::uuid[])`,
        [ids],
      )
    ).rows;
    const [first, second] = ids.map((id) => attempts.find((a) => a.execution_id === id)!);
    // Both were claimed together; the second's attempt started once the first had run.
    expect(second!.started_ms - first!.started_ms).toBeGreaterThanOrEqual(heldMs - 50);
    // And no later than the first's outcome was recorded, which follows the first's end, when the
    // second left the queue (a few ms for the wait's rounding to whole ms).
    expect(second!.started_ms).toBeLessThanOrEqual(first!.finished_ms + 5);
    expect(second!.started_ms).toBeLessThanOrEqual(second!.finished_ms);
  });

  it('drains a backlog many batches long, each execution once, the queue topped up as it goes', async () => {
    const seen: number[] = [];
    h.handle('queue.gated', (input: { n: number }) => void seen.push(input.n));
    await t.service.registerEndpoint(t.actor, { name: 'queue.ep', kind: 'HANDLER', handlerName: 'queue.gated' });
    await t.service.createJobs(
      t.actor,
      Array.from({ length: 600 }, (_, n) => ({ endpointName: 'queue.ep', kind: 'IMMEDIATE' as const, input: { n } })),
    );
    await h.worker({ workerId: 'queue-1', concurrency: 3, batchSize: 100, pollMs: 60_000 });
    await eventually(async () => (await t.query(`select 1 from executions where status <> 'SUCCEEDED' limit 1`)).rows.length === 0, {
      timeout: 30_000,
      what: 'the backlog drained',
    });
    expect(seen.toSorted((a, b) => a - b)).toEqual(Array.from({ length: 600 }, (_, n) => n));
    const { rows } = await t.query<{ claims: number; attempts: number }>(
      `select count(distinct claim_token)::int as claims, max(attempt_count)::int as attempts from executions`,
    );
    expect(rows[0]!.attempts).toBe(1);
    // Claims of at least a quarter of the batch each (the coalescing rule), not of the free slots.
    expect(rows[0]!.claims).toBeLessThanOrEqual(600 / 25);
  });

  it('keeps the waiting leases alive past their length, so no other worker takes them', async () => {
    const g = gatedHandler();
    h.handle('queue.gated', g.fn);
    const ids = await backlog(3);
    await h.worker({ workerId: 'queue-1', concurrency: 1, batchSize: 3, pollMs: 60_000, leaseMs: 1_000, heartbeatMs: 200 });
    await eventually(() => g.blocked() === 1, { what: 'one attempt running' });
    // A second worker with the same handler, which would take any lease that ran out (its
    // reconciler) and claim it again.
    await h.worker({ workerId: 'queue-2', concurrency: 3, pollMs: 100, reconcileMs: 100 });
    // Past the end of the leases the claim gave them, on the database's clock.
    const { rows: first } = await t.query<{ until: Date }>(
      'select max(lease_expires_at) as until from executions where id = any($1::uuid[])',
      [ids],
    );
    await eventually(
      async () =>
        (await t.query<{ past: boolean }>("select now() > $1::timestamptz + interval '1 second' as past", [first[0]!.until])).rows[0]!.past,
      { what: 'the claimed leases would have run out' },
    );
    expect((await statusOf(ids)).every((r) => r.status === 'RUNNING' && r.attempt_count === 1)).toBe(true);
    const { rows } = await t.query<{ owner: string }>('select distinct lease_owner as owner from executions where id = any($1::uuid[])', [
      ids,
    ]);
    expect(rows.map((r) => r.owner)).toEqual(['queue-1']);
    await finishAll(g, ids);
    expect((await statusOf(ids)).map((r) => r.attempt_count)).toEqual([1, 1, 1]);
  });

  it('ends one cancelled while it waits as CANCELLED, without calling its handler', async () => {
    const g = gatedHandler();
    h.handle('queue.gated', g.fn);
    const ids = await backlog(3);
    await h.worker({ workerId: 'queue-1', concurrency: 1, batchSize: 3, pollMs: 60_000 });
    await eventually(() => g.blocked() === 1, { what: 'one attempt running' });

    await t.service.cancelExecution(t.actor, ids[2]!);
    await eventually(async () => (await statusOf([ids[2]!]))[0]!.status === 'CANCELLED', { what: 'the waiting one cancelled' });
    const attempts = await t.query<{ outcome: string; error: string }>('select outcome, error from attempts where execution_id = $1', [
      ids[2],
    ]);
    expect(attempts.rows).toEqual([{ outcome: 'CANCELLED', error: 'cancelled before it started' }]);

    g.releaseOne();
    await eventually(() => g.seen.length === 2, { what: 'the second started' });
    await finishAll(g, ids.slice(0, 2));
    expect(g.seen).toEqual(['0', '1']);
  });

  it('ends one whose lease was taken over while it waits at once, without its handler, and sends no release for it', async () => {
    const g = gatedHandler();
    h.handle('queue.gated', g.fn);
    const ids = await backlog(3);
    const queries = vi.spyOn(t.database.pool, 'query');
    const releases = () => queries.mock.calls.filter(([q]) => typeof q === 'string' && q.includes('released as (')).length;
    try {
      await h.worker({ workerId: 'queue-1', concurrency: 1, batchSize: 3, pollMs: 60_000, reconcileMs: 60_000, heartbeatMs: 200 });
      await eventually(() => g.blocked() === 1, { what: 'one attempt running' });
      // Taken over as another worker's reconciler and claim would: a new epoch, another owner.
      await t.query(
        `update executions set lease_owner = 'queue-other', lease_epoch = lease_epoch + 1, claim_token = gen_random_uuid(),
                lease_expires_at = now() + interval '1 minute' where id = $1`,
        [ids[2]],
      );
      // The next heartbeat finds it gone.
      await eventually(() => h.logs.some((l) => l.includes(`lease of ${ids[2]} lost`)), { what: 'the lost lease seen' });
      g.releaseOne();
      await eventually(() => g.seen.length === 2, { what: 'the second started' });
      await finishAll(g, ids.slice(0, 2));
      // Its outcome was fenced out: the other worker's lease stands, and nobody ran it here.
      expect((await statusOf([ids[2]!]))[0]).toMatchObject({ status: 'RUNNING', attempt_count: 1 });
      expect(g.seen).toEqual(['0', '1']);
      // A lease known to be gone cannot be released: no release was sent for it.
      expect(releases()).toBe(0);
    } finally {
      queries.mockRestore();
    }
  });

  it('hands the waiting ones back at stop, uncounted, while the running ones finish', async () => {
    const g = gatedHandler();
    h.handle('queue.gated', g.fn);
    const ids = await backlog(5);
    const w = await h.worker({ workerId: 'queue-1', concurrency: 2, batchSize: 5, pollMs: 60_000 });
    await eventually(() => g.blocked() === 2, { what: 'two attempts running' });
    // Three of the claimed five wait for a slot.
    expect((await statusOf(ids)).map((r) => r.status)).toEqual(Array(5).fill('RUNNING'));

    const stopping = w.stop({ graceMs: 10_000 });
    // Back before the running ones end: PENDING, their claimed attempt not counted.
    await eventually(async () => (await statusOf(ids.slice(2))).every((r) => r.status === 'PENDING' && r.attempt_count === 0), {
      what: 'the waiting ones handed back',
    });
    expect((await statusOf(ids.slice(0, 2))).map((r) => r.status)).toEqual(['RUNNING', 'RUNNING']);
    g.releaseAll();
    await stopping;
    expect((await statusOf(ids.slice(0, 2))).map((r) => r.status)).toEqual(['SUCCEEDED', 'SUCCEEDED']);
    expect(g.seen).toEqual(['0', '1']);
    expect(w.inFlight()).toBe(0);
  });

  it('hands the waiting ones back, uncounted, when the self-fence gives up their leases: they run later, no attempt lost', async () => {
    // The first blocks until aborted; the others end at once whenever they run.
    const ran: number[] = [];
    h.handle('queue.gated', async (input: { n: number }, ctx) => {
      ran.push(input.n);
      if (input.n === 0) await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    });
    // One attempt each: a waiting execution charged an attempt it never ran would fail for good.
    const ids = await backlog(3, 1);
    await h.worker({
      workerId: 'queue-fenced',
      concurrency: 1,
      batchSize: 3,
      leaseMs: 1500,
      heartbeatMs: 500,
      fenceAfterMs: 1000,
      reconcileMs: 60_000,
      pollMs: 60_000,
    });
    await eventually(() => ran.length === 1, { what: 'the first attempt running' });
    expect((await statusOf(ids)).map((r) => r.status)).toEqual(['RUNNING', 'RUNNING', 'RUNNING']);
    // Heartbeats are refused (the database answers, but not them): the worker fences itself.
    await t.query(`create function refuse_heartbeat() returns trigger language plpgsql as $$
      begin if new.lease_expires_at > old.lease_expires_at and new.status = 'RUNNING' then raise exception 'heartbeat refused (test)'; end if; return new; end $$`);
    await t.query('create trigger refuse_heartbeat before update on executions for each row execute function refuse_heartbeat()');
    try {
      await eventually(
        async () => {
          const rows = await statusOf(ids);
          return rows.every((r) => r.status === 'SUCCEEDED' || r.status === 'FAILED');
        },
        { what: 'all three ended', timeout: 15_000 },
      );
    } finally {
      await t.query('drop trigger refuse_heartbeat on executions');
    }
    const byId = new Map((await statusOf(ids)).map((r) => [r.id, r]));
    // The running one was aborted by the fence; the waiting ones were handed back and ran later.
    expect(byId.get(ids[0]!)).toMatchObject({ status: 'FAILED', attempt_count: 1 });
    expect([byId.get(ids[1]!), byId.get(ids[2]!)]).toMatchObject([
      { status: 'SUCCEEDED', attempt_count: 1 },
      { status: 'SUCCEEDED', attempt_count: 1 },
    ]);
    expect([...ran].sort()).toEqual([0, 1, 2]);
    const notStarted = await t.query(
      `select count(*)::int as n from attempts where execution_id = any($1::uuid[]) and error like '%before it started%'`,
      [ids],
    );
    expect(notStarted.rows[0]!.n).toBe(0);
    expect(h.logs.some((l) => /handed back 2 waiting execution\(s\) whose lease it gave up/.test(l))).toBe(true);
  });

  it('is an engine setting (JOBGATE_WORKER_BATCH_SIZE), which its workers claim with', async () => {
    const g = gatedHandler();
    const ids = await backlog(4);
    const handlers = new HandlerRegistry();
    handlers.register('queue.gated', undefined, g.fn);
    const engine = await openEngine({
      connectionString: t.url,
      log: createLogger('warn'),
      migrations: 'verify',
      poolMax: 4,
      handlers,
      retention: { prune: false },
      worker: { concurrency: 1, batchSize: 4 },
    });
    try {
      await engine.startWorker({ workerId: 'queue-engine', pollMs: 60_000 });
      await eventually(() => g.blocked() === 1, { what: 'one attempt running' });
      expect((await statusOf(ids)).map((r) => r.status)).toEqual(Array(4).fill('RUNNING'));
      await finishAll(g, ids);
      expect(g.most()).toBe(1);
    } finally {
      await engine.stop();
    }
  });
});
