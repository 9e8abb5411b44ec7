/**
 * The pruner: every worker process runs one. It keeps finished history to its window (see
 * docs/operating.md, "Retention"): SUCCEEDED and CANCELLED executions, FAILED ones (kept longer by default),
 * finished one-off and retired jobs whole, the audit log, finished runs with their findings, alert
 * notifications and live events (moving the workspace's replay horizon; those past every window
 * go with their partition, src/service/retention/event-partitions.ts). The slice work itself is
 * src/service/retention/pruning.ts (a serverless pass and an on-demand prune run a bounded amount
 * of it); this file is its loop.
 *
 *  - Exactly once per slice: the work is cut into slices, one per workspace and kind of history
 *    (migrations 000026, 000032, 000061). A worker takes a due slice that nobody holds (skip-locked read,
 *    compare-and-set with a new epoch) and prunes it to the end; any number of workers prune
 *    different slices at once.
 *  - Bounded batches, no long lock: each batch deletes at most `batchSize` rows (and their
 *    attempts or findings) in one short transaction that first checks this worker still holds
 *    the slice (its epoch), and audits its counts in one row. Between batches the pruner pauses
 *    at least four times as long as the batch took (`pauseFactor`), so it keeps a database
 *    connection busy at most a fifth of the time, and the engine's own statements get in between.
 *    While the process's workers are behind their queue (`busy`: a claim came back full) it
 *    pauses 24 times as long (`busyPauseFactor`): a twenty-fifth, so a drain loses less to it;
 *    history it leaves then is pruned at the full pace once they catch up. No pause outlasts
 *    half the slice's lease, so a long one never hands the slice to another worker.
 *  - Live rows are never touched (PENDING, RUNNING executions; RUNNING, PAUSED,
 *    CANCEL_REQUESTED runs), nor the newest `keepPerJob` executions of a job that is kept, whatever
 *    their age: a job's page never goes blank. A job goes only with all its executions.
 *  - A worker that stops hands its slice back (due at once); one that dies leaves it to expire
 *    after `leaseMs`, when another takes it with a new epoch and the dead one's late batch, if
 *    any, is fenced out.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { keepEventPartitions } from '../../retention/event-partitions.js';
import { drainSlices, pruneContextOf, type PrunerOptions as SliceOptions } from '../../retention/pruning.js';
import { createAvailability, type Availability } from '../runtime/availability.js';
import { createPollLoop } from '../runtime/poll-loop.js';

export {
  pruneBounded,
  type BoundedPruneOptions,
  type PrunedBatch,
  type PrunedRows,
  type PruneReport,
  type RetentionKind,
} from '../../retention/pruning.js';

export interface PrunerOptions extends SliceOptions {
  /** How often the pruner looks for a due slice. Default 30 s. */
  pollMs?: number;
  /** The process's view of its database (shared with its other loops, so an outage is logged once). */
  availability?: Availability;
}

export function createPruner(options: PrunerOptions) {
  const { log } = options;
  const id = options.id ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const availability = options.availability ?? createAvailability(log, `pruner ${id}`);
  // `cut` ends the pause between batches at once (stop).
  const state: { running: boolean; cut: (() => void) | undefined } = { running: false, cut: undefined };
  const ctx = pruneContextOf(options, id, state);

  /**
   * One turn of keeping the live events' partitions. What it throws is logged and does not stop the
   * slices.
   */
  async function keepPartitions(): Promise<void> {
    try {
      const turn = await keepEventPartitions(ctx, () => !state.running);
      if (turn.waiting)
        log.info(`pruner ${id}: an old partition of live events waits for open transactions; its detach finishes next turn`);
    } catch (error) {
      if (!availability.unreachable(error, 'retention'))
        log.warn(`pruner ${id}: keeping the live events' partitions failed: ${(error as Error).message}`);
    }
  }

  /** Takes and prunes due slices until none is left; returns the rows deleted. */
  async function drain(stopping: () => boolean): Promise<number> {
    return (await drainSlices(ctx, availability, stopping)).total;
  }

  const loop = createPollLoop({
    everyMs: options.pollMs ?? 30_000,
    pass: async () => {
      await keepPartitions();
      await drain(() => !state.running);
    },
    onError(error) {
      if (!availability.unreachable(error, 'retention')) log.warn(`pruner ${id}: pruning failed: ${(error as Error).message}`);
    },
  });

  return {
    id,
    /**
     * Keeps the live events' partitions (one turn) and prunes every due slice now, in this
     * process, whether or not the loop runs (tests, the library). Throws what a batch throws.
     * Returns the rows the slices deleted.
     */
    runOnce: async (): Promise<number> => {
      await keepEventPartitions(ctx);
      return drain(() => false);
    },
    start() {
      if (state.running) return;
      state.running = true;
      void loop.start();
    },
    /** Stops after the batch in flight; its slice is handed back, due at once for another worker. */
    async stop() {
      if (!state.running) return;
      state.running = false;
      state.cut?.();
      await loop.stop();
    },
  };
}

export type Pruner = ReturnType<typeof createPruner>;
