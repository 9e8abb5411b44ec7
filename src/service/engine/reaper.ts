/**
 * The reaper: every workspace's system job (provisioned by migration 000003 with the workspace)
 * runs this handler, which retires the workspace's cron jobs past their endsAt and stops their
 * schedules. Its endpoint is INTERNAL: users cannot create jobs on it, change it or cancel it.
 */
import type pg from 'pg';
import type { HandlerFn, HandlerRegistry } from './handlers.js';

export const REAPER_HANDLER = 'jobgate.reaper';

/** Retires ended cron jobs of one workspace; returns how many. */
export async function reapEndedCronJobs(pool: pg.Pool, workspaceId: string): Promise<number> {
  const { rowCount } = await pool.query(
    `update jobs set status = 'RETIRED', retired_at = now(), next_fire_at = null, updated_at = now()
     where workspace_id = $1 and kind = 'CRON' and status <> 'RETIRED' and ends_at is not null and ends_at <= now()`,
    [workspaceId],
  );
  return rowCount ?? 0;
}

/** Registers jobgate's own handlers (once per registry). */
export function registerInternalHandlers(registry: HandlerRegistry, pool: pg.Pool): void {
  if (registry.get(REAPER_HANDLER)) return;
  const reaper: HandlerFn = async (_input, ctx) => {
    await reapEndedCronJobs(pool, ctx.workspaceId);
  };
  registry.register(REAPER_HANDLER, undefined, reaper);
}
