/**
 * Retention settings: how long each workspace keeps its finished history. The installation sets
 * the defaults (JOBGATE_RETENTION_*, JOBGATE_EVENT_RETENTION_HOURS); a workspace's ADMIN may set
 * its own windows. The pruning itself is engine work (src/service/engine/maintenance/pruner.ts, live
 * events included), which reads the same row.
 */
import { z } from 'zod';
import * as retentionRepo from '../../db/repositories/retention.js';
import type { Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { DEFAULT_RETENTION, type RetentionSettingsDefaults } from './windows.js';

/** The windows a workspace's history is kept for. Days of 0 keep that history forever. */
export interface RetentionWindows {
  /** SUCCEEDED and CANCELLED executions, with their attempts. */
  executionsDays: number;
  /** FAILED executions, with their attempts. */
  failedExecutionsDays: number;
  auditDays: number;
  /** COMPLETED and FAILED runs, with their findings. */
  runsDays: number;
  /** Live events (replayable by subscriptions' `after` cursors). */
  eventsHours: number;
}

export interface WorkspaceRetention extends RetentionWindows {
  /** The newest executions of each job, kept whatever their age. */
  keepPerJob: number;
  /** What the workspace set itself; null where it follows the installation's default. */
  overrides: { [K in keyof RetentionWindows]: number | null };
}

const days = z.number().int().min(0).max(36_500).nullable().optional();
const setRetentionSchema = z.strictObject({
  executionsDays: days,
  failedExecutionsDays: days,
  auditDays: days,
  runsDays: days,
  eventsHours: z.number().int().min(1).max(876_000).nullable().optional(),
});
/** Each field: a number sets the workspace's window, null returns it to the default, absent leaves it. */
export type SetRetentionInput = z.input<typeof setRetentionSchema>;

export function createRetentionService(ctx: ServiceContext, configured: Partial<RetentionSettingsDefaults> = {}) {
  const defaults: RetentionSettingsDefaults = { ...DEFAULT_RETENTION, ...configured };
  const view = (row: retentionRepo.RetentionOverridesRow | undefined): WorkspaceRetention => {
    const overrides = {
      executionsDays: row?.executions_days ?? null,
      failedExecutionsDays: row?.failed_executions_days ?? null,
      auditDays: row?.audit_days ?? null,
      runsDays: row?.runs_days ?? null,
      eventsHours: row?.events_hours ?? null,
    };
    return {
      executionsDays: overrides.executionsDays ?? defaults.executionsDays,
      failedExecutionsDays: overrides.failedExecutionsDays ?? defaults.failedExecutionsDays,
      auditDays: overrides.auditDays ?? defaults.auditDays,
      runsDays: overrides.runsDays ?? defaults.runsDays,
      eventsHours: overrides.eventsHours ?? defaults.eventsHours,
      keepPerJob: defaults.keepPerJob,
      overrides,
    };
  };
  return {
    /** The actor's workspace's retention windows, in effect now. Any role may read them. */
    async retention(actor: Actor): Promise<WorkspaceRetention> {
      return view(await retentionRepo.findRetention(ctx.db, actor.workspaceId));
    },

    /**
     * Sets the actor's workspace's own retention windows (ADMIN only; audited). A field left out
     * is unchanged; null returns it to the installation's default. The pruners use the new
     * windows from their next pass. Throws FORBIDDEN, VALIDATION_FAILED.
     */
    async setRetention(actor: Actor, raw: SetRetentionInput): Promise<WorkspaceRetention> {
      return mutate(
        ctx,
        actor,
        { action: 'workspace.setRetention', role: 'ADMIN', input: raw, target: { type: 'Workspace', id: actor.workspaceId } },
        async (trx) => {
          const input = parseInput(setRetentionSchema, raw);
          const row = await retentionRepo.setRetention(trx, actor.workspaceId, {
            executions_days: input.executionsDays,
            failed_executions_days: input.failedExecutionsDays,
            audit_days: input.auditDays,
            runs_days: input.runsDays,
            events_hours: input.eventsHours,
          });
          return view(row);
        },
      );
    },
  };
}
