/**
 * A worker process's row in `workers` (src/service/engine/runtime/presence.ts): its presence and
 * heartbeat. Live while its heartbeat is younger than its own `stale_ms`.
 */
import type pg from 'pg';

/**
 * Whether worker row `w` is live: it heartbeated within its own staleness window. The one
 * definition every reader of presence uses (which worker can deliver what, who still holds an
 * interval tick, how many workers run).
 */
export const workerIsLive = (w: string) => `${w}.heartbeat_at > now() - make_interval(secs => ${w}.stale_ms / 1000.0)`;

const UPSERT = `
insert into workers (id, host, pid, stale_ms, handlers) values ($1, $2, $3, $4, $5)
on conflict (id) do update set heartbeat_at = now(), stale_ms = excluded.stale_ms, handlers = excluded.handlers`;

/** Writes the worker's row, or heartbeats it with what it has registered now (`handlers`: JSON text). */
export async function upsertWorker(
  pool: pg.Pool,
  w: { id: string; host: string; pid: number; staleMs: number; handlers: string },
): Promise<void> {
  await pool.query(UPSERT, [w.id, w.host, w.pid, w.staleMs, w.handlers]);
}

/** Forgets workers gone (no heartbeat) for `afterMs` (long out of the catalogue). */
export async function pruneGoneWorkers(pool: pg.Pool, afterMs: number): Promise<void> {
  await pool.query(`delete from workers where heartbeat_at < now() - make_interval(secs => $1::double precision / 1000)`, [afterMs]);
}

/** A clean stop: the worker's row goes. */
export async function deleteWorker(pool: pg.Pool, id: string): Promise<void> {
  await pool.query('delete from workers where id = $1', [id]);
}
