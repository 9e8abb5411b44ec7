/**
 * The runner of recoverable handlers (recoverable.ts): takes unowned live runs of the handlers it
 * has and executes them (run-store.ts), sweeps the runs of runners that stopped heartbeating.
 *
 *  - A runner takes an unowned RUNNING run of a handler it has (compare-and-set: owner, epoch
 *    + 1) and runs it; every write the handler's store makes is fenced on that epoch, so a
 *    runner that lost a run (declared crashed) cannot overwrite the one that took it over.
 *  - It heartbeats while the handler runs. A run whose runner stopped heartbeating (killed,
 *    host lost) is moved to PAUSED with the reason recorded — by the sweep every runner runs,
 *    also at start — and is resumed by an operator or its schedule, not automatically.
 *  - The engine never aborts a handler mid-batch: cancellation and shutdown only make
 *    `store.status()` answer CANCEL_REQUESTED, and the handler stops at its next safe boundary.
 *    A shutdown hands the run back (RUNNING, unowned) for another runner; a cancel pauses it.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { sweepStaleRuns, takeRun } from '../../../db/statements/run-fence.js';
import type { Logger } from '../../../log.js';
import { noopObserver, type Observer } from '../../kernel/observer.js';
import { createAvailability, type Availability } from '../runtime/availability.js';
import { createPollLoop } from '../runtime/poll-loop.js';
import type { RecoverableRegistry } from './recoverable.js';
import { executeRun, type RunExecutionDeps, type RunState } from './run-store.js';

export interface RunnerOptions {
  pool: pg.Pool;
  registry: RecoverableRegistry;
  log: Logger;
  ownerId?: string;
  heartbeatMs?: number;
  /**
   * A run this runner owns that is not heartbeated for this long is declared crashed (by any
   * runner's sweep: the window is recorded on the run). Default 30 s.
   */
  staleMs?: number;
  pollMs?: number;
  /** Runs executed at once by this runner. Default 4. */
  concurrency?: number;
  /** The process's view of its database: its loops report outages there, so one is logged once. */
  availability?: Availability;
  /** Where checkpoints are reported (metrics). Default: nowhere. */
  observer?: Observer | undefined;
}

export function createRunner(options: RunnerOptions) {
  const { pool, log } = options;
  const owner = options.ownerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const staleMs = options.staleMs ?? 30_000;
  const concurrency = options.concurrency ?? 4;
  const availability = options.availability ?? createAvailability(log, `runner ${owner}`);
  const deps: RunExecutionDeps = {
    pool,
    log,
    owner,
    heartbeatMs: options.heartbeatMs ?? 5000,
    availability,
    observer: options.observer ?? noopObserver,
  };
  // By run and epoch: a run taken again by this runner (swept while its heartbeat was late, then
  // resumed) while its earlier execution winds down is two entries, each counted and waited for.
  const active = new Map<string, RunState>();
  let running = false;
  const loop = createPollLoop({
    everyMs: options.pollMs ?? 1000,
    pass,
    onError: (error) => {
      if (!availability.unreachable(error, 'recoverable runner')) log.warn(`runner ${owner}: poll failed: ${(error as Error).message}`);
    },
  });

  /** Sweeps (unless just after an outage), then takes runs while there is room. */
  async function pass() {
    // Heartbeats that stopped while nobody could reach the database are not crashes: for
    // staleMs after an outage the runners that lived through it get to heartbeat first.
    if (!availability.down && availability.sinceBack() >= staleMs) {
      const askedAt = performance.now();
      for (const row of await sweepStaleRuns(pool, staleMs))
        log.warn(`runner ${owner}: run ${row.id} (${row.name}) stopped heartbeating; paused`, {
          kind: 'recoverable',
          handler: row.name,
          run_id: row.id,
          outcome: 'PAUSED',
          cause: 'CRASHED',
          completed: false,
          paused: true,
        });
      availability.reached(askedAt);
    }
    const names = options.registry.names();
    while (running && names.length > 0 && active.size < concurrency) {
      const askedAt = performance.now();
      const run = await takeRun(pool, owner, names, staleMs);
      availability.reached(askedAt);
      if (!run) break;
      const state: RunState = { stopping: false, lost: false, done: Promise.resolve() };
      const key = `${run.id}#${run.epoch}`;
      active.set(key, state);
      // A failure outside the handler (its outcome could not be written, a stored cursor that
      // does not parse) is logged, never an unhandled rejection: the sweep pauses the run once
      // its heartbeat stops.
      state.done = executeRun(options.registry.get(run.name)!, run, state, deps)
        .catch((error: unknown) =>
          log.error(
            `runner ${owner}: run ${run.id} (${run.name}) failed outside its handler: ${(error as Error)?.message ?? String(error)}`,
          ),
        )
        .finally(() => {
          active.delete(key);
          void loop.poke();
        });
    }
  }

  return {
    owner,
    /** Wakes the runner (tests and in-process triggers). */
    kick: () => void loop.poke(),
    active: () => active.size,
    async start() {
      if (running) return;
      running = true;
      await loop.start();
    },
    /** Asks running handlers to stop at their next boundary and hands their runs back. */
    async stop({ graceMs = 10_000 } = {}) {
      running = false;
      // A take in flight: its runs are stopped and handed back like any other.
      await loop.stop();
      for (const s of active.values()) s.stopping = true;
      await Promise.race([Promise.all([...active.values()].map((s) => s.done)), new Promise((r) => setTimeout(r, graceMs).unref())]);
    },
  };
}

export type Runner = ReturnType<typeof createRunner>;
