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
 *  - A batch size above the concurrency claims ahead of the slots: up to `batchSize` a claim, the
 *    ones without a slot waiting in the worker (a local queue, attempt-runner.ts), so a backlog is
 *    claimed and recorded in fewer, larger statements. The cap on leases held is then twice the
 *    batch size.
 *  - When a claim comes back short the queue is empty for this worker: it claims again on a hint
 *    only (a notification, the due timer, the poll, or a recorded outcome that can free an
 *    endpoint's concurrency slot or a serial job's turn), not every time a slot frees. Other
 *    recorded outcomes make nothing claimable, so they do not claim: an idle worker's claim
 *    loop is then free when the next notification arrives (on the engine benchmark's latency
 *    run, each execution cost a second, empty claim and its due-timer query otherwise).
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import type { ListenMode } from '../../../db/listener.js';
import type { ClaimedExecution } from '../../../db/statements/claim.js';
import type { Logger } from '../../../log.js';
import { createAttemptRunner } from './attempt-runner.js';
import { createAvailability, type Availability } from '../runtime/availability.js';
import { createClaimLoop } from './claim-loop.js';
import { createDelivery } from '../delivery/deliver.js';
import type { SecretBox } from '../../kernel/secrets.js';
import type { HandlerRegistry } from '../delivery/handler-registry.js';
import { createLeaseKeeper } from './lease-keeper.js';
import { createOutcomeRecorder } from './outcome-recorder.js';
import { createWorkerLoops } from './loops.js';
import { createWorkerState, DEFAULT_LEASE_MS } from './state.js';
import { drainWorker } from './stop.js';
import { noopObserver, type Observer } from '../../kernel/observer.js';

export interface WorkerOptions {
  pool: pg.Pool;
  /** Connection string for the dedicated LISTEN connection; null: none, the worker polls. */
  connectionString: string | null;
  handlers: HandlerRegistry;
  log: Logger;
  workerId?: string;
  /** Attempts in flight at once in this worker. Default 10. */
  concurrency?: number;
  /**
   * Most executions claimed per statement. Default: concurrency. Above it, a claim takes up to this
   * many and those without a slot wait in the worker, their leases held and renewed, and start in
   * the claim's order as attempts end (a local queue): a backlog costs fewer claims, each larger.
   * A stopping worker hands the waiting ones back at once.
   */
  batchSize?: number;
  leaseMs?: number;
  heartbeatMs?: number;
  /** Abort everything when no heartbeat succeeded for this long. Default 2/3 of the lease. */
  fenceAfterMs?: number;
  /** Fallback poll when no notification arrives. Default 5 s. */
  pollMs?: number;
  reconcileMs?: number;
  /** How often the claim's tables are checked for growth past their planner statistics (src/db/statements/statistics.ts). Default 2 s. */
  statisticsMs?: number;
  defaultTimeoutMs?: number;
  outboundAllow?: string[];
  /** Opens secrets sealed at rest (signing secrets, secret config values). */
  secrets?: SecretBox | undefined;
  /** The process's view of its database (shared by its loops, so an outage is logged once). */
  availability?: Availability;
  /** Where attempts, outcomes and lease events are reported (metrics). Default: nowhere. */
  observer?: Observer | undefined;
}

export interface Worker {
  id: string;
  start(): Promise<void>;
  /** Stops claiming, waits up to `graceMs` for attempts in flight, releases the rest. */
  stop(opts?: { graceMs?: number }): Promise<void>;
  /** Leases held: attempts running, waiting for a slot, or ended with their outcome on the way. */
  inFlight(): number;
  /**
   * Whether this worker is behind its queue: running, and its last claim came back full (more
   * executions were due than it had room for). The process's pruner slows down while one is.
   */
  backlogged(): boolean;
  /** Wakes the claim loop (tests and in-process producers). */
  kick(): void;
  /** The LISTEN connection's mode (undefined when not started), for readiness. */
  listenMode(): ListenMode | undefined;
}

