/**
 * The run schedules' statements (src/service/engine/runs/schedule-ticker.ts): one row per scheduled
 * recoverable handler and workspace, ticked by one worker at a time (SKIP LOCKED, then a
 * compare-and-set on the next_due_at the tick read).
 */
import type pg from 'pg';
import type { RunScheduleRow } from '../types.js';

/** A due schedule as TAKE_DUE reads it: its columns, and its next_due_at as exact text. */
export interface DueRow extends Pick<
  RunScheduleRow,
  'workspace_id' | 'name' | 'cron_expression' | 'timezone' | 'every_ms' | 'params' | 'next_due_at'
> {
  seen: string;
}

/**
 * Registers (or updates) a schedule. Its first tick is the next cron time, or one period from now;
 * a changed cadence recomputes it, an unchanged one keeps the tick already planned.
 */
const UPSERT = `
insert into run_schedules (workspace_id, name, cron_expression, timezone, every_ms, params, next_due_at)
values ($1, $2, $3, $4, $5, $6, $7)
on conflict (workspace_id, name) do update set
  cron_expression = excluded.cron_expression, timezone = excluded.timezone, every_ms = excluded.every_ms, params = excluded.params,
  next_due_at = case when (run_schedules.cron_expression, run_schedules.timezone, run_schedules.every_ms)
                          is distinct from (excluded.cron_expression, excluded.timezone, excluded.every_ms)
                     then excluded.next_due_at else run_schedules.next_due_at end,
  updated_at = now()`;

/**
 * Due schedules this worker registered (handler and workspace: a row left by an older
 * registration elsewhere is not ticked); SKIP LOCKED splits them between workers.
 */
const TAKE_DUE = `
select workspace_id, name, cron_expression, timezone, every_ms, params, next_due_at,
       next_due_at::text as seen -- exact, for the compare-and-set
from run_schedules
where (workspace_id, name) in (select * from unnest($1::uuid[], $2::text[])) and next_due_at <= $3
order by next_due_at
limit 100
for update skip locked`;

/** The tick's claim: a compare-and-set on the next_due_at this pass read, with the tick's outcome. */
const ADVANCE = `
update run_schedules set next_due_at = $4, ticks = ticks + 1, last_tick_at = $5,
  last_tick_outcome = coalesce($6, last_tick_outcome), last_tick_run_id = coalesce($7, last_tick_run_id),
  ticks_on_active = ticks_on_active + ($6 is not distinct from 'ACTIVE')::int,
  last_error = $8, last_error_at = case when $8::text is not null then $5 else last_error_at end, updated_at = now()
where workspace_id = $1 and name = $2 and next_due_at = $3::timestamptz`;

export interface ScheduleRow {
  workspaceId: string;
  name: string;
  cron: string | null;
  timezone: string | null;
  everyMs: number | null;
  /** The params of the runs it starts, as JSON text. */
  params: string;
  firstDueAt: Date | 'infinity';
}

export async function upsertRunSchedule(pool: pg.Pool, r: ScheduleRow): Promise<void> {
  await pool.query(UPSERT, [r.workspaceId, r.name, r.cron, r.timezone, r.everyMs, r.params, r.firstDueAt]);
}

/** The id of the workspace with this slug, if any. */
export async function workspaceIdOf(pool: pg.Pool, slug: string): Promise<string | undefined> {
  return (await pool.query<{ id: string }>('select id from workspaces where slug = $1', [slug])).rows[0]?.id;
}

/** Locks the due schedules among `mine` (workspace, name), at most 100, skipping those locked elsewhere. */
export async function takeDueSchedules(client: pg.PoolClient, mine: [name: string, workspaceId: string][], now: Date): Promise<DueRow[]> {
  const { rows } = await client.query<DueRow>(TAKE_DUE, [mine.map(([, ws]) => ws), mine.map(([name]) => name), now]);
  return rows;
}

export interface ScheduleAdvance {
  workspaceId: string;
  name: string;
  /** next_due_at as this pass read it (exact text): the compare-and-set. */
  seen: string;
  next: Date | 'infinity';
  now: Date;
  outcome: string | null;
  runId: string | null;
  error: string | null;
}

export async function advanceSchedule(client: pg.PoolClient, a: ScheduleAdvance): Promise<void> {
  await client.query(ADVANCE, [a.workspaceId, a.name, a.seen, a.next, a.now, a.outcome, a.runId, a.error]);
}
