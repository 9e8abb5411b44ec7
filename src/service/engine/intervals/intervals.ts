/**
 * Interval handlers: plain periodic work (no cursor, no workspace), registered by name in worker
 * processes. One row per name in `interval_handlers` holds the next tick and the last outcome.
 * An on-demand handler has no period: its next tick is 'infinity' until triggerHandler makes it
 * due, and each tick it runs leaves it 'infinity' again.
 *
 *  - One execution per tick across any number of workers: a worker takes a tick with a
 *    compare-and-set (due, and not running) that moves `next_due_at` and sets itself as owner
 *    with a new epoch; the other workers' concurrent takes find nothing. A tick never overlaps
 *    the previous one: ticks due while it runs coalesce into one, taken when it ends (the others
    are counted in `skipped_ticks`, by a trigger of migration 000023).
 *  - Outcomes: OK with the count and JSON `extra` the handler returned (./tick-outcome.ts), or
 *    ERROR with a cause: HANDLER (it
 *    threw), TIMEOUT (it ran past its timeout: its signal is aborted and the outcome is recorded
 *    at once; whatever it returns later is not), CRASHED (its worker stopped heartbeating
 *    mid-run, found by the sweep every worker runs).
 *  - A tick past its timeout stays owned (`overrun`) for a grace (`graceMs`) while its handler's
 *    promise settles: the signal is only a request, and a handler that stops a little late must
 *    not get a second tick beside it, in this worker or another. If it has not settled by then,
 *    it is abandoned: the slot is freed so later ticks run (a handler that never returns must not
 *    silence its handler for good), and it is counted as abandoned and running (a row of
 *    `interval_abandoned`, the catalogue's `abandonedRunning`, a metric) until it settles or its
 *    worker goes. What it returns then is not recorded. If its worker dies during the grace, the
 *    sweep frees it without recording a second outcome. Writes are fenced on the epoch, so a late
 *    finisher can never overwrite a later outcome. A handler that throws never stops the loop.
 *  - A tick made due by a trigger with `force` runs with `ctx.force` (the take hands it the
 *    row's `force_next` mark): its handler skips its own grace window.
 *  - Each tick writes one structured log line (logTick).
 *  - A clean shutdown aborts the signal and waits a grace period; a tick that did not finish by
 *    then (or threw because it was aborted) is handed back, due at once, for another worker.
 */
import type pg from 'pg';
import type { Logger } from '../../../log.js';
import { storableText } from '../../kernel/inputs.js';
import { logTick, okOutcome, type IntervalResult } from './tick-outcome.js';
import { noopObserver, type Observer } from '../../kernel/observer.js';
import { createAvailability, type Availability } from '../runtime/availability.js';
import { onIntervalHint } from './wake.js';
import { createPollLoop } from '../runtime/poll-loop.js';
import {
  endTickSkipping,
  ensureIntervalHandlers,
  forgetAbandonedOfGoneWorkers,
  sweepCrashedTicks,
  sweepOverrunTicks,
  takeTicks,
  ticksHeldBy,
  type TickEnding,
} from '../../../db/statements/interval-ticks.js';
import { HANDLER_NAME_RULE, isHandlerName } from '../../../db/handler-name.js';

export interface IntervalContext {
  /** Aborted on timeout and at shutdown: stop promptly. */
  signal: AbortSignal;
  name: string;
  /** The worker running this tick. */
  workerId: string;
  /**
   * A trigger with `force` made this tick due: skip your own grace window (a "ran recently, nothing
   * to do" check of the handler's own) and do the work now. False for cadence ticks.
   */
  force: boolean;
}

export type { IntervalResult } from './tick-outcome.js';

export interface IntervalHandler {
  name: string;
  /** Period between ticks, in ms. Required unless `onDemand`. */
  everyMs?: number | undefined;
  /** No cadence: it runs only when triggered (triggerHandler). Give this or `everyMs`, not both. */
  onDemand?: boolean | undefined;
  /** How long a tick may run before it is aborted and recorded as TIMEOUT. Default 60 s. */
  timeoutMs?: number | undefined;
  /**
   * How long, past its timeout, a tick whose handler has not returned keeps its slot before it is
   * abandoned: the next ticks then run, beside the handler if it is still running. Default 30 s.
   */
  graceMs?: number | undefined;
  /**
   * Cadence ticks that come due while a tick is still running: SKIP (default) skips them all (the
   * next tick is the first period boundary after it ends; one warning in the log with
   * `running_for_ms`); QUEUE runs one tick right after it. A forced trigger queues one either way.
   */
  overlap?: 'SKIP' | 'QUEUE' | undefined;
  /** Never raise alerts about this handler (published in the catalogue, read by the alert evaluator). */
  alertsOptOut?: boolean | undefined;
  run(ctx: IntervalContext): Promise<IntervalResult> | IntervalResult;
}

