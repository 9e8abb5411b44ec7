/**
 * A worker's attempts (worker.ts): starts each claimed execution's attempt through the delivery,
 * counts the attempts running (what `concurrency` bounds), and hands each ended attempt's outcome
 * to the outcome recorder, or holds it while the worker is handing the execution back at stop.
 */
import { performance } from 'node:perf_hooks';
import type { ClaimedExecution } from '../../../db/statements/claim.js';
import type { Completion } from '../../../db/statements/complete.js';
import type { Logger } from '../../../log.js';
import type { Observer } from '../../kernel/observer.js';
import type { AbortReason, AttemptResult, Delivery } from '../delivery/deliver.js';
import { idsOf } from './lease-keeper.js';
import type { OutcomeRecorder } from './outcome-recorder.js';
import type { InFlight } from './state.js';

export interface AttemptRunnerDeps {
  id: string;
  log: Logger;
  observer: Observer;
  delivery: Delivery;
  /** The leases held; an attempt's entry joins it when it starts. */
  inFlight: Map<string, InFlight>;
  outcomes: OutcomeRecorder;
  /** An attempt's success was recorded with its handler's writes: its lease is released. */
  recorded(): void;
  /** An attempt ended and its outcome went to the recorder: its slot is free. */
  slotFreed(): void;
}

export interface AttemptRunner {
  /** Starts the attempt of a claimed execution. */
  start(ex: ClaimedExecution): void;
  /** Attempts running. */
  executing(): number;
}

export function createAttemptRunner(deps: AttemptRunnerDeps): AttemptRunner {
  const { id, log, observer, inFlight } = deps;
  const counts = { executing: 0 };

  function start(ex: ClaimedExecution) {
    // Claimed again while an earlier attempt of it still runs here (its lease was taken over while
    // this worker could not reach the database, and this claim got the retry before a heartbeat
    // said so): the claim is the proof the earlier lease is gone, so that attempt stops now.
    const earlier = inFlight.get(ex.id);
    if (earlier && !earlier.finished && !earlier.controller.signal.aborted) {
      log.warn(`worker ${id}: lease of ${ex.id} was taken over; aborting its earlier attempt`);
      observer.leaseLost();
      earlier.controller.abort('lease-lost' satisfies AbortReason);
    }
    const controller = new AbortController();
    const entry: InFlight = { ex, controller, started: performance.now(), finished: false };
    inFlight.set(ex.id, entry);
    counts.executing++;
    observer.attemptStarted(ex.endpoint_name, ex.waited_s);
    if (ex.cancel_requested) controller.abort('cancelled' satisfies AbortReason);
    void deps.delivery.attempt(ex, controller).then((result) => ended(entry, result));
  }

  function ended(entry: InFlight, result: AttemptResult) {
    const { ex } = entry;
    counts.executing--;
    entry.finished = true;
    observer.attemptEnded(ex.endpoint_name, result.outcome, (performance.now() - entry.started) / 1000);
    log.debug(`worker ${id}: attempt ended: ${result.outcome}`, {
      ...idsOf(ex),
      outcome: result.outcome,
      statusCode: result.statusCode,
      durationMs: Math.round(performance.now() - entry.started),
    });
    if (result.recorded) {
      // The handler's fenced transaction recorded the success with its own writes, and with it
      // released the lease: nothing to flush, and its slot and endpoint turn are free.
      if (inFlight.get(ex.id) === entry) inFlight.delete(ex.id);
      observer.executionRecorded(ex.endpoint_name, 'SUCCEEDED');
      deps.recorded();
      return;
    }
    const completion: Completion = {
      executionId: ex.id,
      epoch: ex.lease_epoch,
      durationMs: performance.now() - entry.started,
      ...result,
    };
    if (entry.released) {
      entry.held = completion;
      return;
    }
    deps.outcomes.record(completion, ex);
    deps.slotFreed();
  }

  return { start, executing: () => counts.executing };
}
