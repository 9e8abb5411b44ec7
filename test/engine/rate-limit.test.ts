/**
 * An endpoint's rate limit with three workers, each on its own pool, all claiming from one
 * backlog: the starts the handler sees never exceed the token bucket's bound, the backlog still
 * moves at the limit's rate, and a waiting execution says it is rate limited and until when.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from '../../src/db/pool.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, settled, type EngineHarness, pauseOwnCronJobs } from '../support/engine.js';
import { mostInWindow } from '../support/windows.js';

let t: TestDb;
let h: EngineHarness;
let pools: Database[] = [];
/** When each attempt's handler started (ms, this process's clock). */
const starts: number[] = [];

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
  starts.length = 0;
  h.handle('counted', async () => void starts.push(performance.now()));
});
afterEach(async () => {
  await h.stopAll();
  await Promise.all(pools.map((p) => p.close()));
  pools = [];
});
afterAll(() => t?.close());

async function threeWorkers() {
  for (const i of [1, 2, 3]) {
    const db = createDatabase({ connectionString: t.url, max: 4 });
    pools.push(db);
    await h.worker({ workerId: `rate-${i}`, pool: db.pool, concurrency: 10, pollMs: 1000 });
  }
}

/** The most starts in any window of `ms` that begins at a start. */
const mostIn = (ms: number) => mostInWindow(starts, ms);

