/**
 * The handler catalogue's rows: which live workers registered a handler, the rows of interval
 * handlers, and the schedules of recoverable ones. `workers` and `interval_handlers` are
 * installation-level tables (no workspace); `run_schedules` belong to a workspace.
 */
import { sql } from 'kysely';
import type { IntervalHandlerRow, RunScheduleRow, WorkerRow } from '../types.js';
import { scoped, type Executor } from './scope.js';
import { workerIsLive } from '../statements/workers.js';

export type HandlerKind = 'HANDLER' | 'RECOVERABLE' | 'INTERVAL';

/**
 * A live worker's registration of one handler (a worker with many handlers has a row each): the
 * worker's columns, and what the statement reads from the registration's JSON (declared here).
 */
export interface LiveRegistrationRow extends Pick<WorkerRow, 'id' | 'host' | 'pid' | 'started_at' | 'heartbeat_at'> {
  kind: HandlerKind;
  name: string;
  /** INTERVAL: how long a tick may run, as registered. */
  timeout_ms: number | null;
  /** A recoverable registered with a schedule in the caller's workspace. */
  scheduled_here: boolean;
  /** INTERVAL and RECOVERABLE: this worker registered it opted out of alerts. */
  alerts_opt_out: boolean;
}

/**
 * The registrations of live workers (heartbeated within their own staleness window), by kind
 * and name when given, ordered by kind, name, then the workers' start.
 */
export async function liveRegistrations(
  ex: Executor,
  workspaceId: string,
  filter: { kind: HandlerKind | null; name: string | null },
): Promise<LiveRegistrationRow[]> {
  const { kind, name } = filter;
  const { rows } = await sql<LiveRegistrationRow>`
    select w.id, w.host, w.pid, w.started_at, w.heartbeat_at, h.kind, h.name, h."timeoutMs" as timeout_ms,
           (h.kind = 'RECOVERABLE' and (h.cron is not null or h."everyMs" is not null)
            and h.workspace = (select slug from workspaces where id = ${scoped(workspaceId)})) as scheduled_here,
           coalesce(h."alertsOptOut", false) as alerts_opt_out
    from workers w cross join lateral jsonb_to_recordset(w.handlers)
      as h(kind text, name text, "timeoutMs" bigint, "everyMs" bigint, cron text, workspace text, "alertsOptOut" boolean)
    where ${sql.raw(workerIsLive('w'))}
      and (${kind}::text is null or h.kind = ${kind}) and (${name}::text is null or h.name = ${name})
    order by h.kind, h.name, w.started_at, w.id`.execute(ex);
  return rows;
}

/**
 * The interval handlers' rows with these names (those that have one), each with how many of its
 * abandoned ticks' handlers are still running on a live worker (migration 000033).
 */
export async function intervalHandlersByName(
  ex: Executor,
  names: string[],
): Promise<(IntervalHandlerRow & { abandoned_running: number })[]> {
  if (names.length === 0) return [];
  const { rows } = await sql<IntervalHandlerRow & { abandoned_running: number }>`
    select h.*, (
      select count(*) from interval_abandoned a join workers w on w.id = a.worker_id
      where a.name = h.name and ${sql.raw(workerIsLive('w'))}
    )::int as abandoned_running
    from interval_handlers h where h.name = any(${names}::text[])`.execute(ex);
  return rows;
}

/** The workspace's recoverable-handler schedules with these names (those that have one). */
export async function runSchedulesByName(ex: Executor, workspaceId: string, names: string[]): Promise<RunScheduleRow[]> {
  if (names.length === 0) return [];
  const { rows } = await sql<RunScheduleRow>`
    select * from run_schedules where workspace_id = ${scoped(workspaceId)} and name = any(${names}::text[])`.execute(ex);
  return rows;
}

/** An interval handler's tick state, locked for update (a trigger's): who runs it now, since when, at which epoch. */
export async function lockIntervalHandler(
  ex: Executor,
  name: string,
): Promise<Pick<IntervalHandlerRow, 'owner' | 'run_started_at' | 'epoch'> | undefined> {
  const { rows } = await sql<Pick<IntervalHandlerRow, 'owner' | 'run_started_at' | 'epoch'>>`
    select owner, run_started_at, epoch from interval_handlers where name = ${name} for update`.execute(ex);
  return rows[0];
}

/**
 * Makes an interval handler's next tick due now. A running tick keeps its owner, so the next one
 * is taken only once it ends: never two at once; it is then marked queued on purpose
 * (`queued_after`, migration 000034), so it runs right after under either overlap policy. With
 * `force`, the tick made due runs forced (`force_next`, migration 000035; the take clears it).
 */
export async function makeIntervalDueNow(ex: Executor, name: string, force = false): Promise<void> {
  await sql`update interval_handlers set next_due_at = now(), queued_after = owner is not null,
    force_next = force_next or ${force}, updated_at = now()
    where name = ${name}`.execute(ex);
}

/**
 * Whether a live worker (heartbeated within its own staleness window) registered a handler of
 * this kind and name: what a trigger checks before queueing work only such a worker executes.
 */
export async function hasLiveRegistration(db: Executor, kind: HandlerKind, name: string): Promise<boolean> {
  const { rows } = await sql<{ live: boolean }>`
    select exists (
      select 1 from workers w cross join lateral jsonb_to_recordset(w.handlers) as h(kind text, name text)
      where ${sql.raw(workerIsLive('w'))} and h.kind = ${kind} and h.name = ${name}
    ) as live`.execute(db);
  return rows[0]?.live === true;
}

/** An interval handler's tick state and last outcome; last_epoch is the tick whose outcome the last_* columns hold (migration 000023). */
export type IntervalTickRow = Pick<
  IntervalHandlerRow,
  | 'epoch'
  | 'owner'
  | 'run_started_at'
  | 'last_epoch'
  | 'last_status'
  | 'last_count'
  | 'last_cause'
  | 'last_error'
  | 'last_extra'
  | 'last_started_at'
  | 'last_finished_at'
>;

/** An interval handler's tick state and last outcome: one primary-key probe, no lock. */
export async function intervalTick(db: Executor, name: string): Promise<IntervalTickRow | undefined> {
  const { rows } = await sql<IntervalTickRow>`
    select epoch, owner, run_started_at, last_epoch, last_status, last_count, last_cause, last_error, last_extra, last_started_at, last_finished_at
    from interval_handlers where name = ${name}`.execute(db);
  return rows[0];
}

/**
 * Milliseconds until the first live worker goes stale unless it heartbeats again (null with no
 * live worker): when the handler catalogue changes without any write. By the database's clock.
 */
export async function msUntilFirstWorkerStale(db: Executor): Promise<number | null> {
  const { rows } = await sql<{ ms: number | null }>`
    select extract(epoch from min(w.heartbeat_at + make_interval(secs => w.stale_ms / 1000.0)) - now()) * 1000 as ms
    from workers w where ${sql.raw(workerIsLive('w'))}`.execute(db);
  const ms = rows[0]?.ms;
  return ms === null || ms === undefined ? null : Math.max(0, Number(ms));
}
