/**
 * The cron scheduler's statements (src/service/engine/cron/scheduler.ts). A batch locks due cron jobs
 * (SKIP LOCKED: schedulers split them), claims each job's ticks with a compare-and-set on the
 * next_fire_at it read, and inserts the occurrences of the jobs it claimed; the (job,
 * scheduled_for) unique index makes each occurrence exist once, whatever the number of schedulers.
 */
import type pg from 'pg';
import type { JobRow, MisfirePolicy, OverlapPolicy } from '../types.js';

/**
 * A due cron job as TAKE_DUE reads it: its columns (those a CRON job always has are declared
 * not null here, as CHECK jobs_check1 guarantees) and what the statement computes or joins.
 */
export interface DueJob extends Pick<
  JobRow,
  'id' | 'workspace_id' | 'endpoint_id' | 'ends_at' | 'max_attempts' | 'priority' | 'concurrency_key' | 'lock_key'
> {
  cron_expression: string;
  timezone: string;
  next_fire_at: Date;
  seen: string;
  misfire_policy: MisfirePolicy;
  /** The last pass could not compute the schedule: next_fire_at is its retry time, not an occurrence. */
  retrying: boolean;
  overlap_policy: OverlapPolicy;
  live_id: string | null;
  live_status: string | null;
  live_since: Date | null;
}

const TAKE_DUE = `
select j.id, j.workspace_id, j.endpoint_id, j.cron_expression, j.timezone, j.ends_at, j.next_fire_at,
       -- Exact, for the compare-and-set: a JS Date would drop the microseconds.
       j.next_fire_at::text as seen,
       j.misfire_policy, j.overlap_policy, j.max_attempts, j.priority, j.concurrency_key, j.lock_key,
       j.schedule_error is not null as retrying,
       live.id as live_id, live.status as live_status, live.created_at as live_since
from jobs j
left join lateral (
  -- The job's few live executions (executions_workspace_live), then the earliest. Behind
  -- offset 0, so that the planner does not walk the job's whole history newest first instead
  -- (executions_job_created, in the order asked).
  select l.id, l.status, l.created_at from (
    select e.id, e.status, e.created_at from executions e
    where e.workspace_id = j.workspace_id and e.endpoint_id = j.endpoint_id and e.job_id = j.id
      and e.status in ('PENDING', 'RUNNING')
    offset 0
  ) l
  order by l.created_at limit 1
) live on true
where j.kind = 'CRON' and j.status = 'ACTIVE' and j.next_fire_at <= $1::timestamptz + make_interval(secs => $2::float8 / 1000)
  -- Due, or within the lead to be written ahead; but a SKIP job with a live execution is left to
  -- its time, when the policy decides (re-read every pass until then: its previous may end).
  and (j.next_fire_at <= $1 or j.overlap_policy <> 'SKIP' or live.id is null)
order by j.next_fire_at
limit $3
for update of j skip locked`;

/**
 * The tick claim: a compare-and-set on the next_fire_at this pass read. Rows whose value moved
 * (another pass, an update, a pause) are left alone, and none of their executions is inserted.
 */
const ADVANCE = `
update jobs j
set next_fire_at = v.next_fire_at,
    ahead_at = v.ahead_at,
    -- The occurrence written ahead last time has fired by now (the job is taken again only once it is due).
    last_fired_at = greatest(j.last_fired_at, v.last_fired_at, case when j.ahead_at <= $2::timestamptz then j.ahead_at end),
    skipped_ticks = j.skipped_ticks + v.skipped,
    last_skip_at = case when v.skipped > 0 then $2::timestamptz else j.last_skip_at end,
    last_skip_reason = case when v.skipped > 0 then v.skip_reason else j.last_skip_reason end,
    missed_ticks = j.missed_ticks + v.missed,
    schedule_error = v.error,
    schedule_error_at = case when v.error is not null then $2::timestamptz else j.schedule_error_at end,
    updated_at = now()
from jsonb_to_recordset($1::jsonb) as v(id uuid, seen timestamptz, next_fire_at timestamptz, last_fired_at timestamptz,
                                        ahead_at timestamptz, skipped int, skip_reason text, missed int, error text)
where j.id = v.id and j.next_fire_at = v.seen and j.status = 'ACTIVE'
returning j.id`;

