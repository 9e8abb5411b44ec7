/**
 * Live subscriptions through a real gateway and real graphql-ws clients, fed by triggers and
 * LISTEN/NOTIFY on a real Postgres: order, replay with `after`, the replay/live boundary under
 * out-of-order commits, rollbacks, workspaces, a terminated listening backend.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLogger } from '../../src/log.js';
import { pruneBounded } from '../../src/service/engine/maintenance/pruner.js';
import { outcome, RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { createRunner } from '../../src/service/engine/runs/runner.js';
import { cursorsOf, type TestCursors } from '../support/cursors.js';
import { isConnectionError } from '../../src/db/unavailable.js';
import { adminQuery, createTestDb, type TestDb } from '../support/db.js';
import { QUIET, quietPeriod } from '../support/eventually.js';
import { engineHarness, eventually, type EngineHarness } from '../support/engine.js';
import { collect, startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let live: LiveGateway;
let engine: EngineHarness;
let key: string;
let otherKey: string;
let endpointId: string;
/** The default workspace's cursors, to relate what streams show to the rows behind them. */
let cursors: TestCursors;

beforeAll(async () => {
  t = await createTestDb();
  live = await startLiveGateway(t, { hub: { checkEveryMs: 500, probeTimeoutMs: 500 } });
  engine = engineHarness(t);
  engine.handle('live.noop', async () => {});
  key = (await t.service.bootstrapKey('default', 'VIEWER', 'live viewer')).key;
  otherKey = (await t.service.bootstrapKey('other', 'ADMIN', 'other admin')).key;
  endpointId = (await t.service.registerEndpoint(t.actor, { name: 'live.target', kind: 'HANDLER', handlerName: 'live.noop' })).id;
  cursors = await cursorsOf(t, t.actor.workspaceId);
});
afterAll(async () => {
  await engine.stopAll();
  await live.close();
  await t.close();
});

const EXECUTIONS = `subscription($jobId: ID, $endpointId: ID, $after: String) {
  executionUpdates(jobId: $jobId, endpointId: $endpointId, after: $after) { cursor executionId jobId status previousStatus attemptCount }
}`;
const JOBS = `subscription($jobId: ID, $after: String) { jobEvents(jobId: $jobId, after: $after) { cursor jobId status previousStatus } }`;

/** Subscribes, and resolves once the hub delivers live to it (it started from a settled horizon). */
async function subscribed<T = any>(key: string, query: string, variables: Record<string, unknown> = {}) {
  // Earlier subscriptions of this file end asynchronously; wait for the hub to have let them go.
  const streams = () => live.hub.stats().events + live.hub.stats().findings;
  await eventually(async () => streams() === open.size, 5000, 'earlier subscriptions to end');
  const sub = collect<T>(live.client(key), query, variables);
  const stop = sub.stop;
  open.add(sub);
  sub.stop = () => {
    open.delete(sub);
    stop();
  };
  await eventually(async () => streams() === open.size, 5000, 'the subscription to go live');
  return sub;
}
const open = new Set<unknown>();

