/**
 * The interval handlers' statements (src/service/engine/intervals/intervals.ts): one row per handler name
 * in `interval_handlers`. A tick is held by its owner and the epoch its take set; every write
 * about a tick says so in its WHERE clause (`name = $1 and owner = $2 and epoch = $3`), so a late
 * finisher can never overwrite a later outcome.
 */
import type pg from 'pg';
import { workerIsLive } from './workers.js';

/**
 * Creates the row of each registered handler, first due one period from now (an on-demand one:
 * never, until triggered). A changed period is taken (last registration wins); a shorter one
 * brings the next tick forward; a handler turned on-demand keeps only a tick already due.
 */
const ENSURE = `
insert into interval_handlers (name, every_ms, next_due_at, overlap)
select v.name, v.every_ms, coalesce(now() + make_interval(secs => v.every_ms / 1000.0), 'infinity'), v.overlap
from unnest($1::text[], $2::bigint[], $3::text[]) as v(name, every_ms, overlap)
on conflict (name) do update set every_ms = excluded.every_ms, overlap = excluded.overlap,
  next_due_at = case when interval_handlers.every_ms is not distinct from excluded.every_ms then interval_handlers.next_due_at
                     when excluded.every_ms is null and interval_handlers.next_due_at > now() then 'infinity'
                     else least(interval_handlers.next_due_at, excluded.next_due_at) end,
  updated_at = now()
where interval_handlers.every_ms is distinct from excluded.every_ms or interval_handlers.overlap is distinct from excluded.overlap`;

/**
 * Takes due ticks: one execution per tick across workers. The row must be due and idle; taking
 * it sets the owner and moves next_due_at, so a concurrent take (which re-reads the row after
 * this one commits) no longer matches. The rows are locked in name order before the update (as
 * the sweeps below lock theirs), so takes and sweeps over the same handlers wait in turn, never
 * in a cycle.
 */
const TAKE = `
with due as materialized (
  select name, force_next from interval_handlers where name = any($2::text[]) and owner is null and next_due_at <= now()
  order by name
  for no key update
)
update interval_handlers h set owner = $1, epoch = epoch + 1, run_started_at = now(), force_next = false,
  next_due_at = coalesce(now() + make_interval(secs => every_ms / 1000.0), 'infinity'), updated_at = now()
from due
where h.name = due.name
returning h.name, h.epoch, due.force_next as force`;

/**
 * Records a tick's outcome (with its `extra`), fenced: only the take that is still this worker's (same epoch) may.
 * Answers how many cadence ticks the end skipped (counted by the trigger of migrations 000023 and
 * 000034: under the SKIP policy, every tick that came due while it ran) and how long it ran.
 */
const RECORD = `
with before as (select skipped_ticks from interval_handlers where name = $1)
update interval_handlers set owner = null, run_started_at = null, overrun = false,
  last_status = $4, last_count = $5, last_cause = $6, last_error = $7, last_extra = $8::jsonb,
  last_started_at = run_started_at, last_finished_at = now(),
  ok_runs = ok_runs + ($4 = 'OK')::int, error_runs = error_runs + ($4 = 'ERROR')::int, updated_at = now()
where name = $1 and owner = $2 and epoch = $3
returning (skipped_ticks - (select skipped_ticks from before))::int as skipped, overlap,
  (extract(epoch from (last_finished_at - last_started_at)) * 1000)::bigint::int as running_for_ms`;

/**
 * Records a TIMEOUT at the deadline (fenced) but keeps the tick owned, marked overrun: the row is
 * still not idle, so TAKE (owner is null) cannot start the next tick anywhere until RELEASE.
 */
const RECORD_OVERRUN = `
update interval_handlers set overrun = true,
  last_status = 'ERROR', last_count = null, last_extra = null, last_cause = 'TIMEOUT', last_error = $4,
  last_started_at = run_started_at, last_finished_at = now(),
  error_runs = error_runs + 1, updated_at = now()
where name = $1 and owner = $2 and epoch = $3`;

/** Frees an overrun tick once its handler has returned (fenced); its outcome is already recorded. */
const RELEASE = `
update interval_handlers set owner = null, run_started_at = null, overrun = false, updated_at = now()
where name = $1 and owner = $2 and epoch = $3 and overrun`;