const INSERT_EXECUTIONS = `
insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, priority, concurrency_key, lock_key, serial)
select v.workspace_id, v.job_id, v.endpoint_id, v.scheduled_for, v.scheduled_for, v.max_attempts, v.priority, coalesce(v.concurrency_key, ''), v.lock_key, v.serial
from jsonb_to_recordset($1::jsonb) as v(workspace_id uuid, job_id uuid, endpoint_id uuid, scheduled_for timestamptz,
                                        max_attempts int, priority smallint, concurrency_key text, lock_key text, serial boolean)
-- Earliest first (of two occurrences that share a lock key, the earlier is the one written), and
-- those due at the same instant in no fixed order: they are claimed in id order, and ids grow as
-- rows are made (migration 000058), so the jobs taken first here would start first every tick.
order by v.scheduled_for, random()
on conflict do nothing
returning job_id, scheduled_for`;

/**
 * Locks up to `limit` cron jobs due at `now` (on this pass's clock) or within `leadMs` of it, with
 * their live execution.
 */
export async function takeDueCronJobs(client: pg.PoolClient, now: Date, leadMs: number, limit: number): Promise<DueJob[]> {
  return (await client.query<DueJob>(TAKE_DUE, [now, leadMs, limit])).rows;
}

/** One job's advance, as ADVANCE reads it. */
export interface CronAdvance {
  id: string;
  seen: string;
  next_fire_at: Date | null;
  last_fired_at: Date | null;
  /** The occurrence written before its time, if any. */
  ahead_at: Date | null;
  skipped: number;
  skip_reason: string | null;
  missed: number;
  error: string | null;
}

/** Claims the jobs' ticks (compare-and-set on what was read); returns the ids claimed. */
export async function advanceCronJobs(client: pg.PoolClient, advances: CronAdvance[], now: Date): Promise<Set<string>> {
  const { rows } = await client.query<{ id: string }>(ADVANCE, [JSON.stringify(advances), now]);
  return new Set(rows.map((r) => r.id));
}

export interface CronOccurrence {
  workspace_id: string;
  job_id: string;
  endpoint_id: string;
  scheduled_for: Date;
  max_attempts: number;
  priority: number;
  concurrency_key: string | null;
  lock_key: string | null;
  serial: boolean;
}

/** Inserts occurrences; one a unique index refuses (fired already, lock key held) is left out of the answer. */
export async function insertOccurrences(
  client: pg.PoolClient,
  occurrences: CronOccurrence[],
): Promise<{ job_id: string; scheduled_for: Date }[]> {
  return (await client.query<{ job_id: string; scheduled_for: Date }>(INSERT_EXECUTIONS, [JSON.stringify(occurrences)])).rows;
}

/** Counts occurrences refused by a unique index as skipped ticks of their jobs. */
export async function countRefusedOccurrences(client: pg.PoolClient, byJob: Map<string, number>, now: Date): Promise<void> {
  await client.query(
    `update jobs j set skipped_ticks = j.skipped_ticks + v.n, last_skip_at = $2, last_skip_reason = 'lock key held or occurrence already fired'
     from jsonb_to_recordset($1::jsonb) as v(id uuid, n int) where j.id = v.id`,
    [JSON.stringify([...byJob].map(([id, n]) => ({ id, n }))), now],
  );
}

/**
 * Milliseconds to the next time an active cron job is to be written, on the database's clock: its
 * fire time less the lead, or its fire time for one already within the lead (left to its time, see
 * TAKE_DUE); null when none.
 */
export async function nextCronFireInMs(pool: pg.Pool, leadMs = 0): Promise<number | null> {
  const { rows } = await pool.query<{ wait: number | null }>(
    `select extract(epoch from (min(case when next_fire_at - lead > now() then next_fire_at - lead else next_fire_at end) - now())) * 1000 as wait
     from jobs cross join (select make_interval(secs => $1::float8 / 1000) as lead) l
     where kind = 'CRON' and status = 'ACTIVE'`,
    [leadMs],
  );
  const wait = rows[0]?.wait;
  return wait === null || wait === undefined ? null : Number(wait);
}