/** The options with their defaults filled in. */
function settingsOf(options: WorkerOptions) {
  const { log } = options;
  const id = options.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const concurrency = options.concurrency ?? 10;
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const fenceAfterMs = options.fenceAfterMs ?? Math.floor((leaseMs * 2) / 3);
  return {
    id,
    concurrency,
    batchSize: options.batchSize ?? concurrency,
    leaseMs,
    heartbeatMs: options.heartbeatMs ?? Math.min(10_000, Math.floor(leaseMs / 3)),
    fenceAfterMs,
    pollMs: options.pollMs ?? 5_000,
    reconcileMs: options.reconcileMs ?? Math.min(5_000, leaseMs),
    statisticsMs: options.statisticsMs ?? 2_000,
    availability: options.availability ?? createAvailability(log, `worker ${id}`),
    observer: options.observer ?? noopObserver,
  };
}

export function createWorker(options: WorkerOptions): Worker {
  const { pool, log, handlers } = options;
  const settings = settingsOf(options);
  const { id, concurrency, leaseMs, heartbeatMs, observer, availability } = settings;
  const delivery = createDelivery({
    handlers,
    outboundAllow: options.outboundAllow ?? [],
    defaultTimeoutMs: options.defaultTimeoutMs ?? 30_000,
    secrets: options.secrets,
    fence: { pool, workerId: id, leaseMs },
  });
  const state = createWorkerState();
  const { inFlight, idleWaiters } = state;
  const notifyIdle = () => {
    if (inFlight.size === 0 && !outcomes.busy()) idleWaiters.splice(0).forEach((f) => f());
  };
  const deps = { id, pool, log, observer, availability, inFlight, running: () => state.running };
  const leases = createLeaseKeeper({ ...deps, leaseMs, heartbeatMs, fenceAfterMs: settings.fenceAfterMs });
  const outcomes = createOutcomeRecorder({
    ...deps,
    onRetryScheduled: () => void claims.armDueTimer(),
    flushed(freedTurn) {
      notifyIdle();
      claims.flushed(freedTurn);
    },
  });
  const attempts = createAttemptRunner({
    ...deps,
    concurrency,
    delivery,
    outcomes,
    recorded() {
      notifyIdle();
      claims.kick();
    },
    // The slot is free now; when the last claim found the queue empty there is nothing to claim
    // into it until a hint arrives (a notification, the due timer, the outcome's flush).
    slotFreed: () => (claims.drained() ? undefined : claims.kickSoon()),
  });
  const claims = createClaimLoop({
    ...deps,
    ...settings,
    handlers,
    executing: attempts.executing,
    waiting: attempts.waiting,
    held: () => inFlight.size,
    claimed(sentAt, claimed: ClaimedExecution[]) {
      if (claimed.length > 0) leases.claimedAt(sentAt);
      for (const ex of claimed) attempts.start(ex);
    },
  });
  const loops = createWorkerLoops({ ...deps, ...settings, listenConnectionString: options.connectionString, claims, leases });

  return {
    id,
    inFlight: () => inFlight.size,
    backlogged: () => state.running && claims.backlogged(),
    listenMode: () => loops.listener()?.mode,
    kick: claims.kick,
    async start() {
      if (state.running) return;
      state.running = true;
      // Unknown while the database cannot be reached: claims then check endpoint limits (slower,
      // never wrong) until the poll learns the answer.
      await claims.learnLimited((error: unknown) => {
        if (!availability.unreachable(error, 'start')) throw error;
        return true;
      });
      await loops.start();
      log.info(
        `worker ${id}: started (concurrency ${concurrency}, lease ${leaseMs} ms, handlers: ${handlers.names().join(', ') || 'none'})`,
      );
      claims.kick();
    },
    async stop({ graceMs = 10_000 } = {}) {
      if (!state.running) return;
      state.running = false;
      await loops.stop();
      // A claim in flight commits leases: what it took waits, as what finds no slot does, and is
      // handed back below with the rest that waits, rather than held on after stop() with no heartbeat.
      await claims.settled();
      const idle = () => new Promise<void>((r) => idleWaiters.push(r));
      await drainWorker({ ...deps, claims, outcomes, delivery, heartbeatMs, beat: leases.beat, attempts, idle }, graceMs);
      log.info(`worker ${id}: stopped`);
    },
  };
}