describe('executionUpdates and jobEvents', () => {
  it('streams an execution from creation to success, in order, and only for the job asked about', async () => {
    const noise = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    const sub = await subscribed(key, EXECUTIONS, { jobId: job.id });
    await t.service.triggerJob(t.actor, { id: job.id, force: true });
    await t.service.triggerJob(t.actor, { id: noise.job.id, force: true });
    await engine.worker();
    const items = await sub.until((xs) => xs.some((x) => x.status === 'SUCCEEDED'), 10_000, 'SUCCEEDED');
    sub.stop();
    // Without a cursor the stream starts at the hub's last settled point, so it may also carry
    // the job's first (delayed) execution, created just before; the forced one is complete.
    const forced = items.find((x) => x.status === 'SUCCEEDED')!.executionId;
    expect(items.filter((x) => x.executionId === forced).map((x) => [x.previousStatus, x.status])).toEqual([
      [null, 'PENDING'],
      ['PENDING', 'RUNNING'],
      ['RUNNING', 'SUCCEEDED'],
    ]);
    expect(new Set(items.map((x) => x.jobId))).toEqual(new Set([job.id]));
    const ids = items.map((x) => cursors.open('event', x.cursor));
    expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(ids);
    await engine.stopAll();
  });

  it('replays from a cursor: a client that resubscribes with its last cursor misses nothing and gets nothing twice', async () => {
    const c = live.client(key);
    const first = collect(c, JOBS, { after: '0' });
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    await first.until((xs) => xs.some((x) => x.jobId === job.id));
    first.stop();
    const last = first.items.at(-1)!.cursor as string;
    // While nobody listens: paused, resumed, retired.
    await t.service.pauseJob(t.actor, job.id);
    await t.service.resumeJob(t.actor, job.id);
    await t.service.cancelJob(t.actor, job.id);
    const again = collect(c, JOBS, { jobId: job.id, after: last });
    const items = await again.until((xs) => xs.some((x) => x.status === 'RETIRED'));
    again.stop();
    expect(items.map((x) => x.status)).toEqual(['PAUSED', 'ACTIVE', 'RETIRED']);
    expect(items.every((x) => cursors.open('event', x.cursor) > cursors.open('event', last))).toBe(true);
  });

  it('sends nothing for a change that was rolled back', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    const sub = await subscribed(key, JOBS, { jobId: job.id });
    const client = await t.database.pool.connect();
    try {
      await client.query('begin');
      await client.query(`update jobs set status = 'PAUSED' where id = $1`, [job.id]);
      await client.query('rollback');
    } finally {
      client.release();
    }
    await t.service.cancelJob(t.actor, job.id); // a real change after it
    const items = await sub.until((xs) => xs.length > 0);
    await quietPeriod(QUIET.delivery);
    sub.stop();
    // (The job's creation may be in the stream too: it starts at the last settled point.)
    expect(sub.items.filter((x) => x.previousStatus !== null).map((x) => [x.previousStatus, x.status])).toEqual([['ACTIVE', 'RETIRED']]);
    expect(items.some((x) => x.status === 'PAUSED')).toBe(false);
  });

  it('never crosses workspaces: another workspace sees nothing of ours, and cannot name our job', async () => {
    const theirs = await subscribed(otherKey, EXECUTIONS);
    const ours = await subscribed(key, EXECUTIONS);
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE' });
    await ours.until((xs) => xs.some((x) => x.jobId === job.id));
    await quietPeriod(QUIET.delivery);
    expect(theirs.items).toEqual([]);
    theirs.stop();
    ours.stop();

    const probe = collect(live.client(otherKey), EXECUTIONS, { jobId: job.id });
    await eventually(async () => probe.errors.length > 0, 5000, 'a refusal');
    expect(JSON.stringify(probe.errors)).toContain('NOT_FOUND');
  });

  it("narrows to one type of endpoint, live and in replay: USER leaves jobgate's own work out, INTERNAL shows only it", async () => {
    const BY_TYPE = `subscription($type: EndpointType, $after: String) {
      executionUpdates(endpointType: $type, after: $after) { cursor jobId status }
    }`;
    const internalEndpoint = await t.service.registerEndpoint(
      t.systemActor,
      { name: 'live.internal', kind: 'HANDLER', handlerName: 'live.noop' },
      { type: 'INTERNAL' },
    );
    const users = await subscribed(key, BY_TYPE, { type: 'USER' });
    const internals = await subscribed(key, BY_TYPE, { type: 'INTERNAL' });
    const everything = await subscribed(key, BY_TYPE);
    const before = everything.items.at(-1)?.cursor;
    const ours = (await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE' })).job;
    const theirs = (await t.service.createJob(t.systemActor, { endpointId: internalEndpoint.id, kind: 'IMMEDIATE' })).job;
    await engine.worker();
    const done = (job: { id: string }) => (xs: any[]) => xs.some((x) => x.jobId === job.id && x.status === 'SUCCEEDED');
    await everything.until((xs) => done(ours)(xs) && done(theirs)(xs), 10_000, 'both jobs to succeed');
    await users.until(done(ours), 10_000, 'our job in the USER stream');
    await internals.until(done(theirs), 10_000, 'the internal job in the INTERNAL stream');
    await quietPeriod(QUIET.delivery);
    for (const sub of [users, internals, everything]) sub.stop();
    expect(users.items.some((x) => x.jobId === theirs.id)).toBe(false);
    expect(internals.items.some((x) => x.jobId === ours.id)).toBe(false);
    expect(everything.items.filter((x) => x.jobId === ours.id).map((x) => x.status)).toEqual(['PENDING', 'RUNNING', 'SUCCEEDED']);

    // The same narrowing in a replay, read by the database rather than by the live fan-out.
    const replay = collect(live.client(key), BY_TYPE, { type: 'USER', after: before ?? '0' });
    await replay.until(done(ours), 10_000, 'the replay to reach our job');
    await quietPeriod(QUIET.delivery);
    replay.stop();
    expect(replay.items.filter((x) => x.jobId === ours.id).map((x) => x.status)).toEqual(['PENDING', 'RUNNING', 'SUCCEEDED']);
    expect(replay.items.some((x) => x.jobId === theirs.id)).toBe(false);
  });

  it('refuses a cursor that is not one, with VALIDATION_FAILED and the field', async () => {
    const sub = collect(live.client(key), JOBS, { after: 'yesterday' });
    await eventually(async () => sub.errors.length > 0, 5000, 'a refusal');
    expect(sub.errors[0]).toMatchObject({ extensions: { code: 'VALIDATION_FAILED' } });
    expect(JSON.stringify(sub.errors[0])).toContain('after');
  });
});