/**
 * Abandons an overrun tick whose handler did not return within its grace (fenced): the slot is
 * freed (the next tick may be taken, by any worker) and the handler, still running in this
 * worker, is counted in `interval_abandoned` until it settles (SETTLED) or its worker is gone.
 */
const ABANDON = `
with freed as (
  update interval_handlers set owner = null, run_started_at = null, overrun = false,
    abandoned_total = abandoned_total + 1, updated_at = now()
  where name = $1 and owner = $2 and epoch = $3 and overrun
  returning name
)
insert into interval_abandoned (name, worker_id, epoch) select name, $2, $3 from freed`;

/** An abandoned handler settled at last: no longer counted as running. Nothing else is recorded. */
const SETTLED = `delete from interval_abandoned where name = $1 and worker_id = $2 and epoch = $3`;

/** Abandoned handlers whose worker is gone (row missing or not heartbeating) are not running any more. */
const FORGET_ABANDONED = `
delete from interval_abandoned a
where not exists (
  select 1 from workers w where w.id = a.worker_id and ${workerIsLive('w')}
)
returning a.name`;

/**
 * Hands a tick back at shutdown (fenced): no outcome recorded, due at once for another worker
 * (an overrun tick, whose outcome is recorded, keeps its next tick time).
 */
const HAND_BACK = `
update interval_handlers set owner = null, run_started_at = null, overrun = false,
  next_due_at = case when overrun then next_due_at else now() end, updated_at = now()
where name = $1 and owner = $2 and epoch = $3`;

/**
 * Ticks whose worker is gone (its row missing or not heartbeating within its own stale_ms) were
 * cut off mid-run: recorded as CRASHED and freed, so the next tick can be taken. An overrun tick
 * already has its outcome (TIMEOUT): SWEEP_OVERRUN only frees it. Locked in name order, then
 * updated (see TAKE).
 */
const ORPHANED = (overrun: boolean) => `
  select h.name from interval_handlers h
  where h.owner is not null and ${overrun ? '' : 'not '}h.overrun and not exists (
    select 1 from workers w where w.id = h.owner and ${workerIsLive('w')}
  )
  order by h.name
  for no key update of h`;

const SWEEP = `
with orphaned as materialized (${ORPHANED(false)})
update interval_handlers h set owner = null, run_started_at = null,
  last_status = 'ERROR', last_count = null, last_extra = null, last_cause = 'CRASHED',
  last_error = 'its worker ' || h.owner || ' stopped heartbeating mid-run',
  last_started_at = h.run_started_at, last_finished_at = now(), error_runs = h.error_runs + 1, updated_at = now()
where h.name in (select name from orphaned)
returning h.name, (extract(epoch from (h.last_finished_at - h.last_started_at)) * 1000)::bigint::int as elapsed_ms`;

const SWEEP_OVERRUN = `
with orphaned as materialized (${ORPHANED(true)})
update interval_handlers h set owner = null, run_started_at = null, overrun = false, updated_at = now()
where h.name in (select name from orphaned)
returning h.name`;

/** Ensures a row for each handler, with its period (null: on demand). */
export async function ensureIntervalHandlers(
  pool: pg.Pool,
  handlers: { name: string; everyMs: number | null; overlap: 'SKIP' | 'QUEUE' }[],
): Promise<void> {
  await pool.query(ENSURE, [handlers.map((h) => h.name), handlers.map((h) => h.everyMs), handlers.map((h) => h.overlap)]);
}

/** Takes the due, idle ticks among `names` for `workerId`; returns each with its epoch, and whether a trigger forced it. */
export async function takeTicks(
  pool: pg.Pool,
  workerId: string,
  names: string[],
): Promise<{ name: string; epoch: string; force: boolean }[]> {
  return (await pool.query<{ name: string; epoch: string; force: boolean }>(TAKE, [workerId, names])).rows;
}

/** A tick held: its handler, the worker and the epoch of the take. */
export interface TickFence {
  name: string;
  workerId: string;
  epoch: string;
}

