/**
 * The pruner: every worker process runs one. It keeps finished history to its window (see
 * docs/operating.md, "Retention"): SUCCEEDED and CANCELLED executions, FAILED ones (kept longer by default),
 * the audit log, and finished runs with their findings. Live events are the reaper's
 * (src/service/engine/maintenance/reaper.ts), with the window set in the same place.
 *
 *  - Exactly once per slice: the work is cut into slices, one per workspace and kind of history
 *    (migration 000026). A worker takes a due slice that nobody holds (skip-locked read,
 *    compare-and-set with a new epoch) and prunes it to the end; any number of workers prune
 *    different slices at once.
 *  - Bounded batches, no long lock: each batch deletes at most `batchSize` rows (and their
 *    attempts or findings) in one short transaction that first checks this worker still holds
 *    the slice (its epoch), and audits its counts in one row. Between batches the pruner pauses
 *    at least four times as long as the batch took (`pauseFactor`), so it keeps a database
 *    connection busy at most a fifth of the time, and the engine's own statements get in between.
 *  - Live rows are never touched (PENDING, RUNNING executions; RUNNING, PAUSED,
 *    CANCEL_REQUESTED runs), nor the newest `keepPerJob` executions of any job, whatever their
 *    age: a job's page never goes blank.
 *  - A worker that stops hands its slice back (due at once); one that dies leaves it to expire
 *    after `leaseMs`, when another takes it with a new epoch and the dead one's late batch, if
 *    any, is fenced out.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import type { Logger } from '../../../log.js';
import {
  NO_ROWS,
  finishSlice,
  handBackSlice,
  pruneBatch,
  takeSlice,
  type ExecutionsPosition,
  type PrunedRows,
  type RetentionKind,
  type TakenSlice,
} from '../../../db/statements/pruning.js';
import { createAvailability, type Availability } from '../runtime/availability.js';
import { createPollLoop } from '../runtime/poll-loop.js';
import { DEFAULT_RETENTION, type RetentionDefaults } from '../../retention/windows.js';

export type { PrunedRows, RetentionKind } from '../../../db/statements/pruning.js';

/** One committed batch, as the hook sees it: rows deleted per table (zeros included). EVENTS batches come from the reaper. */
export interface PrunedBatch {
  workspaceId: string;
  kind: RetentionKind | 'EVENTS';
  rows: PrunedRows;
}

/** The hook's view of a batch of live events the reaper pruned. */
export function eventsBatch(workspaceId: string, events: number): PrunedBatch {
  return { workspaceId, kind: 'EVENTS', rows: { ...NO_ROWS, events } };
}

export interface PrunerOptions {
  pool: pg.Pool;
  log: Logger;
  defaults?: Partial<RetentionDefaults>;
  /** This pruner's name as a slice holder. Default host:pid:random. */
  id?: string;
  /** Rows a batch deletes at most. Default 1,000. */
  batchSize?: number;
  /** Least pause between batches, in ms. Default 50. */
  pauseMs?: number;
  /**
   * The pause after a batch is also at least this many times as long as the batch took, so the
   * pruner keeps a connection busy at most 1 / (1 + factor) of the time. Default 4 (a fifth).
   */
  pauseFactor?: number;
  /** How often each slice is pruned. Default 10 minutes. */
  everyMs?: number;
  /** How often the pruner looks for a due slice. Default 30 s. */
  pollMs?: number;
  /** A slice's lease, extended at each batch. Default 60 s. */
  leaseMs?: number;
  /**
   * Called after each committed batch with its counts (metrics: rows pruned per table). A hook
   * that throws is logged and ignored; it never stops pruning.
   */
  onPruned?: (batch: PrunedBatch) => void;
  /** The process's view of its database (shared with its other loops, so an outage is logged once). */
  availability?: Availability;
}

const DAY_MS = 86_400_000;

/** What pruning a slice needs: the pruner's settings, its hook and its pause. */
interface PruneContext {
  pool: pg.Pool;
  log: Logger;
  id: string;
  defaults: RetentionDefaults;
  batchSize: number;
  pauseMs: number;
  pauseFactor: number;
  everyMs: number;
  leaseMs: number;
  report(batch: PrunedBatch): void;
  /** A pause that stop() cuts short. */
  pause(ms: number): Promise<void>;
}

const days = (own: number | null, fallback: number) => {
  const d = own ?? fallback;
  return d === 0 ? null : d * DAY_MS;
};

/** A slice's windows: its workspace's overrides, else the installation's defaults. */
function windowsOf(slice: TakenSlice, defaults: RetentionDefaults) {
  const o = slice.overrides;
  const okMs = days(o.executionsDays, defaults.executionsDays);
  const failedMs = days(o.failedExecutionsDays, defaults.failedExecutionsDays);
  const windowMs = slice.kind === 'AUDIT' ? days(o.auditDays, defaults.auditDays) : days(o.runsDays, defaults.runsDays);
  const keeps = slice.kind === 'EXECUTIONS' ? okMs === null && failedMs === null : windowMs === null;
  return { okMs, failedMs, windowMs, keeps };
}

