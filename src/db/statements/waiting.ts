/**
 * Why a PENDING execution is waiting: the first of the claim's gates (claim.ts) that holds it,
 * read from the same definitions the claim uses, so the answer cannot drift from what the claim
 * does. Gates in the order an operator acts on them: a lever someone pulled (the endpoint or the
 * job paused), then its job's prerequisites (a workflow's order), then time (not due yet, a retry's backoff, the target's Retry-After), then the queue's own rules (the
 * previous occurrence of a serial job, the endpoint's concurrency limit, the workspace's cap, the key's
 * concurrency limit, the endpoint's rate limit, the key's), then
 * capacity (no live worker can deliver it). READY: nothing holds it, and the next claim with room takes it, in due
 * order. A read at one instant: by the time it is shown, the execution may have started.
 */
import { sql } from 'kysely';
import type { Executor } from '../repositories/scope.js';
import { scoped } from '../repositories/scope.js';
import { JOB_RUNS, SERIAL_TURN, tokensNow } from './claim.js';
import { workerIsLive } from './workers.js';

export const WAIT_REASONS = [
  'ENDPOINT_PAUSED',
  'JOB_PAUSED',
  'PREREQUISITES',
  'NOT_DUE',
  'RETRY_BACKOFF',
  'ENDPOINT_RETRY_AFTER',
  'PREVIOUS_OCCURRENCE',
  'ENDPOINT_CONCURRENCY_FULL',
  'WORKSPACE_CONCURRENCY_FULL',
  'KEY_CONCURRENCY_FULL',
  'RATE_LIMITED',
  'KEY_RATE_LIMITED',
  'NO_LIVE_WORKER',
  'READY',
] as const;
export type WaitReason = (typeof WAIT_REASONS)[number];

export interface WaitingRow {
  id: string;
  reason: WaitReason;
  /**
   * NOT_DUE and RETRY_BACKOFF: when it becomes due; ENDPOINT_RETRY_AFTER: when its target's
   * Retry-After runs out; RATE_LIMITED: when its endpoint's next token comes; KEY_RATE_LIMITED:
   * when its concurrency key's next token comes.
   */
  until: Date | null;
  /** ENDPOINT_RETRY_AFTER: the target's answer (429 or 503). */
  retry_after_status: number | null;
  /** PREREQUISITES: the jobs it still waits for (no outcome yet), at most ten, in id order; null for the other reasons. */
  open_prerequisites: string[] | null;
  /** PREREQUISITES: how many it still waits for. */
  open_prerequisite_count: number | null;
  /** ENDPOINT_PAUSED: since when. */
  paused_at: Date | null;
  endpoint_name: string;
  handler_name: string | null;
  concurrency_limit: number | null;
  /** Attempts of its endpoint in flight now (counted only when the endpoint has a limit). */
  running: number | null;
  /** KEY_CONCURRENCY_FULL: its concurrency key, the endpoint's per-key limit and the key's attempts in flight. */
  concurrency_key: string | null;
  key_concurrency_limit: number | null;
  key_running: number | null;
  /** WORKSPACE_CONCURRENCY_FULL: the workspace's cap and its attempts in flight. */
  workspace_concurrency_limit: number | null;
  workspace_running: number | null;
  /** KEY_RATE_LIMITED: the endpoint's rate limit per key. */
  key_rate_limit_count: number | null;
  key_rate_limit_period_ms: number | null;
  rate_limit_count: number | null;
  rate_limit_period_ms: number | null;
  attempt_count: number;
  max_attempts: number;
}

// The pending executions asked about (`pend`) are read first; what their endpoints' gates hold
// is read once per endpoint (`eps`), and attempts in flight once per key (`key_running`), not
// once per execution: so a count over every pending execution (the metrics scrape) costs about
// one join per execution. Followed by the filter on `e` (executions) and WAITING_REST.
const WAITING_HEAD = `with pend as materialized (
  select e.id, e.workspace_id, e.job_id, e.endpoint_id, e.attempt_count, e.max_attempts, e.run_after, e.trigger,
         e.concurrency_key, e.serial, e.scheduled_for, e.blocked
  from executions e where e.status = 'PENDING' and `;
