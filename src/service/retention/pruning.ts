/**
 * Pruning finished history, slice by slice (the rules are the README's "Retention"; the SQL is
 * src/db/statements/pruning.ts): taking a slice, pruning it in bounded, fenced batches, and
 * handing it back or finishing it. The engine's pruner (src/service/engine/maintenance/pruner.ts)
 * runs it in a loop; a serverless pass and an on-demand prune run a bounded amount of it
 * (`pruneBounded`).
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import type { Logger } from '../../log.js';
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
} from '../../db/statements/pruning.js';
import { eventsRowWindowMs, keepEventPartitions } from './event-partitions.js';
import { DEFAULT_RETENTION, type RetentionDefaults } from './windows.js';

export type { PrunedRows, RetentionKind } from '../../db/statements/pruning.js';

/** One committed batch, as the hook sees it: rows deleted per table (zeros included). */
export interface PrunedBatch {
  workspaceId: string;
  kind: RetentionKind;
  rows: PrunedRows;
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
  /**
   * Whether the engine beside the pruner is behind its queue (in a worker process: one of its
   * workers' last claim came back full). While it is, the pause after a batch is `busyPauseFactor`
   * times as long as the batch took instead, so pruning takes less from a drain. Default: never.
   */
  busy?: () => boolean;
  /**
   * The pause factor while `busy()`: the pruner keeps a connection busy at most 1 / (1 + factor) of
   * the time. Default 24 (a twenty-fifth).
   */
  busyPauseFactor?: number;
  /** How often each slice is pruned. Default 10 minutes. */
  everyMs?: number;
  /** A slice's lease, extended at each batch. Default 60 s. */
  leaseMs?: number;
  /**
   * Longest wait for the open transactions before detaching an old partition of live events
   * (./event-partitions.ts); writers go on meanwhile. A detach cut short is finished next turn.
   * Default 5 s.
   */
  detachWaitMs?: number;
  /**
   * Called after each committed batch with its counts (metrics: rows pruned per table). A hook
   * that throws is logged and ignored; it never stops pruning.
   */
  onPruned?: (batch: PrunedBatch) => void;
}

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

/** What pruning a slice needs: the pruner's settings, its hook and its pause. */
export interface PruneContext {
  pool: pg.Pool;
  log: Logger;
  id: string;
  defaults: RetentionDefaults;
  batchSize: number;
  pauseMs: number;
  pauseFactor: number;
  busy: () => boolean;
  busyPauseFactor: number;
  everyMs: number;
  leaseMs: number;
  detachWaitMs: number;
  /**
   * Whether live events past the longest window go with their partition (the loop, a serverless
   * pass), so the EVENTS slice deletes row by row only what a shorter window asks; false on demand,
   * which prunes to the workspace's window now.
   */
  eventsByGeneration: boolean;
  report(batch: PrunedBatch): void;
  /** A pause that stop() cuts short. */
  pause(ms: number): Promise<void>;
  /** Called after each batch (committed or not), so a bounded prune can count them. */
  batchDone?: () => void;
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
  const windowMs =
    slice.kind === 'AUDIT'
      ? days(o.auditDays, defaults.auditDays)
      : slice.kind === 'ALERTS'
        ? days(null, defaults.alertNotificationsDays)
        : slice.kind === 'EVENTS'
          ? (o.eventsHours ?? defaults.eventsHours) * HOUR_MS
          : days(o.runsDays, defaults.runsDays);
  // A job goes with its executions, so it is kept while either kind of execution is kept forever.
  const keeps =
    slice.kind === 'EXECUTIONS'
      ? okMs === null && failedMs === null
      : slice.kind === 'JOBS'
        ? okMs === null && failedMs === null
        : windowMs === null;
  return { okMs, failedMs, windowMs, keeps };
}

/**
 * Prunes one taken slice to the end (or until stopped, when it is handed back, or lost); returns
 * the rows deleted and whether it ran to the end.
 */
async function pruneBatches(ctx: PruneContext, slice: TakenSlice, stopping: () => boolean): Promise<SliceOutcome> {
  const { pool, log, id } = ctx;
  const { okMs, failedMs } = windowsOf(slice, ctx.defaults);
  let { windowMs } = windowsOf(slice, ctx.defaults);
  if (slice.kind === 'EVENTS' && windowMs !== null && ctx.eventsByGeneration) windowMs = await eventsRowWindowMs(ctx, windowMs);
  const outcome: SliceOutcome = { total: 0, batches: 0, done: false, rows: { ...NO_ROWS } };
  let position: ExecutionsPosition | undefined = slice.position;
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
    ctx.batchDone?.();
    const rows = Object.values(result.pruned).reduce((a, b) => a + b, 0);
    outcome.total += rows;
    addRows(outcome.rows, result.pruned);
    if (rows > 0) ctx.report({ workspaceId: slice.workspaceId, kind: slice.kind, rows: result.pruned });
    position = result.position;
    if (result.done) return { ...outcome, done: true };
    if (stopping()) break;
    const factor = ctx.busy() ? ctx.busyPauseFactor : ctx.pauseFactor;
    // The factor's pause never past half the slice's lease, which the next batch extends: a long
    // batch (a busy database) times a large factor would otherwise let the lease lapse and another
    // worker take the slice over. (`pauseMs` is the operator's own.)
    await ctx.pause(Math.max(ctx.pauseMs, Math.min((performance.now() - started) * factor, ctx.leaseMs / 2)));
    if (stopping()) break;
  }
  await handBackSlice(pool, slice, id, position);
  return outcome;
}

