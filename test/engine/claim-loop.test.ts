/**
 * The claim loop under a backlog. Claims stay whole: attempts claimed together end together, and
 * one claim takes the room they free, rather than a few attempts that ended apart getting a claim
 * of their own and splitting the batches for good (a full claim and a claim of two in turn, twice
 * the claims). And a claim that finds a limited endpoint's lock held by another claim is not taken
 * for an empty queue: the worker claims again, waiting for the lock, instead of sitting idle.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LOCK_CLASS } from '../../src/db/advisory-locks.js';
import { claimExecutions } from '../../src/db/statements/claim.js';
import { nextAwait, STICKY_CLAIMS } from '../../src/service/engine/worker/claim-loop.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, pauseOwnCronJobs, type EngineHarness } from '../support/engine.js';
import { ownPool } from '../support/own-pool.js';

let t: TestDb;
let h: EngineHarness;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  h = engineHarness(t);
  // The first two attempts end a little after the rest of their claim: from then on, without
  // coalescing, those two slots were claimed apart from the others for the whole drain.
  let started = 0;
  h.handle('batches.noop', () => (++started <= 2 ? new Promise<void>((r) => setTimeout(r, 20)) : undefined));
});
afterEach(() => h.stopAll());
afterAll(() => t?.close());

const BACKLOG = 2_000;
const BATCH = 50;

/** How many claims took the endpoint's executions: each claim writes a token of its own on what it takes. */
async function drainAndCountClaims(endpoint: { keyConcurrencyLimit?: number }): Promise<number> {
  const ep = await t.service.registerEndpoint(t.actor, {
    name: 'batches.backlog',
    kind: 'HANDLER',
    handlerName: 'batches.noop',
    ...endpoint,
  });
  for (let from = 0; from < BACKLOG; from += 1_000)
    await t.service.createJobs(
      t.actor,
      Array.from({ length: 1_000 }, (_, i) => ({
        endpointName: 'batches.backlog',
        kind: 'IMMEDIATE' as const,
        concurrencyKey: `k${(from + i) % 20}`,
      })),
    );
  await h.worker({ workerId: 'batches', concurrency: BATCH, batchSize: BATCH, pollMs: 60_000 });
  await eventually(
    async () =>
      (await t.query(`select 1 from executions where endpoint_id = $1 and status <> 'SUCCEEDED' limit 1`, [ep.id])).rows.length === 0,
    { timeout: 60_000, what: 'the backlog drained' },
  );
  const { rows } = await t.query<{ claims: number }>(
    `select count(distinct claim_token)::int as claims from executions where endpoint_id = $1`,
    [ep.id],
  );
  return rows[0]!.claims;
}

describe('claims under a backlog', () => {
  // The fewest claims are BACKLOG / BATCH (40); split batches took about twice as many.
  it('take whole batches on an endpoint without limits', async () => {
    expect(await drainAndCountClaims({})).toBeLessThan((BACKLOG / BATCH) * 1.5);
  });

  it('take whole batches on a limited endpoint, whose claims cost the most', async () => {
    expect(await drainAndCountClaims({ keyConcurrencyLimit: BATCH })).toBeLessThan((BACKLOG / BATCH) * 1.5);
  });
});

