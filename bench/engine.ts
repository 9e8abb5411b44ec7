/**
 * The engine benchmark: jobgate's execution engine against graphile-worker 0.17 on the same
 * Postgres server, with no-op work, so what is measured is the queue itself.
 *
 *  - Throughput: 20,000 executions (jobs) inserted in bulk with SQL, then drained by one and by
 *    two worker processes. jobgate's window is read from its attempts table, first attempt
 *    started to last attempt finished (both on the database clock). graphile-worker deletes
 *    finished jobs, so its window runs from its first job starting (reported by the worker
 *    processes) to the first poll, every 10 ms, that finds its jobs table empty (this errs
 *    against graphile-worker by at most one poll interval).
 *  - CPU per execution during each drain, from /proc: the database server's backends serving the
 *    benchmark database, and the worker processes (support/cpu.ts). Both are counted from "go" to
 *    the drain's end, so they include each worker's start; they are printed only when the server
 *    runs on this host.
 *  - WAL bytes per execution during each drain: the server's WAL position before "go" and after the
 *    drain's end (the whole server's, so exact only when nothing else writes; full-page images
 *    after the last checkpoint included, as in production).
 *  - Latency: enqueue to handler start, 300 sequential single jobs with an idle in-process
 *    worker (after 20 unmeasured warm-up jobs), on one clock: `performance.now()` before the
 *    enqueue call and inside the handler. jobgate enqueues through the service's `createJob`
 *    (one transaction: endpoint lookup, job and execution rows), graphile-worker through
 *    WorkerUtils' `addJob`. `engine.latency.enqueue-call.p50` is how long that call itself took.
 *  - The same drain with every flow-control gate configured (priorities, a per-key limit over 100
 *    keys, a rate limit), none of them binding: what the gates cost (`gated`), and its ratio to
 *    the plain drain.
 *  - createJob of a DELAYED job beside idle workers: the call's p50 and p99, 300 sequential jobs
 *    due in an hour, with no worker running and with two idle worker processes (which a hint of
 *    work due later must not make claim: `engine.enqueue-delayed`).
 *  - Ratios jobgate ÷ graphile-worker, for both graphile-worker configurations (see
 *    support/graphile.ts): throughput above 1 and latency below 1 favour jobgate.
 *
 * Every measurement runs on a fresh database (jobgate_bench_<random>, graphile_bench_<random>),
 * dropped afterwards; worker processes are killed whatever happens. Nothing is asserted.
 *
 * Settings, the same for both systems: CONCURRENCY attempts at once per worker process; jobgate
 * claims up to BATCH_SIZE executions per statement (100 unless set: what finds no slot waits in
 * the worker, as in graphile-worker's fast configuration, whose local queue holds 100); pools of 10
 * connections.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { makeWorkerUtils, run as runGraphile, runMigrations } from 'graphile-worker';
import { migrate } from '../src/db/migrate.js';
import { createJobgate } from '../src/index.js';
import { createLogger } from '../src/log.js';
import type { Figure } from './run.js';
import { spawnChild, type Child } from './support/children.js';
import { backendPids, measureCpu, type CpuSplit } from './support/cpu.js';
import { ADD_NOOP_JOBS, graphileLogger, graphilePreset, type GraphileConfigName } from './support/graphile.js';
import { openServer, type BenchDatabase, type BenchServer } from './support/postgres.js';

const env = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const EXECUTIONS = env('BENCH_ENGINE_EXECUTIONS', 20_000);
const LATENCY_RUNS = env('BENCH_ENGINE_LATENCY_RUNS', 300);
const WARMUP_RUNS = 20;
const CONCURRENCY = env('BENCH_ENGINE_CONCURRENCY', 50);
const BATCH_SIZE = env('BENCH_ENGINE_BATCH_SIZE', 100);
const PROCESSES = [1, 2];
/** Worker processes started, with nothing due, beside createJob of work due later. */
const IDLE_WORKERS = 2;
const DRAIN_TIMEOUT_MS = env('BENCH_ENGINE_TIMEOUT_MS', 180_000);

const ENDPOINT = 'bench.noop';
const SYSTEMS = { jobgate: 'jobgate', default: 'graphile-worker', fast: 'graphile-worker-fast' } as const;

const say = (msg: string) => process.stderr.write(`bench engine: ${msg}\n`);
const now = () => performance.timeOrigin + performance.now();
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

