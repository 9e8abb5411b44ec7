/**
 * Recording attempt outcomes, many per statement.
 *
 * The fence: an outcome is accepted only from the lease that is current — same epoch, still
 * RUNNING. A worker that lost its lease (reconciled, taken over) matches no row, so its late
 * write changes nothing; this is what makes a *recorded* completion exactly-once while
 * execution itself is at-least-once. An expired lease that nobody has taken yet is still its
 * owner's: expiry lets the reconciler take it, it is not itself a taking. So the owner of an
 * attempt that ended while the database was unreachable for longer than the lease records its
 * outcome when the database is back (reconcilers hold off for a lease after an outage), instead
 * of the attempt being counted as lost and its handler run a second time.
 *
 * The next state is decided here, from the attempt's outcome and the execution's row:
 *   cancel requested                      -> CANCELLED
 *   succeeded                             -> SUCCEEDED
 *   failed, retryable, attempts remain    -> PENDING, run_after = now() + delay
 *   otherwise                             -> FAILED
 * The delay is the worker's (a Retry-After) or, when null, the endpoint's backoff. A Retry-After
 * on a 429 or 503 also holds the whole endpoint until then (endpoint_retry_after).
 * The attempt's row is written in the same statement.
 */
import { hostname } from 'node:os';
import type pg from 'pg';
import type { AttemptOutcome, AttemptTarget } from '../types.js';

export interface Completion {
  executionId: string;
  epoch: number;
  outcome: AttemptOutcome;
  retryable: boolean;
  /** Explicit delay before the retry (Retry-After), else null for the endpoint's backoff. */
  retryDelayMs: number | null;
  statusCode: number | null;
  durationMs: number;
  /**
   * How long the execution waited in the worker for a slot between its claim and its attempt's
   * start (a batch size above the concurrency); the attempt's row starts that long after the claim.
   */
  queuedMs?: number;
  error: string | null;
  responseExcerpt: string | null;
  /** The HTTP target the attempt called, secrets redacted; null for handlers. */
  target?: AttemptTarget | null;
  /** A handler error's stack, redacted and capped; null otherwise. */
  errorStack?: string | null;
}

// The worker recording an outcome is the one that made the attempt (the lease holder, in this
// process), so the attempt row takes this process's host and pid.
const HOST = hostname();

