/**
 * `/metrics` scrape time at scale: 1,000 endpoints, 300,000 finished executions, 20,000 pending
 * (half due, half later) and 1,000 running, with the per-endpoint counters and histograms of all
 * 1,000 endpoints touched (capped at 100 names plus `_other`), over HTTP with the token.
 * Figures: p50/p99 of a scrape (served from the last read of the queue gauges, the next read
 * started beside it), its CPU, a process's first scrape (which waits for the read), the grouped
 * query alone, the size of the answer. Goal: under 50 ms.
 */
import { performance } from 'node:perf_hooks';
import { migrate } from '../src/db/migrate.js';
import { createDatabase } from '../src/db/pool.js';
import { readClusterSnapshot } from '../src/db/statements/metrics.js';
import { createLogger } from '../src/log.js';
import { createDatabaseProbes } from '../src/service/ops/probes.js';
import { createMetrics } from '../src/metrics/prometheus.js';
import { createHealth } from '../src/server/health.js';
import { startOpsServer } from '../src/server/ops-routes.js';
import type { Figure } from './run.js';
import { openServer } from './support/postgres.js';
import { quantile } from './support/quantile.js';

const ENDPOINTS = 1_000;
const FINISHED = 300_000;
const PENDING = 20_000;
const RUNNING = 1_000;
const ROUNDS = 200;
const TOKEN = 'bench-metrics-token-0123456789';

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  const target = await server.createDatabase('jobgate_bench_metrics');
  try {
    await migrate(target.url);
    const database = createDatabase({ connectionString: target.url, max: 4 });
    const { pool } = database;
    process.stderr.write(`bench metrics: loading ${ENDPOINTS} endpoints and ${FINISHED + PENDING + RUNNING} executions\n`);
    const ws = (await pool.query(`select id from workspaces where slug = 'default'`)).rows[0].id as string;
    await pool.query(
      `insert into endpoints (workspace_id, name, kind, handler_name)
       select $1, 'bench.endpoint-' || lpad(i::text, 4, '0'), 'HANDLER', 'noop' from generate_series(1, $2) i`,
      [ws, ENDPOINTS],
    );
    await pool.query(
      `insert into jobs (workspace_id, endpoint_id, kind, max_attempts) select workspace_id, id, 'IMMEDIATE', 1 from endpoints where name like 'bench.%'`,
    );
    // Bulk load without the event triggers (they feed live subscriptions, which this bench has none of).
    const client = await pool.connect();
    try {
      await client.query(`set session_replication_role = replica`);
      const JOBS = `(select row_number() over (order by id) - 1 as k, * from jobs where endpoint_id in (select id from endpoints where name like 'bench.%'))`;
      await client.query(
        `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, status, max_attempts, attempt_count, finished_at, gated, job_held)
         select j.workspace_id, j.id, j.endpoint_id, now() - make_interval(secs => i), now() - make_interval(secs => i), 'SUCCEEDED', 1, 1, now(), false, false
         from generate_series(1, $1) i join ${JOBS} j on j.k = i % $2`,
        [FINISHED, ENDPOINTS],
      );
      // Pending and running ones after the finished ones in time, so (job, scheduled_for) stays unique.
      await client.query(
        `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, status, max_attempts, gated, job_held)
         select j.workspace_id, j.id, j.endpoint_id, now() + make_interval(secs => i), now() + make_interval(secs => case when i % 2 = 0 then -i else i end), 'PENDING', 1, false, false
         from generate_series(1, $1) i join ${JOBS} j on j.k = i % $2`,
        [PENDING, ENDPOINTS],
      );
      await client.query(
        `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, status, max_attempts, attempt_count, lease_owner, lease_epoch, lease_expires_at, gated, job_held)
         select j.workspace_id, j.id, j.endpoint_id, now() + make_interval(days => 1, secs => i), now(), 'RUNNING', 1, 1, 'bench', 1, now() + interval '1 hour', false, false
         from generate_series(1, $1) i join ${JOBS} j on j.k = i % $2`,
        [RUNNING, ENDPOINTS],
      );
      await client.query(`set session_replication_role = origin`);
    } finally {
      client.release();
    }
    await pool.query('vacuum analyze executions');

    const log = createLogger('warn');
    const touched = (metrics: ReturnType<typeof createMetrics>) => {
      // Every endpoint's counters and histograms touched, as a busy worker's would be.
      for (let i = 1; i <= ENDPOINTS; i++) {
        const name = `bench.endpoint-${String(i).padStart(4, '0')}`;
        metrics.observer.attemptStarted(name, 0.01);
        metrics.observer.attemptEnded(name, 'SUCCEEDED', 0.02);
        metrics.observer.executionRecorded(name, 'SUCCEEDED');
        metrics.observer.executionRecorded(name, 'FAILED');
      }
      return metrics;
    };
    const serve = (metrics: ReturnType<typeof createMetrics>) =>
      startOpsServer({ health: createHealth({ database: createDatabaseProbes(pool) }), metrics, metricsToken: TOKEN, log }, '127.0.0.1', 0);
    const scrapeOnce = async (url: string) => {
      const t0 = performance.now();
      const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`scrape answered ${res.status}`);
      return { ms: performance.now() - t0, bytes: Buffer.byteLength(text) };
    };

    // Steady state: a process scraped every few seconds. Each scrape serves the last read of the
    // queue gauges and, when it is 5 s old, starts the next read beside it (here a TTL of 0: every
    // scrape starts one, the worst case for the database).
    const metrics = touched(createMetrics({ pool, snapshot: createDatabaseProbes(pool).clusterSnapshot, snapshotTtlMs: 0 }));
    const ops = await serve(metrics);
    for (let i = 0; i < 20; i++) await scrapeOnce(ops.url); // warm up: connections, plans, JIT
    const steady: number[] = [];
    let bytes = 0;
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < ROUNDS; i++) {
      const r = await scrapeOnce(ops.url);
      steady.push(r.ms);
      bytes = r.bytes;
    }
    const cpu = process.cpuUsage(cpu0);
    await ops.close();
    // The exposition alone, without HTTP or the scraper: what a scrape costs the scraped process.
    const render0 = process.cpuUsage();
    for (let i = 0; i < ROUNDS; i++) await metrics.render();
    const renderCpu = process.cpuUsage(render0);

    // A process's first scrape waits for the read.
    const first: number[] = [];
    for (let i = 0; i < 20; i++) {
      const fresh = await serve(
        touched(createMetrics({ pool, snapshot: createDatabaseProbes(pool).clusterSnapshot, processMetrics: false })),
      );
      first.push((await scrapeOnce(fresh.url)).ms);
      await fresh.close();
    }
    const query: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const t0 = performance.now();
      await readClusterSnapshot(pool);
      query.push(performance.now() - t0);
    }
    const load = (await import('node:os')).loadavg()[0]!;
    await database.close();
    for (const list of [steady, first, query]) list.sort((a, b) => a - b);
    const sys = 'jobgate';
    return [
      { bench: 'metrics: scrape, p50', system: sys, value: quantile(steady, 0.5), unit: 'ms' },
      { bench: 'metrics: scrape, p99', system: sys, value: quantile(steady, 0.99), unit: 'ms' },
      {
        bench: 'metrics: scrape, CPU (scraper and served in one process)',
        system: sys,
        value: (cpu.user + cpu.system) / 1000 / ROUNDS,
        unit: 'ms',
      },
      { bench: 'metrics: rendering the answer, CPU', system: sys, value: (renderCpu.user + renderCpu.system) / 1000 / ROUNDS, unit: 'ms' },
      { bench: "metrics: a process's first scrape (waits for the queue read), p50", system: sys, value: quantile(first, 0.5), unit: 'ms' },
      { bench: 'metrics: queue read alone, p50', system: sys, value: quantile(query, 0.5), unit: 'ms' },
      { bench: 'metrics: queue read alone, p99', system: sys, value: quantile(query, 0.99), unit: 'ms' },
      { bench: 'metrics: answer size', system: sys, value: bytes / 1024, unit: 'KiB' },
      { bench: 'metrics: machine load average (1 min) at the end', system: sys, value: load, unit: '' },
    ];
  } finally {
    await target.drop();
    await server.close();
  }
}
