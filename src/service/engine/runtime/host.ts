/**
 * What one worker process runs besides its execution workers, under one id: its presence in the
 * handler catalogue, the runner of recoverable handlers, interval handlers, and the schedules of
 * recoverable handlers. The library's `startWorker` and `jobgate start` / `jobgate worker` both
 * start one, so the machinery runs whether or not any handler is registered.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import type { Logger } from '../../../log.js';
import type { Actor } from '../../kernel/actor.js';
import type { TriggerRunInput, TriggerRunOptions, TriggerRunResult } from '../../runs/runs.js';
import { createAvailability, type Availability } from './availability.js';
import type { Observer } from '../../kernel/observer.js';
import type { HandlerRegistry } from '../delivery/handler-registry.js';
import { createIntervalRunner, DEFAULT_INTERVAL_TIMEOUT_MS, type IntervalRegistry } from '../intervals/intervals.js';
import { createPresence, type Registration } from './presence.js';
import type { RecoverableRegistry } from '../runs/recoverable.js';
import { createRunner } from '../runs/runner.js';
import { createRunScheduleTicker } from '../runs/schedule-ticker.js';

export interface EngineHostOptions {
  pool: pg.Pool;
  log: Logger;
  handlers: HandlerRegistry;
  recoverables: RecoverableRegistry;
  intervals: IntervalRegistry;
  /** The service's triggerRun (schedules call it). */
  triggerRun: (actor: Actor, input: TriggerRunInput, options?: TriggerRunOptions) => Promise<TriggerRunResult>;
  id?: string;
  /** Presence heartbeat period. Default 5 s. */
  heartbeatMs?: number;
  /** A worker (and a run) silent this long is gone. Default 30 s. */
  staleMs?: number;
  /** Poll period of the runner, the intervals and the schedules. Default 1 s. */
  pollMs?: number;
  /** The process's view of its database (shared with its worker, so an outage is logged once). */
  availability?: Availability;
  /** Where the runner reports checkpoints (metrics). Default: nowhere. */
  observer?: Observer | undefined;
  /** Workers gone this long are forgotten by this one's presence. Default a day. */
  goneWorkersMs?: number | undefined;
}

/** Everything registered in a process, as the catalogue shows it. */
export function registrationsOf(handlers: HandlerRegistry, recoverables: RecoverableRegistry, intervals: IntervalRegistry): Registration[] {
  return [
    ...handlers.names().map((name): Registration => ({ kind: 'HANDLER', name })),
    ...recoverables.list().map((h): Registration => ({
      kind: 'RECOVERABLE',
      name: h.name,
      cron: h.schedule?.cron,
      timezone: h.schedule?.timezone,
      everyMs: h.schedule?.everyMs,
      workspace: h.schedule ? (h.schedule.workspace ?? 'default') : undefined,
      ...(h.alertsOptOut ? { alertsOptOut: true } : {}),
    })),
    ...intervals.list().map((h): Registration => ({
      kind: 'INTERVAL',
      name: h.name,
      everyMs: h.everyMs,
      timeoutMs: h.timeoutMs ?? DEFAULT_INTERVAL_TIMEOUT_MS,
      ...(h.onDemand ? { onDemand: true } : {}),
      ...(h.alertsOptOut ? { alertsOptOut: true } : {}),
    })),
  ];
}

export function createEngineHost(options: EngineHostOptions) {
  const { pool, log } = options;
  const id = options.id ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const staleMs = options.staleMs ?? 30_000;
  const pollMs = options.pollMs ?? 1000;
  // Several heartbeats fit in the staleness window, for the worker's row and its runs alike.
  const heartbeatMs = options.heartbeatMs ?? Math.max(100, Math.min(5000, Math.floor(staleMs / 6)));
  const availability = options.availability ?? createAvailability(log, `worker ${id}`);
  const presence = createPresence({
    pool,
    log,
    id,
    heartbeatMs,
    staleMs,
    registrations: () => registrationsOf(options.handlers, options.recoverables, options.intervals),
    availability,
    goneWorkersMs: options.goneWorkersMs,
  });
  const runner = createRunner({
    pool,
    log,
    registry: options.recoverables,
    ownerId: id,
    staleMs,
    pollMs,
    heartbeatMs,
    availability,
    observer: options.observer,
  });
  const intervals = createIntervalRunner({
    pool,
    log,
    registry: options.intervals,
    workerId: id,
    pollMs,
    availability,
    staleMs,
    observer: options.observer,
  });
  const schedules = createRunScheduleTicker({
    pool,
    log,
    registry: options.recoverables,
    trigger: options.triggerRun,
    pollMs,
    availability,
  });
  let started = false;

  return {
    id,
    presence,
    runner,
    intervals,
    schedules,
    /** Starts it all, once the database answers (`signal` ends that wait). */
    async start(signal?: AbortSignal) {
      if (started) return;
      started = true;
      // Presence first: the interval sweep counts a tick whose worker has no live row as crashed.
      await presence.start(signal);
      await runner.start();
      await intervals.start();
      schedules.start();
      log.info(`worker ${id}: catalogue, recoverable runner, interval handlers and run schedules started`);
    },
    async stop({ graceMs = 10_000 } = {}) {
      if (!started) return;
      started = false;
      await schedules.stop();
      await Promise.all([intervals.stop({ graceMs }), runner.stop({ graceMs })]);
      await presence.stop();
    },
  };
}

export type EngineHost = ReturnType<typeof createEngineHost>;