// The fence is the UPDATE's own WHERE clause: Postgres re-checks it on the row's latest version
// when a concurrent write got there first. The next state is computed once per row, from that same
// latest version, in the multi-column SET.
//
// Lock order: the rows are locked first, in id order (`locked`), and only then updated. An UPDATE
// ... FROM unnest(...) locks rows in whatever order its plan visits them (the array's order in a
// nested loop, the table's in a hash join), and the worker's heartbeat (lease.ts) locks the same
// executions in the order of its own list: the two deadlocked under plain load, and the aborted
// batch's leases then expired and its handlers ran again. Every statement that locks several
// executions takes them in id order (see lease.ts), so no two can wait on each other in a cycle.
// The CTE is materialized, so its rows come from one forward pass of Sort then LockRows; the
// UPDATE joins to it and so only touches rows already locked. FOR NO KEY UPDATE is the lock the
// UPDATE itself takes, so the lock pass blocks nothing the update would not.
//
// Access by primary key: the lock pass finds the rows by id alone and reads the fence's columns
// from the version it locked (a row locked FOR UPDATE is returned as its latest version), and the
// UPDATE checks the fence on those. A status = 'RUNNING' test in either WHERE lets the planner
// read the executions through the partial index of running ones instead, which it estimates from
// statistics taken when few ran (one row): a scan of every running execution, and of every index
// entry left by those that ended since the last vacuum, per batch. That plan made each batch's
// cost grow with the queue's churn and halved the engine's throughput.
const COMPLETE = `
with done as (
  select * from unnest($1::uuid[], $2::bigint[], $3::text[], $4::boolean[], $5::double precision[],
                       $6::int[], $7::int[], $8::text[], $9::text[], $11::jsonb[], $12::text[], $15::int[])
    as d(id, epoch, outcome, retryable, delay_ms, status_code, duration_ms, error, excerpt, target, stack, queued_ms)
), locked as materialized (
  -- Id order, so this statement and a heartbeat over the same rows never lock in opposite orders.
  -- The fence's columns as of the locked (latest) version: nobody changes them until we commit.
  select e.id, e.lease_epoch, e.status = 'RUNNING' as running from executions e
  where e.id = any($1::uuid[])
  order by e.id
  for no key update
), updated as (
  update executions e
  set (status, run_after, last_error, finished_at) = (
        select n.next_status,
               case when n.next_status = 'PENDING'
                    then now() + make_interval(secs => coalesce(d.delay_ms,
                           jobgate_backoff_ms(en.backoff_base_ms, en.backoff_max_ms, e.attempt_count, en.jitter)) / 1000)
                    else e.run_after end,
               case when n.next_status = 'SUCCEEDED' then null
                    when n.next_status = 'CANCELLED' then coalesce(d.error, 'cancelled')
                    else d.error end,
               case when n.next_status = 'PENDING' then null else now() end
        from (select case
                       when e.cancel_requested_at is not null then 'CANCELLED'
                       when d.outcome = 'SUCCEEDED' then 'SUCCEEDED'
                       when d.retryable and e.attempt_count < e.max_attempts then 'PENDING'
                       else 'FAILED'
                     end as next_status) n),
      lease_owner = null,
      lease_expires_at = null,
      updated_at = now()
  from locked l, done d, endpoints en
  -- The fence: only the current lease (same epoch, still running) records. Expiry is not
  -- checked: until a reconciler or a claim moves the row on, nobody else has the execution.
  where e.id = l.id
    and d.id = l.id
    and l.running
    and l.lease_epoch = d.epoch
    and en.id = e.endpoint_id
  returning e.id, e.workspace_id, e.endpoint_id, e.lease_epoch, e.attempt_count, e.attempt_started_at, e.status
), retry_after as (
  -- A target that answered 429 or 503 with Retry-After asked for no requests before then: no
  -- new starts on its endpoint until the latest such time, on any worker (see claim.ts). Only
  -- accepted outcomes count, by id and epoch as the attempt row below.
  insert into endpoint_retry_after (endpoint_id, until, status_code)
  select u.endpoint_id, max(now() + make_interval(secs => d.delay_ms / 1000)),
         -- The answer that asked for the longest wait.
         (array_agg(d.status_code order by d.delay_ms desc))[1]
  from updated u join done d on d.id = u.id and d.epoch = u.lease_epoch
  where d.delay_ms is not null and d.status_code in (429, 503)
  group by u.endpoint_id
  on conflict (endpoint_id) do update
    set until = greatest(endpoint_retry_after.until, excluded.until),
        status_code = case when excluded.until >= endpoint_retry_after.until then excluded.status_code else endpoint_retry_after.status_code end,
        noted_at = now()
), attempt_rows as (
  -- The attempt's row, written once now that it has ended: its number is the attempt count the
  -- claim set, its start the claim's time and what it waited in the worker for a slot (never past
  -- its end), its worker the lease holder ($10, on host $13 as pid $14).
  insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, started_at, finished_at,
                        outcome, status_code, duration_ms, error, response_excerpt, target,
                        worker_host, worker_pid, error_stack)
  select u.workspace_id, u.id, u.attempt_count, u.lease_epoch, $10,
         least(coalesce(u.attempt_started_at + make_interval(secs => coalesce(d.queued_ms, 0) / 1000.0), now()), now()), now(),
         case when u.status = 'CANCELLED' and d.outcome <> 'SUCCEEDED' then 'CANCELLED' else d.outcome end,
         d.status_code, d.duration_ms, d.error, d.excerpt, d.target, $13, $14::int, d.stack
  -- By id and epoch: a batch may also carry an earlier, fenced-out attempt of the same execution
  -- (its lease was lost and the execution claimed again), which must not write this row.
  from updated u join done d on d.id = u.id and d.epoch = u.lease_epoch
)
select id, status from updated`;

/**
 * Records outcomes of attempts made by `workerId` (the lease holder); returns the ids whose
 * outcome was accepted, with their new status. On a client, inside its transaction (a handler's
 * fenced transaction records its success this way).
 */
export async function completeExecutions(
  pool: pg.Pool | pg.PoolClient,
  workerId: string,
  items: Completion[],
): Promise<Map<string, string>> {
  if (items.length === 0) return new Map();
  // A named statement: parsed and planned once per connection.
  const { rows } = await pool.query<{ id: string; status: string }>({
    name: 'jobgate.complete',
    text: COMPLETE,
    values: [
      items.map((i) => i.executionId),
      items.map((i) => i.epoch),
      items.map((i) => i.outcome),
      items.map((i) => i.retryable),
      items.map((i) => i.retryDelayMs),
      items.map((i) => i.statusCode),
      items.map((i) => Math.round(i.durationMs)),
      items.map((i) => i.error),
      items.map((i) => i.responseExcerpt),
      workerId,
      items.map((i) => (i.target ? JSON.stringify(i.target) : null)),
      items.map((i) => i.errorStack ?? null),
      HOST,
      process.pid,
      items.map((i) => Math.round(i.queuedMs ?? 0)),
    ],
  });
  return new Map(rows.map((r) => [r.id, r.status]));
}