interface SliceOutcome {
  total: number;
  batches: number;
  done: boolean;
  /** Rows deleted per table. */
  rows: PrunedRows;
}

function addRows(into: PrunedRows, rows: Readonly<PrunedRows>): void {
  for (const key of Object.keys(into) as (keyof PrunedRows)[]) into[key] += rows[key];
}

/** Prunes one taken slice to the end (or until stopped); returns what it deleted and whether it finished. */
async function pruneSlice(ctx: PruneContext, slice: TakenSlice, stopping: () => boolean): Promise<SliceOutcome> {
  const outcome = windowsOf(slice, ctx.defaults).keeps
    ? { total: 0, batches: 0, done: true, rows: { ...NO_ROWS } }
    : await pruneBatches(ctx, slice, stopping);
  const { total, batches, done } = outcome;
  if (!done) return outcome;
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
  return outcome;
}

/** Builds a pruner's settings from its options. */
export function pruneContextOf(options: PrunerOptions, id: string, wake: { cut: (() => void) | undefined }): PruneContext {
  const { log } = options;
  return {
    pool: options.pool,
    log,
    id,
    defaults: { ...DEFAULT_RETENTION, ...options.defaults },
    batchSize: options.batchSize ?? 1000,
    pauseMs: options.pauseMs ?? 50,
    pauseFactor: options.pauseFactor ?? 4,
    busy: options.busy ?? (() => false),
    busyPauseFactor: options.busyPauseFactor ?? 24,
    everyMs: options.everyMs ?? 10 * 60_000,
    leaseMs: options.leaseMs ?? 60_000,
    detachWaitMs: options.detachWaitMs ?? 5_000,
    eventsByGeneration: true,
    report(batch) {
      if (!options.onPruned) return;
      try {
        options.onPruned(batch);
      } catch (error) {
        log.warn(`pruner ${id}: the onPruned hook threw: ${(error as Error).message}`);
      }
    },
    pause(ms) {
      if (ms <= 0) return Promise.resolve();
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

/**
 * Takes and prunes slices until none is left or `stopping()`: any workspace's due ones, or (with
 * `workspaceId`) each of that workspace's slices once, due or not. A slice left unfinished is
 * handed back, due at once.
 */
export async function drainSlices(
  ctx: PruneContext,
  availability: { reached(askedAt: number): void } | undefined,
  stopping: () => boolean,
  workspaceId?: string,
): Promise<{ total: number; rows: PrunedRows; complete: boolean }> {
  const out = { total: 0, rows: { ...NO_ROWS }, complete: false };
  const taken: RetentionKind[] = [];
  while (!stopping()) {
    const askedAt = performance.now();
    const slice = await takeSlice(ctx.pool, ctx.id, ctx.leaseMs, workspaceId ? { workspaceId, skip: taken } : undefined);
    availability?.reached(askedAt);
    if (!slice) {
      // On demand, a slice another worker holds right now is not this call's to finish.
      out.complete = !workspaceId || RETENTION_KINDS.every((k) => taken.includes(k));
      break;
    }
    taken.push(slice.kind);
    try {
      const outcome = await pruneSlice(ctx, slice, stopping);
      out.total += outcome.total;
      addRows(out.rows, outcome.rows);
    } catch (error) {
      await handBackSlice(ctx.pool, slice, ctx.id).catch(() => {});
      throw error;
    }
  }
  return out;
}

const RETENTION_KINDS: readonly RetentionKind[] = ['EXECUTIONS', 'JOBS', 'RUNS', 'AUDIT', 'ALERTS', 'EVENTS'];

/** What a bounded prune removed: rows per table, and whether it got through everything it was to look at. */
export interface PruneReport {
  removed: PrunedRows;
  /** False when it stopped at its budget (or a slice was busy): more may be due. */
  complete: boolean;
}

export interface BoundedPruneOptions extends PrunerOptions {
  /** Most batches this call runs, over all slices (each at most `batchSize` rows). */
  maxBatches: number;
  /** Prune this workspace's slices, due or not (on demand); without it, any workspace's due ones. */
  workspaceId?: string | undefined;
}

/**
 * One bounded prune in the caller's time (a serverless pass, an on-demand prune): the same
 * slices, batches, fences, audit rows and pauses between batches as the pruner's loop, at most
 * `maxBatches` batches. Throws what a batch throws.
 */
export async function pruneBounded(options: BoundedPruneOptions): Promise<PruneReport> {
  const id = options.id ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  let batches = 0;
  const ctx: PruneContext = {
    ...pruneContextOf(options, id, { cut: undefined }),
    batchDone: () => batches++,
    eventsByGeneration: !options.workspaceId,
  };
  // The partitions' count of an old generation spends the same budget, a chunk a batch.
  if (!options.workspaceId) await keepEventPartitions(ctx, () => batches >= options.maxBatches);
  const { rows, complete } = await drainSlices(ctx, undefined, () => batches >= options.maxBatches, options.workspaceId);
  return { removed: rows, complete };
}
