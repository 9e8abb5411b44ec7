/**
 * A worker's attempts (worker.ts): starts each claimed execution's attempt through the delivery,
 * counts the attempts running (what `concurrency` bounds), and hands each ended attempt's outcome
 * to the outcome recorder, or holds it while the worker is handing the execution back at stop.
 *
 * A claim may take more than the free slots (a batch size above the concurrency): the rest wait
 * here, in the claim's order, and start as attempts end. They are leases like the running ones
 * (in `inFlight`, renewed by heartbeats, aborted by a cancellation, a lost lease, the self-fence or
 * a stop), and one aborted while it waits ends at once, without a slot and without its handler.
 * One whose lease the self-fence gives up (it cannot tell whether the lease is still held) is
 * handed back uncounted, as a stop hands them back: it never ran, so it costs its execution no
 * attempt. The release is fenced by the lease's epoch, so what it does not take back (taken over,
 * a cancellation requested) ends as an aborted attempt, its outcome's write fenced as any. One
 * whose lease is known to be gone (a heartbeat's answer, a second claim of it) ends so at once:
 * a release there could never take it back.
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import type { ClaimedExecution } from '../../../db/statements/claim.js';
import type { Completion } from '../../../db/statements/complete.js';
import type { Logger } from '../../../log.js';
import type { Observer } from '../../kernel/observer.js';
import type { AbortReason, AttemptResult, Delivery } from '../delivery/deliver.js';
import { releaseLeases } from './hand-back.js';
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
  /**
   * A lease was released with no outcome left to record: its attempt's success was recorded with
   * its handler's writes, or it was handed back while it waited.
   */
  recorded(): void;
  /** An attempt ended and its outcome went to the recorder: its slot is free. */
  slotFreed(): void;
  /** Attempts run at once; claimed executions past it wait for a slot. */
  concurrency: number;
  /**
   * Whether the worker runs: a stopping worker starts nothing more, neither a waiting execution nor
   * one its last claim took (stop hands them back).
   */
  running(): boolean;
  /** Where waiting executions whose lease was given up are handed back. */
  pool: pg.Pool;
}

export interface AttemptRunner {
  /** Starts the attempt of a claimed execution, or queues it until a slot frees. */
  start(ex: ClaimedExecution): void;
  /** Attempts running. */
  executing(): number;
  /** Claimed executions waiting for a slot. */
  waiting(): number;
  /** The leases of the executions waiting for a slot (a stopping worker hands them back). */
  waitingLeases(): InFlight[];
}

export function createAttemptRunner(deps: AttemptRunnerDeps): AttemptRunner {
  const { id, log, observer, inFlight, concurrency } = deps;
  const counts = { executing: 0, waiting: 0 };
  const queue = createWaitingQueue();
  const giveBack = createGiveBack(deps, (entry) => run(entry));

  function start(ex: ClaimedExecution) {
    abortEarlierAttempt(deps, ex);
    const controller = new AbortController();
    const entry: InFlight = { ex, controller, started: 0, finished: false };
    inFlight.set(ex.id, entry);
    if (ex.cancel_requested) controller.abort('cancelled' satisfies AbortReason);
    if ((counts.executing < concurrency && deps.running()) || controller.signal.aborted) return run(entry);
    entry.waiting = true;
    entry.queuedAt = performance.now();
    counts.waiting++;
    queue.push(entry);
    // Aborted while it waits: handed back when the self-fence gave its lease up, else it ends now,
    // as its attempt would have (delivery's abortedBeforeStart).
    const aborted = () => {
      if (!entry.waiting) return;
      if (!entry.givenUp) return run(entry);
      counts.waiting--;
      entry.waiting = false;
      giveBack(entry);
    };
    controller.signal.addEventListener('abort', aborted, { once: true });
  }

  function run(entry: InFlight) {
    if (entry.waiting) counts.waiting--;
    entry.waiting = false;
    counts.executing++;
    // Aborted before it started, its handler is not called (delivery's abortedBeforeStart): no
    // attempt started for the metrics. A wait in the queue is part of the start's delay.
    const queuedMs = entry.queuedAt === undefined ? 0 : performance.now() - entry.queuedAt;
    if (!entry.controller.signal.aborted) {
      entry.started = performance.now();
      observer.attemptStarted(entry.ex.endpoint_name, entry.ex.waited_s + queuedMs / 1000);
    }
    void deps.delivery.attempt(entry.ex, entry.controller, queuedMs).then((result) => ended(entry, result, queuedMs));
  }

  /** Starts waiting executions while slots are free. */
  function startWaiting() {
    while (counts.executing < concurrency && deps.running()) {
      const entry = queue.next();
      if (!entry) return;
      run(entry);
    }
  }

  function ended(entry: InFlight, result: AttemptResult, queuedMs: number) {
    const { ex } = entry;
    counts.executing--;
    entry.finished = true;
    const ran = entry.started > 0 ? performance.now() - entry.started : 0;
    if (entry.started > 0) observer.attemptEnded(ex.endpoint_name, result.outcome, ran / 1000);
    log.debug(`worker ${id}: attempt ended: ${result.outcome}`, {
      executionId: ex.id,
      jobId: ex.job_id,
      attempt: ex.attempt_count,
      outcome: result.outcome,
      statusCode: result.statusCode,
      durationMs: Math.round(ran),
    });
    if (result.recorded) {
      // The handler's fenced transaction recorded the success with its own writes, and with it
      // released the lease: nothing to flush, and its slot and endpoint turn are free.
      if (inFlight.get(ex.id) === entry) inFlight.delete(ex.id);
      observer.executionRecorded(ex.endpoint_name, 'SUCCEEDED');
      startWaiting();
      deps.recorded();
      return;
    }
    const completion: Completion = { executionId: ex.id, epoch: ex.lease_epoch, durationMs: ran, queuedMs, ...result };
    if (entry.released) {
      entry.held = completion;
      return;
    }
    deps.outcomes.record(completion, ex);
    startWaiting();
    deps.slotFreed();
  }

  return {
    start,
    executing: () => counts.executing,
    waiting: () => counts.waiting,
    waitingLeases: queue.leases,
  };
}

