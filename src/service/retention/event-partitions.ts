/**
 * Live events kept by generation (migration 000062): the pruner's loop and a serverless pass keep
 * the partitions here before they take slices. Each turn, in one process at a time (the others
 * skip it): finish a detach cut short, start a new generation when the current one is older than
 * its span, and retire, detach and drop every ended generation past the longest events window in
 * force. A workspace whose own window is shorter still has its events deleted row by row by its
 * EVENTS slice; the others' are left to their partition (`eventsRowWindowMs`).
 *
 * A generation spans a third of the longest window, between an hour and a day: events are kept
 * their window and at most a third more (a day more at the 72 hours default), and a replay reads
 * five partitions or so.
 */
import {
  currentGeneration,
  dropGeneration,
  finishDetaches,
  generationsPast,
  longestEventsWindowHours,
  retire,
  rotate,
  withPartitionsLock,
} from '../../db/statements/event-partitions.js';
import type pg from 'pg';
import { NO_ROWS, type PrunedRows, type RetentionKind } from '../../db/statements/pruning.js';

/** What a turn needs of the pruner's settings (./pruning.ts's PruneContext is one). */
export interface PartitionKeeping {
  pool: pg.Pool;
  defaults: { eventsHours: number };
  /** Longest wait for open transactions before a detach is left pending for the next turn. */
  detachWaitMs: number;
  /** Told each workspace's events dropped with a generation, as a batch of its EVENTS slice. */
  report(batch: { workspaceId: string; kind: RetentionKind; rows: PrunedRows }): void;
}

const HOUR_MS = 3_600_000;

/** How long one generation is written before the next begins, for the longest window in force. */
export function generationSpanMs(longestHours: number): number {
  return Math.min(24, Math.max(1, longestHours / 3)) * HOUR_MS;
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
export async function keepEventPartitions(ctx: PartitionKeeping): Promise<PartitionTurn> {
  const turn = await withPartitionsLock(ctx.pool, async (client) => {
    const out: PartitionTurn = { rotated: false, dropped: [], held: true, waiting: false };
    if (!(await finishDetaches(client, ctx.detachWaitMs))) return { ...out, waiting: true };
    const hours = await longestEventsWindowHours(client, ctx.defaults.eventsHours);
    const current = await currentGeneration(client);
    if (current.ageMs >= generationSpanMs(hours)) {
      await rotate(client, current.gen);
      out.rotated = true;
    }
    for (const { gen, retired } of await generationsPast(client, hours)) {
      if (!retired) {
        for (const { workspaceId, events } of await retire(client, gen))
          ctx.report({ workspaceId, kind: 'EVENTS', rows: { ...NO_ROWS, events } });
      }
      if (!(await dropGeneration(client, gen, ctx.detachWaitMs))) return { ...out, waiting: true };
      out.dropped.push(gen);
    }
    return out;
  });
  return turn ?? { rotated: false, dropped: [], held: false, waiting: false };
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