describe('runProgress and runFindings', () => {
  let registry: RecoverableRegistry;
  // Checkpoints need a permit from the test: the walk takes one before each checkpoint.
  let permits = Infinity;
  let waiting: (() => void)[] = [];
  const allow = (n: number) => {
    permits += n;
    while (permits > 0 && waiting.length) {
      permits--;
      waiting.shift()!();
    }
  };
  const permit = () =>
    new Promise<void>((resolve) => {
      if (permits > 0) {
        permits--;
        resolve();
      } else waiting.push(resolve);
    });
  const hold = () => {
    permits = 0;
    waiting = [];
  };

  beforeAll(() => {
    registry = new RecoverableRegistry();
    // Ten batches of ten; waits on the test's gate before each checkpoint when it is closed.
    registry.register({
      name: 'live.walk',
      params: z.object({ findings: z.boolean().default(false) }),
      async run(store, params) {
        let next = ((await store.loadCursor()) as { next: number } | null)?.next ?? 0;
        while (next < 100) {
          if ((await store.status()) === 'CANCEL_REQUESTED') return outcome.paused({ next });
          if (params.findings)
            for (let id = next; id < next + 10; id++) await store.recordFinding({ kind: 'seen', severity: 'INFO', resourceId: String(id) });
          await permit();
          next += 10;
          await store.checkpoint({ next }, { processed: 10, total: 100, stats: { batches: 1 } });
        }
        return outcome.completed();
      },
    });
  });

  it('emits the state at once, then every checkpoint in order, and completes when the run completes', async () => {
    hold();
    const runner = createRunner({ pool: t.database.pool, registry, log: createLogger('silent'), pollMs: 50, heartbeatMs: 200 });
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'live.walk', params: {} });
    const sub = collect(live.client(key), `subscription($id: ID!) { runProgress(runId: $id) { status processed total progress stats } }`, {
      id: run.id,
    });
    await sub.until((xs) => xs.length >= 1);
    expect(sub.items[0]).toMatchObject({ status: 'RUNNING', processed: 0 });
    await runner.start();
    // One checkpoint at a time: each must arrive before the next is allowed.
    for (let done = 10; done <= 50; done += 10) {
      allow(1);
      await sub.until((xs) => xs.some((x) => x.processed === done), 10_000, `processed ${done}`);
    }
    allow(Infinity);
    await sub.until(() => sub.completed, 10_000, 'completion');
    await runner.stop();
    const processed = sub.items.map((x) => x.processed as number);
    expect([...processed].sort((a, b) => a - b)).toEqual(processed);
    expect(sub.items.at(-1)).toMatchObject({ status: 'COMPLETED', processed: 100, total: 100, progress: 1, stats: { batches: 10 } });
    for (const n of [10, 20, 30, 40, 50]) expect(processed).toContain(n);
  });

  it('replays findings after a cursor, then streams new ones: no gap, no duplicate, even when commits land out of id order', async () => {
    hold();
    const runner = createRunner({ pool: t.database.pool, registry, log: createLogger('silent'), pollMs: 50, heartbeatMs: 200 });
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'live.walk', params: { findings: true } });
    await runner.start();
    await eventually(
      async () => (await t.query(`select count(*)::int as n from findings where run_id = $1`, [run.id])).rows[0].n === 10,
    ).catch(async (e) => {
      console.log(
        (await t.query('select id, status, processed, owner, error, params from runs')).rows,
        (await t.query('select count(*) from findings')).rows,
      );
      throw e;
    });
    const firstTen = (await t.query(`select id from findings where run_id = $1 order by id`, [run.id])).rows.map((r) => String(r.id));
    const cursor = firstTen[4]!;
    // Those ten are settled before the slow writer opens (an open writer holds back what follows it).
    await eventually(async () => (live.hub.horizon()?.findings ?? 0n) >= BigInt(firstTen[9]!), 5000, 'the hub to settle the first ten');

    // A second writer whose transaction takes an id first and commits last.
    const slow = await t.database.pool.connect();
    await slow.query('begin');
    const held = (
      await slow.query(
        `insert into findings (workspace_id, run_id, kind, severity, resource_id) values ($1, $2, 'late', 'ERROR', 'held') returning id`,
        [t.actor.workspaceId, run.id],
      )
    ).rows[0].id as string;

    const sub = collect(
      live.client(key),
      `subscription($id: ID!, $after: String) { runFindings(runId: $id, after: $after) { id kind resourceId } }`,
      { id: run.id, after: cursors.seal('finding', cursor) },
    );
    const ids = () => sub.items.map((x) => String(cursors.open('finding', x.id)));
    await sub
      .until((xs) => xs.length >= 5, 10_000, 'the replay')
      .catch(async (e) => {
        await slow.query('rollback');
        slow.release();
        throw e;
      });
    expect(ids()).toEqual(firstTen.slice(5));
    allow(1); // the walk records the next ten, with ids after `held`, and commits them first
    try {
      await eventually(async () => (await t.query(`select count(*)::int as n from findings where run_id = $1`, [run.id])).rows[0].n === 20);
      await quietPeriod(QUIET.delivery);
      // Committed but behind the open writer: not delivered yet, or order would break.
      expect(sub.items.length).toBe(5);
    } finally {
      await slow.query('commit');
      slow.release();
    }
    allow(Infinity);
    await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'COMPLETED', 15_000, 'the run to complete');
    const all = (await t.query(`select id from findings where run_id = $1 and id > $2 order by id`, [run.id, cursor])).rows.map((r) =>
      String(r.id),
    );
    await sub.until((xs) => xs.length >= all.length, 10_000, `all ${all.length} findings`);
    await quietPeriod(QUIET.delivery);
    await runner.stop();
    sub.stop();
    expect(ids()).toEqual(all);
    expect(all).toContain(String(held));
  });

  it('refuses a cursor beyond every id handed out (VALIDATION_FAILED), which would otherwise skip every event until the ids reach it', async () => {
    allow(Infinity);
    const runner = createRunner({ pool: t.database.pool, registry, log: createLogger('silent'), pollMs: 50, heartbeatMs: 200 });
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'live.walk', params: {} });
    await runner.start();
    await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'COMPLETED', 15_000, 'the run to complete');
    await runner.stop();
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    const latest = async (seq: string) => BigInt((await t.query(`select last_value from ${seq}`)).rows[0].last_value);
    // Cursors from a database restored to an older state: the workspace's own, but far ahead.
    const ahead = (await latest('events_id_seq')) + (await latest('findings_id_seq')) + 1_000n;
    const events = collect(live.client(key), JOBS, { jobId: job.id, after: cursors.seal('event', ahead) });
    const findings = collect(live.client(key), `subscription($id: ID!, $after: String) { runFindings(runId: $id, after: $after) { id } }`, {
      id: run.id,
      after: cursors.seal('finding', ahead),
    });
    await eventually(async () => events.errors.length > 0 && findings.errors.length > 0, 5000, 'both refused');
    for (const sub of [events, findings]) {
      expect(sub.errors[0]).toMatchObject({ extensions: { code: 'VALIDATION_FAILED' } });
      expect(JSON.stringify(sub.errors[0])).toContain('after');
    }
    // The last id handed out is still a cursor (nothing after it yet): the stream goes on from it.
    const atLatest = await subscribed(key, JOBS, { jobId: job.id, after: cursors.seal('event', await latest('events_id_seq')) });
    await t.service.cancelJob(t.actor, job.id);
    await atLatest.until((xs) => xs.some((x) => x.status === 'RETIRED'));
    atLatest.stop();
  });

  it('keeps delivering after the listening backend is terminated: the hub reconnects and re-reads from its position', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    const sub = await subscribed(key, JOBS, { jobId: job.id });
    const pid = await live.hub.listener.backendPid();
    expect(pid).toBeTypeOf('number');
    await t.query('select pg_terminate_backend($1)', [pid]);
    // Changes while the listener is down (or reconnecting).
    await t.service.pauseJob(t.actor, job.id);
    await t.service.resumeJob(t.actor, job.id);
    await eventually(
      async () => (await live.hub.listener.backendPid().catch(() => undefined)) !== undefined && live.hub.listener.mode === 'notify',
      10_000,
      'the listener to come back',
    );
    expect(await live.hub.listener.backendPid()).not.toBe(pid);
    await t.service.cancelJob(t.actor, job.id);
    const items = await sub.until((xs) => xs.some((x) => x.status === 'RETIRED'));
    sub.stop();
    expect(items.filter((x) => x.previousStatus !== null).map((x) => x.status)).toEqual(['PAUSED', 'ACTIVE', 'RETIRED']);
    expect(live.logs.some((l) => l.includes('listening connection lost'))).toBe(true);
  });
});