describe('whether a worker is behind its queue (its pruner slows down while it is)', () => {
  it('is while its last claim came back full, is not once one comes back short, nor once it stops', async () => {
    let release!: () => void;
    let held = new Promise<void>((r) => (release = r));
    h.handle('batches.held', () => held);
    const ep = await t.service.registerEndpoint(t.actor, { name: 'batches.behind', kind: 'HANDLER', handlerName: 'batches.held' });
    await t.service.createJobs(
      t.actor,
      Array.from({ length: 5 }, () => ({ endpointName: 'batches.behind', kind: 'IMMEDIATE' as const })),
    );
    const w = await h.worker({ workerId: 'behind', concurrency: 2, pollMs: 60_000 });
    await eventually(() => w.inFlight() === 2, 10_000, 'two attempts running');
    // Two slots, five executions due: the claim took as many as it asked for.
    expect(w.backlogged()).toBe(true);
    release();
    await eventually(
      async () =>
        (await t.query(`select 1 from executions where endpoint_id = $1 and status <> 'SUCCEEDED' limit 1`, [ep.id])).rows.length === 0,
      10_000,
      'the five executions done',
    );
    // The claim after the last one finds the queue empty.
    await eventually(() => !w.backlogged(), 10_000, 'a short claim');
    held = new Promise<void>((r) => (release = r));
    await t.service.createJobs(
      t.actor,
      Array.from({ length: 3 }, () => ({ endpointName: 'batches.behind', kind: 'IMMEDIATE' as const })),
    );
    w.kick();
    await eventually(() => w.backlogged(), 10_000, 'a full claim again');
    release();
    await h.stopAll();
    expect(w.backlogged()).toBe(false);
  });
});

describe('a claim that finds a limited endpoint locked by another claim', () => {
  it('claims again once the lock is free, instead of taking the queue for empty until its poll', async () => {
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'batches.locked',
      kind: 'HANDLER',
      handlerName: 'batches.noop',
      concurrencyLimit: 100,
    });
    await t.service.createJobs(
      t.actor,
      Array.from({ length: 20 }, () => ({ endpointName: 'batches.locked', kind: 'IMMEDIATE' as const })),
    );
    // Another claim holds the endpoint's lock (as a second worker's claim transaction does) when
    // the worker starts: its first claims find work they may not take yet.
    const other = new pg.Client({ connectionString: t.url });
    await other.connect();
    try {
      await other.query('begin');
      await other.query('select pg_advisory_xact_lock($1, hashtext($2::text))', [LOCK_CLASS.endpointClaims, ep.id]);
      // No poll and no notification in the test's time: only the claim loop itself can go on.
      await h.worker({ workerId: 'batches-locked', concurrency: 10, pollMs: 60_000, reconcileMs: 60_000 });
      await new Promise((r) => setTimeout(r, 300));
      expect(
        (await t.query(`select count(*)::int as n from executions where endpoint_id = $1 and status = 'SUCCEEDED'`, [ep.id])).rows[0].n,
      ).toBe(0);
      await other.query('commit');
    } finally {
      await other.end();
    }
    await eventually(
      async () =>
        (await t.query(`select count(*)::int as n from executions where endpoint_id = $1 and status = 'SUCCEEDED'`, [ep.id])).rows[0].n ===
        20,
      { timeout: 10_000, what: 'all 20 succeeded' },
    );
  });
});

