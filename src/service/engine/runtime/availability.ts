/**
 * One process's view of whether its database answers. Every loop of the engine (claims,
 * heartbeats, the reconciler, outcomes, the scheduler, the catalogue, runners) reports here
 * instead of logging each failed try: an outage is said once when it starts and once when it
 * ends, whatever the number of loops and retries in between, and the reconciler can tell that
 * leases expired while nobody could reach the database (see `sinceBack`).
 */
import { performance } from 'node:perf_hooks';
import { explainFault } from '../../../db/faults.js';
import { isConnectionError, isSaturation } from '../../../db/unavailable.js';
import type { Logger } from '../../../log.js';

export interface Availability {
  /**
   * Whether the caller should wait and retry `error` without logging it itself: the database is
   * unreachable (the outage is noted, and the first report of one logged), or it answers but has
   * no connection for us just now (a saturated pool, isSaturation: logged once until a statement
   * is answered, and no outage: `down` stays as it was).
   */
  unreachable(error: unknown, what: string): boolean;
  /**
   * A statement asked at `askedAt` (performance.now()) got its answer: ends the outage, if one
   * was noted before it was asked (logged once). An answer to a statement already under way when
   * the outage was noted proves nothing: it may come from a connection the outage had not reached
   * yet.
   */
  reached(askedAt: number): void;
  /** Whether an outage has been noted and no statement has been answered since. */
  readonly down: boolean;
  /** Milliseconds since the last outage ended; Infinity when there has been none. */
  sinceBack(): number;
  /**
   * Calls `fn` each time an outage ends, whichever loop noticed: a worker whose own claims had
   * not failed yet claims at once instead of at its next poll. Returns the unsubscribe.
   */
  onBack(fn: () => void): () => void;
}

export function createAvailability(log: Logger, name = 'jobgate'): Availability {
  let downSince: number | undefined;
  let backAt: number | undefined;
  let saturatedSaid = false;
  const listeners = new Set<() => void>();
  return {
    unreachable(error, what) {
      if (!isConnectionError(error)) return false;
      if (isSaturation(error)) {
        if (!saturatedSaid) {
          saturatedSaid = true;
          log.warn(`${name}: no database connection free (${what}: ${(error as Error)?.message ?? String(error)}); retrying`);
        }
        return true;
      }
      if (downSince === undefined) {
        downSince = performance.now();
        log.warn(
          `${name}: the database is unreachable (${what}: ${(error as Error)?.message ?? String(error)}); waiting for it, retrying every second at most`,
        );
      }
      return true;
    },
    reached(askedAt) {
      saturatedSaid = false;
      if (downSince === undefined || askedAt < downSince) return;
      const ms = performance.now() - downSince;
      downSince = undefined;
      backAt = performance.now();
      // At the level of the line it ends, so whoever sees that an outage began sees it end.
      log.warn(`${name}: the database answers again after ${(ms / 1000).toFixed(1)} s; resuming`);
      for (const fn of listeners) fn();
    },
    get down() {
      return downSince !== undefined;
    },
    sinceBack() {
      return backAt === undefined ? Infinity : performance.now() - backAt;
    },
    onBack(fn) {
      listeners.add(fn);
      return () => void listeners.delete(fn);
    },
  };
}

/**
 * Whether leases that ran out may be reconciled now. Not while the database is unreachable, nor
 * for `leaseMs` after it answers again: leases that ran out while nobody could reach the database
 * are no evidence that their workers died, and the owners that lived through the outage get a
 * lease's length to heartbeat, record or hand back first. A worker that did die is reconciled
 * after that. Every reconciler asks this (the worker's loop, the serverless pass).
 */
export function mayReconcile(availability: Availability, leaseMs: number): boolean {
  return !availability.down && availability.sinceBack() >= leaseMs;
}

/**
 * Runs `attempt` until it gets through, for start-up and for a write an outage must not drop (a
 * run's end, src/service/engine/runs/run-store.ts): while the database cannot be reached (an
 * outage, a server still starting, a database refusing connections) it waits, at most a second
 * between tries, and says so once through `availability` (and once when the database answers).
 * Any other error is thrown at once, with what to fix when it is a fault no wait cures (bad
 * credentials, no such database, migrations refused: src/db/faults.ts). `signal` ends the wait
 * (the promise rejects with its reason). The wait's timer is referenced: a process awaiting its
 * start-up stays up while it waits.
 */
export async function waitForDatabase<T>(
  availability: Availability,
  what: string,
  attempt: () => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  for (let tries = 0; ; tries++) {
    signal?.throwIfAborted();
    const askedAt = performance.now();
    try {
      const result = await attempt();
      availability.reached(askedAt);
      return result;
    } catch (error) {
      if (!availability.unreachable(error, what)) throw explainFault(error);
    }
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal!.reason);
      };
      const timer = setTimeout(
        () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.min(1_000, 100 * 2 ** tries),
      );
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
