/**
 * The reaper: every workspace's system job (provisioned by migration 000003 with the workspace)
 * runs this handler, which retires the workspace's cron jobs past their endsAt and stops their
 * schedules, and drops the workspace's live events older than the retention window. Its endpoint is INTERNAL: users cannot create jobs on it, change it or cancel it.
 */
import type pg from 'pg';
import { pruneEvents } from '../../db/queries/events.js';
import type { HandlerFn, HandlerRegistry } from './handlers.js';
import { registerAlertHandlers, type AlertEmailOptions } from './alert-handlers.js';

export const REAPER_HANDLER = 'jobgate.reaper';

/**
 * Retires ended cron jobs of one workspace, as cancelJob does, in one statement: the jobs are
 * retired, their pending executions cancelled, their running ones asked to stop, and each
 * retirement audited (as jobgate itself). Returns how many jobs.
 */
const REAP = `
with reaped as (
  update jobs set status = 'RETIRED', retired_at = now(), next_fire_at = null, updated_at = now()
  where workspace_id = $1 and kind = 'CRON' and status <> 'RETIRED' and ends_at is not null and ends_at <= now()
  returning id, workspace_id
), ended as (
  -- One UPDATE over both states, as cancelJob's (cancelLiveExecutions): an execution whose outcome
  -- turns it from RUNNING back to PENDING meanwhile is still cancelled, not left pending for good.
  update executions
  set status = case when status = 'PENDING' then 'CANCELLED' else status end,
      finished_at = case when status = 'PENDING' then now() else finished_at end,
      last_error = case when status = 'PENDING' then 'job ended (endsAt passed)' else last_error end,
      cancel_requested_at = case when status = 'RUNNING' then coalesce(cancel_requested_at, now()) else cancel_requested_at end,
      updated_at = now()
  where job_id in (select id from reaped) and status in ('PENDING', 'RUNNING')
  returning id, status
), audited as (
  insert into audit_log (workspace_id, actor_kind, action, target_type, target_id, input, result_code)
  select workspace_id, 'system', 'job.reap', 'Job', id::text, '{}'::jsonb, 'OK' from reaped
)
select (select count(*) from reaped)::int as jobs, coalesce((select array_agg(id) from ended where status = 'RUNNING'), '{}') as asked`;

export async function reapEndedCronJobs(pool: pg.Pool, workspaceId: string): Promise<number> {
  const { rows } = await pool.query<{ jobs: number; asked: string[] }>(REAP, [workspaceId]);
  for (const id of rows[0]!.asked) await pool.query(`select pg_notify('jobgate_cancel', $1)`, [id]);
  return rows[0]!.jobs;
}

/** How long live events are kept for subscriptions to replay, unless configured. */
export const DEFAULT_EVENT_RETENTION_MS = 72 * 3_600_000;

/** Registers jobgate's own handlers (once per registry). */
export function registerInternalHandlers(
  registry: HandlerRegistry,
  pool: pg.Pool,
  options: { eventRetentionMs?: number; alerts?: AlertEmailOptions; onEventsPruned?: (workspaceId: string, events: number) => void } = {},
): void {
  // The alert evaluator and email sender are internal work too (migration 000020).
  registerAlertHandlers(registry, pool, options.alerts);
  if (registry.get(REAPER_HANDLER)) return;
  const reaper: HandlerFn = async (_input, ctx) => {
    await reapEndedCronJobs(pool, ctx.workspaceId);
    // Live events past the retention window: a subscription can no longer replay from before it.
    await pruneEvents(
      pool,
      ctx.workspaceId,
      options.eventRetentionMs ?? DEFAULT_EVENT_RETENTION_MS,
      (n) => options.onEventsPruned?.(ctx.workspaceId, n),
      ctx.signal,
    );
  };
  registry.register(REAPER_HANDLER, undefined, reaper);
}
