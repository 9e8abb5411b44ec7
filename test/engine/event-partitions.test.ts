/**
 * Live events kept by generation (migration 000062, src/service/retention/event-partitions.ts):
 * a generation written for its span gives way to a new one; one past the longest window in force
 * goes whole, with each workspace's replay horizon moved past its events and the removal audited;
 * writers never wait for either; a detach cut short is finished at the next turn; and the EVENTS
 * slice leaves to the partitions what they will drop.
 */
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LOCK_KEY } from '../../src/db/advisory-locks.js';
import { matchingEvents } from '../../src/db/statements/events.js';
import { createLogger } from '../../src/log.js';
import { createPruner, pruneBounded, type PrunedBatch } from '../../src/service/engine/maintenance/pruner.js';
import { keepEventPartitions } from '../../src/service/retention/event-partitions.js';
import { pruneContextOf } from '../../src/service/retention/pruning.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/eventually.js';

let t: TestDb;
let reported: PrunedBatch[];
const log = createLogger('warn', () => {});
const clients: pg.Client[] = [];

beforeEach(async () => {
  t = await createTestDb();
  // No events but each test's own (a new database holds its built-in jobs' creation).
  await t.query(`delete from events`);
  reported = [];
});
afterEach(async () => {
  while (clients.length)
    await clients
      .pop()!
      .end()
      .catch(() => {});
  await t?.close();
});

/**
 * One turn of keeping the partitions, with the installation's events window of 48 hours (a span of
 * 16). `batchSize` 1 counts a generation 100 ids at a time.
 */
function turn(detachWaitMs = 30_000, { batchSize = 1000, stopping = (): boolean => false } = {}) {
  const ctx = pruneContextOf(
    { pool: t.database.pool, log, defaults: { eventsHours: 48 }, detachWaitMs, batchSize, pauseMs: 0, onPruned: (b) => reported.push(b) },
    'test',
    { cut: undefined },
  );
  return keepEventPartitions(ctx, stopping);
}

/** A connection of its own (an open transaction, a held lock). */
async function connection(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: t.url });
  await c.connect();
  clients.push(c);
  return c;
}

const INSERT = `insert into events (workspace_id, topic, subject_id, status, created_at)
  select $1, 'JOB', gen_random_uuid(), 'ACTIVE', now() - make_interval(hours => $3) from generate_series(1, $2::int)
  returning id, tableoid::regclass::text as partition`;

async function events(workspaceId: string, n = 1, ageHours = 0) {
  return (await t.query<{ id: string; partition: string }>(INSERT, [workspaceId, n, ageHours])).rows;
}

/**
 * Makes the current generation look `hours` old, and the spare attached as long ago (unless
 * `spare` is false), so the next turn starts a new one once that is past the span.
 */
async function ageCurrent(hours: number, { spare = true } = {}) {
  await t.query(
    `update event_generations set started_at = now() - make_interval(hours => $1) where started_at is not null and ended_at is null`,
    [hours],
  );
  if (spare)
    await t.query(`update event_generations set attached_at = now() - make_interval(hours => $1) where started_at is null`, [hours]);
}

/** Makes generation `gen` look ended `hours` ago. */
async function endedAgo(gen: number, hours: number) {
  await t.query(`update event_generations set ended_at = now() - make_interval(hours => $2) where gen = $1`, [gen, hours]);
}

const generations = async () =>
  (
    await t.query<{ gen: number; state: string }>(
      `select gen, case when started_at is null then 'spare' when ended_at is null then 'current' else 'ended' end as state
       from event_generations order by gen`,
    )
  ).rows;
const partitions = async () =>
  (
    await t.query<{ name: string }>(
      `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
       where i.inhparent = 'events'::regclass order by 1`,
    )
  ).rows.map((r) => r.name);
const horizon = async (workspaceId: string) =>
  Number((await t.query(`select events_pruned_through as h from workspaces where id = $1`, [workspaceId])).rows[0].h);

