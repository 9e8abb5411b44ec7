/**
 * A worker process's row in `workers`: who it is (host, pid, start), the handlers it registered,
 * and a heartbeat. A worker whose last heartbeat is older than its own `stale_ms` is not live:
 * the handler catalogue leaves it out, and an interval handler it was running is swept as
 * crashed. A clean stop deletes the row; rows of workers gone for their window (a day by default) are pruned.
 */
import { hostname } from 'node:os';
import type pg from 'pg';
import { deleteWorker, pruneGoneWorkers, upsertWorker } from '../../../db/statements/workers.js';
import type { Logger } from '../../../log.js';
import { createAvailability, waitForDatabase, type Availability } from './availability.js';

export type HandlerKind = 'HANDLER' | 'RECOVERABLE' | 'INTERVAL';

/** One handler as a worker registered it (stored as JSON in `workers.handlers`). */
export interface Registration {
  kind: HandlerKind;
  name: string;
  /** INTERVAL: its period (none when on demand); RECOVERABLE: its schedule's period, when scheduled by interval. */
  everyMs?: number | undefined;
  /** RECOVERABLE scheduled by cron. */
  cron?: string | undefined;
  timezone?: string | undefined;
  /** INTERVAL with no cadence: runs only when triggered. */
  onDemand?: boolean | undefined;
  /** INTERVAL: how long a tick may run. */
  timeoutMs?: number | undefined;
  /** RECOVERABLE scheduled: the slug of the workspace its schedule triggers runs in. */
  workspace?: string | undefined;
  /** INTERVAL and RECOVERABLE: opted out of alerts at registration. */
  alertsOptOut?: boolean | undefined;
}

export interface PresenceOptions {
  pool: pg.Pool;
  log: Logger;
  id: string;
  /** What this process has registered now (read at every heartbeat: late registrations show up). */
  registrations: () => Registration[];
  heartbeatMs?: number;
  /** Not live after this long without a heartbeat. Default 6 heartbeats, at least 5 s. */
  staleMs?: number;
  /** The process's view of its database: its loops report outages there, so one is logged once. */
  availability?: Availability;
  /** Workers gone (no heartbeat) this long are forgotten (their row deleted). Default a day. */
  goneWorkersMs?: number | undefined;
}

export function createPresence(options: PresenceOptions) {
  const { pool, log, id } = options;
  const availability = options.availability ?? createAvailability(log, `worker ${id}`);
  const heartbeatMs = options.heartbeatMs ?? 5000;
  const staleMs = options.staleMs ?? Math.max(5000, heartbeatMs * 6);
  let timer: NodeJS.Timeout | undefined;
  let beats = 0;
  // The timer's heartbeat in flight: stop waits for it, or its upsert could land after the delete
  // and bring the row back (a stopped worker listed in the catalogue until it went stale).
  let beating: Promise<void> | undefined;

  const write = () =>
    upsertWorker(pool, { id, host: hostname(), pid: process.pid, staleMs, handlers: JSON.stringify(options.registrations()) });

  async function beat() {
    try {
      const askedAt = performance.now();
      await write();
      availability.reached(askedAt);
      // Now and then, forget workers gone for their window (they are long out of the catalogue).
      if (beats++ % 100 === 0) await pruneGoneWorkers(pool, options.goneWorkersMs ?? 86_400_000);
    } catch (error) {
      if (!availability.unreachable(error, 'presence heartbeat'))
        log.warn(`worker ${id}: presence heartbeat failed: ${(error as Error).message}`);
    }
  }

  return {
    id,
    staleMs,
    /**
     * Writes the row (awaited: what runs in this process may rely on it being live), waiting for
     * the database if it cannot be reached yet; `signal` ends that wait.
     */
    async start(signal?: AbortSignal) {
      if (timer) return;
      await waitForDatabase(availability, 'presence', write, signal);
      timer = setInterval(() => void (beating ??= beat().finally(() => (beating = undefined))), heartbeatMs);
      timer.unref();
    },
    /** Heartbeats now (tests). */
    beat,
    async stop() {
      clearInterval(timer);
      timer = undefined;
      await beating;
      await deleteWorker(pool, id).catch((e: Error) => log.warn(`worker ${id}: removing its presence failed: ${e.message}`));
    },
  };
}

export type Presence = ReturnType<typeof createPresence>;
