/**
 * Many processes on one Postgres, as a scaled-out deployment runs them: 4 gateways (`jobgate
 * serve`) and 1, 2, 4 or 8 workers (`jobgate worker`), each a compiled CLI process of its own
 * (bench/support/cli-process.ts), each size on a fresh database. Per size:
 *
 *  - drain: 20,000 no-op executions (the demo handler `demo.echo`) written with SQL, then drained
 *    by the workers; executions/s from the first attempt's start to the last one's end (database
 *    clock);
 *  - enqueue → start: createJob over HTTP, one every 25 ms, round-robin over the gateways, while
 *    the workers are otherwise idle; p50 and p99 of the attempt's start minus the execution's
 *    creation (both on the database clock);
 *  - connections to the database while the drain runs (the most seen, sampled every 100 ms), by
 *    kind: pools (`jobgate`), LISTEN connections (`jobgate-live` for the gateways' live hubs,
 *    `jobgate-worker-listen` for the workers' wake-ups).
 *
 * On a 2-core machine the workers, the gateways and Postgres share the same cores: past two worker
 * processes the figures show contention, not the engine's ceiling. Settings: DATABASE_POOL_MAX 5,
 * so that 12 processes need at most 12 x (5 + 1) = 72 connections, within a default server's 100
 * (docs/operating.md, Connections); JOBGATE_WORKER_CONCURRENCY 50. BENCH_TOPOLOGY_WORKERS (e.g.
 * "1,2") picks sizes, BENCH_TOPOLOGY_GATEWAYS the gateways (0: no enqueue latency), and
 * BENCH_TOPOLOGY_LATENCY_RUNS the createJobs timed. To look inside: BENCH_TOPOLOGY_DEBUG=1 prints
 * the attempts started in each second of the drain ("count/workers"), and BENCH_TOPOLOGY_EXPLAIN=1
 * has Postgres log the plan of every statement over 40 ms (auto_explain, in the server's log).
 */
import pg from 'pg';
import { migrate } from '../src/db/migrate.js';
import { createDatabase } from '../src/db/pool.js';
import { createJobService } from '../src/service/index.js';
import type { Figure } from './run.js';
import { buildDist, startCli, type CliProcess } from './support/cli-process.js';
import { openServer, type BenchServer } from './support/postgres.js';
import { quantile } from './support/quantile.js';

const GATEWAYS = Number(process.env.BENCH_TOPOLOGY_GATEWAYS ?? 4);
const SIZES = (process.env.BENCH_TOPOLOGY_WORKERS ?? '1,2,4,8').split(',').map(Number);
const EXECUTIONS = 20_000;
const LATENCY_RUNS = Number(process.env.BENCH_TOPOLOGY_LATENCY_RUNS ?? 200);
const DRAIN_TIMEOUT_MS = 300_000;

