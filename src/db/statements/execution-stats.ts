/**
 * The overview's aggregate: what the workspace's executions are doing now and did over a recent
 * window, in three statements that each read only what the window or the live statuses touch.
 *
 * Plans (1,000,000 executions of one workspace over 24 hours, 60-minute window; bench/console.ts
 * measures the whole query):
 * - live per endpoint: index-only scan of executions_workspace_live (PENDING/RUNNING only);
 * - dead-letter size per endpoint: index-only scan of executions_workspace_failed_endpoint;
 * - ended in the window: index-only range scan of executions_workspace_finished (the window's rows);
 * - started in the window: index-only range scan of executions_workspace_attempt_started.
 * Without migration 000027 each of these read every execution of the workspace. Latency was first
 * read from attempt rows joined to their executions by primary key: 40,000 lookups an hour at this
 * volume, about 700 ms; the execution row itself carries the latest attempt's start
 * (attempt_started_at, set by the claim) and when it was due (run_after), so no join is needed.
 */
import { sql } from 'kysely';
import type { Executor } from '../repositories/scope.js';
import { scoped } from '../repositories/scope.js';
import { workerIsLive } from './workers.js';

export interface EndpointStatusCounts {
  endpointId: string;
  endpointName: string;
  /** An INTERNAL endpoint: jobgate's own work (alert delivery, the reaper, retention), not the workspace's. */
  internal: boolean;
  pending: number;
  running: number;
  /** All FAILED executions (the dead-letter queue), whenever they failed. */
  failed: number;
  /** When the endpoint was paused; null when it is not. */
  pausedAt: Date | null;
  /** Until when its target holds it (a 429 or 503 with Retry-After); null when no hold is in force. */
  heldUntil: Date | null;
  /** Ended in the window, by status. */
  succeededInWindow: number;
  failedInWindow: number;
  cancelledInWindow: number;
}

export interface MinuteBucket {
  /** Start of the minute. */
  minute: Date;
  succeeded: number;
  failed: number;
  /** Executions whose latest attempt started in this minute. */
  started: number;
  /** Due-to-start latency of those attempts (start minus when it was due), milliseconds; null without any. */
  latencyP50Ms: number | null;
  latencyP95Ms: number | null;
}

export async function endpointStatusCounts(ex: Executor, workspaceId: string, windowMinutes: number): Promise<EndpointStatusCounts[]> {
  const ws = scoped(workspaceId);
  const { rows } = await sql<{
    endpoint_id: string;
    name: string;
    internal: boolean;
    paused_at: Date | null;
    held_until: Date | null;
    pending: string;
    running: string;
    failed: string;
    succeeded_w: string;
    failed_w: string;
    cancelled_w: string;
  }>`
    with live as (
      select endpoint_id, count(*) filter (where status = 'PENDING') as pending, count(*) filter (where status = 'RUNNING') as running
      from executions where workspace_id = ${ws} and status in ('PENDING', 'RUNNING') group by endpoint_id
    ), dead as (
      select endpoint_id, count(*) as failed from executions where workspace_id = ${ws} and status = 'FAILED' group by endpoint_id
    ), ended as (
      select endpoint_id,
             count(*) filter (where status = 'SUCCEEDED') as succeeded_w,
             count(*) filter (where status = 'FAILED') as failed_w,
             count(*) filter (where status = 'CANCELLED') as cancelled_w
      from executions
      where workspace_id = ${ws} and finished_at is not null and finished_at >= now() - make_interval(mins => ${windowMinutes})
      group by endpoint_id
    ), ids as (select endpoint_id from live union select endpoint_id from dead union select endpoint_id from ended)
    select ids.endpoint_id, e.name, e.type = 'INTERNAL' as internal, e.paused_at,
           (select max(r.until) from endpoint_retry_after r where r.endpoint_id = ids.endpoint_id and r.until > now()) as held_until,
           coalesce(live.pending, 0) as pending, coalesce(live.running, 0) as running, coalesce(dead.failed, 0) as failed,
           coalesce(ended.succeeded_w, 0) as succeeded_w, coalesce(ended.failed_w, 0) as failed_w, coalesce(ended.cancelled_w, 0) as cancelled_w
    from ids
    join endpoints e on e.workspace_id = ${ws} and e.id = ids.endpoint_id
    left join live on live.endpoint_id = ids.endpoint_id
    left join dead on dead.endpoint_id = ids.endpoint_id
    left join ended on ended.endpoint_id = ids.endpoint_id
    order by e.name, ids.endpoint_id`.execute(ex);
  return rows.map((r) => ({
    endpointId: r.endpoint_id,
    endpointName: r.name,
    internal: r.internal,
    pausedAt: r.paused_at,
    heldUntil: r.held_until,
    pending: Number(r.pending),
    running: Number(r.running),
    failed: Number(r.failed),
    succeededInWindow: Number(r.succeeded_w),
    failedInWindow: Number(r.failed_w),
    cancelledInWindow: Number(r.cancelled_w),
  }));
}

