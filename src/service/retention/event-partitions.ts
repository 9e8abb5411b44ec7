/**
 * Live events kept by generation (migration 000062): the pruner's loop and a serverless pass keep
 * the partitions here before they take slices. Each turn, in one process at a time (the others
 * skip it): finish a detach cut short, start a new generation when the current one is older than
 * its span, and retire, detach and drop every ended generation past the longest events window in
 * force. A workspace whose own window is shorter still has its events deleted row by row by its
 * EVENTS slice; the others' are left to their partition (`eventsRowWindowMs`).
 *
 * A generation spans a third of the longest window, at least an hour: events are kept their
 * window and at most a third more (a day more at the 72 hours default), and a replay reads five
 * partitions or so. Writers move to a generation only once its partition has been attached for a
 * span: a statement routes its rows with the partitions there were when it began (one that began
 * before the attach failed to write into it). A turn attaches the next one ahead, the spare.
 */
import {
  countChunk,
  currentGeneration,
  dropGeneration,
  ensureAttached,
  finishDetaches,
  generationsPast,
  idRange,
  longestEventsWindowHours,
  retire,
  rotate,
  saveCount,
  withPartitionsLock,
  type Counted,
} from '../../db/statements/event-partitions.js';
import type pg from 'pg';
import { NO_ROWS, type PrunedRows, type RetentionKind } from '../../db/statements/pruning.js';

/** What a turn needs of the pruner's settings (./pruning.ts's PruneContext is one). */
export interface PartitionKeeping {
  pool: pg.Pool;
  defaults: { eventsHours: number };
  /** Longest wait for open transactions before a detach is left pending for the next turn. */
  detachWaitMs: number;
  /** The pruner's batch size: a generation's events are counted `CHUNK_PER_BATCH` times as many ids at a time. */
  batchSize: number;
  /** The pruner's pace between batches, kept between chunks too (./pruning.ts). */
  pauseMs: number;
  pauseFactor: number;
  busy: () => boolean;
  busyPauseFactor: number;
  pause(ms: number): Promise<void>;
  /** Called after each chunk counted, so a bounded prune counts it as a batch. */
  batchDone?: () => void;
  /** Told each workspace's events dropped with a generation, as a batch of its EVENTS slice. */
  report(batch: { workspaceId: string; kind: RetentionKind; rows: PrunedRows }): void;
}

/**
 * Ids counted in one chunk per row of a pruning batch: 100,000 at the default batch of 1,000, about
 * as long to count (by the partition's primary key) as a batch of the EVENTS slice takes to delete
 * its 10,000.
 */
export const CHUNK_PER_BATCH = 100;

const HOUR_MS = 3_600_000;

/**
 * How long one generation is written before the next begins, for the longest window in force: a
 * third of it, at least an hour, so a window of any length is kept in four or five partitions.
 */
export function generationSpanMs(longestHours: number): number {
  return Math.max(1, longestHours / 3) * HOUR_MS;
}

export interface PartitionTurn {
  /** Whether a new generation began. */
  rotated: boolean;
  /** Generations dropped. */
  dropped: number[];
  /** False when another process was keeping them (nothing was done). */
  held: boolean;
  /**
   * A detach waited its longest (`detachWaitMs`) for open transactions and is left pending, to be
   * finished next turn; nothing after it was done this turn.
   */
  waiting: boolean;
}

/** One turn of keeping the partitions (see the file's comment). Throws what a statement throws. */
export async function keepEventPartitions(ctx: PartitionKeeping, stopping: () => boolean = () => false): Promise<PartitionTurn> {
  const turn = await withPartitionsLock(ctx.pool, async (client) => {
    const out: PartitionTurn = { rotated: false, dropped: [], held: true, waiting: false };
    const hours = await longestEventsWindowHours(client, ctx.defaults.eventsHours);
    const span = generationSpanMs(hours);
    const current = await currentGeneration(client);
    await ensureAttached(client, current.gen);
    const spare = await ensureAttached(client, current.gen + 1);
    if (current.ageMs >= span && spare.attachedAgeMs >= span) {
      await rotate(client, current.gen);
      await ensureAttached(client, current.gen + 2);
      out.rotated = true;
    }
    const finished = await finishDetaches(client, ctx.detachWaitMs);
    out.dropped.push(...finished.dropped);
    if (finished.waiting) return { ...out, waiting: true };
    for (const past of await generationsPast(client, hours)) {
      if (!past.retired) {
        const kept = await countGeneration(ctx, client, past, stopping);
        if (!kept) return out;
        await retire(client, past.gen, kept);
        for (const { workspaceId, events } of kept) ctx.report({ workspaceId, kind: 'EVENTS', rows: { ...NO_ROWS, events } });
      }
      if (!(await dropGeneration(client, past.gen, ctx.detachWaitMs))) return { ...out, waiting: true };
      out.dropped.push(past.gen);
    }
    return out;
  });
  return turn ?? { rotated: false, dropped: [], held: false, waiting: false };
}

/**
 * A generation's events per workspace, counted a chunk of ids at a time with the pruner's pause
 * after each (a twenty-fifth of a connection while the workers are behind), so the read does not
 * take a drain's cores as one scan would (a parallel scan of 1,500,000 events took both cores of
 * this machine for 0.3 s). Each chunk's count is saved, so a turn stopped (a stopping pruner, a
 * serverless pass's budget, a crash) goes on from there next time. Undefined when stopped.
 */
async function countGeneration(
  ctx: PartitionKeeping,
  client: pg.PoolClient,
  past: { gen: number; counted: Counted; countedThrough: number | null },
  stopping: () => boolean,
) {
  const { gen } = past;
  const counted: Counted = { ...past.counted };
  const range = await idRange(client, gen);
  const chunk = Math.max(1, ctx.batchSize * CHUNK_PER_BATCH);
  let after = past.countedThrough ?? (range ? range.lo - 1 : 0);
  while (range && after < range.hi) {
    if (stopping()) return undefined;
    const started = performance.now();
    const upTo = Math.min(after + chunk, range.hi);
    for (const { workspaceId, n, through } of await countChunk(client, gen, after, upTo)) {
      const seen = counted[workspaceId] ?? { n: 0, through: 0 };
      counted[workspaceId] = { n: seen.n + n, through: Math.max(seen.through, through) };
    }
    await saveCount(client, gen, counted, upTo);
    ctx.batchDone?.();
    after = upTo;
    if (after >= range.hi) break;
    const factor = ctx.busy() ? ctx.busyPauseFactor : ctx.pauseFactor;
    await ctx.pause(Math.max(ctx.pauseMs, (performance.now() - started) * factor));
  }
  return Object.entries(counted).map(([workspaceId, c]) => ({ workspaceId, events: c.n, through: c.through }));
}

/**
 * The window the EVENTS slice deletes a workspace's events by, row by row: its own when shorter
 * than the longest in force (its partitions outlive it); otherwise they go with their partition,
 * and the slice only catches what a stalled turn left, past two spans more.
 */
export async function eventsRowWindowMs(ctx: PartitionKeeping, windowMs: number): Promise<number> {
  const hours = await longestEventsWindowHours(ctx.pool, ctx.defaults.eventsHours);
  return windowMs < hours * HOUR_MS ? windowMs : windowMs + 2 * generationSpanMs(hours);
}
