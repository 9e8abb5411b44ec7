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
 *  - Outcomes: OK with the count the handler returned, or ERROR with a cause: HANDLER (it
 *    threw), TIMEOUT (it ran past its timeout: its signal is aborted and the outcome is recorded
 *    at once; whatever it returns later is not), CRASHED (its worker stopped heartbeating
 *    mid-run, found by the sweep every worker runs).
 *  - A tick past its timeout stays owned (`overrun`) until its handler's promise settles: the
 *    signal is only a request, and a handler that ignores it must not get a second tick beside
 *    it, in this worker or another. If its worker dies meanwhile, the sweep frees it without
 *    recording a second outcome. Writes are fenced on the epoch, so a late finisher
 *    can never overwrite a later outcome. A handler that throws never stops the loop.
 *  - A clean shutdown aborts the signal and waits a grace period; a tick that did not finish by
 *    then (or threw because it was aborted) is handed back, due at once, for another worker.
 */
import type pg from 'pg';
import type { Logger } from '../../log.js';
import { storableText } from '../inputs.js';
import { createAvailability, type Availability } from './availability.js';
import { onIntervalHint } from './wake.js';

export interface IntervalContext {
  /** Aborted on timeout and at shutdown: stop promptly. */
  signal: AbortSignal;
  name: string;
  /** The worker running this tick. */
  workerId: string;
}

/** What a tick returns: how many things it handled (shown as the last outcome's count). */
export type IntervalResult = { count?: number } | void;

export interface IntervalHandler {
  name: string;
  /** Period between ticks, in ms. Required unless `onDemand`. */
  everyMs?: number | undefined;
  /** No cadence: it runs only when triggered (triggerHandler). Give this or `everyMs`, not both. */
  onDemand?: boolean | undefined;
  /** How long a tick may run before it is aborted and recorded as TIMEOUT. Default 60 s. */
  timeoutMs?: number | undefined;
  /** Never raise alerts about this handler (published in the catalogue, read by the alert evaluator). */
  alertsOptOut?: boolean | undefined;
  run(ctx: IntervalContext): Promise<IntervalResult> | IntervalResult;
}

export const DEFAULT_INTERVAL_TIMEOUT_MS = 60_000;
const MAX_MS = 2_147_483_647; // what setTimeout can wait

export class IntervalRegistry {
  private readonly handlers = new Map<string, IntervalHandler>();

  register(handler: IntervalHandler): void {
    if (!/^[A-Za-z0-9_.:-]{1,200}$/.test(handler.name))
      throw new Error(`interval handler name "${handler.name}" must be 1-200 letters, digits, _ . : -`);
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
    this.handlers.set(handler.name, handler);
  }

  get(name: string): IntervalHandler | undefined {
    return this.handlers.get(name);
  }

  list(): IntervalHandler[] {
    return [...this.handlers.values()];
  }
}

/**
 * Creates the row of each registered handler, first due one period from now (an on-demand one:
 * never, until triggered). A changed period is taken (last registration wins); a shorter one
 * brings the next tick forward; a handler turned on-demand keeps only a tick already due.
 */
const ENSURE = `
insert into interval_handlers (name, every_ms, next_due_at)
select v.name, v.every_ms, coalesce(now() + make_interval(secs => v.every_ms / 1000.0), 'infinity')
from unnest($1::text[], $2::bigint[]) as v(name, every_ms)
on conflict (name) do update set every_ms = excluded.every_ms,
  next_due_at = case when excluded.every_ms is null and interval_handlers.next_due_at > now() then 'infinity'
                     else least(interval_handlers.next_due_at, excluded.next_due_at) end,
  updated_at = now()
where interval_handlers.every_ms is distinct from excluded.every_ms`;

/**
 * Takes due ticks: one execution per tick across workers. The row must be due and idle; taking
 * it sets the owner and moves next_due_at, so a concurrent take (which re-reads the row after
 * this one commits) no longer matches.
 */