export const DEFAULT_INTERVAL_TIMEOUT_MS = 60_000;
export const DEFAULT_INTERVAL_GRACE_MS = 30_000;
const MAX_MS = 2_147_483_647; // what setTimeout can wait

export class IntervalRegistry {
  private readonly handlers = new Map<string, IntervalHandler>();

  register(handler: IntervalHandler): void {
    if (!isHandlerName(handler.name)) throw new Error(`interval handler name "${handler.name}" ${HANDLER_NAME_RULE}`);
    if (this.handlers.has(handler.name)) throw new Error(`an interval handler named "${handler.name}" is already registered`);
    const ms = (v: number | undefined, what: string) => {
      if (v !== undefined && (!Number.isInteger(v) || v < 1 || v > MAX_MS))
        throw new Error(`interval handler "${handler.name}": ${what} must be a whole number of ms from 1 to ${MAX_MS}`);
    };
    ms(handler.everyMs, 'everyMs');
    if (handler.onDemand === true && handler.everyMs !== undefined)
      throw new Error(`interval handler "${handler.name}": give everyMs or onDemand, not both`);
    if (handler.onDemand !== true && handler.everyMs === undefined)
      throw new Error(`interval handler "${handler.name}": everyMs is required (or onDemand: true, to run only when triggered)`);
    ms(handler.timeoutMs, 'timeoutMs');
    ms(handler.graceMs, 'graceMs');
    this.handlers.set(handler.name, handler);
  }

  get(name: string): IntervalHandler | undefined {
    return this.handlers.get(name);
  }

  list(): IntervalHandler[] {
    return [...this.handlers.values()];
  }
}

export interface IntervalRunnerOptions {
  pool: pg.Pool;
  registry: IntervalRegistry;
  log: Logger;
  /** This worker's id in `workers` (its presence must be started first). */
  workerId: string;
  /** How often due ticks are looked for. Default 1 s. */
  pollMs?: number;
  /** The process's view of its database: its loops report outages there, so one is logged once. */
  availability?: Availability;
  /** How long the crash sweep holds off after a database outage (the staleness window). Default 30 s. */
  staleMs?: number;
  /** Where abandoned ticks are reported (metrics). Default: nowhere. */
  observer?: Observer | undefined;
}

type Outcome = TickEnding;

const TIMED_OUT = Symbol('timed out');

/** A tick running in this worker. */
interface ActiveTick {
  controller: AbortController;
  done: Promise<void>;
  /** The worker is stopping: a throw then hands the tick back. */
  stopping: boolean;
}

/**
 * Runs a tick's handler under its timeout and records its outcome. A tick past its timeout is
 * recorded at once and stays this worker's until the handler settles.
 */
async function runTick(
  handler: IntervalHandler,
  state: ActiveTick,
  ids: { name: string; workerId: string; force: boolean },
  record: (result: Outcome) => Promise<boolean>,
  abandoned: (settled: Promise<unknown>) => void,
): Promise<void> {
  const timeoutMs = handler.timeoutMs ?? DEFAULT_INTERVAL_TIMEOUT_MS;
  let deadline: NodeJS.Timeout | undefined;
  const timedOut = new Promise<typeof TIMED_OUT>((resolve) => {
    deadline = setTimeout(() => resolve(TIMED_OUT), timeoutMs);
  });
  const work = Promise.resolve().then(() => handler.run({ signal: state.controller.signal, ...ids }));
  work.catch(() => {}); // it may reject after its tick was recorded as a timeout
  let result: Outcome;
  try {
    const r = await Promise.race([work, timedOut]);
    if (r === TIMED_OUT) {
      state.controller.abort(new Error(`timed out after ${timeoutMs} ms`));
      // Recorded now; the tick stays this worker's (owned, overrun, in `active`) until the
      // handler's promise settles, whatever it returns then is not recorded.
      const message = `ran past its timeout of ${timeoutMs} ms`;
      const overrun = await record({ status: 'TIMEOUT', message });
      const settled = work.then(
        () => {},
        () => {},
      );
      if (overrun && !(await settlesWithin(settled, handler.graceMs ?? DEFAULT_INTERVAL_GRACE_MS))) {
        // Ignored its signal for the whole grace: its slot is freed, the handler runs on, counted.
        await record({ status: 'ABANDON' });
        abandoned(settled);
        return;
      }
      await settled;
      // Not marked overrun (its write failed): RELEASE would match nothing, so the TIMEOUT is the outcome to write.
      result = overrun ? { status: 'RELEASE' } : { status: 'ERROR', cause: 'TIMEOUT', message };
    } else {
      result = { status: 'OK', ...okOutcome(r) };
    }
  } catch (error) {
    // Postgres text cannot hold a NUL: left in, the outcome could never be written.
    const message = storableText(`${(error as Error)?.name ?? 'Error'}: ${(error as Error)?.message ?? String(error)}`.slice(0, 2000));
    result = state.stopping ? { status: 'HAND_BACK' } : { status: 'ERROR', cause: 'HANDLER', message };
  } finally {
    clearTimeout(deadline);
  }
  await record(result);
}

