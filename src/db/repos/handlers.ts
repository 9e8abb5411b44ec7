/**
 * The handler catalogue's rows: which live workers registered a handler, and the one row of an
 * interval handler. Installation-level tables (`workers`, `interval_handlers`): no workspace.
 */
import { sql } from 'kysely';
import type { Executor } from './scope.js';

/**
 * Whether a live worker (heartbeated within its own staleness window) registered a handler of
 * this kind and name: what a trigger checks before queueing work only such a worker executes.
 */
export async function hasLiveRegistration(db: Executor, kind: 'HANDLER' | 'RECOVERABLE' | 'INTERVAL', name: string): Promise<boolean> {
  const { rows } = await sql<{ live: boolean }>`
    select exists (
      select 1 from workers w cross join lateral jsonb_to_recordset(w.handlers) as h(kind text, name text)
      where w.heartbeat_at > now() - make_interval(secs => w.stale_ms / 1000.0) and h.kind = ${kind} and h.name = ${name}
    ) as live`.execute(db);
  return rows[0]?.live === true;
}

export interface IntervalTickRow {
  epoch: string;
  owner: string | null;
  run_started_at: Date | null;
  /** The epoch of the tick whose outcome the last_* columns hold (migration 000023). */
  last_epoch: string | null;
  last_status: 'OK' | 'ERROR' | null;
  last_count: string | null;
  last_cause: 'HANDLER' | 'TIMEOUT' | 'CRASHED' | null;
  last_error: string | null;
  last_started_at: Date | null;
  last_finished_at: Date | null;
}

/** An interval handler's tick state and last outcome: one primary-key probe, no lock. */
export async function intervalTick(db: Executor, name: string): Promise<IntervalTickRow | undefined> {
  const { rows } = await sql<IntervalTickRow>`
    select epoch, owner, run_started_at, last_epoch, last_status, last_count, last_cause, last_error, last_started_at, last_finished_at
    from interval_handlers where name = ${name}`.execute(db);
  return rows[0];
}

/**
 * Milliseconds until the first live worker goes stale unless it heartbeats again (null with no
 * live worker): when the handler catalogue changes without any write. By the database's clock.
 */
export async function msUntilFirstWorkerStale(db: Executor): Promise<number | null> {
  const { rows } = await sql<{ ms: number | null }>`
    select extract(epoch from min(heartbeat_at + make_interval(secs => stale_ms / 1000.0)) - now()) * 1000 as ms
    from workers where heartbeat_at > now() - make_interval(secs => stale_ms / 1000.0)`.execute(db);
  const ms = rows[0]?.ms;
  return ms === null || ms === undefined ? null : Math.max(0, Number(ms));
}
