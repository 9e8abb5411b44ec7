/**
 * A worker: claims due executions in batches, runs their attempts, records outcomes in batches,
 * keeps its leases alive, fences itself when it cannot, and reconciles expired leases of others.
 *
 *  - Woken by LISTEN/NOTIFY (`jobgate_work`) when work is added; a timer wakes it for the next
 *    delayed execution; a slow fallback poll covers a lost notification. NOTIFY is only a hint.
 *  - Leases live on the database clock. Heartbeats extend them; an execution missing from a
 *    heartbeat's answer was taken over (reconciled, claimed again: its epoch moved, or it is no
 *    longer RUNNING) and its attempt is aborted. Expiry alone is no loss: a lease is its owner's
 *    until someone takes it, so a heartbeat renews an expired lease nobody took. Hence the
 *    self-fence, when no heartbeat has succeeded for `fenceAfterMs`, asks the database rather
 *    than guess: while the database is unreachable the attempts run on (whether their leases
 *    are still ours is the first thing asked when it answers); after a stall (the event loop
 *    blocked) a heartbeat is sent at once and its answer decides; only when heartbeats reach
 *    the database and fail (it answers, but will not renew) is every attempt aborted, since
 *    nothing can tell whether they are still ours. Outcomes are fenced on the lease epoch in
 *    SQL regardless.
 *  - Completions are flushed as soon as the previous flush returns: no added delay, and under
 *    load many outcomes share one statement.
 *  - Claims are sized to the free slots, and a slot frees when its attempt ends, not when its
 *    outcome is recorded: the next claim runs beside the flush of the last batch's outcomes
 *    instead of after it, so slow flushes do not idle the slots (on the engine benchmark's no-op
 *    handlers, +5-15% executions/s for one process, for ~20% more database CPU per execution).
 *    At most `concurrency` more leases are held for outcomes on their way to the database.
 *  - When a claim comes back short the queue is empty for this worker: it claims again on a hint
 *    only (a notification, the due timer, the poll, or a recorded outcome that can free an
 *    endpoint's concurrency slot or a serial job's turn), not every time a slot frees. Other
 *    recorded outcomes make nothing claimable, so they do not claim: an idle worker's claim
 *    loop is then free when the next notification arrives (on the engine benchmark's latency
 *    run, each execution cost a second, empty claim and its due-timer query otherwise).
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { createListener, type Listener, type ListenMode } from '../../db/listener.js';
import { anyLimitedEndpoint, claimExecutions, nextDueInMs, type ClaimedExecution } from '../../db/queries/claim.js';
import type { Completion } from '../../db/queries/complete.js';
import { reconcileExpiredLeases, releaseExecutions } from '../../db/queries/lease.js';
import type { Logger } from '../../log.js';
import { createAvailability, mayReconcile, type Availability } from './availability.js';
import { createDelivery, type AbortReason, type Delivery } from './deliver.js';
import type { SecretBox } from '../secrets.js';
import type { HandlerRegistry } from './handlers.js';
import { INTERVAL_HINT_PREFIX, wakeIntervals } from './wake.js';
import { createLeaseKeeper, idsOf } from './lease-keeper.js';
import { createOutcomeRecorder } from './outcome-recorder.js';
import { noopObserver, type Observer } from '../observer.js';

export interface WorkerOptions {
  pool: pg.Pool;
  /** Connection string for the dedicated LISTEN connection. */
  connectionString: string;
  handlers: HandlerRegistry;
  log: Logger;
  workerId?: string;
  /** Attempts in flight at once in this worker. Default 10. */
  concurrency?: number;
  /** Most executions claimed per statement. Default: concurrency. */
  batchSize?: number;
  leaseMs?: number;
  heartbeatMs?: number;
  /** Abort everything when no heartbeat succeeded for this long. Default 2/3 of the lease. */
  fenceAfterMs?: number;
  /** Fallback poll when no notification arrives. Default 5 s. */
  pollMs?: number;
  reconcileMs?: number;
  defaultTimeoutMs?: number;
  outboundAllow?: string[];
  /** Opens secrets sealed at rest (signing secrets, secret config values). */
  secrets?: SecretBox | undefined;
  /** The process's view of its database (shared by its loops, so an outage is logged once). */
  availability?: Availability;
  /** Where attempts, outcomes and lease events are reported (metrics). Default: nowhere. */
  observer?: Observer | undefined;
}

