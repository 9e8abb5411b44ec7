/**
 * The retention benchmark: pruning a million finished executions, and what it costs the engine.
 *
 *  - Seed: BENCH_RETENTION_ROWS (1,000,000) SUCCEEDED executions finished 40 days ago, each with
 *    one attempt, spread over 1,000 jobs, written in bulk with SQL (events off, as a restore
 *    would), then vacuumed and analysed.
 *  - Engine throughput on that database: BENCH_RETENTION_DRAIN (20,000) no-op executions drained
 *    by one worker process, first with no pruner anywhere, then with the worker's own pruner
 *    running at its default pace (batches of 1,000, a pause at least four times as long as each batch,
 *    24 times while the worker is behind its queue, as it is through a drain) from the start of the
 *    drain; BENCH_RETENTION_PAIRS (3) of each, alternated, medians compared. The drop between the
 *    two is the figure to watch (goal: at most 2 %).
 *  - Pruning rate: rows (executions and attempts) deleted per second, at the default pace (a
 *    pruner left to its loop for BENCH_RETENTION_PACED_MS, 60 s) and flat out (no pause, to the
 *    end of the pass, on what is left).
 *    The newest 100 executions of each job are kept, so 900,000 executions go of a million.
 *  - Live events: the same drain with the worker's pruner at its default pace on its EVENTS slice
 *    alone (the other slices not due), BENCH_RETENTION_EVENTS (1,500,000) events past their
 *    72-hour window seeded before each such drain, in a generation past the window (migration
 *    000062), which the pruner drops whole as the drain starts; the drop against the drain without
 *    pruning, and the events pruned per second meanwhile. Alternated with the two drains above
 *    (which have the EVENTS slice not due).
 *
 * Nothing is asserted; the database is dropped afterwards.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { migrate } from '../src/db/migrate.js';
import { pgTypes } from '../src/db/pg-types.js';
import { createJobgate } from '../src/index.js';
import { createLogger } from '../src/log.js';
import { createPruner, type PrunedBatch } from '../src/service/engine/maintenance/pruner.js';
import { keepEventPartitions } from '../src/service/retention/event-partitions.js';
import { pruneContextOf } from '../src/service/retention/pruning.js';
import type { Figure } from './run.js';
import { spawnChild } from './support/children.js';
import { openServer, type BenchDatabase, type BenchServer } from './support/postgres.js';

const env = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const ROWS = env('BENCH_RETENTION_ROWS', 1_000_000);
const JOBS = Math.max(1, Math.round(ROWS / 1000));
const PAIRS = env('BENCH_RETENTION_PAIRS', 3);
const PACED_MS = env('BENCH_RETENTION_PACED_MS', 60_000);
const DRAIN = env('BENCH_RETENTION_DRAIN', 20_000);
const EVENTS = env('BENCH_RETENTION_EVENTS', 1_500_000);
const CONCURRENCY = 50;
const say = (msg: string) => process.stderr.write(`bench retention: ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

interface Seeded {
  workspaceId: string;
  /** The endpoint of the seeded history. */
  endpointId: string;
  /** The endpoint the drains run on (same no-op handler), so their rows are found by its index. */
  drainEndpointId: string;
}

async function prepare(db: BenchDatabase): Promise<Seeded> {
  await migrate(db.url);
  const gate = await createJobgate({ databaseUrl: db.url, migrate: false, poolMax: 2, log: createLogger('warn') });
  try {
    const endpoint = await gate.client.registerEndpoint({ name: 'bench.history', kind: 'HANDLER', handlerName: 'noop' });
    const drain = await gate.client.registerEndpoint({ name: 'bench.noop', kind: 'HANDLER', handlerName: 'noop' });
    return { workspaceId: (await gate.actor()).workspaceId, endpointId: endpoint.id, drainEndpointId: drain.id };
  } finally {
    await gate.close();
  }
}

