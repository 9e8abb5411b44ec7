/**
 * Pruning on demand (GraphQL `pruneHistory`, the library's `gate.prune()`): the actor's workspace's
 * history pruned now to the windows in effect, whether or not its slices are due, in the pruner's
 * own bounded, fenced batches (./pruning.ts), and an answer saying what went.
 */
import { z } from 'zod';
import { silentLogger } from '../../log.js';
import type { Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { ValidationError } from '../kernel/errors.js';
import { pruneBounded, type PrunedRows } from './pruning.js';
import { DEFAULT_RETENTION, type RetentionSettingsDefaults } from './windows.js';

const pruneSchema = z.strictObject({
  maxBatches: z.number().int().min(1).max(10_000).nullable().optional(),
});
/** `maxBatches`: most batches (each at most the installation's batch size) this call runs; default 100. */
export type PruneHistoryInput = z.input<typeof pruneSchema>;

/** What an on-demand prune removed. */
export interface PruneHistoryResult {
  /** Rows deleted per table (attempts with their executions, findings with their runs). */
  removed: PrunedRows;
  /** False when it stopped at `maxBatches`, or a slice was being pruned by a worker at that moment: call again. */
  complete: boolean;
}

export type PruneDefaults = Partial<RetentionSettingsDefaults & { batchSize: number; pauseMs: number }>;

export function createPruneService(ctx: ServiceContext, configured: PruneDefaults = {}) {
  return {
    /**
     * Prunes the actor's workspace's finished history now (ADMIN only; audited), as the pruner
     * would: the same windows, live rows never touched, batches of one short transaction each
     * (each also audited as jobgate's own 'retention.prune'). Bounded by `maxBatches`; answers the
     * rows removed per table. Not inside a caller's transaction (each batch commits on its own).
     * Throws FORBIDDEN, VALIDATION_FAILED.
     */
    async pruneHistory(actor: Actor, raw: PruneHistoryInput = {}): Promise<PruneHistoryResult> {
      return mutate(
        ctx,
        actor,
        { action: 'workspace.pruneHistory', role: 'ADMIN', input: raw, target: { type: 'Workspace', id: actor.workspaceId } },
        async () => {
          const input = parseInput(pruneSchema, raw);
          const pool = ctx.pool;
          if (!pool || ctx.outer) {
            throw ValidationError.at([], "pruning commits batch by batch; it cannot run inside the caller's transaction");
          }
          const report = await pruneBounded({
            pool,
            log: silentLogger,
            defaults: { ...DEFAULT_RETENTION, ...configured },
            batchSize: configured.batchSize,
            pauseMs: configured.pauseMs,
            maxBatches: input.maxBatches ?? 100,
            workspaceId: actor.workspaceId,
            onPruned: (batch) => ctx.observer.historyPruned(batch.rows),
          });
          return { removed: report.removed, complete: report.complete };
        },
      );
    },
  };
}
