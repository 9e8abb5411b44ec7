/**
 * Cron at scale: 10,000 jobs due every minute, one scheduler (as one worker process runs); then
 * 100,000 due in the same minute with three schedulers, each in a process of its own
 * (bench/workers/scheduler.ts), as three worker processes run them. Every occurrence must fire once:
 * the bench fails otherwise. Figures: tick lateness (execution created minus occurrence due, both
 * on the database clock; 0 for one written ahead of its time) p50/p99, how long before its time the
 * last occurrence was written (the lead's margin: 0 when any was late), and the schedulers' CPU time
 * over that minute. BENCH_CRON_SIZES picks the runs, e.g. "10000x1" (jobs x schedulers);
 * BENCH_CRON_LEAD_MS the schedulers' lead (default a worker's, JOBGATE_CRON_LEAD_MS's default).
 */
import { performance } from 'node:perf_hooks';
import { migrate } from '../src/db/migrate.js';
import { createDatabase } from '../src/db/pool.js';
import type { Figure } from './run.js';
import { spawnChild } from './support/children.js';
import { openServer, type BenchServer } from './support/postgres.js';
import { quantile } from './support/quantile.js';

const SIZES = (process.env.BENCH_CRON_SIZES ?? '10000x1,100000x3').split(',').map((s) => s.split('x').map(Number) as [number, number]);

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  const figures: Figure[] = [];
  try {
    for (const [jobs, schedulers] of SIZES) figures.push(...(await measure(server, jobs, schedulers)));
  } finally {
    await server.close();
  }
  return figures;
}

async function measure(server: BenchServer, jobs: number, schedulers: number): Promise<Figure[]> {
  const target = await server.createDatabase('jobgate_bench_cron');
  const children = Array.from({ length: schedulers }, () => spawnChild('bench/workers/scheduler.ts', { DATABASE_URL: target.url }));
  try {
    await migrate(target.url);
    const database = createDatabase({ connectionString: target.url, max: 4 });
    const { pool } = database;
    const ws = (await pool.query(`select id from workspaces where slug = 'default'`)).rows[0].id as string;
    const ep = (
      await pool.query(
        `insert into endpoints (workspace_id, name, kind, handler_name) values ($1, 'bench.cron', 'HANDLER', 'noop') returning id`,
        [ws],
      )
    ).rows[0].id as string;
    // Due at the next minute boundary at least 40 s ahead: the schedulers are up, and their lead
    // (30 s by default) has not begun, by then. Only that minute's occurrences are counted: the
    // next minute's are written from half a minute after it.
    await pool.query(
      `insert into jobs (workspace_id, endpoint_id, kind, max_attempts, cron_expression, timezone, misfire_policy, overlap_policy, next_fire_at)
       select $1, $2, 'CRON', 1, '* * * * *', 'UTC', 'FIRE_LATEST', 'SKIP', date_trunc('minute', now() + interval '100 seconds')
       from generate_series(1, $3)`,
      [ws, ep, jobs],
    );
    await pool.query('analyze jobs');
    const due = (await pool.query(`select min(next_fire_at) as at from jobs where endpoint_id = $1`, [ep])).rows[0].at as Date;
    process.stderr.write(`bench cron: ${jobs} jobs due at ${due.toISOString()}, ${schedulers} scheduler(s); waiting for that minute\n`);

    await Promise.all(children.map((c) => c.line('ready', 60_000)));
    const t0 = performance.now();
    children.forEach((c) => c.send('go'));
    for (;;) {
      const { rows } = await pool.query(`select count(*)::int as n from executions where endpoint_id = $1 and scheduled_for = $2`, [
        ep,
        due,
      ]);
      if (rows[0].n >= jobs) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    // CPU over one whole minute of scheduling, including its idle polls.
    const remaining = 60_000 - (performance.now() - t0);
    if (remaining > 0) await new Promise((r) => setTimeout(r, remaining));
    let cpuUs = 0;
    for (const c of children) {
      c.send('cpu');
      cpuUs += Number(await c.line('cpu'));
    }

    const { rows } = await pool.query<{ ms: number }>(
      `select extract(epoch from (created_at - scheduled_for)) * 1000 as ms from executions where endpoint_id = $1 and scheduled_for = $2 order by 1`,
      [ep, due],
    );
    const once = await pool.query<{ twice: number }>(
      `select count(*)::int as twice from (select job_id, scheduled_for from executions where endpoint_id = $1 and scheduled_for = $2
                                            group by 1, 2 having count(*) > 1) d`,
      [ep, due],
    );
    if (rows.length !== jobs || once.rows[0]!.twice !== 0)
      throw new Error(`bench cron: ${rows.length} occurrences for ${jobs} jobs, ${once.rows[0]!.twice} fired twice`);
    // Written ahead, an occurrence is on time; the last one written ahead says how much time was to spare.
    const lateness = rows.map((r) => Math.max(0, Number(r.ms)));
    const spare = Math.max(0, -Math.max(...rows.map((r) => Number(r.ms))));
    await database.close();
    const bench = `cron ${jobs / 1000}k jobs/minute, ${schedulers} scheduler process${schedulers > 1 ? 'es' : ''}`;
    return [
      { bench: `${bench}: tick lateness p50`, system: 'jobgate', value: quantile(lateness, 0.5), unit: 'ms' },
      { bench: `${bench}: tick lateness p99`, system: 'jobgate', value: quantile(lateness, 0.99), unit: 'ms' },
      { bench: `${bench}: last written, time to spare`, system: 'jobgate', value: spare, unit: 'ms' },
      { bench: `${bench}: schedulers' CPU`, system: 'jobgate', value: cpuUs / 1000, unit: 'ms/minute' },
    ];
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await target.drop();
  }
}