const say = (msg: string) => process.stderr.write(`bench topology: ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Size {
  drain: number;
  p50: number;
  p99: number;
  connections: Record<string, number>;
}

async function measure(server: BenchServer, workers: number): Promise<Size> {
  const db = await server.createDatabase('jobgate_bench_topology');
  const processes: CliProcess[] = [];
  let c = new pg.Client({ connectionString: db.url, application_name: 'bench-topology' });
  try {
    await migrate(db.url);
    const setup = createDatabase({ connectionString: db.url, max: 2, applicationName: 'bench-topology' });
    const service = createJobService({ db: setup.db, pool: setup.pool, defaultMaxAttempts: 1 });
    const { key } = await service.bootstrapKey('default', 'ADMIN', 'topology bench');
    const actor = await service.authenticate(key);
    const endpoint = await service.registerEndpoint(actor, { name: 'bench.echo', kind: 'HANDLER', handlerName: 'demo.echo' });
    await setup.close();
    if (process.env.BENCH_TOPOLOGY_EXPLAIN) {
      await c.connect();
      await c.query(`alter database ${db.name} set session_preload_libraries = 'auto_explain'`);
      await c.query(`alter database ${db.name} set auto_explain.log_min_duration = '40ms'`);
      await c.query(`alter database ${db.name} set auto_explain.log_analyze = on`);
      await c.end();
    }
    const env = {
      DATABASE_URL: db.url,
      DATABASE_POOL_MAX: '5',
      JOBGATE_DEMO_HANDLERS: 'on',
      JOBGATE_WORKER_CONCURRENCY: '50',
      JOBGATE_LOG_LEVEL: 'info',
      JOBGATE_RATE_LIMIT_PER_SECOND: '0',
    };
    for (let i = 0; i < GATEWAYS; i++) processes.push(await startCli('serve', env));
    for (let i = 0; i < workers; i++) processes.push(await startCli('worker', env));
    const gateways = processes.slice(0, GATEWAYS);
    c = new pg.Client({ connectionString: db.url, application_name: 'bench-topology' });
    await c.connect();

    // Enqueue → start, with the workers idle.
    const ids: string[] = [];
    for (let i = 0; i < (GATEWAYS ? LATENCY_RUNS : 0); i++) {
      const res = await fetch(`http://127.0.0.1:${gateways[i % GATEWAYS]!.port}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({
          query: `mutation { createJob(input: { kind: IMMEDIATE, endpointName: "bench.echo", input: {} }) { job { id } } }`,
        }),
      });
      const body = (await res.json()) as { data?: { createJob: { job: { id: string } } }; errors?: unknown };
      if (!body.data) throw new Error(`createJob: ${JSON.stringify(body.errors)}`);
      ids.push(body.data.createJob.job.id);
      await sleep(25);
    }
    let latencies: number[] = [];
    for (const deadline = Date.now() + 60_000; ;) {
      const { rows } = await c.query<{ ms: number }>(
        `select extract(epoch from (a.started_at - e.created_at)) * 1000 as ms
           from executions e join attempts a on a.execution_id = e.id and a.attempt_number = 1
          where e.job_id = any($1::uuid[]) order by 1`,
        [ids],
      );
      latencies = rows.map((r) => Number(r.ms));
      if (latencies.length === ids.length) break;
      if (!GATEWAYS || !LATENCY_RUNS) break;
      if (Date.now() > deadline) throw new Error(`only ${latencies.length} of ${ids.length} latency jobs started`);
      await sleep(100);
    }

    // The drain, with the connections counted while it runs.
    await c.query(
      `insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts)
       select $1, $2, 'IMMEDIATE', '{}', 1 from generate_series(1, $3::int)`,
      [actor.workspaceId, endpoint.id, EXECUTIONS],
    );
    await c.query(
      `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
       select workspace_id, id, endpoint_id, now(), now(), 1 from jobs
        where endpoint_id = $1 and not exists (select 1 from executions e where e.job_id = jobs.id)`,
      [endpoint.id],
    );
    const since = (await c.query(`select now() as at`)).rows[0].at as Date;
    const most: Record<string, number> = {};
    for (const deadline = Date.now() + DRAIN_TIMEOUT_MS; ;) {
      const { rows } = await c.query<{ name: string; n: number }>(
        `select application_name as name, count(*)::int as n from pg_stat_activity
          where datname = current_database() and application_name <> 'bench-topology' group by 1`,
      );
      for (const r of rows) most[r.name] = Math.max(most[r.name] ?? 0, r.n);
      const live = await c.query(
        `select exists (select 1 from executions where status = 'PENDING' and endpoint_id = $1)
             or exists (select 1 from executions where status = 'RUNNING' and endpoint_id = $1) as live`,
        [endpoint.id],
      );
      if (!live.rows[0].live) break;
      if (Date.now() > deadline) throw new Error(`executions left after ${DRAIN_TIMEOUT_MS} ms`);
      await sleep(100);
    }
    const { rows } = await c.query<{ n: number; secs: number }>(
      `select count(*)::int as n, extract(epoch from (max(a.finished_at) - min(a.started_at))) as secs
         from attempts a join executions e on e.id = a.execution_id
        where e.endpoint_id = $1 and a.started_at >= $2`,
      [endpoint.id, since],
    );
    if (process.env.BENCH_TOPOLOGY_DEBUG) {
      const h = await c.query(
        `select date_trunc('second', a.started_at) as s, count(*)::int as n, count(distinct a.worker_id)::int as w from attempts a join executions e on e.id = a.execution_id
          where e.endpoint_id = $1 and a.started_at >= $2 group by 1 order by 1`,
        [endpoint.id, since],
      );
      say(h.rows.map((r) => `${r.n}/${r.w}`).join(' '));
    }
    return { drain: rows[0]!.n / Number(rows[0]!.secs), p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), connections: most };
  } finally {
    await c.end().catch(() => {});
    for (const p of processes.reverse()) await p.stop();
    await db.drop();
  }
}

export async function run(): Promise<Figure[]> {
  buildDist();
  const server = await openServer();
  const figures: Figure[] = [];
  try {
    for (const workers of SIZES) {
      say(`${GATEWAYS} gateways, ${workers} worker process(es)`);
      const size = await measure(server, workers);
      const system = `jobgate, ${GATEWAYS} gateways + ${workers} worker${workers > 1 ? 's' : ''}`;
      figures.push({ bench: 'topology: drain 20,000 no-op executions', system, value: size.drain, unit: 'executions/s' });
      figures.push({ bench: 'topology: enqueue (createJob over HTTP) → start', system, value: size.p50, unit: 'ms p50' });
      figures.push({ bench: 'topology: enqueue (createJob over HTTP) → start', system, value: size.p99, unit: 'ms p99' });
      const total = Object.values(size.connections).reduce((a, b) => a + b, 0);
      figures.push({ bench: 'topology: connections during the drain (most seen)', system, value: total, unit: 'all' });
      for (const [name, n] of Object.entries(size.connections).sort())
        figures.push({ bench: 'topology: connections during the drain (most seen)', system, value: n, unit: name });
    }
  } finally {
    await server.close();
  }
  return figures;
}
