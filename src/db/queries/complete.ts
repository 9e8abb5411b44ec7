/**
 * Recording attempt outcomes, many per statement.
 *
 * The fence: an outcome is accepted only from the lease that is current — same epoch, still
 * RUNNING, lease not expired on the database clock. A worker that lost its lease (expired,
 * reconciled, taken over) matches no row, so its late write changes nothing; this is what makes
 * a *recorded* completion exactly-once while execution itself is at-least-once.
 *
 * The next state is decided here, from the attempt's outcome and the execution's row:
 *   cancel requested                      -> CANCELLED
 *   succeeded                             -> SUCCEEDED
 *   failed, retryable, attempts remain    -> PENDING, run_after = now() + delay
 *   otherwise                             -> FAILED
 * The delay is the worker's (a Retry-After) or, when null, the endpoint's backoff.
 * The attempt row is finished in the same statement.
 */
import type pg from 'pg';
import type { AttemptOutcome } from '../types.js';

export interface Completion {
  executionId: string;
  epoch: number;
  outcome: AttemptOutcome;
  retryable: boolean;
  /** Explicit delay before the retry (Retry-After), else null for the endpoint's backoff. */
  retryDelayMs: number | null;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  responseExcerpt: string | null;
}

const COMPLETE = `
with done as (
  select * from unnest($1::uuid[], $2::bigint[], $3::text[], $4::boolean[], $5::double precision[],
                       $6::int[], $7::int[], $8::text[], $9::text[])
    as d(id, epoch, outcome, retryable, delay_ms, status_code, duration_ms, error, excerpt)
), fenced as (
  select e.id, e.lease_epoch, e.attempt_count, e.max_attempts, e.cancel_requested_at, en.backoff_base_ms, en.backoff_max_ms, en.jitter,
         d.outcome, d.retryable, d.delay_ms, d.error
  from done d
  join executions e on e.id = d.id
  join endpoints en on en.id = e.endpoint_id
  where e.lease_epoch = d.epoch
    and e.status = 'RUNNING'
    and e.lease_expires_at > now()
  for update of e
), decided as (
  select f.*,
         case
           when f.cancel_requested_at is not null then 'CANCELLED'
           when f.outcome = 'SUCCEEDED' then 'SUCCEEDED'
           when f.retryable and f.attempt_count < f.max_attempts then 'PENDING'
           else 'FAILED'
         end as next_status
  from fenced f
), updated as (
  update executions e
  set status = n.next_status,
      run_after = case when n.next_status = 'PENDING'
                       then now() + make_interval(secs => coalesce(n.delay_ms,
                              jobgate_backoff_ms(n.backoff_base_ms, n.backoff_max_ms, n.attempt_count, n.jitter)) / 1000)
                       else e.run_after end,
      lease_owner = null,
      lease_expires_at = null,
      last_error = case when n.next_status = 'SUCCEEDED' then null
                        when n.next_status = 'CANCELLED' then coalesce(n.error, 'cancelled')
                        else n.error end,
      finished_at = case when n.next_status = 'PENDING' then null else now() end,
      updated_at = now()
  from decided n
  where e.id = n.id
  returning e.id, e.lease_epoch, e.status
), attempts_done as (
  update attempts a
  set finished_at = now(),
      outcome = case when u.status = 'CANCELLED' and d.outcome <> 'SUCCEEDED' then 'CANCELLED' else d.outcome end,
      status_code = d.status_code,
      duration_ms = d.duration_ms,
      error = d.error,
      response_excerpt = d.excerpt
  from updated u join done d on d.id = u.id
  where a.execution_id = u.id and a.lease_epoch = u.lease_epoch
)
select id, status from updated`;

/** Records outcomes; returns the ids whose outcome was accepted, with their new status. */
export async function completeExecutions(pool: pg.Pool, items: Completion[]): Promise<Map<string, string>> {
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
    ],
  });
  return new Map(rows.map((r) => [r.id, r.status]));
}
