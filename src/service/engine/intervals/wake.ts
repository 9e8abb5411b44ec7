/**
 * Wake-ups between the engine's parts in one process. The worker holds the process's LISTEN
 * connection; the interval runner (in the engine host) has none of its own and polls. A hint the
 * listener receives for the interval handlers (an `interval` hint on the work channel,
 * src/db/channels.ts) is passed on here, keyed by the pool both parts were built on (a composition
 * root builds its worker and host on its one pool), so a triggered tick starts within a round
 * trip instead of a poll period. Only a hint: the runner's poll still finds what one misses.
 */
import type pg from 'pg';

const intervalWakers = new WeakMap<pg.Pool, Set<() => void>>();

/** Calls `fn` on each interval hint received for `pool`'s database; returns the unsubscribe. */
export function onIntervalHint(pool: pg.Pool, fn: () => void): () => void {
  let set = intervalWakers.get(pool);
  if (!set) intervalWakers.set(pool, (set = new Set()));
  set.add(fn);
  return () => void set.delete(fn);
}

/** Passes an interval hint on to the interval runners built on `pool`. */
export function wakeIntervals(pool: pg.Pool): void {
  for (const fn of intervalWakers.get(pool) ?? []) fn();
}