describe('database connections lost', () => {
  it("keeps every subscription converging when the hub's pool connections are killed under it", async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    const liveSub = await subscribed(key, JOBS, { jobId: job.id });
    const replaying = collect(live.client(key), JOBS, { jobId: job.id, after: '0' });
    await replaying.until((xs) => xs.length >= 1);
    for (let round = 0; round < 3; round++) {
      await adminQuery(
        `select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid() and application_name <> 'jobgate-live'`,
        [t.name],
      );
      // The service's own pool may hand out killed connections first (one per idle client that
      // has not reported its end yet); the change is made on a retry.
      for (let tries = 0; ; tries++) {
        try {
          await (round % 2 === 0 ? t.service.pauseJob(t.actor, job.id) : t.service.resumeJob(t.actor, job.id));
          break;
        } catch (error) {
          if (!isConnectionError(error) || tries >= 10) throw error;
        }
      }
    }
    const expected = ['PAUSED', 'ACTIVE', 'PAUSED'];
    for (const sub of [liveSub, replaying]) {
      const items = await sub.until((xs) => xs.filter((x) => x.previousStatus !== null).length >= 3, 15_000, 'the three changes');
      expect(items.filter((x) => x.previousStatus !== null).map((x) => x.status)).toEqual(expected);
      sub.stop();
    }
  });
});

