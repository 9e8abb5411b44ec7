/**
 * What a metrics scrape reads from the database: the queue per endpoint, the live runs and why
 * each pending execution waits, for the whole installation, in one round trip (four statements
 * in one simple-protocol message, which runs as one transaction).
 *
 * Only live rows are read, through partial indexes: pending executions through `executions_due`
 * (status = 'PENDING'), running ones through `executions_running_endpoint` (status = 'RUNNING'),
 * so the cost follows the queue's length, not the history's (bench/metrics.ts measures it with
 * 1,000 endpoints beside a few hundred thousand finished executions). Finished runs are not
 * counted: their number only grows.
 */
import type pg from 'pg';
import { WAITING_COUNTS, type WaitReason } from './waiting.js';

/** Counts per endpoint (an aggregate): declared here. */
export interface QueueRow {
  endpoint: string;
  /** Pending, due or not. */
  pending: number;
  /** Pending and due (run_after passed): waiting for a worker, a concurrency slot or its job's turn. */
  due: number;
  running: number;
}

/** Pending executions of one endpoint waiting for one reason (waiting.ts's reasons): declared here. */
export interface WaitingCountRow {
  endpoint: string;
  reason: WaitReason;
  count: number;
}

export interface ClusterSnapshot {
  queue: QueueRow[];
  /** Every pending execution by endpoint and the reason it waits (as its `waitingFor` says). */
  waiting: WaitingCountRow[];
  /** Live runs by status (RUNNING, CANCEL_REQUESTED, PAUSED). */
  runs: { status: string; count: number }[];
}

// The first statement turns JIT off for the others (one transaction): the waiting counts' plan
// is estimated far above its cost (the serial-turn subqueries it rarely runs), and compiling it
// took 870 ms of a 990 ms read (bench/metrics.ts) on a server with JIT on, as Postgres' default is.
const SNAPSHOT = `
select set_config('jit', 'off', true);
select en.name as endpoint, sum(q.pending)::int as pending, sum(q.due)::int as due, sum(q.running)::int as running
from (
  select endpoint_id, count(*) as pending, count(*) filter (where run_after <= now()) as due, 0 as running
  from executions where status = 'PENDING' group by endpoint_id
  union all
  select endpoint_id, 0, 0, count(*) from executions where status = 'RUNNING' group by endpoint_id
) q
join endpoints en on en.id = q.endpoint_id
group by en.name
order by sum(q.pending) + sum(q.running) desc, en.name;
select status, count(*)::int as count from runs where status in ('RUNNING', 'CANCEL_REQUESTED', 'PAUSED') group by status;
${WAITING_COUNTS}`;

export async function readClusterSnapshot(pool: pg.Pool): Promise<ClusterSnapshot> {
  const results = (await pool.query(SNAPSHOT)) as unknown as pg.QueryResult[];
  return {
    queue: results[1]!.rows as QueueRow[],
    runs: results[2]!.rows as { status: string; count: number }[],
    waiting: results[3]!.rows as WaitingCountRow[],
  };
}

/** The newest migration applied to the database (0 when none is): readiness compares it with the files. */
export async function appliedMigrationVersion(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ version: number | null }>('select max(version) as version from jobgate_migrations');
  return rows[0]?.version ?? 0;
}