const TAKE = `
update interval_handlers set owner = $1, epoch = epoch + 1, run_started_at = now(),
  next_due_at = coalesce(now() + make_interval(secs => every_ms / 1000.0), 'infinity'), updated_at = now()
where name = any($2::text[]) and owner is null and next_due_at <= now()
returning name, epoch`;

/** Records a tick's outcome, fenced: only the take that is still this worker's (same epoch) may. */
const RECORD = `
update interval_handlers set owner = null, run_started_at = null, overrun = false,
  last_status = $4, last_count = $5, last_cause = $6, last_error = $7,
  last_started_at = run_started_at, last_finished_at = now(),
  ok_runs = ok_runs + ($4 = 'OK')::int, error_runs = error_runs + ($4 = 'ERROR')::int, updated_at = now()
where name = $1 and owner = $2 and epoch = $3`;

/**
 * Records a TIMEOUT at the deadline (fenced) but keeps the tick owned, marked overrun: the row is
 * still not idle, so TAKE (owner is null) cannot start the next tick anywhere until RELEASE.
 */
const RECORD_OVERRUN = `
update interval_handlers set overrun = true,
  last_status = 'ERROR', last_count = null, last_cause = 'TIMEOUT', last_error = $4,
  last_started_at = run_started_at, last_finished_at = now(),
  error_runs = error_runs + 1, updated_at = now()
where name = $1 and owner = $2 and epoch = $3`;

/** Frees an overrun tick once its handler has returned (fenced); its outcome is already recorded. */
const RELEASE = `
update interval_handlers set owner = null, run_started_at = null, overrun = false, updated_at = now()
where name = $1 and owner = $2 and epoch = $3 and overrun`;

/**
 * Hands a tick back at shutdown (fenced): no outcome recorded, due at once for another worker
 * (an overrun tick, whose outcome is recorded, keeps its next tick time).
 */
const HAND_BACK = `
update interval_handlers set owner = null, run_started_at = null, overrun = false,
  next_due_at = case when overrun then next_due_at else now() end, updated_at = now()
where name = $1 and owner = $2 and epoch = $3`;

/**
 * Ticks whose worker is gone (its row missing or not heartbeating within its own stale_ms) were
 * cut off mid-run: recorded as CRASHED and freed, so the next tick can be taken. An overrun tick
 * already has its outcome (TIMEOUT): SWEEP_OVERRUN only frees it.
 */
const SWEEP = `
update interval_handlers h set owner = null, run_started_at = null,
  last_status = 'ERROR', last_count = null, last_cause = 'CRASHED',
  last_error = 'its worker ' || h.owner || ' stopped heartbeating mid-run',
  last_started_at = h.run_started_at, last_finished_at = now(), error_runs = h.error_runs + 1, updated_at = now()
where h.owner is not null and not h.overrun and not exists (
  select 1 from workers w where w.id = h.owner and w.heartbeat_at > now() - make_interval(secs => w.stale_ms / 1000.0)
)
returning h.name`;

const SWEEP_OVERRUN = `
update interval_handlers h set owner = null, run_started_at = null, overrun = false, updated_at = now()
where h.owner is not null and h.overrun and not exists (
  select 1 from workers w where w.id = h.owner and w.heartbeat_at > now() - make_interval(secs => w.stale_ms / 1000.0)
)
returning h.name`;

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
}

type Outcome =
  | { status: 'OK'; count: number | null }
  | { status: 'ERROR'; cause: 'HANDLER' | 'TIMEOUT'; message: string }
  | { status: 'TIMEOUT'; message: string }
  | { status: 'HAND_BACK' }
  | { status: 'RELEASE' };

const TIMED_OUT = Symbol('timed out');

