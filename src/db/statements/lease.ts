/**
 * Lease upkeep: heartbeats, the reconciler and release at shutdown.
 */
import type pg from 'pg';
import { workChannel } from '../channels.js';

/**
 * The executions of a worker's list ($1 ids), locked in id order before anything updates them,
 * with what the lease's fence needs as of the locked (latest) version: nobody changes it until
 * the statement commits. Every statement that locks several executions takes them in id order,
 * so none waits on another in a cycle: an UPDATE ... FROM unnest(...) alone locks rows in
 * whatever order its plan visits them, and a heartbeat and the same worker's outcome batch
 * (complete.ts), each in the order of its own list, deadlocked under plain load. Used as a
 * materialized CTE: its rows come from one forward pass (Sort, then LockRows), and the UPDATE
 * joined to it touches only rows already locked. FOR NO KEY UPDATE is the lock the UPDATE itself
 * takes. By primary key alone, and the fence checked on its columns rather than by a status
 * test in a WHERE: see complete.ts for the plan such a test leads to.
 */
const LOCK_LISTED_IN_ID_ORDER = `select e.id, e.lease_epoch, e.status = 'RUNNING' as running from executions e
  where e.id = any($1::uuid[])
  order by e.id
  for no key update`;

/**
 * Extends the leases this worker still holds: same epoch, still RUNNING. An expired lease that
 * nobody took over is still held (expiry lets a reconciler take it; it is not itself a taking,
 * the same fence as recording an outcome, see complete.ts): renewed here, so an attempt that ran
 * through a database outage longer than the lease carries on. Returns, per execution still held,
 * whether a cancellation was requested: the worker aborts those, and aborts every execution
 * *not* returned (it was taken over).
 */
const HEARTBEAT = `
with locked as materialized (
  ${LOCK_LISTED_IN_ID_ORDER}
)
update executions e
set lease_expires_at = now() + make_interval(secs => $3::double precision / 1000)
from locked l, unnest($1::uuid[], $2::bigint[]) as h(id, epoch)
where e.id = l.id and h.id = l.id and l.lease_epoch = h.epoch and l.running
returning e.id, e.cancel_requested_at is not null as cancel_requested`;

export async function heartbeat(pool: pg.Pool, held: { id: string; epoch: number }[], leaseMs: number): Promise<Map<string, boolean>> {
  if (held.length === 0) return new Map();
  const { rows } = await pool.query<{ id: string; cancel_requested: boolean }>(HEARTBEAT, [
    held.map((h) => h.id),
    held.map((h) => h.epoch),
    leaseMs,
  ]);
  return new Map(rows.map((r) => [r.id, r.cancel_requested]));
}

/**
 * The reconciler: executions whose lease expired (their worker died, stalled or was cut off).
 * Candidates are taken with SKIP LOCKED, so every worker may run this concurrently. The lost
 * attempt has already counted (at claim); the execution is retried after the endpoint's backoff,
 * or FAILED with "lease expired" when that was its last attempt — nothing is reclaimed forever.
 * A cancellation requested meanwhile ends it CANCELLED.
 */
const RECONCILE = `
with expired as (
  select e.id, e.lease_owner, e.attempt_started_at from executions e
  where e.status = 'RUNNING' and e.lease_expires_at <= now()
    -- A pass that reaches the server after its deadline takes nothing (see reconcileExpiredLeases).
    and ($2::timestamptz is null or now() <= $2)
  order by e.lease_expires_at
  limit $1
  for update of e skip locked
), updated as (
  update executions e
  set status = case when e.cancel_requested_at is not null then 'CANCELLED'
                    when e.attempt_count >= e.max_attempts then 'FAILED'
                    else 'PENDING' end,
      run_after = case when e.cancel_requested_at is null and e.attempt_count < e.max_attempts
                       then now() + make_interval(secs => jobgate_backoff_ms(en.backoff_base_ms, en.backoff_max_ms, e.attempt_count, en.jitter) / 1000)
                       else e.run_after end,
      finished_at = case when e.cancel_requested_at is not null or e.attempt_count >= e.max_attempts then now() end,
      last_error = 'lease expired',
      lease_owner = null,
      lease_expires_at = null,
      updated_at = now()
  from expired x, endpoints en
  where e.id = x.id and en.id = e.endpoint_id
  returning e.id, e.workspace_id, e.lease_epoch, e.attempt_count, e.status
), attempts_lost as (
  -- The lost attempt's row; the candidates were read before this statement's update, so they
  -- still carry its worker and start.
  insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, started_at, finished_at, outcome, error)
  select u.workspace_id, u.id, u.attempt_count, u.lease_epoch, coalesce(x.lease_owner, 'unknown'),
         coalesce(x.attempt_started_at, now()), now(), 'LEASE_EXPIRED', 'lease expired: the worker stopped heartbeating'
  from updated u join expired x on x.id = u.id
  -- No row can exist for this attempt (one is written only when an attempt ends, and this one
  -- has not); if one ever did, the reconciler must still free the rest of its batch.
  on conflict (execution_id, attempt_number) do nothing
)
select id, status from updated`;

/**
 * `notAfter`, on the database's clock: past it the statement takes nothing. A pass sent just
 * before the database stalls (a pooler paused, a server frozen, a full pool) waits in a queue
 * beside the owners' heartbeats and outcomes, and reaching the server first when it answers
 * again it would take leases that expired only because those were stuck behind it.
 */
export async function reconcileExpiredLeases(pool: pg.Pool, limit = 500, notAfter?: Date): Promise<{ id: string; status: string }[]> {
  const { rows } = await pool.query<{ id: string; status: string }>(RECONCILE, [limit, notAfter ?? null]);
  return rows;
}

/**
 * Graceful shutdown: hands executions this worker still holds back to the queue, due now, so
 * another worker picks them up at once. The interrupted attempt is not counted (the count is
 * given back, and no attempt row is written): the worker chose to stop, the endpoint did not fail.
 */
const RELEASE = `
with locked as materialized (
  ${LOCK_LISTED_IN_ID_ORDER}
), released as (
  update executions e
  set status = 'PENDING', run_after = now(), lease_owner = null, lease_expires_at = null,
      attempt_count = e.attempt_count - 1, updated_at = now()
  from locked l, unnest($1::uuid[], $2::bigint[]) as h(id, epoch)
  -- Still this worker's: the same epoch and still RUNNING. A lease that ran out while nobody took
  -- it over (a database outage longer than the lease) is still held, as heartbeats and outcomes
  -- hold it; one taken over has a new epoch (or another status) and is not touched.
  where e.id = l.id and h.id = l.id and l.lease_epoch = h.epoch and l.running and e.cancel_requested_at is null
  returning e.id
), woken as (
  -- Other workers may have room for them: one wake, in this statement, and only when something
  -- came back (a release the fence refused whole wakes nobody).
  select pg_notify($3, $4) from released limit 1
)
select r.id from released r
cross join (select count(*) from woken) as sent -- referenced, so that the wake is sent`;

export async function releaseExecutions(pool: pg.Pool, held: { id: string; epoch: number }[]): Promise<string[]> {
  if (held.length === 0) return [];
  const { rows } = await pool.query<{ id: string }>(RELEASE, [
    held.map((h) => h.id),
    held.map((h) => h.epoch),
    workChannel.name,
    workChannel.encode({ kind: 'work' }),
  ]);
  return rows.map((r) => r.id);
}
