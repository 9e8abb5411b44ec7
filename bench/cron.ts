/**
 * Cron at scale: 10,000 jobs due every minute, one scheduler (as one worker process runs).
 * Figures: tick lateness (execution created minus occurrence due, both on the database clock)
 * p50/p99, and the scheduler's CPU time over that minute.
 */
import { performance } from 'node:perf_hooks';
import { migrate } from '../src/db/migrate.js';
import { createDatabase } from '../src/db/pool.js';
import { createLogger } from '../src/log.js';
import { createCronJobScheduler } from '../src/service/engine/cron/scheduler.js';
import type { Figure } from './run.js';
import { openServer } from './support/postgres.js';

const JOBS = 10_000;

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  const target = await server.createDatabase('jobgate_bench_cron');
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
    // Due at the next minute boundary (at least 5 s ahead, so the scheduler is up by then).
    await pool.query(
      `insert into jobs (workspace_id, endpoint_id, kind, max_attempts, cron_expression, timezone, misfire_policy, overlap_policy, next_fire_at)
       select $1, $2, 'CRON', 1, '* * * * *', 'UTC', 'FIRE_LATEST', 'SKIP', date_trunc('minute', now() + interval '65 seconds')
       from generate_series(1, $3)`,
      [ws, ep, JOBS],
    );
    const due = (await pool.query(`select min(next_fire_at) as at from jobs where endpoint_id = $1`, [ep])).rows[0].at as Date;
    process.stderr.write(`bench cron: ${JOBS} jobs due at ${due.toISOString()}; waiting for that minute\n`);

    const scheduler = createCronJobScheduler({ pool, log: createLogger('warn'), batchSize: 1000 });
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    scheduler.start();
    for (;;) {
      const { rows } = await pool.query(`select count(*)::int as n from executions where endpoint_id = $1`, [ep]);
      if (rows[0].n >= JOBS) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    // CPU over one whole minute of scheduling, including its idle polls.
    const remaining = 60_000 - (performance.now() - t0);
    if (remaining > 0) await new Promise((r) => setTimeout(r, remaining));
    const cpu = process.cpuUsage(cpu0);
    await scheduler.stop();

    const { rows } = await pool.query<{ ms: number }>(
      `select extract(epoch from (created_at - scheduled_for)) * 1000 as ms from executions where endpoint_id = $1 order by 1`,
      [ep],
    );
    const lateness = rows.map((r) => Number(r.ms));
    await database.close();
    return [
      { bench: 'cron 10k jobs/minute: tick lateness p50', system: 'jobgate', value: quantile(lateness, 0.5), unit: 'ms' },
      { bench: 'cron 10k jobs/minute: tick lateness p99', system: 'jobgate', value: quantile(lateness, 0.99), unit: 'ms' },
      { bench: 'cron 10k jobs/minute: scheduler CPU', system: 'jobgate', value: (cpu.user + cpu.system) / 1000, unit: 'ms/minute' },
    ];
  } finally {
    await target.drop();
    await server.close();
  }
}