export interface InFlight {
  ex: ClaimedExecution;
  controller: AbortController;
  started: number;
  /** The attempt has ended; its outcome is waiting to be recorded (the lease is still held). */
  finished: boolean;
  /** Being handed back at shutdown: its outcome waits in `held` for the release's answer. */
  released?: boolean;
  held?: Completion;
}

export interface Worker {
  id: string;
  start(): Promise<void>;
  /** Stops claiming, waits up to `graceMs` for attempts in flight, releases the rest. */
  stop(opts?: { graceMs?: number }): Promise<void>;
  /** Number of attempts in flight. */
  inFlight(): number;
  /** Wakes the claim loop (tests and in-process producers). */
  kick(): void;
  /** The LISTEN connection's mode (undefined when not started), for readiness. */
  listenMode(): ListenMode | undefined;
}

/** A worker's lease unless configured. */
export const DEFAULT_LEASE_MS = 30_000;

export function createWorker(options: WorkerOptions): Worker {
  const { pool, log } = options;
  const id = options.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const concurrency = options.concurrency ?? 10;
  const batchSize = options.batchSize ?? concurrency;
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const heartbeatMs = options.heartbeatMs ?? Math.min(10_000, Math.floor(leaseMs / 3));
  const fenceAfterMs = options.fenceAfterMs ?? Math.floor((leaseMs * 2) / 3);
  const pollMs = options.pollMs ?? 5_000;
  const reconcileMs = options.reconcileMs ?? Math.min(5_000, leaseMs);
  const availability = options.availability ?? createAvailability(log, `worker ${id}`);
  const observer = options.observer ?? noopObserver;
  const delivery: Delivery = createDelivery({
    handlers: options.handlers,
    outboundAllow: options.outboundAllow ?? [],
    defaultTimeoutMs: options.defaultTimeoutMs ?? 30_000,
    secrets: options.secrets,
    fence: { pool, workerId: id, leaseMs },
  });

  // Leases held: attempts running, and attempts ended whose outcome is not recorded yet.
  const inFlight = new Map<string, InFlight>();
  // Attempts running: what `concurrency` bounds. A slot frees when the attempt ends, so the next
  // claim overlaps the flush of the previous outcomes instead of waiting for it; at most
  // `concurrency` more leases are held for outcomes on their way to the database.
  let executing = 0;
  let running = false;
  let claiming = false;
  let claimRun: Promise<void> | undefined;
  let wantClaim = false;
  let kickQueued = false;
  // The last claim was held back by the cap on leases awaiting their outcome's record.
  let heldBack = false;
  // The last claim found fewer due executions than it asked for (or failed).
  let drained = true;
  let limited = false;
  let listener: Listener | undefined;
  const timers: NodeJS.Timeout[] = [];
  let dueTimer: NodeJS.Timeout | undefined;
  // While the database is unreachable the claim is retried on this timer, at most a second
  // apart, so claiming resumes within a second of the database answering again.
  let retryTimer: NodeJS.Timeout | undefined;
  let claimRetries = 0;
  let unsubscribeBack: (() => void) | undefined;
  const idle: (() => void)[] = [];
  const leases = createLeaseKeeper({ id, pool, log, observer, availability, inFlight, leaseMs, heartbeatMs, fenceAfterMs });
  const beat = leases.beat;
  const outcomes = createOutcomeRecorder({
    id,
    pool,
    log,
    observer,
    availability,
    inFlight,
    running: () => running,
    onRetryScheduled: () => void armDueTimer(),
    flushed(freedTurn) {
      notifyIdle();
      // A recorded outcome releases its lease, and can make other executions claimable (a
      // concurrency slot of its endpoint, the next occurrence of a serial job): claim again if
      // the lease cap held the last claim back, or if the last claim came back short and this
      // flush freed a slot or a turn. Under load (full claims) ending attempts already keep the
      // loop going.
      if (heldBack || limited || (drained && freedTurn)) kick();
    },
  });

  const notifyIdle = () => {
    if (inFlight.size === 0 && !outcomes.busy()) idle.splice(0).forEach((f) => f());
  };

  function kick() {
    if (!running) return;
    wantClaim = true;
    if (!claiming) claimRun = claimLoop();
  }

  /** Kicks once after the current tick, so attempts ending together free their slots for one claim. */
  function kickSoon() {
    if (kickQueued) return;
    kickQueued = true;
    setImmediate(() => {
      kickQueued = false;
      kick();
    });
  }

  function room(): number {
    const free = concurrency - executing;
    const unheld = 2 * concurrency - inFlight.size;
    heldBack = unheld < free;
    return Math.min(free, unheld);
  }

  async function claimLoop() {
    claiming = true;
    // Whether the queue looked empty (or the database unreachable): then the due timer is armed.
    let short = false;
    try {
      while (running && wantClaim) {
        wantClaim = false;
        const free = room();
        if (free <= 0) break;
        const limit = Math.min(free, batchSize);
        const sentAt = performance.now();
        let claimed: ClaimedExecution[];
        try {
          claimed = await claimExecutions(pool, {
            workerId: id,
            limit,
            handlers: options.handlers.names(),
            leaseMs,
            limitedEndpoints: limited,
          });
        } catch (error) {
          short = drained = true;
          if (availability.unreachable(error, 'claim')) {
            retryClaim();
            return;
          }
          log.warn(`worker ${id}: claim failed: ${(error as Error).message}`);
          break;
        }
        availability.reached(sentAt);
        claimRetries = 0;
        clearTimeout(retryTimer);
        retryTimer = undefined;
        if (claimed.length > 0) leases.claimedAt(sentAt);
        for (const ex of claimed) startAttempt(ex);
        // A full batch means there is probably more.
        drained = claimed.length < limit;
        if (drained) short = true;
        else wantClaim = true;
      }
    } finally {
      claiming = false;
    }
    if (!running) return;
    if (wantClaim && room() > 0) claimRun = claimLoop();
    // With every slot busy there is nothing to time: ending attempts kick the loop.
    else if (short) void armDueTimer();
  }

  function retryClaim() {
    clearTimeout(retryTimer);
    const delay = Math.min(1000, 50 * 2 ** claimRetries++);
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      kick();
    }, delay);
    // The worker's own referenced interval (see start) keeps the process up meanwhile.
    retryTimer.unref();
  }

  async function armDueTimer() {
    let inMs: number | null;
    try {
      inMs = await nextDueInMs(pool);
    } catch (error) {
      if (running && availability.unreachable(error, 'due timer')) retryClaim();
      return;
    }
    if (!running || inMs === null) return;
    clearTimeout(dueTimer);
    // On the database's clock (the claim's): a host clock ahead of it would wake the worker early,
    // over and over. The query's round trip makes the timer late by as much, at most.
    const delay = Math.max(0, Math.min(pollMs, inMs));
    dueTimer = setTimeout(kick, delay);
    dueTimer.unref();
  }

  function startAttempt(ex: ClaimedExecution) {
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
    executing++;
    observer.attemptStarted(ex.endpoint_name, ex.waited_s);
    if (ex.cancel_requested) controller.abort('cancelled' satisfies AbortReason);
    void delivery.attempt(ex, controller).then((result) => {
      executing--;
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
        notifyIdle();
        kick();
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
      outcomes.record(completion, ex);
      // The slot is free now; when the last claim found the queue empty there is nothing to claim
      // into it until a hint arrives (a notification, the due timer, the flush below).
      if (!drained) kickSoon();
    });
  }

  async function reconcile() {
    if (!mayReconcile(availability, leaseMs)) return;
    const askedAt = performance.now();
    try {
      const rows = await reconcileExpiredLeases(pool);
      availability.reached(askedAt);
      observer.leasesReconciled(rows);
      if (rows.length) {
        log.warn(`worker ${id}: reconciled ${rows.length} execution(s) whose lease expired`);
        kick();
      }
    } catch (error) {
      if (!availability.unreachable(error, 'reconcile')) log.warn(`worker ${id}: reconcile failed: ${(error as Error).message}`);
    }
  }

  /**
   * The LISTEN connection: work added wakes the worker, a cancellation aborts its attempt. It
   * reconnects with backoff and probes itself (src/db/listener.ts); while it is down or deaf
   * the poll timer keeps the worker going.
   */
  async function listen(): Promise<void> {
    listener = createListener({
      connectionString: options.connectionString,
      channels: ['jobgate_work', 'jobgate_cancel'],
      log,
      applicationName: 'jobgate-worker-listen',
      observer,
      onHint(channel, payload) {
        // A tick made due is the interval runner's (src/service/engine/wake.ts), not a claim's.
        if (channel === 'jobgate_work' && payload?.startsWith(INTERVAL_HINT_PREFIX)) wakeIntervals(pool);
        else if (channel === 'jobgate_work') kick();
        else if (payload) inFlight.get(payload)?.controller.abort('cancelled' satisfies AbortReason);
      },
      onListening: () => kick(), // anything added while we were not listening
      onMode: () => {},
    });
    await listener.start();
  }

  return {
    id,
    inFlight: () => inFlight.size,
    listenMode: () => listener?.mode,
    kick,
    async start() {
      if (running) return;
      running = true;
      // Unknown while the database cannot be reached: claims then check endpoint limits (slower,
      // never wrong) until the poll below learns the answer.
      limited = await anyLimitedEndpoint(pool).catch((error: unknown) => {
        if (!availability.unreachable(error, 'start')) throw error;
        return true;
      });
      await reconcile();
      await listen();
      const every = (ms: number, fn: () => unknown) => {
        const t = setInterval(fn, ms);
        t.unref();
        timers.push(t);
        return t;
      };
      every(heartbeatMs, beat);
      every(leases.fenceTickMs, leases.fenceCheck);
      every(reconcileMs, reconcile);
      // The one referenced handle of a started worker, released by stop(): every other timer
      // and socket of the engine is unreferenced or comes and goes with the database, so when
      // the database went away nothing else was left and the process exited 0, silently, in
      // the middle of its work (issue 14). A started worker runs until it is stopped.
      every(pollMs, async () => {
        limited = await anyLimitedEndpoint(pool).catch(() => limited);
        kick();
      }).ref();
      unsubscribeBack = availability.onBack(() => {
        kick();
        // First of all, whether the leases of attempts that ran through the outage are still ours.
        void beat();
      });
      log.info(
        `worker ${id}: started (concurrency ${concurrency}, lease ${leaseMs} ms, handlers: ${options.handlers.names().join(', ') || 'none'})`,
      );
      kick();
    },
    async stop({ graceMs = 10_000 } = {}) {
      if (!running) return;
      running = false;
      timers.splice(0).forEach(clearInterval);
      clearTimeout(dueTimer);
      clearTimeout(retryTimer);
      unsubscribeBack?.();
      const l = listener;
      listener = undefined;
      await l?.stop();
      // A claim in flight commits leases: its attempts start, and below they finish within the
      // grace period or are handed back, rather than run on after stop() with no heartbeat.
      while (claiming) await claimRun;
      if (inFlight.size > 0) {
        log.info(`worker ${id}: waiting up to ${graceMs} ms for ${inFlight.size} attempt(s)`);
        // Leases must outlive the grace period.
        const keepAlive = setInterval(beat, heartbeatMs);
        await Promise.race([new Promise<void>((r) => idle.push(r)), new Promise((r) => setTimeout(r, graceMs).unref())]);
        clearInterval(keepAlive);
      }
      const left = [...inFlight.values()].filter((f) => !f.finished);
      if (left.length > 0) {
        // Abort first, then hand back: a handler that honours its signal has stopped before
        // another worker can claim the execution (one that ignores it is at-least-once anyway).
        for (const f of left) {
          f.released = true;
          f.controller.abort('shutdown' satisfies AbortReason);
        }
        const released = await releaseExecutions(
          pool,
          left.map((f) => ({ id: f.ex.id, epoch: f.ex.lease_epoch })),
        ).then(
          (ids) => new Set(ids),
          (e: Error) => {
            log.error(`worker ${id}: release failed (${e.message}); the reconciler will take them when their leases expire`);
            return undefined;
          },
        );
        if (released) {
          log.info(`worker ${id}: released ${released.size} execution(s) to other workers`);
          // What the release would not take back (a cancellation was requested, or the lease had
          // already expired) gets its outcome recorded, fenced as any: a cancelled one ends
          // CANCELLED now instead of staying RUNNING, holding its lock key, concurrency slot and
          // serial turn, until its lease expires.
          for (const f of left) {
            if (released.has(f.ex.id)) continue;
            f.released = false;
            if (f.held) outcomes.record(f.held, f.ex);
          }
        }
      }
      await outcomes.settled();
      // Outcomes of released attempts are fenced out; do not wait on them.
      for (const f of left) inFlight.delete(f.ex.id);
      await delivery.close().catch(() => {});
      log.info(`worker ${id}: stopped`);
    },
  };
}
