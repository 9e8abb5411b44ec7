/**
 * The queue-week benchmark: a week of queue work (one IMMEDIATE job per unit of work, the common
 * case) in compressed time, and the database's size day by day. The history that retention must
 * keep flat is the jobs, their executions and attempts, and live events.
 *
 *  - Each simulated day, BENCH_WEEK_JOBS_PER_DAY (2,000) jobs are created through the library
 *    (the real createJob path) and run by serverless passes (gate.runDue(), a no-op handler; one
 *    in ten fails, with one attempt). Then the day ends: every row of history is moved a day into
 *    the past (the compression: the database's clock cannot be moved, so history is), an
 *    on-demand prune (gate.prune(), live events included, as the workers' pruner would over a
 *    day) runs, and a plain VACUUM stands in for autovacuum.
 *  - Windows scaled to the week: SUCCEEDED executions 2 days, FAILED 3, events 24 hours.
 *  - BENCH_WEEK_DAYS (7) days. Printed per day: rows per table and the size of those tables.
 *    Figures: the size on the last day against the size once the windows were full (day 4),
 *    which stays flat (a ratio near 1), and the rows retention removed per simulated day.
 *
 * Nothing is asserted; the database is dropped afterwards.
 */
import pg from 'pg';
import { migrate } from '../src/db/migrate.js';
import { createJobgate, type Jobgate } from '../src/index.js';
import type { Figure } from './run.js';
import { openServer, type BenchServer } from './support/postgres.js';

const env = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const PER_DAY = env('BENCH_WEEK_JOBS_PER_DAY', 2_000);
const DAYS = env('BENCH_WEEK_DAYS', 7);
const say = (msg: string) => process.stderr.write(`bench retention-week: ${msg}\n`);

const TABLES = ['jobs', 'executions', 'attempts', 'events'] as const;

async function sizes(c: pg.Client): Promise<{ rows: Record<string, number>; bytes: number }> {
  const rows: Record<string, number> = {};
  for (const table of TABLES) rows[table] = (await c.query(`select count(*)::int as n from ${table}`)).rows[0].n;
  const bytes = Number(
    (await c.query(`select sum(pg_total_relation_size(t::regclass))::bigint as n from unnest($1::text[]) t`, [[...TABLES]])).rows[0].n,
  );
  return { rows, bytes };
}

/** Moves every row of history a day into the past: the day is over. */
async function endDay(c: pg.Client): Promise<void> {
  await c.query('begin');
  await c.query(`update jobs set created_at = created_at - interval '1 day', updated_at = updated_at - interval '1 day',
    retired_at = retired_at - interval '1 day', run_at = run_at - interval '1 day'`);
  await c.query(`update executions set created_at = created_at - interval '1 day', updated_at = updated_at - interval '1 day',
    finished_at = finished_at - interval '1 day', scheduled_for = scheduled_for - interval '1 day', run_after = run_after - interval '1 day',
    attempt_started_at = attempt_started_at - interval '1 day'`);
  await c.query(`update attempts set started_at = started_at - interval '1 day', finished_at = finished_at - interval '1 day'`);
  await c.query(`update events set created_at = created_at - interval '1 day'`);
  await c.query('commit');
}

async function day(gate: Jobgate, endpointId: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const fail = i % 10 === 0;
    await gate.client.createJob({ endpointId, kind: 'IMMEDIATE', input: { i, fail }, ...(fail ? { maxAttempts: 1 } : {}) });
  }
  for (let pass = 0; pass < 100; pass++) {
    const result = await gate.runDue({ limit: 500 });
    const { succeeded, failed, retrying } = result.executions;
    if (succeeded + failed + retrying === 0) break;
  }
}

export async function run(): Promise<Figure[]> {
  const server: BenchServer = await openServer();
  const figures: Figure[] = [];
  const figure = (bench: string, value: number, unit: string) => figures.push({ bench, system: 'jobgate', value, unit });
  const db = await server.createDatabase('jobgate_bench_week');
  const c = new pg.Client({ connectionString: db.url });
  let gate: Jobgate | undefined;
  try {
    await migrate(db.url);
    await c.connect();
    gate = await createJobgate({
      databaseUrl: db.url,
      migrate: false,
      retention: { executionsDays: 2, failedExecutionsDays: 3, eventsHours: 24, runDueBatches: 4 },
    });
    gate.handle<{ fail?: boolean }>('bench.unit', (input) => {
      if (input.fail) throw new Error('one in ten fails');
    });
    const endpoint = await gate.client.registerEndpoint({ name: 'bench.unit', kind: 'HANDLER', handlerName: 'bench.unit' });
    const perDay: number[] = [];
    const removed: number[] = [];
    for (let d = 1; d <= DAYS; d++) {
      await day(gate, endpoint.id, PER_DAY);
      await endDay(c);
      let gone = 0;
      for (;;) {
        const report = await gate.prune({ maxBatches: 1_000 });
        gone += Object.values(report.removed).reduce((a, b) => a + b, 0);
        if (report.complete) break;
      }
      await c.query('vacuum jobs, executions, attempts, events');
      const s = await sizes(c);
      perDay.push(s.bytes);
      removed.push(gone);
      say(
        `day ${d}: ${Object.entries(s.rows)
          .map(([t, n]) => `${t} ${n}`)
          .join(', ')}; ${(s.bytes / 1024 / 1024).toFixed(2)} MiB; ${gone} rows pruned`,
      );
    }
    const full = perDay[Math.min(3, perDay.length - 1)]!;
    figure('retention-week.size.last-day', perDay.at(-1)! / 1024 / 1024, 'MiB');
    figure('retention-week.size.last-over-day-4', perDay.at(-1)! / full, 'ratio');
    figure('retention-week.pruned-per-day', removed.slice(3).reduce((a, b) => a + b, 0) / Math.max(1, removed.slice(3).length), 'rows');
  } finally {
    await gate?.close().catch(() => {});
    await c.end().catch(() => {});
    await db.drop();
    await server.close();
  }
  return figures;
}