/**
 * Prunes one taken slice to the end (or until stopped, when it is handed back, or lost); returns
 * the rows deleted and whether it ran to the end.
 */
async function pruneBatches(
  ctx: PruneContext,
  slice: TakenSlice,
  stopping: () => boolean,
): Promise<{ total: number; batches: number; done: boolean }> {
  const { pool, log, id } = ctx;
  const { okMs, failedMs, windowMs } = windowsOf(slice, ctx.defaults);
  const outcome = { total: 0, batches: 0, done: false };
  let position: ExecutionsPosition | undefined;
  for (;;) {
    const started = performance.now();
    const result = await pruneBatch(
      pool,
      { slice, owner: id, leaseMs: ctx.leaseMs, batch: ctx.batchSize },
      { executions: { okMs, failedMs, keepPerJob: ctx.defaults.keepPerJob }, position, windowMs: windowMs ?? undefined },
    );
    if (!result.held) {
      log.warn(`pruner ${id}: lost its ${slice.kind} slice of workspace ${slice.workspaceId} (another worker took it over)`, {
        workspaceId: slice.workspaceId,
      });
      return outcome;
    }
    outcome.batches++;
    const rows = Object.values(result.pruned).reduce((a, b) => a + b, 0);
    outcome.total += rows;
    if (rows > 0) ctx.report({ workspaceId: slice.workspaceId, kind: slice.kind, rows: result.pruned });
    position = result.position;
    if (result.done) return { ...outcome, done: true };
    if (stopping()) break;
    await ctx.pause(Math.max(ctx.pauseMs, (performance.now() - started) * ctx.pauseFactor));
    if (stopping()) break;
  }
  await handBackSlice(pool, slice, id);
  return outcome;
}

/** Prunes one taken slice to the end (or until stopped); returns the rows deleted. */
async function pruneSlice(ctx: PruneContext, slice: TakenSlice, stopping: () => boolean): Promise<number> {
  const { total, batches, done } = windowsOf(slice, ctx.defaults).keeps
    ? { total: 0, batches: 0, done: true }
    : await pruneBatches(ctx, slice, stopping);
  if (!done) return total;
  await finishSlice(ctx.pool, slice, ctx.id, total, ctx.everyMs);
  if (total > 0)
    ctx.log.info(
      `pruner ${ctx.id}: workspace ${slice.workspaceId}: pruned ${total} ${slice.kind.toLowerCase()} rows in ${batches} batches`,
      {
        workspaceId: slice.workspaceId,
        kind: slice.kind,
        rows: total,
        batches,
      },
    );
  return total;
}

/** Builds a pruner's settings from its options. */
function pruneContextOf(options: PrunerOptions, id: string, wake: { cut: (() => void) | undefined }): PruneContext {
  const { log } = options;
  return {
    pool: options.pool,
    log,
    id,
    defaults: { ...DEFAULT_RETENTION, ...options.defaults },
    batchSize: options.batchSize ?? 1000,
    pauseMs: options.pauseMs ?? 50,
    pauseFactor: options.pauseFactor ?? 4,
    everyMs: options.everyMs ?? 10 * 60_000,
    leaseMs: options.leaseMs ?? 60_000,
    report(batch) {
      if (!options.onPruned) return;
      try {
        options.onPruned(batch);
      } catch (error) {
        log.warn(`pruner ${id}: the onPruned hook threw: ${(error as Error).message}`);
      }
    },
    pause(ms) {
      return new Promise<void>((resolve) => {
        const t = setTimeout(done, ms);
        function done() {
          clearTimeout(t);
          wake.cut = undefined;
          resolve();
        }
        wake.cut = done;
      });
    },
  };
}

export function createPruner(options: PrunerOptions) {
  const { pool, log } = options;
  const id = options.id ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const availability = options.availability ?? createAvailability(log, `pruner ${id}`);
  // `cut` ends the pause between batches at once (stop).
  const state: { running: boolean; cut: (() => void) | undefined } = { running: false, cut: undefined };
  const ctx = pruneContextOf(options, id, state);

  /** Takes and prunes due slices until none is left; returns the rows deleted. */
  async function drain(stopping: () => boolean): Promise<number> {
    let total = 0;
    while (!stopping()) {
      const askedAt = performance.now();
      const slice = await takeSlice(pool, id, ctx.leaseMs);
      availability.reached(askedAt);
      if (!slice) break;
      try {
        total += await pruneSlice(ctx, slice, stopping);
      } catch (error) {
        await handBackSlice(pool, slice, id).catch(() => {});
        throw error;
      }
    }
    return total;
  }

  const loop = createPollLoop({
    everyMs: options.pollMs ?? 30_000,
    pass: async () => {
      await drain(() => !state.running);
    },
    onError(error) {
      if (!availability.unreachable(error, 'retention')) log.warn(`pruner ${id}: pruning failed: ${(error as Error).message}`);
    },
  });

  return {
    id,
    /**
     * Prunes every due slice now, in this process, whether or not the loop runs (tests, the
     * library). Throws what a batch throws. Returns the rows deleted.
     */
    runOnce: (): Promise<number> => drain(() => false),
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