describe('a claim that waits for a limited endpoint it claimed from before', () => {
  const claim = (
    awaitEndpoint: string | undefined,
    limit: number,
    handlers: string[],
    heard: string[],
    cut: { short: boolean; due?: string[] },
  ) =>
    claimExecutions(t.database.pool, {
      workerId: 'awaiting',
      limit,
      handlers,
      leaseMs: 60_000,
      limitedEndpoints: true,
      awaitEndpoint,
      claimedLimited: (id) => heard.push(id),
      cutShort: () => (cut.short = true),
      limitedDue: (ids) => (cut.due = ids),
    });
  const limitedWithJobs = async (name: string, handlerName: string, concurrencyLimit: number, jobs: number) => {
    const ep = await t.service.registerEndpoint(t.actor, { name, kind: 'HANDLER', handlerName, concurrencyLimit });
    await t.service.createJobs(
      t.actor,
      Array.from({ length: jobs }, () => ({ endpointName: name, kind: 'IMMEDIATE' as const })),
    );
    return ep.id;
  };

  it('claims only it, within its limit counted after the wait, and says it stopped short; the next claim takes the others', async () => {
    const first = await limitedWithJobs('awaited.first', 'batches.noop', 3, 5);
    const other = await limitedWithJobs('awaited.other', 'batches.noop', 100, 10);
    const heard: string[] = [];
    const cut: { short: boolean; due?: string[] } = { short: false };
    const rows = await claim(first, 10, ['batches.noop'], heard, cut);
    expect(rows.map((r) => r.endpoint_id)).toEqual([first, first, first]);
    expect(heard).toEqual([first]);
    expect(cut.short).toBe(true);
    // It says the other endpoint has due work too: the worker's next claims look at both.
    expect(cut.due).toEqual([first, other]);
    // The claim that follows looks everywhere: the other endpoint's, none of the full one's.
    const next = await claim(undefined, 12, ['batches.noop'], [], { short: false });
    expect(next.map((r) => r.endpoint_id)).toEqual(Array(10).fill(other));
    // Its three in flight fill its limit: a claim that waits for it takes none of it.
    const cutAgain = { short: false };
    expect(await claim(first, 10, ['batches.noop'], [], cutAgain)).toEqual([]);
    expect(cutAgain.short).toBe(true);
  });

  it('takes a full room of it and commits, without looking further', async () => {
    const first = await limitedWithJobs('awaited.backlog', 'batches.noop', 100, 12);
    await limitedWithJobs('awaited.later', 'batches.noop', 100, 5);
    const cut: { short: boolean; due?: string[] } = { short: false };
    const rows = await claim(first, 10, ['batches.noop'], [], cut);
    expect(rows.map((r) => r.endpoint_id)).toEqual(Array(10).fill(first));
    expect(cut.short).toBe(false);
    expect(cut.due).toHaveLength(2);
    const { rows: running } = await t.query<{ n: number }>(`select count(*)::int as n from executions where status = 'RUNNING'`);
    expect(running[0]!.n).toBe(10);
  });

  it('takes nothing of it when this worker cannot deliver it, and still claims what it can', async () => {
    const undeliverable = await limitedWithJobs('awaited.elsewhere', 'batches.elsewhere', 100, 3);
    const other = await limitedWithJobs('awaited.here', 'batches.noop', 100, 2);
    const heard: string[] = [];
    const cut: { short: boolean; due?: string[] } = { short: false };
    const rows = await claim(undeliverable, 10, ['batches.noop'], heard, cut);
    expect(rows.map((r) => r.endpoint_id)).toEqual([other, other]);
    expect(heard).toEqual([other]);
    expect(cut.short).toBe(false);
  });

  it('counts what a claim that held the lock committed while it waited', async () => {
    const ep = await limitedWithJobs('awaited.counted', 'batches.noop', 3, 5);
    const other = new pg.Client({ connectionString: t.url });
    await other.connect();
    try {
      // Another claim holds the lock and takes two, as a second worker's claim does.
      await other.query('begin');
      await other.query('select pg_advisory_xact_lock($1, hashtext($2::text))', [LOCK_CLASS.endpointClaims, ep]);
      await other.query(
        `update executions set status = 'RUNNING', lease_owner = 'other', lease_epoch = lease_epoch + 1,
                lease_expires_at = now() + interval '1 minute', attempt_count = attempt_count + 1, attempt_started_at = now()
         where id in (select id from executions where endpoint_id = $1 order by id limit 2)`,
        [ep],
      );
      const claiming = claim(ep, 10, ['batches.noop'], [], { short: false });
      await other.query('commit');
      // Its limit of three less the two the other claim committed while this one waited.
      expect(await claiming).toHaveLength(1);
    } finally {
      await other.end();
    }
    const { rows } = await t.query<{ n: number }>(
      `select count(*)::int as n from executions where endpoint_id = $1 and status = 'RUNNING'`,
      [ep],
    );
    expect(rows[0]!.n).toBe(3);
  });

  it('gives up its wait for a lock another claim holds, reports the endpoint contended, and keeps what the unlimited claim took', async () => {
    const held = await limitedWithJobs('awaited.held', 'batches.noop', 100, 3);
    const plain = await t.service.registerEndpoint(t.actor, { name: 'awaited.plain', kind: 'HANDLER', handlerName: 'batches.noop' });
    await t.service.createJobs(
      t.actor,
      [1, 2].map(() => ({ endpointName: 'awaited.plain', kind: 'IMMEDIATE' as const })),
    );
    // One connection, to see it come back idle.
    const pool = ownPool({ connectionString: t.url, max: 1 });
    const other = new pg.Client({ connectionString: t.url });
    await other.connect();
    try {
      await other.query('begin');
      await other.query('select pg_advisory_xact_lock($1, hashtext($2::text))', [LOCK_CLASS.endpointClaims, held]);
      const contended: string[][] = [];
      const rows = await claimExecutions(pool, {
        workerId: 'awaiting',
        limit: 10,
        handlers: ['batches.noop'],
        leaseMs: 60_000,
        limitedEndpoints: true,
        awaitEndpoint: held,
        contended: (ids) => contended.push(ids),
      });
      expect(rows.map((r) => r.endpoint_id)).toEqual([plain.id, plain.id]);
      expect(contended).toEqual([[held]]);
      await other.query('rollback');
      const { rows: running } = await t.query<{ endpoint_id: string }>(`select endpoint_id from executions where status = 'RUNNING'`);
      expect(running.map((r) => r.endpoint_id)).toEqual([plain.id, plain.id]);
      // The connection comes back idle: outside any transaction, out of pipeline mode.
      const client = await pool.connect();
      expect(client.getTransactionStatus()).toBe('I');
      expect((client as unknown as { pipeline: boolean }).pipeline).toBe(false);
      client.release();
      // And claims the endpoint once its lock is free.
      expect(
        await claimExecutions(pool, {
          workerId: 'after',
          limit: 10,
          handlers: ['batches.noop'],
          leaseMs: 60_000,
          limitedEndpoints: true,
          awaitEndpoint: held,
        }),
      ).toHaveLength(3);
      const after = await pool.connect();
      expect(after.getTransactionStatus()).toBe('I');
      expect((after as unknown as { pipeline: boolean }).pipeline).toBe(false);
      after.release();
    } finally {
      await other.end();
      await pool.end();
    }
  });
});