/**
 * One bucket per minute of the window, oldest first, the current (partial) minute last. Executions
 * on INTERNAL endpoints (jobgate's own work) are left out: the buckets are the workspace's
 * activity. The workspace's internal endpoints are read once (an InitPlan, a handful of ids), so
 * the scans keep their indexes and only drop those rows.
 */
export async function minuteBuckets(ex: Executor, workspaceId: string, windowMinutes: number): Promise<MinuteBucket[]> {
  const ws = scoped(workspaceId);
  const internal = sql`array(select id from endpoints where workspace_id = ${ws} and type = 'INTERNAL')`;
  const { rows } = await sql<{
    minute: Date;
    succeeded: string | null;
    failed: string | null;
    started: string | null;
    p50: number | null;
    p95: number | null;
  }>`
    with minutes as (
      select generate_series(date_trunc('minute', now()) - make_interval(mins => ${windowMinutes - 1}), date_trunc('minute', now()), interval '1 minute') as minute
    ), ended as (
      select date_trunc('minute', finished_at) as minute,
             count(*) filter (where status = 'SUCCEEDED') as succeeded,
             count(*) filter (where status = 'FAILED') as failed
      from executions
      where workspace_id = ${ws} and finished_at is not null
        and finished_at >= date_trunc('minute', now()) - make_interval(mins => ${windowMinutes - 1})
        and endpoint_id <> all(${internal})
      group by 1
    ), started as (
      select date_trunc('minute', attempt_started_at) as minute, count(*) as started,
             percentile_cont(0.5) within group (order by extract(epoch from (attempt_started_at - run_after)) * 1000) as p50,
             percentile_cont(0.95) within group (order by extract(epoch from (attempt_started_at - run_after)) * 1000) as p95
      from executions
      where workspace_id = ${ws} and attempt_started_at is not null
        and attempt_started_at >= date_trunc('minute', now()) - make_interval(mins => ${windowMinutes - 1})
        and endpoint_id <> all(${internal})
      group by 1
    )
    select m.minute, ended.succeeded, ended.failed, started.started, started.p50, started.p95
    from minutes m left join ended using (minute) left join started using (minute)
    order by m.minute`.execute(ex);
  return rows.map((r) => ({
    minute: r.minute,
    succeeded: Number(r.succeeded ?? 0),
    failed: Number(r.failed ?? 0),
    started: Number(r.started ?? 0),
    // A negative latency (an attempt started before it was due: a forced trigger) is 0.
    latencyP50Ms: r.p50 === null ? null : Math.max(0, Math.round(Number(r.p50))),
    latencyP95Ms: r.p95 === null ? null : Math.max(0, Math.round(Number(r.p95))),
  }));
}

/** Worker processes that heartbeated within their own staleness window (installation-wide). */
export async function liveWorkerCount(ex: Executor): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    select count(*) as n from workers w where ${sql.raw(workerIsLive('w'))}`.execute(ex);
  return Number(rows[0]?.n ?? 0);
}