export function createIntervalRunner(options: IntervalRunnerOptions) {
  const { pool, log, workerId } = options;
  const availability = options.availability ?? createAvailability(log, `worker ${workerId}`);
  const pollMs = options.pollMs ?? 1000;
  const staleMs = options.staleMs ?? 30_000;
  const active = new Map<string, { controller: AbortController; done: Promise<void>; stopping: boolean }>();
  const ensured = new Map<string, number | null>();
  // Outcomes whose write failed, by name: the tick stays owned by this (live) worker, which no
  // sweep frees, so each pass writes them again (fenced on the epoch) until one gets through.
  const unrecorded = new Map<string, { epoch: string; result: Outcome }>();
  let running = false;
  let current: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let unsubscribeHint: (() => void) | undefined;

  async function execute(name: string, epoch: string) {
    const handler = options.registry.get(name)!;
    const state = active.get(name)!;
    const timeoutMs = handler.timeoutMs ?? DEFAULT_INTERVAL_TIMEOUT_MS;
    let deadline: NodeJS.Timeout | undefined;
    const timedOut = new Promise<typeof TIMED_OUT>((resolve) => {
      deadline = setTimeout(() => resolve(TIMED_OUT), timeoutMs);
    });
    const work = Promise.resolve().then(() => handler.run({ signal: state.controller.signal, name, workerId }));
    work.catch(() => {}); // it may reject after its tick was recorded as a timeout
    let result: Outcome;
    try {
      const r = await Promise.race([work, timedOut]);
      if (r === TIMED_OUT) {
        state.controller.abort(new Error(`timed out after ${timeoutMs} ms`));
        // Recorded now; the tick stays this worker's (owned, overrun, in `active`) until the
        // handler's promise settles, whatever it returns then is not recorded.
        const message = `ran past its timeout of ${timeoutMs} ms`;
        const overrun = await record(name, epoch, { status: 'TIMEOUT', message });
        await work.then(
          () => {},
          () => {},
        );
        // Not marked overrun (its write failed): RELEASE would match nothing, so the TIMEOUT is the outcome to write.
        result = overrun ? { status: 'RELEASE' } : { status: 'ERROR', cause: 'TIMEOUT', message };
      } else {
        const count = r && typeof r.count === 'number' && Number.isFinite(r.count) ? Math.max(0, Math.floor(r.count)) : null;
        result = { status: 'OK', count };
      }
    } catch (error) {
      // Postgres text cannot hold a NUL: left in, the outcome could never be written.
      const message = storableText(`${(error as Error)?.name ?? 'Error'}: ${(error as Error)?.message ?? String(error)}`.slice(0, 2000));
      result = state.stopping ? { status: 'HAND_BACK' } : { status: 'ERROR', cause: 'HANDLER', message };
    } finally {
      clearTimeout(deadline);
    }
    await record(name, epoch, result);
  }

  /** Writes the outcome (fenced); false when the write failed (then retried by later passes, but for TIMEOUT). */
  async function record(name: string, epoch: string, result: Outcome): Promise<boolean> {
    unrecorded.delete(name);
    try {
      const res =
        result.status === 'HAND_BACK'
          ? await pool.query(HAND_BACK, [name, workerId, epoch])
          : result.status === 'RELEASE'
            ? await pool.query(RELEASE, [name, workerId, epoch])
            : result.status === 'TIMEOUT'
              ? await pool.query(RECORD_OVERRUN, [name, workerId, epoch, result.message])
              : result.status === 'OK'
                ? await pool.query(RECORD, [name, workerId, epoch, 'OK', result.count, null, null])
                : await pool.query(RECORD, [name, workerId, epoch, 'ERROR', null, result.cause, result.message]);
      if (res.rowCount === 0 && result.status === 'RELEASE')
        log.debug(`worker ${workerId}: interval ${name}: the overrun tick was already freed`);
      else if (res.rowCount === 0)
        log.warn(`worker ${workerId}: interval ${name}: the tick is no longer this worker's; its outcome is not recorded`);
      else if (result.status === 'ERROR') log.warn(`worker ${workerId}: interval ${name}: handler: ${result.message}`);
      else if (result.status === 'TIMEOUT')
        log.warn(`worker ${workerId}: interval ${name}: timeout: ${result.message}; it stays running until its handler returns`);
      return true;
    } catch (error) {
      // The tick stays owned. Written again by the next pass; once this worker is gone, the
      // sweep records it as crashed instead.
      if (!availability.unreachable(error, `recording interval ${name}'s outcome`))
        log.error(`worker ${workerId}: interval ${name}: recording its outcome failed: ${(error as Error).message}`);
      if (result.status !== 'TIMEOUT') unrecorded.set(name, { epoch, result });
      return false;
    }
  }

  async function ensure() {
    const fresh = options.registry.list().filter((h) => !ensured.has(h.name) || ensured.get(h.name) !== (h.everyMs ?? null));
    if (fresh.length === 0) return;
    await pool.query(ENSURE, [fresh.map((h) => h.name), fresh.map((h) => h.everyMs ?? null)]);
    for (const h of fresh) ensured.set(h.name, h.everyMs ?? null);
  }

  /** One pass at a time; a timer firing during a pass shares it. */
  function poll(): Promise<void> {
    if (!running) return Promise.resolve();
    current ??= pass().finally(() => {
      current = undefined;
    });
    return current;
  }

  async function pass() {
    try {
      // Heartbeats that stopped while nobody could reach the database are not crashes: for the
      // staleness window after an outage, the workers that lived through it heartbeat first.
      if (!availability.down && availability.sinceBack() >= staleMs) {
        const askedAt = performance.now();
        const swept = await pool.query<{ name: string }>(SWEEP);
        availability.reached(askedAt);
        for (const row of swept.rows)
          log.warn(`worker ${workerId}: interval ${row.name}: its worker stopped heartbeating mid-run; recorded as crashed`);
        const freed = await pool.query<{ name: string }>(SWEEP_OVERRUN);
        for (const row of freed.rows)
          log.warn(`worker ${workerId}: interval ${row.name}: its worker stopped heartbeating while the tick ran past its timeout; freed`);
      }
      await ensure();
      for (const [name, { epoch, result }] of [...unrecorded]) await record(name, epoch, result);
      const names = options.registry
        .list()
        .map((h) => h.name)
        .filter((n) => !active.has(n));
      if (names.length === 0) return;
      const askedAt = performance.now();
      const { rows } = await pool.query<{ name: string; epoch: string }>(TAKE, [workerId, names]);
      availability.reached(askedAt);
      for (const row of rows) {
        const state = { controller: new AbortController(), done: Promise.resolve(), stopping: false };
        active.set(row.name, state);
        state.done = execute(row.name, row.epoch).finally(() => {
          active.delete(row.name);
          if (running) setImmediate(() => void poll());
        });
      }
    } catch (error) {
      if (!availability.unreachable(error, 'interval poll'))
        log.warn(`worker ${workerId}: interval poll failed: ${(error as Error).message}`);
    }
  }

  return {
    /** Looks for due ticks now, after any pass in progress; resolves when that pass is done (tests). */
    async kick() {
      await current;
      await poll();
    },
    /** Names of the ticks running in this worker. */
    active: () => [...active.keys()],
    async start() {
      if (running) return;
      running = true;
      await poll();
      timer = setInterval(() => void poll(), pollMs);
      timer.unref();
      // A triggered tick: at once, after any pass in progress (which may have missed it).
      unsubscribeHint = onIntervalHint(pool, () => void (current ? current.then(poll) : poll()));
    },
    /** Aborts running ticks, waits up to `graceMs` for them, and hands back the unfinished. */
    async stop({ graceMs = 10_000 } = {}) {
      if (!running) return;
      running = false;
      clearInterval(timer);
      unsubscribeHint?.();
      // A take in flight starts its ticks: they are aborted and handed back below like any other,
      // rather than run on, unstopped, after stop() returned.
      await current;
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
          const { rows } = await pool.query<{ name: string; epoch: string }>(
            `select name, epoch from interval_handlers where owner = $1 and name = any($2::text[])`,
            [workerId, [...active.keys()]],
          );
          for (const row of rows) await record(row.name, row.epoch, { status: 'HAND_BACK' });
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