describe('event retention', () => {
  /** Prunes `workspaceId`'s history now, live events kept an hour, as the pruner does it (its EVENTS slice). */
  async function pruneEventsOf(workspaceId: string) {
    await pruneBounded({
      pool: t.database.pool,
      log: createLogger('warn', () => {}),
      defaults: { eventsHours: 1 },
      pauseMs: 0,
      maxBatches: 1000,
      workspaceId,
    });
  }

  it("the pruner drops a workspace's events older than the retention window and keeps the rest", async () => {
    await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') });
    await t.service.createJob(t.otherActor, {
      endpointId: (await t.service.registerEndpoint(t.otherActor, { name: 'other.target', kind: 'HANDLER', handlerName: 'x' })).id,
      kind: 'IMMEDIATE',
    });
    await t.query(`update events set created_at = now() - interval '2 hours'`);
    const ours = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') });
    const count = async (ws: string, old: boolean) =>
      (
        await t.query(`select count(*)::int as n from events where workspace_id = $1 and (created_at < now() - interval '1 hour') = $2`, [
          ws,
          old,
        ])
      ).rows[0].n as number;
    expect(await count(t.actor.workspaceId, true)).toBeGreaterThan(0);
    await pruneEventsOf(t.actor.workspaceId);
    expect(await count(t.actor.workspaceId, true)).toBe(0);
    expect(await count(t.actor.workspaceId, false)).toBeGreaterThan(0); // the newest job's events
    expect(await count(t.otherActor.workspaceId, true)).toBeGreaterThan(0); // another workspace's slice, not pruned here
    expect((await t.query(`select count(*)::int as n from events where subject_id = $1`, [ours.job.id])).rows[0].n).toBe(1);
  });

  it('refuses to replay from a cursor whose next events were pruned (CURSOR_EXPIRED), and replays from one above them', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') });
    const idOf = async (status: string) =>
      String((await t.query(`select id from events where subject_id = $1 and status = $2`, [job.id, status])).rows[0].id);
    const cursorOf = async (status: string) => cursors.seal('event', await idOf(status));
    const created = await cursorOf('ACTIVE');
    await t.service.pauseJob(t.actor, job.id);
    const paused = await cursorOf('PAUSED');
    await t.service.resumeJob(t.actor, job.id);
    // The pause ages past the window and is pruned; the resume stays.
    await t.query(`update events set created_at = now() - interval '2 hours' where id <= $1`, [cursors.open('event', paused).toString()]);
    await pruneEventsOf(t.actor.workspaceId);

    // From before the pruned pause: refused, rather than silently resuming at the resume.
    const stale = collect(live.client(key), JOBS, { jobId: job.id, after: created });
    await eventually(async () => stale.errors.length > 0, 5000, 'a refusal');
    expect(stale.errors[0]).toMatchObject({ extensions: { code: 'CURSOR_EXPIRED', oldestCursor: paused } });
    expect(stale.items).toEqual([]);
    // From the pruned event itself: everything after it is kept.
    const fresh = await subscribed(key, JOBS, { jobId: job.id, after: paused });
    const items = await fresh.until((xs) => xs.length >= 1, 5000, 'the resume');
    expect(items.map((x) => [x.previousStatus, x.status])).toEqual([['PAUSED', 'ACTIVE']]);
    fresh.stop();
    // "0" asks for everything kept, and is never refused.
    const all = await subscribed(key, JOBS, { jobId: job.id, after: '0' });
    expect((await all.until((xs) => xs.length >= 1, 5000, 'what is kept')).map((x) => x.status)).toEqual(['ACTIVE']);
    all.stop();
    // A prune landing after the stream was authorised (here: straight to the hub, past
    // authorisation) is caught by the replay's own read, in the same snapshot as the rows.
    await t.query(`update workspaces set events_pruned_through = $2 where id = $1`, [
      t.actor.workspaceId,
      cursors.open('event', paused).toString(),
    ]);
    const feed = live.hub.events({ workspaceId: t.actor.workspaceId, topic: 'JOB', jobId: job.id }, cursors.open('event', created), (id) =>
      cursors.seal('event', id),
    );
    const outcome = await feed.next().then(
      (r) => ({ delivered: r.value }),
      (e: { code?: string }) => ({ refused: e.code }),
    );
    expect(outcome).toEqual({ refused: 'CURSOR_EXPIRED' });
    // Another workspace's horizon is its own: its cursor at the same position is not refused.
    const other = await cursorsOf(t, t.otherActor.workspaceId);
    const elsewhere = collect(live.client(otherKey), JOBS, { after: other.seal('event', cursors.open('event', created)) });
    await quietPeriod(QUIET.firstAnswer);
    expect(elsewhere.errors).toEqual([]);
    elsewhere.stop();
  });
});