/** Whether `p` settles within `ms` (the timer is cleared either way). */
async function settlesWithin(p: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([p.then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}

// eslint-disable-next-line max-lines-per-function -- a loop's factory: its passes, ticks and stop share its active ticks and their unwritten outcomes
export function createIntervalRunner(options: IntervalRunnerOptions) {
  const { pool, log, workerId } = options;
  const availability = options.availability ?? createAvailability(log, `worker ${workerId}`);
  const pollMs = options.pollMs ?? 1000;
  const staleMs = options.staleMs ?? 30_000;
  const observer = options.observer ?? noopObserver;
  const active = new Map<string, ActiveTick>();
  // Abandoned ticks whose handler is still running here, by `name:epoch`.
  const abandoned = new Map<string, { name: string; since: Date }>();
  const ensured = new Map<string, string>();
  // Outcomes whose write failed, by name: the tick stays owned by this (live) worker, which no
  // sweep frees, so each pass writes them again (fenced on the epoch) until one gets through.
  const unrecorded = new Map<string, { epoch: string; result: Outcome }>();
  let running = false;
  const loop = createPollLoop({
    everyMs: pollMs,
    pass: () => pass(),
    onError: (error) => {
      if (!availability.unreachable(error, 'interval poll'))
        log.warn(`worker ${workerId}: interval poll failed: ${(error as Error).message}`);
    },
  });
  let unsubscribeHint: (() => void) | undefined;

  async function execute(name: string, epoch: string, force: boolean) {
    const handler = options.registry.get(name)!;
    const startedAt = performance.now();
    await runTick(
      handler,
      active.get(name)!,
      { name, workerId, force },
      (result) => record(name, epoch, result, Math.round(performance.now() - startedAt)),
      (settled) => {
        const key = `${name}:${epoch}`;
        abandoned.set(key, { name, since: new Date() });
        observer.intervalTickAbandoned(name);
        void settled.then(async () => {
          abandoned.delete(key);
          observer.intervalAbandonedSettled(name);
          log.info(`worker ${workerId}: interval ${name}: an abandoned tick's handler settled at last; its outcome is not recorded`);
          await record(name, epoch, { status: 'SETTLED' });
        });
      },
    );
  }

  /** Writes the outcome (fenced); false when the write failed (then retried by later passes, but for TIMEOUT). */
  async function record(name: string, epoch: string, result: Outcome, elapsedMs?: number): Promise<boolean> {
    unrecorded.delete(name);
    try {
      const { matched, skips } = await endTickSkipping(pool, { name, workerId, epoch }, result);
      if (skips && skips.skipped > 0 && skips.overlap === 'SKIP')
        log.warn(
          `worker ${workerId}: interval ${name}: ${skips.skipped} tick(s) came due while a tick ran for ${skips.runningForMs} ms; skipped`,
          { handler: name, skipped: skips.skipped, running_for_ms: skips.runningForMs },
        );
      if (matched === 0 && result.status === 'RELEASE')
        log.debug(`worker ${workerId}: interval ${name}: the overrun tick was already freed`);
      else if (matched === 0)
        log.warn(`worker ${workerId}: interval ${name}: the tick is no longer this worker's; its outcome is not recorded`);
      else if (result.status === 'OK' || result.status === 'ERROR' || result.status === 'TIMEOUT')
        logTick(log, workerId, name, result, skips?.runningForMs ?? elapsedMs ?? null);
      else if (result.status === 'ABANDON')
        log.warn(
          `worker ${workerId}: interval ${name}: its handler ignored its signal through the grace after its timeout; abandoned: ` +
            'later ticks run while it may still be running here',
          { handler: name, epoch },
        );
      return true;
    } catch (error) {
      // The tick stays owned. Written again by the next pass; once this worker is gone, the
      // sweep records it as crashed instead.
      if (!availability.unreachable(error, `recording interval ${name}'s outcome`))
        log.error(`worker ${workerId}: interval ${name}: recording its outcome failed: ${(error as Error).message}`);
      if (result.status !== 'TIMEOUT' && result.status !== 'SETTLED') unrecorded.set(name, { epoch, result });
      return false;
    }
  }

  async function ensure() {
    const settings = (h: IntervalHandler) => `${h.everyMs ?? 'on demand'}/${h.overlap ?? 'SKIP'}`;
    const fresh = options.registry.list().filter((h) => ensured.get(h.name) !== settings(h));
    if (fresh.length === 0) return;
    await ensureIntervalHandlers(
      pool,
      fresh.map((h) => ({ name: h.name, everyMs: h.everyMs ?? null, overlap: h.overlap ?? 'SKIP' })),
    );
    for (const h of fresh) ensured.set(h.name, settings(h));
  }

  /** Sweeps (unless just after an outage), writes outcomes still unwritten, takes due ticks. */
  async function pass() {
    // Heartbeats that stopped while nobody could reach the database are not crashes: for the
    // staleness window after an outage, the workers that lived through it heartbeat first.
    if (!availability.down && availability.sinceBack() >= staleMs) {
      const askedAt = performance.now();
      const swept = await sweepCrashedTicks(pool);
      availability.reached(askedAt);
      for (const { name, elapsedMs } of swept)
        logTick(log, workerId, name, { status: 'CRASHED', message: 'its worker stopped heartbeating mid-run' }, elapsedMs);
      for (const name of await sweepOverrunTicks(pool))
        log.warn(`worker ${workerId}: interval ${name}: its worker stopped heartbeating while the tick ran past its timeout; freed`);
      await forgetAbandonedOfGoneWorkers(pool);
    }
    await ensure();
    for (const [name, { epoch, result }] of [...unrecorded]) await record(name, epoch, result);
    const names = options.registry
      .list()
      .map((h) => h.name)
      .filter((n) => !active.has(n));
    if (names.length === 0) return;
    const askedAt = performance.now();
    const rows = await takeTicks(pool, workerId, names);
    availability.reached(askedAt);
    for (const row of rows) {
      const state = { controller: new AbortController(), done: Promise.resolve(), stopping: false };
      active.set(row.name, state);
      state.done = execute(row.name, row.epoch, row.force).finally(() => {
        active.delete(row.name);
        if (running) setImmediate(() => void loop.poke());
      });
    }
  }

  return {
    /** Looks for due ticks now, after any pass in progress; resolves when that pass is done (tests). */
    kick: () => loop.poke(),
    /** Names of the ticks running in this worker (abandoned ones are not). */
    active: () => [...active.keys()],
    /** Abandoned ticks whose handler is still running in this worker. */
    abandoned: () => [...abandoned.values()],
    async start() {
      if (running) return;
      running = true;
      await loop.start();
      // A triggered tick: at once, after any pass in progress (which may have missed it).
      unsubscribeHint = onIntervalHint(pool, () => void loop.poke());
    },
    /** Aborts running ticks, waits up to `graceMs` for them, and hands back the unfinished. */
    async stop({ graceMs = 10_000 } = {}) {
      if (!running) return;
      running = false;
      unsubscribeHint?.();
      // A take in flight starts its ticks: they are aborted and handed back below like any other,
      // rather than run on, unstopped, after stop() returned.
      await loop.stop();
      const left = [...active.entries()];
      for (const [, s] of left) {
        s.stopping = true;
        s.controller.abort(new Error('the worker is shutting down'));
      }
      const all = Promise.all(left.map(([, s]) => s.done));
      const settled = await Promise.race([all.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), graceMs).unref())]);
      if (!settled) {
        // Still running: hand back what is still ours (a late outcome is fenced out). With the
        // database unreachable the hand-back is skipped, not fatal to the rest of the shutdown:
        // another worker's sweep records the tick as crashed once this worker stops heartbeating.
        try {
          for (const row of await ticksHeldBy(pool, workerId, [...active.keys()]))
            await record(row.name, row.epoch, { status: 'HAND_BACK' });
        } catch (error) {
          log.warn(
            `worker ${workerId}: handing back unfinished interval ticks failed (${(error as Error).message}); the sweep will free them`,
          );
        }
      }
      // A last try; what still fails is freed by the sweep once this worker's row is gone.
      for (const [name, { epoch, result }] of [...unrecorded]) await record(name, epoch, result);
    },
  };
}

export type IntervalRunner = ReturnType<typeof createIntervalRunner>;