/** Starts the timed part from a quiet server: no checkpoint due mid-run. */
async function settle(c: pg.Client) {
  await c.query('analyze');
  await c.query('checkpoint').catch(() => {}); // needs superuser; harmless without
}

async function withDatabase<T>(server: BenchServer, prefix: string, fn: (db: BenchDatabase) => Promise<T>): Promise<T> {
  const db = await server.createDatabase(prefix);
  try {
    return await fn(db);
  } finally {
    await db.drop();
  }
}

/** A migrated jobgate database with the HANDLER endpoint `bench.noop` (handler `noop`). */
async function prepareJobgate(db: BenchDatabase): Promise<{ workspaceId: string; endpointId: string }> {
  await migrate(db.url);
  const gate = await createJobgate({ databaseUrl: db.url, migrate: false, poolMax: 2, log: createLogger('warn') });
  try {
    const endpoint = await gate.client.registerEndpoint({ name: ENDPOINT, kind: 'HANDLER', handlerName: 'noop' });
    return { workspaceId: (await gate.actor()).workspaceId, endpointId: endpoint.id };
  } finally {
    await gate.close();
  }
}

async function startChildren(n: number, script: string, envFor: (i: number) => Record<string, string>): Promise<Child[]> {
  const children = Array.from({ length: n }, (_, i) => spawnChild(script, envFor(i)));
  await Promise.all(children.map((c) => c.line('ready')));
  return children;
}

/** Executions per second, and the CPU each execution cost the database server and the workers. */
export interface Throughput {
  rate: number;
  cpu: CpuSplit | undefined;
  /** WAL written by the whole server during the drain, per execution (bytes): exact only on a server doing nothing else. */
  walBytes: number;
}

const walAt = async (c: pg.Client): Promise<string> => (await c.query('select pg_current_wal_lsn()::text as lsn')).rows[0].lsn;
const walSince = async (c: pg.Client, from: string): Promise<number> =>
  Number((await c.query('select pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8 as bytes', [from])).rows[0].bytes);

/**
 * Finished history beside the drain: `executions` SUCCEEDED executions of HISTORY_JOBS one-off
 * jobs of another endpoint, each with its attempt, finished over the last 30 days (inside the
 * default retention window), as a queue that has run for a month keeps them. Their live events are
 * not seeded (the reaper keeps three days of them). Seeded in SQL with the session's triggers and
 * foreign-key checks off, then a VACUUM ANALYZE. The ids are time-ordered, as the tables make them
 * since migration 000058, or with `randomIds` random (UUID version 4), as a database upgraded past
 * that migration holds its older history.
 */
