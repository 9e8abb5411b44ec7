/**
 * What wakes a started worker (worker.ts): the LISTEN connection (work added, a cancellation),
 * the heartbeat, self-fence and reconcile timers, the fallback poll, and the database coming back.
 * NOTIFY is only a hint; the poll covers a lost notification.
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { cancelChannel, workChannel } from '../../../db/channels.js';
import { createListener, type Listener } from '../../../db/listener.js';
import { analyzeGrownTables } from '../../../db/statements/statistics.js';
import type { Logger } from '../../../log.js';
import type { Observer } from '../../kernel/observer.js';
import { mayReconcile, type Availability } from '../runtime/availability.js';
import type { ClaimLoop } from './claim-loop.js';
import type { AbortReason } from '../delivery/deliver.js';
import type { LeaseKeeper } from './lease-keeper.js';
import { wakeIntervals } from '../intervals/wake.js';
import type { InFlight } from './state.js';
import { createReconciler } from './reconcile-pass.js';

export interface WorkerLoopsDeps {
  id: string;
  pool: pg.Pool;
  log: Logger;
  observer: Observer;
  availability: Availability;
  listenConnectionString: string | null;
  inFlight: Map<string, InFlight>;
  claims: ClaimLoop;
  leases: LeaseKeeper;
  leaseMs: number;
  heartbeatMs: number;
  pollMs: number;
  reconcileMs: number;
  /** How often the claim's tables are checked for growth past their statistics. */
  statisticsMs: number;
}

export interface WorkerLoops {
  /** Reconciles expired leases once, then listens and starts the timers. */
  start(): Promise<void>;
  /** Stops the timers and the LISTEN connection. */
  stop(): Promise<void>;
  /** The LISTEN connection (undefined when not started). */
  listener(): Listener | undefined;
}

/** The claim's tables analyzed once they outgrow their planner statistics (src/db/statements/statistics.ts). */
async function keepStatistics({ id, pool, log, availability }: WorkerLoopsDeps): Promise<void> {
  if (availability.down) return;
  try {
    const analyzed = await analyzeGrownTables(pool);
    if (analyzed.length) log.info(`worker ${id}: analyzed ${analyzed.join(', ')}: grown past their planner statistics`);
  } catch (error) {
    if (!availability.unreachable(error, 'statistics'))
      log.warn(`worker ${id}: analyzing grown tables failed: ${(error as Error).message}`);
  }
}

/**
 * A hint on the work channel: a tick made due is the interval runner's
 * (src/service/engine/intervals/wake.ts), not a claim's; work due later arms the due timer; any
 * other hint is work.
 */
function onWork(payload: string, pool: pg.Pool, claims: ClaimLoop) {
  const hint = workChannel.decode(payload);
  if (hint?.kind === 'interval') wakeIntervals(pool);
  else if (hint?.kind === 'due') claims.dueIn(hint.inMs);
  else claims.kick();
}

export function createWorkerLoops(deps: WorkerLoopsDeps): WorkerLoops {
  const { id, pool, log, observer, availability, claims, leases } = deps;
  const handles: { listener: Listener | undefined; timers: NodeJS.Timeout[]; unsubscribeBack: (() => void) | undefined } = {
    listener: undefined,
    timers: [],
    unsubscribeBack: undefined,
  };

  const reconciler = createReconciler(pool, deps.leaseMs);
  async function reconcile() {
    if (!mayReconcile(availability, deps.leaseMs)) return;
    const askedAt = performance.now();
    try {
      const rows = await reconciler.pass();
      availability.reached(askedAt);
      if (!rows) return;
      observer.leasesReconciled(rows);
      if (rows.length) {
        log.warn(`worker ${id}: reconciled ${rows.length} execution(s) whose lease expired`);
        claims.kick();
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
    handles.listener = createListener({
      connectionString: deps.listenConnectionString,
      channels: [workChannel.name, cancelChannel.name],
      log,
      applicationName: 'jobgate-worker-listen',
      observer,
      onHint(channel, payload) {
        if (channel === workChannel.name) onWork(payload, pool, claims);
        else {
          const cancel = cancelChannel.decode(payload);
          if (cancel) deps.inFlight.get(cancel.executionId)?.controller.abort('cancelled' satisfies AbortReason);
        }
      },
      onListening: () => claims.kick(), // anything added while we were not listening
      onMode: () => {},
    });
    await handles.listener.start();
  }

  function startTimers() {
    const every = (ms: number, fn: () => unknown) => {
      const t = setInterval(fn, ms);
      t.unref();
      handles.timers.push(t);
      return t;
    };
    every(deps.heartbeatMs, leases.beat);
    every(leases.fenceTickMs, leases.fenceCheck);
    every(deps.reconcileMs, reconcile);
    every(deps.statisticsMs, () => keepStatistics(deps));
    // The one referenced handle of a started worker, released by stop(): every other timer
    // and socket of the engine is unreferenced or comes and goes with the database, so when
    // the database went away nothing else was left and the process exited 0, silently, in
    // the middle of its work (issue 14). A started worker runs until it is stopped.
    every(deps.pollMs, async () => {
      await claims.learnLimited();
      claims.kick();
    }).ref();
    handles.unsubscribeBack = availability.onBack(() => {
      claims.kick();
      // First of all, whether the leases of attempts that ran through the outage are still ours.
      void leases.beat();
    });
  }

  return {
    listener: () => handles.listener,
    async start() {
      await reconcile();
      await listen();
      startTimers();
    },
    async stop() {
      handles.timers.splice(0).forEach(clearInterval);
      claims.clearTimers();
      handles.unsubscribeBack?.();
      const l = handles.listener;
      handles.listener = undefined;
      await l?.stop();
    },
  };
}
