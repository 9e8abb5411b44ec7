/**
 * A worker's leases (worker.ts): heartbeats that renew them, and the self-fence when they cannot
 * be renewed. A heartbeat's answer decides each attempt it was sent for (matched on the lease
 * epoch); an execution missing from it was taken over and its attempt is aborted. Expiry alone is
 * no loss: a lease is its owner's until someone takes it, so a heartbeat renews an expired lease
 * nobody took. Hence the self-fence, when no heartbeat has succeeded for `fenceAfterMs`, asks the
 * database rather than guess (see fenceCheck).
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import type { ClaimedExecution } from '../../../db/statements/claim.js';
import { heartbeat } from '../../../db/statements/lease.js';
import { isSaturation } from '../../../db/unavailable.js';
import type { Logger } from '../../../log.js';
import type { Observer } from '../../kernel/observer.js';
import type { Availability } from '../runtime/availability.js';
import { reportConflictRetry, retryConflicts } from './conflict-retry.js';
import type { AbortReason } from '../delivery/deliver.js';
import type { InFlight } from './state.js';

export interface LeaseKeeperDeps {
  id: string;
  pool: pg.Pool;
  log: Logger;
  observer: Observer;
  availability: Availability;
  /** The leases held: attempts running, and attempts ended whose outcome is not recorded yet. */
  inFlight: Map<string, InFlight>;
  leaseMs: number;
  heartbeatMs: number;
  fenceAfterMs: number;
}

/** What the keeper knows of its leases between heartbeats. */
interface LeaseHealth {
  /** When the leases were last known to be held (performance.now()). */
  lastLeaseOk: number;
  /** The heartbeat in flight, if any: its answer decides what a silence meant. */
  beating: Promise<void> | undefined;
  /**
   * Why the last heartbeat failed, until one succeeds: the database could not be reached
   * ('unreachable'), it answered with an error ('error'), it did not answer in time ('timeout': a
   * stuck connection, a lock wait; not a known outage), or no connection was free for it
   * ('saturated': a full pool, max_connections; the database answers others, so no outage).
   */
  beatFailure: 'unreachable' | 'error' | 'timeout' | 'saturated' | undefined;
  /** Whether this outage's "attempts keep running" line was logged. */
  keptRunningSaid: boolean;
}

export interface LeaseKeeper {
  /** How often the self-fence looks. */
  fenceTickMs: number;
  /** Sends a heartbeat, or shares the one in flight. */
  beat(): Promise<void>;
  /** The self-fence (see there): run every fenceTickMs. */
  fenceCheck(): void;
  /** A claim sent at `sentAt` took leases: they are held as of then. */
  claimedAt(sentAt: number): void;
}