/** ROWS finished executions (and attempts) 40 days old over JOBS jobs; the slices made due. */
async function seed(c: pg.Client, s: Seeded): Promise<void> {
  const started = performance.now();
  await c.query(`set session_replication_role = replica`); // no event rows, as a bulk restore
  const { rows } = await c.query<{ id: string }>(
    `insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts, created_at)
     select $1, $2, 'IMMEDIATE', '{}', 5, now() - interval '41 days' from generate_series(1, $3::int) returning id`,
    [s.workspaceId, s.endpointId, JOBS],
  );
  const jobIds = rows.map((r) => r.id);
  const chunk = 100_000;
  for (let done = 0; done < ROWS; done += chunk) {
    const n = Math.min(chunk, ROWS - done);
    await c.query(
      `with made as (
         insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, status, attempt_count, max_attempts, run_after, finished_at, created_at, input, gated, job_held)
         select $1, ($3::uuid[])[1 + (i % $4::int)], $2, t, 'SUCCEEDED', 1, 5, t, t + interval '1 second', t, '{}', false, false
         from generate_series($5::int, $5::int + $6::int - 1) i, lateral (select now() - interval '40 days' - make_interval(secs => ($7::int - i) / 1000.0) as t) x
         returning id, workspace_id, created_at, finished_at
       )
       insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, started_at, finished_at, outcome, duration_ms)
       select workspace_id, id, 1, 1, 'seed', created_at, finished_at, 'SUCCEEDED', 1000 from made`,
      [s.workspaceId, s.endpointId, jobIds, JOBS, done, n, ROWS],
    );
  }
  await c.query(`set session_replication_role = origin`);
  await c.query(`vacuum analyze executions`);
  await c.query(`vacuum analyze attempts`);
  await c.query(`update retention_slices set next_due_at = now(), owner = null, lease_until = null`);
  await c.query('checkpoint').catch(() => {});
  say(`seeded ${ROWS} executions with attempts in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

/**
 * EVENTS live events 100 hours old (past the 72-hour window) in the seeded workspace, as the
 * drains' would be: written into the current generation, which is then ended (a turn after its
 * span, the spare attached as long) and made to look ended 73 hours ago, so the worker's pruner drops it whole at the start of
 * the drain that follows.
 */
async function seedEvents(c: pg.Client, db: BenchDatabase, s: Seeded): Promise<void> {
  await c.query(
    `insert into events (workspace_id, topic, subject_id, status, previous_status, created_at)
     select $1, 'EXECUTION', gen_random_uuid(), 'SUCCEEDED', 'RUNNING', now() - interval '100 hours' + i * interval '1 ms'
     from generate_series(1, $2::int) i`,
    [s.workspaceId, EVENTS],
  );
  await c.query(`update event_generations set started_at = now() - interval '25 hours' where started_at is not null and ended_at is null`);
  await c.query(`update event_generations set attached_at = now() - interval '25 hours' where started_at is null`);
  const pool = new pg.Pool({ connectionString: db.url, max: 1, types: pgTypes });
  try {
    await keepEventPartitions(pruneContextOf({ pool, log: createLogger('warn') }, 'bench', { cut: undefined }));
  } finally {
    await pool.end();
  }
  await c.query(`update event_generations set ended_at = now() - interval '73 hours' where ended_at is not null`);
  await c.query(`vacuum analyze events`);
  // Its WAL written out now, not by a checkpoint during the drain that follows.
  await c.query('checkpoint').catch(() => {});
}

/**
 * Drains DRAIN no-op executions with one worker process, with its pruner or not (the slices due
 * are the caller's); executions/s from its attempts.
 */
async function drain(
  c: pg.Client,
  db: BenchDatabase,
  s: Seeded,
  prune: boolean,
  what = prune ? 'with pruning' : 'without pruning',
): Promise<number> {
  const ep = s.drainEndpointId;
  await c.query(`delete from attempts a using executions e where e.endpoint_id = $1 and a.execution_id = e.id`, [ep]);
  await c.query(`delete from executions where endpoint_id = $1`, [ep]);
  await c.query(`delete from jobs where endpoint_id = $1`, [ep]);
  await c.query(
    `insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts) select $1, $2, 'IMMEDIATE', '{}', 5 from generate_series(1, $3::int)`,
    [s.workspaceId, ep, DRAIN],
  );
  await c.query(
    `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
     select workspace_id, id, endpoint_id, now(), now(), 5 from jobs where endpoint_id = $1`,
    [ep],
  );
  // As a long-running database would have them: statistics of every table (jobs grew too).
  await c.query(`analyze`);
  const child = spawnChild('bench/workers/jobgate.ts', {
    DATABASE_URL: db.url,
    WORKER_ID: 'bench-1',
    CONCURRENCY: String(CONCURRENCY),
    PRUNE: prune ? '1' : '0',
  });
  try {
    await child.line('ready');
    child.send('go');
    for (;;) {
      // Through the partial indexes of live executions: the poll must not load the server it measures.
      const { rows } = await c.query(
        `select exists (select 1 from executions where status = 'PENDING' and endpoint_id = $1)
             or exists (select 1 from executions where status = 'RUNNING' and endpoint_id = $1) as live`,
        [ep],
      );
      if (!rows[0].live) break;
      await sleep(50);
    }
    const { rows } = await c.query(
      `select extract(epoch from max(a.finished_at) - min(a.started_at)) * 1000 as ms, count(*)::int as n
       from attempts a join executions e on e.id = a.execution_id where e.endpoint_id = $1`,
      [ep],
    );
    const rate = (rows[0].n / rows[0].ms) * 1000;
    say(`drain ${what}: ${rows[0].n} executions in ${Math.round(rows[0].ms)} ms`);
    return rate;
  } finally {
    await child.stop();
  }
}

/** Makes the EVENTS slice due and the others not (`events`), or the other way round. */
async function due(c: pg.Client, events: boolean): Promise<void> {
  await c.query(
    `update retention_slices set next_due_at = case when (kind = 'EVENTS') = $1 then now() else now() + interval '1 day' end,
       owner = null, lease_until = null`,
    [events],
  );
}

async function eventsPrunedSoFar(c: pg.Client): Promise<number> {
  return Number(
    (await c.query(`select coalesce(sum(pruned_total), 0)::bigint as n from retention_slices where kind = 'EVENTS'`)).rows[0].n,
  );
}

/** The default pace, for `ms`: rows pruned per second by a pruner left to its loop. */
async function prunePaced(db: BenchDatabase, ms: number): Promise<number> {
  const pool = new pg.Pool({ connectionString: db.url, max: 2, types: pgTypes });
  let rows = 0;
  const pruner = createPruner({
    pool,
    log: createLogger('warn'),
    onPruned: (b) => void (rows += Object.values(b.rows).reduce((x, y) => x + y, 0)),
  });
  try {
    const started = performance.now();
    pruner.start();
    await sleep(ms);
    await pruner.stop();
    return rows / ((performance.now() - started) / 1000);
  } finally {
    await pool.end();
  }
}

async function pruneAll(db: BenchDatabase, pauseMs: number): Promise<{ rows: number; seconds: number; batches: number }> {
  const pool = new pg.Pool({ connectionString: db.url, max: 2, types: pgTypes });
  let batches = 0;
  const pruner = createPruner({
    pool,
    log: createLogger('warn'),
    pauseMs,
    pauseFactor: pauseMs === 0 ? 0 : undefined,
    onPruned: (_b: PrunedBatch) => void batches++,
  });
  try {
    const started = performance.now();
    const rows = await pruner.runOnce();
    return { rows, seconds: (performance.now() - started) / 1000, batches };
  } finally {
    await pool.end();
  }
}

export async function run(): Promise<Figure[]> {
  const server: BenchServer = await openServer();
  const figures: Figure[] = [];
  const figure = (bench: string, value: number, unit: string) => figures.push({ bench, system: 'jobgate', value, unit });
  const [load] = os.loadavg();
  if (load! > os.availableParallelism() / 4)
    say(`load average ${load!.toFixed(2)} on ${os.availableParallelism()} cores: other work is running, figures will be noisy`);
  const db = await server.createDatabase('jobgate_bench_retention');
  try {
    const s = await prepare(db);
    await withClient(db.url, async (c) => {
      await seed(c, s);
      // Drains without and with the pruner, alternated so that other load on the machine falls on
      // both alike; the medians are compared. The worker's pruner starts with each drain.
      const before = (await c.query(`select coalesce(sum(pruned_total), 0)::bigint as n from retention_slices where kind <> 'EVENTS'`))
        .rows[0].n;
      const rates: { without: number[]; beside: number[]; events: number[] } = { without: [], beside: [], events: [] };
      const eventsPruned = { events: 0, seconds: 0 };
      for (let i = 0; i < PAIRS; i++) {
        rates.without.push(await drain(c, db, s, false));
        await due(c, false);
        rates.beside.push(await drain(c, db, s, true));
        await seedEvents(c, db, s);
        await due(c, true);
        const before = await eventsPrunedSoFar(c);
        const rate = await drain(c, db, s, true, 'beside event pruning');
        rates.events.push(rate);
        eventsPruned.events += (await eventsPrunedSoFar(c)) - before;
        eventsPruned.seconds += DRAIN / rate;
      }
      const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      const without = median(rates.without);
      const beside = median(rates.beside);
      figure('retention.engine-throughput.without-pruning', without, 'executions/s');
      figure('retention.engine-throughput.with-pruning', beside, 'executions/s');
      figure('retention.engine-throughput.drop', (1 - beside / without) * 100, '%');
      const besideEvents = median(rates.events);
      figure('retention.engine-throughput.with-event-pruning', besideEvents, 'executions/s');
      figure('retention.engine-throughput.event-pruning-drop', (1 - besideEvents / without) * 100, '%');
      figure('retention.event-prune-rate.beside-drain', eventsPruned.events / eventsPruned.seconds, 'events/s');
      say(`${eventsPruned.events} events pruned during the drains beside event pruning`);
      await c.query(`delete from events where workspace_id = $1 and created_at < now() - interval '72 hours'`, [s.workspaceId]);
      const during =
        Number(
          (await c.query(`select coalesce(sum(pruned_total), 0)::bigint as n from retention_slices where kind <> 'EVENTS'`)).rows[0].n,
        ) - Number(before);
      say(`${during} rows pruned during the drains with pruning`);
      await c.query(`update retention_slices set next_due_at = now(), owner = null, lease_until = null`);
      const paced = await prunePaced(db, PACED_MS);
      figure('retention.prune-rate.default-pace', paced, 'rows/s');
      // Flat out, on what is left of the million.
      await c.query(`update retention_slices set next_due_at = now(), owner = null, lease_until = null`);
      const flat = await pruneAll(db, 0);
      say(`flat out: ${flat.rows} rows in ${flat.seconds.toFixed(1)} s, ${flat.batches} batches`);
      figure('retention.prune-rate.flat-out', flat.rows / flat.seconds, 'rows/s');
      figure('retention.prune-batch.flat-out', (flat.seconds * 1000) / Math.max(1, flat.batches), 'ms');
      const left = (await c.query(`select count(*)::int as n from executions where endpoint_id = $1`, [s.endpointId])).rows[0].n;
      say(`${left} seeded executions left (the newest ${JOBS > 0 ? Math.round(left / JOBS) : 0} of each job)`);
    });
  } finally {
    await db.drop();
    await server.close();
  }
  return figures;
}