/**
 * Claimed again while an earlier attempt of it still runs here (its lease was taken over while this
 * worker could not reach the database, and this claim got the retry before a heartbeat said so):
 * the claim is the proof the earlier lease is gone, so that attempt stops now.
 */
function abortEarlierAttempt(deps: AttemptRunnerDeps, ex: ClaimedExecution) {
  const earlier = deps.inFlight.get(ex.id);
  if (!earlier || earlier.finished || earlier.controller.signal.aborted) return;
  deps.log.warn(`worker ${deps.id}: lease of ${ex.id} was taken over; aborting its earlier attempt`);
  deps.observer.leaseLost();
  earlier.controller.abort('lease-lost' satisfies AbortReason);
}

/**
 * Hands back waiting executions whose lease the self-fence gave up (see the file's comment), those given up
 * in one turn of the event loop together (the self-fence gives up all at once). What the release
 * does not take back, or all when it fails, goes to `end`: it ends as an aborted attempt.
 */
function createGiveBack(deps: AttemptRunnerDeps, end: (entry: InFlight) => void): (entry: InFlight) => void {
  const { id, log, inFlight } = deps;
  let pending: InFlight[] = [];
  async function handBack(entries: InFlight[]) {
    const released =
      (await releaseLeases(deps.pool, entries, (error) =>
        log.warn(`worker ${id}: handing back ${entries.length} waiting execution(s) failed: ${error.message}`),
      )) ?? new Set<string>();
    for (const entry of entries) {
      if (!released.has(entry.ex.id)) end(entry);
      else if (inFlight.get(entry.ex.id) === entry) inFlight.delete(entry.ex.id);
    }
    if (released.size === 0) return;
    log.info(`worker ${id}: handed back ${released.size} waiting execution(s) whose lease it gave up, uncounted`);
    deps.recorded();
  }
  return (entry) => {
    if (pending.push(entry) > 1) return;
    queueMicrotask(() => {
      const entries = pending;
      pending = [];
      void handBack(entries);
    });
  };
}

/**
 * The executions claimed past the free slots, in the claim's order (the worker starts them in it).
 * An entry run while it waited (aborted: it ends at once) stays until `next` passes it.
 */
function createWaitingQueue() {
  const queue: InFlight[] = [];
  let head = 0;
  return {
    push: (entry: InFlight) => void queue.push(entry),
    /** The next entry still waiting, taken out of the queue; undefined when none is. */
    next(): InFlight | undefined {
      while (head < queue.length) {
        const entry = queue[head++]!;
        if (!entry.waiting) continue;
        // Under a backlog the queue is topped up before it empties: what was taken is dropped
        // once it is half the array, so the array stays the size of the backlog it holds.
        if (head >= 64 && head * 2 >= queue.length) {
          queue.splice(0, head);
          head = 0;
        }
        return entry;
      }
      queue.length = head = 0;
      return undefined;
    },
    leases: () => queue.slice(head).filter((entry) => entry.waiting),
  };
}