const HISTORY_JOBS = 100_000;
export async function seedHistory(c: pg.Client, workspaceId: string, executions: number, randomIds = false): Promise<void> {
  const t0 = performance.now();
  await c.query(`set session_replication_role = replica`);
  const endpoint = (
    await c.query(
      `insert into endpoints (workspace_id, name, kind, handler_name) values ($1, 'bench.history', 'HANDLER', 'noop') returning id`,
      [workspaceId],
    )
  ).rows[0].id as string;
  const jobs = Math.min(HISTORY_JOBS, executions);
  await c.query(
    `insert into jobs (id, workspace_id, endpoint_id, kind, input, max_attempts, created_at, updated_at)
     select case when $4 then gen_random_uuid() else jobgate_uuid_v7() end, $1, $2, 'IMMEDIATE', '{}', 5,
            now() - interval '30 days' + g * interval '1 second', now() - interval '30 days' + g * interval '1 second'
     from generate_series(1, $3::int) g`,
    [workspaceId, endpoint, jobs, randomIds],
  );
  // In slices of a million, so no statement holds a 10-million-row sort or hash.
  const span = (30 * 86_400) / executions;
  for (let from = 0; from < executions; from += 1_000_000) {
    const to = Math.min(executions, from + 1_000_000);
    await c.query(
      `with j as (select id, row_number() over (order by id) - 1 as n from jobs where endpoint_id = $2),
       x as (
         insert into executions (id, workspace_id, job_id, endpoint_id, scheduled_for, run_after, status, attempt_count, max_attempts,
                                 lease_epoch, attempt_started_at, finished_at, input, created_at, updated_at, gated, job_held)
         select case when $7 then gen_random_uuid() else jobgate_uuid_v7() end, $1, j.id, $2, t.ts, t.ts, 'SUCCEEDED', 1, 5, 1, t.ts, t.ts + interval '5 ms', '{}'::jsonb, t.ts, t.ts + interval '5 ms', false, false
         from generate_series($3::int, $4::int - 1) g
         join j on j.n = g % $5
         cross join lateral (select now() - interval '30 days' + g * make_interval(secs => $6) as ts) t
         returning id, attempt_started_at, finished_at)
       insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, started_at, finished_at, outcome, duration_ms)
       select $1, x.id, 1, 1, 'bench-history', x.attempt_started_at, x.finished_at, 'SUCCEEDED', 5 from x`,
      [workspaceId, endpoint, from, to, jobs, span, randomIds],
    );
  }
  await c.query(`reset session_replication_role`);
  await c.query(`vacuum analyze`);
  say(
    `seeded ${executions} executions of history${randomIds ? ' with random ids' : ''} in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
}

/**
 * The drain with every flow-control gate configured (`gated`): the endpoint has a per-key limit
 * and a rate limit, and each job a priority (0 to 3) and one of GATED_KEYS concurrency keys. The
 * limits are set high enough never to hold anything back, so what is measured is what the gates
 * cost the claim: its limited path (the endpoint's advisory lock, the bucket, the rotation).
 */
const GATED_KEYS = 100;

export async function jobgateThroughput(
  server: BenchServer,
  processes: number,
  gated = false,
  history: { executions: number; randomIds?: boolean } = { executions: 0 },
): Promise<Throughput> {
  return withDatabase(server, 'jobgate_bench', async (db) => {
    const { workspaceId, endpointId } = await prepareJobgate(db);
    return withClient(db.url, async (c) => {
      if (history.executions > 0) await seedHistory(c, workspaceId, history.executions, history.randomIds);
      if (gated)
        await c.query(
          `update endpoints set key_concurrency_limit = $2, rate_limit_count = 1000000, rate_limit_period_ms = 1000,
                                rate_limit_burst = 1000000 where id = $1`,
          [endpointId, CONCURRENCY],
        );
      // As createJob would write them: a job, and its execution due now.
      await c.query(
        `insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts, priority, concurrency_key)
         select $1, $2, 'IMMEDIATE', '{}', 5,
                case when $4 then (g % 4) else 0 end, case when $4 then 'key-' || (g % $5) end
         from generate_series(1, $3::int) g`,
        [workspaceId, endpointId, EXECUTIONS, gated, GATED_KEYS],
      );
      await c.query(
        `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, priority, concurrency_key)
         select workspace_id, id, endpoint_id, now(), now(), 5, priority, coalesce(concurrency_key, '') from jobs where endpoint_id = $1`,
        [endpointId],
      );
      await settle(c);
      const children = await startChildren(processes, 'bench/workers/jobgate.ts', (i) => ({
        DATABASE_URL: db.url,
        WORKER_ID: `bench-${i + 1}`,
        CONCURRENCY: String(CONCURRENCY),
        BATCH_SIZE: String(BATCH_SIZE),
      }));
      try {
        const cpu = measureCpu(
          await backendPids(c, db.name, server.source !== 'BENCH_DATABASE_URL'),
          children.map((ch) => ch.pid),
        );
        const wal0 = await walAt(c);
        const go = now();
        children.forEach((ch) => ch.send('go'));
        const deadline = go + DRAIN_TIMEOUT_MS;
        for (;;) {
          // Through the partial indexes of live executions: the poll must not load the server it measures.
          const { rows } = await c.query(
            `select exists (select 1 from executions where status = 'PENDING' and endpoint_id = $1)
                 or exists (select 1 from executions where status = 'RUNNING' and endpoint_id = $1) as live`,
            [endpointId],
          );
          if (!rows[0].live) break;
          if (now() > deadline) {
            const left = await c.query(
              `select id, status, attempt_count, lease_owner, lease_epoch, lease_expires_at, run_after, now() as now
              from executions where status in ('PENDING', 'RUNNING') and endpoint_id = $1 limit 5`,
              [endpointId],
            );
            throw new Error(`jobgate: executions left after ${DRAIN_TIMEOUT_MS} ms, e.g. ${JSON.stringify(left.rows)}`);
          }
          await sleep(50);
        }
        const polled = now() - go;
        const split = cpu.stop(EXECUTIONS);
        const walBytes = (await walSince(c, wal0)) / EXECUTIONS;
        const { rows } = await c.query(
          `select extract(epoch from max(a.finished_at) - min(a.started_at)) * 1000 as ms,
                  count(*)::int as attempts, count(*) filter (where a.outcome = 'SUCCEEDED')::int as ok
           from attempts a join executions e on e.id = a.execution_id where e.endpoint_id = $1`,
          [endpointId],
        );
        const { ms, attempts, ok } = rows[0] as { ms: number; attempts: number; ok: number };
        if (ok !== EXECUTIONS || attempts !== EXECUTIONS)
          say(`jobgate: ${attempts} attempts, ${ok} succeeded (expected ${EXECUTIONS} each)`);
        say(
          `jobgate${gated ? ' (gated)' : ''}, ${processes} process(es): ${Math.round(ms)} ms by attempts (${Math.round(polled)} ms from "go" by polling)`,
        );
        return { rate: (ok / ms) * 1000, cpu: split, walBytes };
      } finally {
        await Promise.all(children.map((ch) => ch.stop()));
      }
    });
  });
}

async function prepareGraphile(db: BenchDatabase) {
  await runMigrations({ connectionString: db.url, logger: graphileLogger });
}

export async function graphileThroughput(server: BenchServer, config: GraphileConfigName, processes: number): Promise<Throughput> {
  return withDatabase(server, 'graphile_bench', async (db) => {
    await prepareGraphile(db);
    return withClient(db.url, async (c) => {
      await c.query(ADD_NOOP_JOBS, [EXECUTIONS]);
      await settle(c);
      const children = await startChildren(processes, 'bench/workers/graphile.ts', () => ({
        DATABASE_URL: db.url,
        CONCURRENCY: String(CONCURRENCY),
        FAST: config === 'fast' ? '1' : '0',
      }));
      try {
        // A process that got no job never reports a first one.
        const firsts = children.map((ch) =>
          ch
            .line('first', DRAIN_TIMEOUT_MS)
            .then(Number)
            .catch(() => Infinity),
        );
        const cpu = measureCpu(
          await backendPids(c, db.name, server.source !== 'BENCH_DATABASE_URL'),
          children.map((ch) => ch.pid),
        );
        const wal0 = await walAt(c);
        const go = now();
        children.forEach((ch) => ch.send('go'));
        const deadline = go + DRAIN_TIMEOUT_MS;
        let end: number;
        for (;;) {
          const sent = now();
          // Through the primary key: cheap even with many dead rows behind it.
          const { rows } = await c.query(`select id from graphile_worker._private_jobs order by id limit 1`);
          if (rows.length === 0) {
            end = sent;
            break;
          }
          if (sent > deadline) throw new Error(`graphile-worker: jobs left after ${DRAIN_TIMEOUT_MS} ms`);
          await sleep(10);
        }
        const started = (await Promise.all(firsts.map((f) => Promise.race([f, sleep(100).then(() => Infinity)])))).filter(Number.isFinite);
        const start = Math.min(...started);
        const ms = end - start;
        say(`graphile-worker (${config}), ${processes} process(es): ${Math.round(ms)} ms (${Math.round(end - go)} ms from "go")`);
        const split = cpu.stop(EXECUTIONS);
        return { rate: (EXECUTIONS / ms) * 1000, cpu: split, walBytes: (await walSince(c, wal0)) / EXECUTIONS };
      } finally {
        await Promise.all(children.map((ch) => ch.stop()));
      }
    });
  });
}

interface Percentiles {
  p50: number;
  p95: number;
  p99: number;
}

export interface Latency extends Percentiles {
  /** Median time the enqueue call itself took (createJob, addJob): part of the latency. */
  enqueue: number;
}

export function percentiles(samples: number[]): Percentiles {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99) };
}

/** Runs `enqueue` WARMUP_RUNS + `runs` (default LATENCY_RUNS) times, one at a time, timing each to its handler's start. */
export async function sequentialLatency(
  enqueue: () => Promise<unknown>,
  started: { next: Promise<number> },
  runs = LATENCY_RUNS,
  /** Awaited before each enqueue, untimed (e.g. a random pause, so arrivals do not follow a poll's rhythm). */
  before?: () => Promise<void>,
): Promise<Latency> {
  const samples: number[] = [];
  const calls: number[] = [];
  for (let i = 0; i < WARMUP_RUNS + runs; i++) {
    await before?.();
    const handlerStarted = started.next;
    const t0 = performance.now();
    await enqueue();
    const returned = performance.now();
    const t1 = await handlerStarted;
    if (i >= WARMUP_RUNS) {
      samples.push(t1 - t0);
      calls.push(returned - t0);
    }
  }
  return { ...percentiles(samples), enqueue: percentiles(calls).p50 };
}

/** A promise per handler start: `next` resolves at the next start, with its `performance.now()`. */
export function startSignal() {
  let resolve!: (t: number) => void;
  const signal = {
    next: new Promise<number>((r) => (resolve = r)),
    fire() {
      const t = performance.now();
      const r = resolve;
      signal.next = new Promise<number>((x) => (resolve = x));
      r(t);
    },
  };
  return signal;
}

export async function jobgateLatency(server: BenchServer): Promise<Latency> {
  return withDatabase(server, 'jobgate_bench', async (db) => {
    await prepareJobgate(db);
    const gate = await createJobgate({ databaseUrl: db.url, migrate: false, log: createLogger('warn') });
    try {
      const started = startSignal();
      gate.handle('noop', () => started.fire());
      await gate.startWorker({ concurrency: CONCURRENCY, batchSize: BATCH_SIZE });
      return await sequentialLatency(() => gate.client.createJob({ endpointName: ENDPOINT, kind: 'IMMEDIATE' }), started);
    } finally {
      await gate.close();
    }
  });
}

/**
 * createJob of a DELAYED job (due in an hour), one at a time, with `idleWorkers` worker processes
 * started and nothing due for them: what idle workers cost an insert they cannot run yet (before
 * migration 000063, each claimed and read the next due time on every insert). Percentiles of the call.
 */
export async function jobgateDelayedEnqueue(server: BenchServer, idleWorkers: number): Promise<Percentiles> {
  return withDatabase(server, 'jobgate_bench', async (db) => {
    await prepareJobgate(db);
    const children = await startChildren(idleWorkers, 'bench/workers/jobgate.ts', (i) => ({
      DATABASE_URL: db.url,
      WORKER_ID: `bench-idle-${i + 1}`,
      CONCURRENCY: String(CONCURRENCY),
      BATCH_SIZE: String(BATCH_SIZE),
    }));
    const gate = await createJobgate({ databaseUrl: db.url, migrate: false, log: createLogger('warn') });
    try {
      children.forEach((ch) => ch.send('go'));
      await Promise.all(children.map((ch) => ch.line('started')));
      const runAt = new Date(Date.now() + 3_600_000);
      const calls: number[] = [];
      for (let i = 0; i < WARMUP_RUNS + LATENCY_RUNS; i++) {
        const t0 = performance.now();
        await gate.client.createJob({ endpointName: ENDPOINT, kind: 'DELAYED', runAt });
        if (i >= WARMUP_RUNS) calls.push(performance.now() - t0);
      }
      return percentiles(calls);
    } finally {
      await gate.close();
      await Promise.all(children.map((ch) => ch.stop()));
    }
  });
}

export async function graphileLatency(server: BenchServer, config: GraphileConfigName): Promise<Latency> {
  return withDatabase(server, 'graphile_bench', async (db) => {
    await prepareGraphile(db);
    const started = startSignal();
    // Our own pool (graphile-worker's default size), so that every connection is closed before
    // the database is dropped.
    const pgPool = new pg.Pool({ connectionString: db.url, max: 10 });
    pgPool.on('error', () => {});
    pgPool.on('connect', (client) => client.on('error', () => {}));
    try {
      const runner = await runGraphile({
        pgPool,
        concurrency: CONCURRENCY,
        noHandleSignals: true,
        logger: graphileLogger,
        taskList: { noop: async () => started.fire() },
        preset: graphilePreset(config),
      });
      const utils = await makeWorkerUtils({ pgPool, logger: graphileLogger });
      try {
        return await sequentialLatency(() => utils.addJob('noop', {}), started);
      } finally {
        await utils.release();
        await runner.stop();
      }
    } finally {
      await pgPool.end();
    }
  });
}

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  say(`postgres: ${server.source}; ${EXECUTIONS} executions, concurrency ${CONCURRENCY}, jobgate batch size ${BATCH_SIZE}`);
  const [load] = os.loadavg();
  if (load! > os.availableParallelism() / 4)
    say(`load average ${load!.toFixed(2)} on ${os.availableParallelism()} cores: other work is running, figures will be noisy`);
  const figures: Figure[] = [];
  const figure = (bench: string, system: string, value: number, unit: string) => {
    figures.push({ bench, system, value, unit });
    return value;
  };
  try {
    const throughput = (n: number) => `engine.throughput.${n}-process${n > 1 ? 'es' : ''}`;
    const tput: Record<string, Record<number, number>> = { jobgate: {}, default: {}, fast: {} };
    const cpu: [system: string, n: number, split: CpuSplit | undefined][] = [];
    const wal: [system: string, n: number, bytes: number][] = [];
    const record = (system: keyof typeof SYSTEMS, n: number, t: Throughput) => {
      tput[system]![n] = figure(throughput(n), SYSTEMS[system], t.rate, 'executions/s');
      cpu.push([SYSTEMS[system], n, t.cpu]);
      wal.push([SYSTEMS[system], n, t.walBytes]);
    };
    for (const n of PROCESSES) record('jobgate', n, await jobgateThroughput(server, n));
    // The same drain with every gate configured, and what it keeps of the plain figure.
    for (const n of PROCESSES) {
      const gated = (await jobgateThroughput(server, n, true)).rate;
      figure(`engine.throughput.gated.${n}-process${n > 1 ? 'es' : ''}`, SYSTEMS.jobgate, gated, 'executions/s');
      figure(`engine.throughput.gated.${n}-process${n > 1 ? 'es' : ''}`, 'jobgate gated/plain', gated / tput.jobgate![n]!, 'ratio');
    }
    for (const config of ['default', 'fast'] as const) {
      for (const n of PROCESSES) record(config, n, await graphileThroughput(server, config, n));
    }
    // Where each execution's CPU went during the drains (unknown for a server on another host).
    for (const [system, n, split] of cpu) {
      if (!split) continue;
      const suffix = `${n}-process${n > 1 ? 'es' : ''}`;
      figure(`engine.cpu-per-execution.postgres.${suffix}`, system, split.postgres, 'µs');
      figure(`engine.cpu-per-execution.workers.${suffix}`, system, split.workers, 'µs');
    }
    for (const [system, n, bytes] of wal)
      figure(`engine.wal-per-execution.${n}-process${n > 1 ? 'es' : ''}`, system, Math.round(bytes), 'bytes');

    const latency: Record<string, Latency> = {};
    latency.jobgate = await jobgateLatency(server);
    for (const config of ['default', 'fast'] as const) latency[config] = await graphileLatency(server, config);
    for (const q of ['p50', 'p95', 'p99'] as const) {
      for (const system of ['jobgate', 'default', 'fast'] as const)
        figure(`engine.latency.${q}`, SYSTEMS[system], latency[system]![q], 'ms');
    }
    // How much of the latency is the enqueue call (jobgate's createJob is a transaction of several
    // statements; graphile-worker's addJob is one function call).
    for (const system of ['jobgate', 'default', 'fast'] as const)
      figure('engine.latency.enqueue-call.p50', SYSTEMS[system], latency[system]!.enqueue, 'ms');

    // What idle workers cost an insert of work due later.
    for (const idle of [0, IDLE_WORKERS]) {
      const call = await jobgateDelayedEnqueue(server, idle);
      const system = idle === 0 ? 'jobgate, no worker' : `jobgate, ${idle} idle worker processes`;
      figure('engine.enqueue-delayed.call.p50', system, call.p50, 'ms');
      figure('engine.enqueue-delayed.call.p99', system, call.p99, 'ms');
    }

    for (const config of ['default', 'fast'] as const) {
      const versus = `jobgate/${SYSTEMS[config]}`;
      for (const n of PROCESSES) figure(throughput(n), versus, tput.jobgate![n]! / tput[config]![n]!, 'ratio');
      figure('engine.latency.p50', versus, latency.jobgate!.p50 / latency[config]!.p50, 'ratio');
    }
    return figures;
  } finally {
    await server.close();
  }
}