// eslint-disable-next-line max-lines-per-function -- one worker's lease upkeep: beat and fenceCheck share its LeaseHealth, each explained where it is written
export function createLeaseKeeper(deps: LeaseKeeperDeps): LeaseKeeper {
  const { id, pool, log, observer, availability, inFlight, leaseMs, heartbeatMs, fenceAfterMs } = deps;
  const fenceTickMs = Math.max(250, Math.min(1000, Math.floor(fenceAfterMs / 4)));
  const state: LeaseHealth = { lastLeaseOk: performance.now(), beating: undefined, beatFailure: undefined, keptRunningSaid: false };

  /**
   * One heartbeat at a time: a timer firing while one is in flight shares it. Each is bounded
   * (see beatOnce), so a heartbeat that hangs releases the next tick to send a fresh one.
   */
  function beat(): Promise<void> {
    state.beating ??= beatOnce().finally(() => {
      state.beating = undefined;
    });
    return state.beating;
  }

  async function beatOnce() {
    if (inFlight.size === 0) {
      state.lastLeaseOk = performance.now();
      state.beatFailure = undefined;
      return;
    }
    const held = [...inFlight.values()].map((f) => ({ id: f.ex.id, epoch: f.ex.lease_epoch }));
    const sentAt = performance.now();
    // A heartbeat has no statement timeout of its own: one on a stuck pooled connection (a
    // half-open socket, a lock wait) could hang for minutes while the self-fence waited on its
    // answer and other workers' reconcilers took the leases. It gets until the fence is due (at
    // least a fence tick, at most a heartbeat period); past that it counts as failed, not as an
    // outage, and its late answer is ignored: the next heartbeat asks again.
    const limitMs = Math.max(fenceTickMs, Math.min(heartbeatMs, fenceAfterMs - (sentAt - state.lastLeaseOk)));
    let timer: NodeJS.Timeout | undefined;
    // A conflict (a deadlock Postgres broke, a serialization failure) rolled the heartbeat back
    // whole: sending it again is safe, since it renews only leases still held at their epoch.
    const sent = retryConflicts(() => heartbeat(pool, held, leaseMs), reportConflictRetry(deps, 'heartbeat', 'heartbeat'));
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), limitMs);
      timer.unref();
    });
    try {
      const answer = await Promise.race([sent, timedOut]);
      if (answer === 'timeout') {
        sent.catch(() => {});
        state.beatFailure = 'timeout';
        log.warn(`worker ${id}: heartbeat got no answer within ${Math.round(limitMs)} ms; counted as failed`);
        return;
      }
      const alive = answer;
      availability.reached(sentAt);
      state.lastLeaseOk = sentAt;
      state.beatFailure = undefined;
      state.keptRunningSaid = false;
      for (const h of held) {
        const f = inFlight.get(h.id);
        // Only the attempt this heartbeat was sent for: the execution may have been claimed again
        // since (its earlier lease taken over), and that attempt is answered by later heartbeats.
        if (!f || f.ex.lease_epoch !== h.epoch || f.controller.signal.aborted) continue;
        if (!alive.has(h.id)) {
          // An ended attempt's outcome may have been recorded since the heartbeat was sent.
          if (!f.finished) {
            log.warn(`worker ${id}: lease of ${h.id} lost; aborting its attempt`, idsOf(f.ex));
            observer.leaseLost();
            f.controller.abort('lease-lost' satisfies AbortReason);
          }
        } else if (alive.get(h.id)) {
          f.controller.abort('cancelled' satisfies AbortReason);
        }
      }
    } catch (error) {
      if (availability.unreachable(error, 'heartbeat')) state.beatFailure = isSaturation(error) ? 'saturated' : 'unreachable';
      else {
        state.beatFailure = 'error';
        log.warn(`worker ${id}: heartbeat failed: ${(error as Error).message}`);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The self-fence, when no heartbeat has succeeded for `fenceAfterMs`. An expired lease is still
   * this worker's until another takes it over, and only the database can say whether that
   * happened, so the attempts are not aborted for a silence the database explains:
   *  - a heartbeat in flight: its answer decides (an execution missing from it is aborted); it
   *    is bounded (beatOnce), and one that does not answer in time is a failure, not an outage;
   *  - the database unreachable: the attempts run on, and when it answers the first heartbeat
   *    (sent on its return) renews the leases nobody took and aborts the rest. Reconcilers wait
   *    a lease after an outage, so an owner that lived through it renews first; only a worker
   *    cut off alone, while the others reached the database, can find its executions taken;
   *  - heartbeats that reached the database and failed, or got no answer in time (a hang is not
   *    a known outage): the worker cannot learn whether it still holds its leases, so it aborts
   *    its attempts before another worker may run them, whether or not a heartbeat is in flight;
   *  - no heartbeat tried (the event loop was blocked): one is sent now.
   */
  function fenceCheck() {
    const silent = performance.now() - state.lastLeaseOk;
    if (silent < fenceAfterMs || inFlight.size === 0) return;
    const running = [...inFlight.values()].filter((f) => !f.finished && !f.controller.signal.aborted);
    // An attempt that has ended only waits for its outcome's record: nothing to stop.
    if (running.length === 0) return;
    // The last heartbeat failed and the database is not known to be down: a heartbeat in flight
    // gets no more time, since another worker may already run these executions.
    const failed =
      (state.beatFailure === 'error' || state.beatFailure === 'timeout' || state.beatFailure === 'saturated') && !availability.down;
    if (state.beating && !failed) return;
    if (availability.down) {
      if (!state.keptRunningSaid) {
        state.keptRunningSaid = true;
        log.warn(
          `worker ${id}: ${running.length} attempt(s) keep running although their leases cannot be renewed while the database is unreachable; whether they are still this worker's is asked first when it answers`,
        );
      }
      return;
    }
    if (!failed) return void beat();
    for (const f of running) {
      observer.leaseLost();
      f.givenUp = true;
      f.controller.abort('lease-lost' satisfies AbortReason);
    }
    const why =
      state.beatFailure === 'timeout'
        ? 'heartbeats get no answer in time'
        : state.beatFailure === 'saturated'
          ? 'no database connection is free for heartbeats'
          : 'the database answers but does not renew them';
    log.error(
      `worker ${id}: no heartbeat for ${Math.round(silent)} ms; aborted ${running.length} attempt(s) before their leases expire (${why})`,
    );
  }

  return {
    fenceTickMs,
    beat,
    fenceCheck,
    claimedAt: (sentAt) => {
      state.lastLeaseOk = Math.max(state.lastLeaseOk, sentAt);
    },
  };
}

/** The ids an engine log line about one attempt carries (structured fields, see src/log.ts). */
export function idsOf(ex: ClaimedExecution | undefined, executionId = ex?.id): { executionId?: string; jobId?: string; attempt?: number } {
  return ex ? { executionId: ex.id, jobId: ex.job_id, attempt: ex.attempt_count } : { executionId };
}
