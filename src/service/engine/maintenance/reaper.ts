/**
 * The reaper: every workspace's system job (provisioned by migration 000003 with the workspace)
 * runs this handler, which retires the workspace's cron jobs past their endsAt and stops their
 * schedules, and drops its concurrency keys' full rate buckets. Its endpoint is INTERNAL: users
 * cannot create jobs on it, change it or cancel it. Live events past their window are the
 * pruner's (migration 000061).
 */
import type pg from 'pg';
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

/** Registers jobgate's own handlers (once per registry). */
export function registerInternalHandlers(registry: HandlerRegistry, pool: pg.Pool, options: { alerts?: AlertEmailOptions } = {}): void {
  // The alert evaluator and email sender are internal work too (migration 000020).
  registerAlertHandlers(registry, pool, options.alerts);
  if (registry.get(REAPER_HANDLER)) return;
  const reaper: HandlerFn = async (_input, ctx) => {
    await reapEndedCronJobs(pool, ctx.workspaceId);
    await deleteFullKeyBuckets(pool, ctx.workspaceId);
  };
  registry.register(REAPER_HANDLER, undefined, reaper);
}