const WAITING_GATES = `), eps as materialized (
  select en.id, en.name, en.kind, en.handler_name, en.concurrency_limit, en.paused_at, en.rate_limit_count,
         en.rate_limit_period_ms, en.key_concurrency_limit, ra.until as ra_until, ra.status_code as retry_after_status, tk.tokens,
         en.key_rate_limit_count, en.key_rate_limit_period_ms,
         case when en.concurrency_limit is not null
              then (select count(*)::int from executions x where x.endpoint_id = en.id and x.status = 'RUNNING') end as running,
         case when en.workspace_capped then w.concurrency_limit end as workspace_concurrency_limit,
         case when en.workspace_capped
              then (select count(*)::int from executions x join endpoints xe on xe.id = x.endpoint_id
                    where x.workspace_id = en.workspace_id and x.status = 'RUNNING' and xe.workspace_capped) end as workspace_running,
         exists (
           select 1 from workers w
           where ${workerIsLive('w')}
             and (en.kind = 'HTTP' or exists (select 1 from jsonb_to_recordset(w.handlers) as h(kind text, name text)
                                              where h.kind = 'HANDLER' and h.name = en.handler_name))
         ) as deliverable
  from endpoints en
  join workspaces w on w.id = en.workspace_id
  left join endpoint_retry_after ra on ra.endpoint_id = en.id and ra.until > now()
  left join endpoint_rate_buckets b on b.endpoint_id = en.id
  left join lateral (select ${tokensNow('en', 'b')} as tokens) tk on en.rate_limit_count is not null
  where en.id in (select endpoint_id from pend)
), key_running as materialized (
  select x.endpoint_id, x.concurrency_key, count(*)::int as running from executions x
  where x.status = 'RUNNING' and x.concurrency_key <> ''
    and x.endpoint_id in (select id from eps where key_concurrency_limit is not null)
  group by 1, 2
), key_tokens as materialized (
  select kb.endpoint_id, kb.concurrency_key, ${tokensNow('en', 'kb', 'key_rate_limit')} as tokens
  from endpoint_key_rate_buckets kb join endpoints en on en.id = kb.endpoint_id
  where en.key_rate_limit_count is not null
    and kb.endpoint_id in (select id from eps where key_rate_limit_count is not null)
    and kb.refilled_at > now() - make_interval(secs => en.key_rate_limit_period_ms::float8 / en.key_rate_limit_count / 1000)
)`;
const WAITING_SELECT = `
select e.id, e.endpoint_id, e.attempt_count, e.max_attempts, en.name as endpoint_name, en.handler_name, en.concurrency_limit,
       en.paused_at, en.rate_limit_count, en.rate_limit_period_ms, en.running, en.retry_after_status,
       e.concurrency_key, en.key_concurrency_limit, en.workspace_concurrency_limit, en.workspace_running,
       case when e.blocked then array(select d.prerequisite_id from job_dependencies d where d.job_id = e.job_id and d.outcome is null
                                      order by d.prerequisite_id limit 10) end as open_prerequisites,
       case when e.blocked then (select count(*)::int from job_dependencies d where d.job_id = e.job_id and d.outcome is null) end
         as open_prerequisite_count,
       en.key_rate_limit_count, en.key_rate_limit_period_ms,
       case when en.key_concurrency_limit is not null and e.concurrency_key <> '' then coalesce(kr.running, 0) end as key_running,
       case when e.run_after > now() then e.run_after
            when en.ra_until is not null then en.ra_until
            when en.tokens < 1 then clock_timestamp() + make_interval(secs => (1 - en.tokens) * en.rate_limit_period_ms / en.rate_limit_count / 1000)
            when kt.tokens < 1 then clock_timestamp() + make_interval(secs => (1 - kt.tokens) * en.key_rate_limit_period_ms / en.key_rate_limit_count / 1000)
       end as until,
       case
         when en.paused_at is not null then 'ENDPOINT_PAUSED'
         when not ${JOB_RUNS} then 'JOB_PAUSED'
         when e.blocked then 'PREREQUISITES'
         when e.run_after > now() and e.attempt_count > 0 then 'RETRY_BACKOFF'
         when e.run_after > now() then 'NOT_DUE'
         when en.ra_until is not null then 'ENDPOINT_RETRY_AFTER'
         when not ${SERIAL_TURN} then 'PREVIOUS_OCCURRENCE'
         when en.running >= en.concurrency_limit then 'ENDPOINT_CONCURRENCY_FULL'
         when en.workspace_running >= en.workspace_concurrency_limit then 'WORKSPACE_CONCURRENCY_FULL'
         when e.concurrency_key <> '' and coalesce(kr.running, 0) >= en.key_concurrency_limit then 'KEY_CONCURRENCY_FULL'
         when en.tokens < 1 then 'RATE_LIMITED'
         when e.concurrency_key <> '' and kt.tokens < 1 then 'KEY_RATE_LIMITED'
         when not en.deliverable then 'NO_LIVE_WORKER'
         else 'READY'
       end as reason
from pend e
join jobs j on j.id = e.job_id
join eps en on en.id = e.endpoint_id
left join key_running kr on kr.endpoint_id = e.endpoint_id and kr.concurrency_key = e.concurrency_key
left join key_tokens kt on kt.endpoint_id = e.endpoint_id and kt.concurrency_key = e.concurrency_key`;

/**
 * The waiting reason of each of `ids` that is PENDING in the workspace (others are left out).
 * The gates' SQL is claim.ts's own where it can be: SERIAL_TURN verbatim; CLAIMABLE's parts
 * (due; job ACTIVE, or PAUSED with a manual trigger) and DELIVERABLE's (not paused; a handler a
 * live worker registered) as separate cases, since here each must be told apart.
 */
export async function waitingReasons(db: Executor, workspaceId: string, ids: readonly string[]): Promise<WaitingRow[]> {
  if (ids.length === 0) return [];
  const { rows } =
    await sql<WaitingRow>`${sql.raw(WAITING_HEAD)} e.workspace_id = ${scoped(workspaceId)} and e.id = any(${[...ids]}::uuid[])
    ${sql.raw(WAITING_GATES + WAITING_SELECT)}`.execute(db);
  return rows;
}

/**
 * Every pending execution of the installation counted by its endpoint and its waiting reason (the
 * same reason waitingReasons gives it): the metrics scrape's statement (no parameters).
 */
export const WAITING_COUNTS = `${WAITING_HEAD}true${WAITING_GATES}, waiting as (${WAITING_SELECT})
select w.endpoint_id, w.endpoint_name as endpoint, w.reason, count(*)::int as count from waiting w group by 1, 2, 3 order by 2, 3`;