describe('which limited endpoint the next claim waits for', () => {
  const full = { full: true, contended: undefined, stickyLeft: 0 };

  it('the one a full claim took from, while it is the only limited endpoint with due work, for STICKY_CLAIMS claims', () => {
    let next = nextAwait({ ...full, filledFrom: 'a', limitedDue: ['a'] });
    expect(next).toEqual({ awaitEndpoint: 'a', stickyLeft: STICKY_CLAIMS });
    const waited: (string | undefined)[] = [];
    // The claims that wait for it do not look at the others (limitedDue undefined).
    for (let i = 0; i < STICKY_CLAIMS + 1; i++) {
      waited.push(next.awaitEndpoint);
      next = nextAwait({ ...full, filledFrom: 'a', limitedDue: undefined, stickyLeft: next.stickyLeft });
    }
    expect(waited).toEqual([...Array(STICKY_CLAIMS).fill('a'), 'a']);
    expect(next.awaitEndpoint).toBeUndefined();
  });

  it('none after a full claim when several limited endpoints have due work, so a held lock sends it to another', () => {
    expect(nextAwait({ ...full, filledFrom: 'a', limitedDue: ['a', 'b'] })).toEqual({ awaitEndpoint: undefined, stickyLeft: 0 });
  });

  it('the one whose lock a short claim found held; none after a short claim that found none held', () => {
    expect(nextAwait({ full: false, contended: 'b', filledFrom: undefined, limitedDue: ['a', 'b'], stickyLeft: 0 }).awaitEndpoint).toBe(
      'b',
    );
    expect(nextAwait({ full: false, contended: 'a', filledFrom: undefined, limitedDue: ['a'], stickyLeft: 0 })).toEqual({
      awaitEndpoint: 'a',
      stickyLeft: STICKY_CLAIMS,
    });
    expect(nextAwait({ full: false, contended: undefined, filledFrom: 'a', limitedDue: undefined, stickyLeft: 5 })).toEqual({
      awaitEndpoint: undefined,
      stickyLeft: 0,
    });
  });
});