describe('generations', () => {
  it('starts a new one once the current one has been written for its span, and writers move to it', async () => {
    const [first] = await events(t.actor.workspaceId);
    expect(first!.partition).toBe('events_g0');
    // The next one's partition is attached ahead.
    expect(await generations()).toEqual([
      { gen: 0, state: 'current' },
      { gen: 1, state: 'spare' },
    ]);
    await ageCurrent(15);
    expect(await turn()).toEqual({ rotated: false, dropped: [], held: true, waiting: false });
    // Not before the spare has been attached for a span either.
    await ageCurrent(17, { spare: false });
    expect(await turn()).toEqual({ rotated: false, dropped: [], held: true, waiting: false });
    await ageCurrent(17);
    expect(await turn()).toEqual({ rotated: true, dropped: [], held: true, waiting: false });
    expect(await generations()).toEqual([
      { gen: 0, state: 'ended' },
      { gen: 1, state: 'current' },
      { gen: 2, state: 'spare' },
    ]);
    expect(await partitions()).toEqual(['events_g0', 'events_g1', 'events_g2']);

    // The engine's own writers (the statement triggers) stamp the new generation.
    const endpoint = await t.service.registerEndpoint(t.actor, { name: 'gen.target', kind: 'HANDLER', handlerName: 'x' });
    const { job } = await t.service.createJob(t.actor, {
      endpointId: endpoint.id,
      kind: 'DELAYED',
      runAt: new Date('2999-01-01T00:00:00Z'),
    });
    const written = await t.query(`select tableoid::regclass::text as partition, id, topic from events where job_id = $1`, [job.id]);
    expect(written.rows.length).toBeGreaterThan(0);
    expect(new Set(written.rows.map((r) => r.partition))).toEqual(new Set(['events_g1']));
    // Ids go on rising across generations, and a replay reads both.
    expect(Math.min(...written.rows.map((r) => Number(r.id)))).toBeGreaterThan(Number(first!.id));
    const { rows } = await matchingEvents(t.database.pool, { workspaceId: t.actor.workspaceId, topic: 'JOB' }, 0n, 10n ** 12n, 100);
    const ids = [first!.id, ...written.rows.filter((r) => r.topic === 'JOB').map((r) => r.id)].map(Number);
    expect(rows.map((r) => Number(r.id))).toEqual(ids);
  });

  it('a serverless pass keeps them too', async () => {
    await ageCurrent(17);
    await pruneBounded({ pool: t.database.pool, log, defaults: { eventsHours: 48 }, maxBatches: 1 });
    expect((await generations()).find((g) => g.state === 'current')?.gen).toBe(1);
  });

  it('drops one whose end is past the longest window: horizons move per workspace, the removal is audited, replays are told', async () => {
    const [ws, other] = [t.actor.workspaceId, t.otherActor.workspaceId];
    const gone = await events(ws, 3);
    await ageCurrent(17);
    await turn();
    const kept = [...(await events(ws, 2)), ...(await events(other, 2))];
    expect(new Set(kept.map((e) => e.partition))).toEqual(new Set(['events_g1']));
    const since = (await t.query(`select coalesce(max(id), 0) as id from audit_log`)).rows[0].id;
    const slice = async () =>
      (await t.query(`select pruned_total from retention_slices where workspace_id = $1 and kind = 'EVENTS'`, [ws])).rows[0].pruned_total;
    const before = Number(await slice());

    await endedAgo(0, 47);
    expect((await turn()).dropped).toEqual([]);
    await endedAgo(0, 49);
    expect(await turn()).toEqual({ rotated: false, dropped: [0], held: true, waiting: false });

    expect(await partitions()).toEqual(['events_g1', 'events_g2']);
    expect((await t.query(`select to_regclass('events_g0') as t`)).rows[0].t).toBeNull();
    expect(await generations()).toEqual([
      { gen: 1, state: 'current' },
      { gen: 2, state: 'spare' },
    ]);
    const left = (await t.query(`select id from events order by id`)).rows.map((r) => Number(r.id));
    expect(left).toEqual(kept.map((e) => Number(e.id)).sort((a, b) => a - b));
    // The horizon moves to the workspace's newest event gone; a workspace with none there keeps its own.
    expect(await horizon(ws)).toBe(Math.max(...gone.map((e) => Number(e.id))));
    expect(await horizon(other)).toBe(0);
    const audited = await t.query(`select workspace_id, input from audit_log where action = 'retention.prune' and id > $1`, [since]);
    expect(audited.rows).toEqual([{ workspace_id: ws, input: { kind: 'EVENTS', events: 3, generation: 0 } }]);
    expect(Number(await slice())).toBe(before + 3);
    expect(reported).toEqual([{ workspaceId: ws, kind: 'EVENTS', rows: expect.objectContaining({ events: 3, executions: 0 }) }]);
    // A replay from before the horizon learns that events it would skip are gone (CURSOR_EXPIRED).
    const replay = await matchingEvents(t.database.pool, { workspaceId: ws, topic: 'JOB' }, 0n, 10n ** 12n, 100);
    expect(replay.prunedThrough).toBe(BigInt(Math.max(...gone.map((e) => Number(e.id)))));
    expect(replay.rows.map((r) => Number(r.id))).toEqual(kept.slice(0, 2).map((e) => Number(e.id)));
  });

  it('attaches the partition of a generation the sequence is at but has none (a restore that moved it past them)', async () => {
    await t.query(`select setval('events_generation', 5)`);
    await expect(events(t.actor.workspaceId)).rejects.toThrow(/no partition/);
    await turn();
    expect((await events(t.actor.workspaceId))[0]!.partition).toBe('events_g5');
    expect(await partitions()).toEqual(['events_g0', 'events_g1', 'events_g5', 'events_g6']);
  });

  it('counts a generation a chunk of ids at a time; a turn stopped while counting moves nothing, and the next goes on', async () => {
    const [ws, other] = [t.actor.workspaceId, t.otherActor.workspaceId];
    const mine: number[] = [];
    const theirs: number[] = [];
    for (let i = 0; i < 5; i++) {
      mine.push(...(await events(ws, 47)).map((e) => Number(e.id)));
      theirs.push(...(await events(other, 13)).map((e) => Number(e.id)));
    }
    await ageCurrent(17);
    await turn();
    await endedAgo(0, 49);
    // Stopped after the first chunk of 100 ids (of 300): no horizon, no audit, still there.
    let chunks = 0;
    const stopped = await turn(30_000, { batchSize: 1, stopping: () => chunks++ > 0 });
    expect(stopped).toEqual({ rotated: false, dropped: [], held: true, waiting: false });
    expect(await partitions()).toEqual(['events_g0', 'events_g1', 'events_g2']);
    expect(await horizon(ws)).toBe(0);
    expect(reported).toEqual([]);
    expect((await t.query(`select counted_through is not null as saved from event_generations where gen = 0`)).rows).toEqual([
      { saved: true },
    ]);

    expect((await turn(30_000, { batchSize: 1 })).dropped).toEqual([0]);
    expect(await horizon(ws)).toBe(Math.max(...mine));
    expect(await horizon(other)).toBe(Math.max(...theirs));
    const audits = await t.query(`select workspace_id, input from audit_log where action = 'retention.prune' order by workspace_id`);
    expect(audits.rows).toEqual(
      [
        { workspace_id: ws, input: { kind: 'EVENTS', events: 235, generation: 0 } },
        { workspace_id: other, input: { kind: 'EVENTS', events: 65, generation: 0 } },
      ].sort((a, b) => a.workspace_id.localeCompare(b.workspace_id)),
    );
  });

  it("is kept while any workspace's own window still covers it", async () => {
    await events(t.actor.workspaceId, 2);
    await ageCurrent(17);
    await turn();
    await t.query(`insert into workspace_retention (workspace_id, events_hours) values ($1, 100)`, [t.otherActor.workspaceId]);
    await endedAgo(0, 60);
    expect((await turn()).dropped).toEqual([]);
    expect(await partitions()).toEqual(['events_g0', 'events_g1', 'events_g2']);
    await endedAgo(0, 101);
    expect((await turn()).dropped).toEqual([0]);
  });

  it('never makes writers wait: a new generation attaches beside an open writer, and a detach waits for it while others write', async () => {
    const open = await connection();
    await open.query('begin');
    await open.query(INSERT, [t.actor.workspaceId, 1, 0]);
    await ageCurrent(17);
    // Attached and moved to while that transaction holds its insert.
    expect((await turn()).rotated).toBe(true);
    await open.query('commit');

    await open.query('begin');
    await open.query(INSERT, [t.actor.workspaceId, 1, 0]);
    await endedAgo(0, 49);
    const dropping = turn();
    const waiting = () =>
      t.query(
        `select 1 from pg_stat_activity where query like 'alter table events detach partition events_g0 concurrently%' and wait_event_type = 'Lock'`,
      );
    await eventually(async () => (await waiting()).rowCount === 1, {}, 'the detach to wait for the open transaction');
    // Other writers go on meanwhile, into the current generation.
    expect((await events(t.otherActor.workspaceId))[0]!.partition).toBe('events_g1');
    expect((await waiting()).rowCount).toBe(1);
    await open.query('commit');
    expect((await dropping).dropped).toEqual([0]);
    expect(await partitions()).toEqual(['events_g1', 'events_g2']);
  });

  it('lets a statement that began writing events before a new generation began write more after it', async () => {
    const open = await connection();
    // One statement writing two events, a second apart: the second row reads the generation after
    // the turn below has moved it, with the partitions the statement knew of when it began.
    const writing = open.query(
      `insert into events (workspace_id, topic, subject_id, status)
       select $1, 'JOB', gen_random_uuid(), 'ACTIVE' from generate_series(1, 2) g
       where g = 1 or pg_sleep(1) is not null
       returning tableoid::regclass::text as partition`,
      [t.actor.workspaceId],
    );
    await eventually(
      async () =>
        (await t.query(`select 1 from pg_stat_activity where wait_event = 'PgSleep' and query like 'insert into events%'`)).rowCount === 1,
      {},
      'the statement to write its first event',
    );
    await ageCurrent(17);
    expect((await turn()).rotated).toBe(true);
    expect((await writing).rows.map((r) => r.partition)).toEqual(['events_g0', 'events_g1']);
  });

  it('finishes at the next turn a detach cut short by its wait, auditing once', async () => {
    await events(t.actor.workspaceId, 2);
    await ageCurrent(17);
    await turn();
    const open = await connection();
    await open.query('begin');
    await open.query(INSERT, [t.actor.workspaceId, 1, 0]);
    await endedAgo(0, 49);
    expect(await turn(200)).toEqual({ rotated: false, dropped: [], held: true, waiting: true });
    const pending = await t.query(`select inhdetachpending as p from pg_inherits where inhrelid = 'events_g0'::regclass`);
    expect(pending.rows).toEqual([{ p: true }]);
    // Its events are no longer read; the horizon already says so.
    expect((await t.query(`select count(*)::int as n from events where gen = 0`)).rows[0].n).toBe(0);
    // While it waits, a turn does nothing after it.
    expect(await turn(200)).toEqual({ rotated: false, dropped: [], held: true, waiting: true });
    await open.query('commit');
    expect(await turn()).toEqual({ rotated: false, dropped: [0], held: true, waiting: false });
    expect(await partitions()).toEqual(['events_g1', 'events_g2']);
    expect((await t.query(`select to_regclass('events_g0') as t`)).rows[0].t).toBeNull();
    const audits = await t.query(`select input from audit_log where action = 'retention.prune' and input->>'kind' = 'EVENTS'`);
    expect(audits.rows).toEqual([{ input: { kind: 'EVENTS', events: 2, generation: 0 } }]);
  });

  it('is kept by one process at a time: a turn while another holds them does nothing', async () => {
    const holder = await connection();
    await holder.query('select pg_advisory_lock($1)', [LOCK_KEY.eventPartitions]);
    await ageCurrent(17);
    expect(await turn()).toEqual({ rotated: false, dropped: [], held: false, waiting: false });
    await holder.query('select pg_advisory_unlock($1)', [LOCK_KEY.eventPartitions]);
    expect((await turn()).rotated).toBe(true);
  });
});