describe('a rate limit', () => {
  it('holds three workers to burst + count per period in every window, and keeps the backlog moving at its rate', async () => {
    await t.service.registerEndpoint(t.actor, {
      name: 'rate.limited',
      kind: 'HANDLER',
      handlerName: 'counted',
      rateLimit: { count: 5, periodMs: 1000, burst: 5 },
    });
    for (let i = 0; i < 60; i++) await t.service.createJob(t.actor, { endpointName: 'rate.limited', kind: 'IMMEDIATE' });
    await threeWorkers();
    const ranFor = 6_000;
    await new Promise((r) => setTimeout(r, ranFor));
    // The bucket's bound over a window T: burst + count × T / period. A handler starts a few ms
    // after its claim spent the token, and not always the same few: 250 ms of that is allowed.
    const bound = (windowMs: number) => Math.floor(5 + (5 * (windowMs + 250)) / 1000);
    expect(mostIn(1_000)).toBeLessThanOrEqual(bound(1_000));
    expect(mostIn(3_000)).toBeLessThanOrEqual(bound(3_000));
    // The burst, then about five a second: not held back beyond the limit either. And all of them
    // within the bound for the span they took (the workers start one after another, so the span
    // is not exactly the time slept).
    expect(starts.length).toBeGreaterThanOrEqual(5 + 5 * 4);
    expect(starts.length).toBeLessThanOrEqual(bound(Math.max(...starts) - Math.min(...starts)));
  });

  it('keeps a fast rate fed between its tokens: no next token is left to the poll', async () => {
    // 200 a second: a token every 5 ms. A token that came between a claim that found none and the
    // worker's look at what is due next was not counted as ahead, and the worker slept until its
    // poll. With the poll a minute away, the backlog must still drain by the due timer alone.
    await t.service.registerEndpoint(t.actor, {
      name: 'rate.fast',
      kind: 'HANDLER',
      handlerName: 'counted',
      rateLimit: { count: 200, periodMs: 1000, burst: 10 },
    });
    await t.service.createJobs(
      t.actor,
      Array.from({ length: 400 }, () => ({ endpointName: 'rate.fast', kind: 'IMMEDIATE' as const })),
    );
    await h.worker({ workerId: 'rate-fast', concurrency: 20, pollMs: 60_000 });
    await eventually(() => starts.length === 400, { timeout: 30_000, what: 'all 400 started' });
    // And never past the bucket's bound on the way.
    expect(mostIn(1_000)).toBeLessThanOrEqual(Math.floor(10 + (200 * 1_250) / 1000));
  });

  it('does not claim in a loop while its due work is held by something else than the bucket', async () => {
    // A fast rate with a small burst, and a concurrency limit of one that a blocked handler holds:
    // the due work is not the bucket's to release. A look back at the last claim that took a full
    // bucket for one short of a token (more tokens refill in the look back than the burst holds)
    // answered "due now" after every claim: the worker claimed in a loop, hundreds of times a second.
    let release: () => void = () => {};
    h.handle('blocked', () => new Promise<void>((resolve) => (release = resolve)));
    await t.service.registerEndpoint(t.actor, {
      name: 'rate.held',
      kind: 'HANDLER',
      handlerName: 'blocked',
      concurrencyLimit: 1,
      rateLimit: { count: 1000, periodMs: 1000, burst: 5 },
    });
    await t.service.createJobs(
      t.actor,
      Array.from({ length: 10 }, () => ({ endpointName: 'rate.held', kind: 'IMMEDIATE' as const })),
    );
    // The worker's own pool, so every statement it sends is counted as it checks out a client:
    // exact, where the database's commit statistics reach pg_stat_database late and in bulk.
    const db = createDatabase({ connectionString: t.url, max: 4 });
    pools.push(db);
    let checkouts = 0;
    db.pool.on('acquire', () => checkouts++);
    await h.worker({ workerId: 'rate-held', pool: db.pool, concurrency: 5, pollMs: 60_000, reconcileMs: 60_000 });
    await eventually(async () => (await t.query(`select 1 from executions where status = 'RUNNING'`)).rows.length === 1);
    await new Promise((r) => setTimeout(r, 500));
    const before = checkouts;
    await new Promise((r) => setTimeout(r, 2_000));
    // A heartbeat and a due timer's look now and then; a loop claims hundreds of times a second.
    expect(checkouts - before).toBeLessThan(40);
    release();
  });

  it('says a waiting execution is rate limited, and until when', async () => {
    await t.service.registerEndpoint(t.actor, {
      name: 'rate.slow',
      kind: 'HANDLER',
      handlerName: 'counted',
      rateLimit: { count: 1, periodMs: 60_000 },
    });
    const first = (await t.service.createJob(t.actor, { endpointName: 'rate.slow', kind: 'IMMEDIATE' })).job.id;
    const second = (await t.service.createJob(t.actor, { endpointName: 'rate.slow', kind: 'IMMEDIATE' })).job.id;
    await h.worker();
    await settled(t, first, ['SUCCEEDED']);
    const waiting = (await t.service.executions(t.actor, { jobId: second })).edges[0]!.node;
    const w = await eventually(() => t.service.waitingFor(t.actor, waiting.id));
    expect(w.reason).toBe('RATE_LIMITED');
    expect(w.detail).toContain('has started its 1 per 60000 ms');
    expect(w.until!.getTime() - Date.now()).toBeGreaterThan(50_000);
    expect(w.until!.getTime() - Date.now()).toBeLessThanOrEqual(61_000);
    expect(starts).toHaveLength(1);

    // Lifted: it starts.
    const ep = await t.service.endpoint(t.actor, { name: 'rate.slow' });
    expect((await t.service.updateEndpoint(t.actor, { id: ep.id, rateLimit: null })).rateLimit).toBeNull();
    await settled(t, second, ['SUCCEEDED']);
  });

  it('is refused out of bounds with VALIDATION_FAILED at its field, and changes nothing', async () => {
    const ep = await t.service.registerEndpoint(t.actor, { name: 'rate.bounds', kind: 'HANDLER', handlerName: 'counted' });
    expect(ep.rateLimit).toBeNull();
    for (const rateLimit of [
      { count: 0, periodMs: 1000 },
      { count: 1, periodMs: 999 },
      { count: 1, periodMs: 1000, burst: 0 },
    ]) {
      expect(await codeOf(() => t.service.updateEndpoint(t.actor, { id: ep.id, rateLimit }))).toBe('VALIDATION_FAILED');
    }
    expect((await t.service.endpoint(t.actor, { id: ep.id })).rateLimit).toBeNull();
    const set = await t.service.updateEndpoint(t.actor, { id: ep.id, rateLimit: { count: 10, periodMs: 60_000 } });
    expect(set.rateLimit).toEqual({ count: 10, periodMs: 60_000, burst: 10 });
  });
});