/** How a tick ends, as written (fenced). */
export type TickEnding =
  /** `extra`: JSON text (see okOutcome), or null. */
  | { status: 'OK'; count: number | null; extra?: string | null }
  | { status: 'ERROR'; cause: 'HANDLER' | 'TIMEOUT'; message: string }
  /** Past its timeout: recorded, but the tick stays owned (overrun) until its handler returns. */
  | { status: 'TIMEOUT'; message: string }
  /** Shutdown: handed back, due at once, nothing recorded. */
  | { status: 'HAND_BACK' }
  /** An overrun tick's handler returned: freed. */
  | { status: 'RELEASE' }
  /** An overrun tick's handler did not return within its grace: freed, and counted as abandoned while it runs. */
  | { status: 'ABANDON' }
  /** An abandoned handler settled: no longer counted. */
  | { status: 'SETTLED' };

/** What writing an outcome (OK, ERROR) found: the cadence ticks its end skipped, and how long the tick ran. */
export interface TickSkips {
  skipped: number;
  overlap: 'SKIP' | 'QUEUE';
  runningForMs: number;
}

/**
 * Writes a tick's ending; returns how many rows matched (0: the tick is no longer this worker's),
 * and for an outcome, what its end skipped.
 */
export async function endTick(pool: pg.Pool, f: TickFence, e: TickEnding): Promise<number> {
  return (await endTickSkipping(pool, f, e)).matched;
}

export async function endTickSkipping(pool: pg.Pool, f: TickFence, e: TickEnding): Promise<{ matched: number; skips?: TickSkips }> {
  if (e.status === 'OK' || e.status === 'ERROR') {
    const fence = [f.name, f.workerId, f.epoch];
    const res = await pool.query<{ skipped: number; overlap: 'SKIP' | 'QUEUE'; running_for_ms: number }>(
      RECORD,
      e.status === 'OK' ? [...fence, 'OK', e.count, null, null, e.extra ?? null] : [...fence, 'ERROR', null, e.cause, e.message, null],
    );
    const row = res.rows[0];
    return row
      ? { matched: res.rowCount ?? 0, skips: { skipped: row.skipped, overlap: row.overlap, runningForMs: row.running_for_ms } }
      : { matched: 0 };
  }
  return { matched: await endOther(pool, f, e) };
}

/** The endings that record no outcome of their own (or, TIMEOUT, keep the tick owned). */
async function endOther(pool: pg.Pool, f: TickFence, e: Exclude<TickEnding, { status: 'OK' | 'ERROR' }>): Promise<number> {
  const fence = [f.name, f.workerId, f.epoch];
  const statement = { ABANDON, SETTLED, HAND_BACK, RELEASE, TIMEOUT: RECORD_OVERRUN }[e.status];
  const res = await pool.query(statement, e.status === 'TIMEOUT' ? [...fence, e.message] : fence);
  return res.rowCount ?? 0;
}

/** Records ticks whose worker is gone as CRASHED and frees them; returns each with how long it had run. */
export async function sweepCrashedTicks(pool: pg.Pool): Promise<{ name: string; elapsedMs: number }[]> {
  return (await pool.query<{ name: string; elapsed_ms: number }>(SWEEP)).rows.map((r) => ({ name: r.name, elapsedMs: r.elapsed_ms }));
}

/** Frees overrun ticks whose worker is gone (their outcome is recorded); returns their names. */
export async function sweepOverrunTicks(pool: pg.Pool): Promise<string[]> {
  return (await pool.query<{ name: string }>(SWEEP_OVERRUN)).rows.map((r) => r.name);
}

/** The ticks among `names` that `workerId` holds, with their epochs (handed back at shutdown). */
export async function ticksHeldBy(pool: pg.Pool, workerId: string, names: string[]): Promise<{ name: string; epoch: string }[]> {
  const { rows } = await pool.query<{ name: string; epoch: string }>(
    `select name, epoch from interval_handlers where owner = $1 and name = any($2::text[])`,
    [workerId, names],
  );
  return rows;
}

/** Forgets abandoned handlers whose worker is gone (they went with it); returns their names. */
export async function forgetAbandonedOfGoneWorkers(pool: pg.Pool): Promise<string[]> {
  return (await pool.query<{ name: string }>(FORGET_ABANDONED)).rows.map((r) => r.name);
}