describe('the EVENTS slice beside the partitions', () => {
  async function prunePass(): Promise<number> {
    await t.query(`update retention_slices set next_due_at = now(), owner = null, lease_until = null`);
    const pruner = createPruner({
      pool: t.database.pool,
      log,
      defaults: { eventsHours: 48 },
      pauseMs: 0,
      onPruned: (b) => reported.push(b),
    });
    await pruner.runOnce();
    return reported.filter((b) => b.kind === 'EVENTS').reduce((n, b) => n + b.rows.events, 0);
  }
  const count = async (ws: string) => (await t.query(`select count(*)::int as n from events where workspace_id = $1`, [ws])).rows[0].n;

  it('leaves events past the window to their partition, unless the workspace keeps a shorter window', async () => {
    const [ws, other] = [t.actor.workspaceId, t.otherActor.workspaceId];
    // 60 hours old: past the 48-hour window, within two spans (32 hours) more.
    await events(ws, 5, 60);
    await events(other, 5, 60);
    await t.query(`insert into workspace_retention (workspace_id, events_hours) values ($1, 24)`, [other]);
    expect(await prunePass()).toBe(5);
    expect(await count(ws)).toBe(5);
    expect(await count(other)).toBe(0);
    // Past two spans more (a turn that stalled), the slice deletes them itself.
    await events(ws, 4, 81);
    reported = [];
    expect(await prunePass()).toBe(4);
    expect(await count(ws)).toBe(5);
  });

  it('on demand, prunes to the window at once', async () => {
    // The service's window is the default 72 hours: 80 hours old is past it, within two spans (48 hours) more.
    await events(t.actor.workspaceId, 5, 80);
    const pruner = createPruner({ pool: t.database.pool, log, pauseMs: 0, onPruned: (b) => reported.push(b) });
    await t.query(`update retention_slices set next_due_at = now(), owner = null, lease_until = null`);
    await pruner.runOnce();
    expect(await count(t.actor.workspaceId)).toBe(5);
    const res = await t.service.pruneHistory(t.actor, {});
    expect(res.removed.events).toBe(5);
    expect(await count(t.actor.workspaceId)).toBe(0);
  });
});
