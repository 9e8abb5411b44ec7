/**
 * The reaper: every workspace's system job (provisioned by migration 000003 with the workspace)
 * runs this handler, which retires the workspace's cron jobs past their endsAt and stops their
 * schedules, drops the workspace's live events older than the retention window, and its concurrency
 * keys' full rate buckets. Its endpoint is INTERNAL: users cannot create jobs on it, change it or cancel it.
 */
import type pg from 'pg';
import { pruneEvents } from '../../../db/statements/events.js';
import { deleteFullKeyBuckets, notifyCancel, reapEndedCronJobsOf } from '../../../db/statements/reap.js';
import type { HandlerFn, HandlerRegistry } from '../delivery/handler-registry.js';
import { registerAlertHandlers, type AlertEmailOptions } from '../alerts/alert-handlers.js';

export const REAPER_HANDLER = 'jobgate.reaper';

/**
 * Retires ended cron jobs of one workspace, as cancelJob does, in one statement
 * (src/db/statements/reap.ts), and asks the workers running their executions to stop. Returns how
 * many jobs.
 */
export async function reapEndedCronJobs(pool: pg.Pool, workspaceId: string): Promise<number> {
  const { jobs, asked } = await reapEndedCronJobsOf(pool, workspaceId);
  await notifyCancel(pool, asked);
  return jobs;
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
    await deleteFullKeyBuckets(pool, ctx.workspaceId);
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
