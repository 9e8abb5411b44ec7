/**
 * The handler catalogue as read: what the live workers registered (HANDLER for HANDLER
 * endpoints, RECOVERABLE, INTERVAL), with cadence and last outcome, and each actor's view of it.
 *
 * Scoping: handlers are code in worker processes, not tenant data, so the catalogue (names,
 * kinds, workers, interval cadence and outcomes) is the installation's and any authenticated
 * caller may read it; where workers run and handler error text only installation admins see.
 * What belongs to a workspace is shown for the caller's workspace only: the last run of a
 * recoverable handler and its schedule (which triggers runs in one workspace).
 */
import {
  intervalHandlersByName,
  liveRegistrations,
  runSchedulesByName,
  type HandlerKind,
  type IntervalTickRow,
  type LiveRegistrationRow,
} from '../../db/repositories/handlers.js';
import { latestRunsByName } from '../../db/repositories/runs.js';
import { scoped, type Executor } from '../../db/repositories/scope.js';
import type { IntervalHandlerRow, RunScheduleRow } from '../../db/types.js';
import { seesInstallation, type Actor } from '../kernel/actor.js';
import { ValidationError } from '../kernel/errors.js';
import { opaqueWorkerId } from '../kernel/models.js';
import { toRun, type Run } from '../runs/runs.js';

export type { HandlerKind } from '../../db/repositories/handlers.js';

export interface WorkerInfo {
  id: string;
  host: string | null;
  pid: number | null;
  startedAt: Date;
  heartbeatAt: Date;
}

export interface HandlerCadence {
  everyMs: number | null;
  cron: string | null;
  timezone: string | null;
}

export interface HandlerOutcome {
  status: 'OK' | 'ERROR';
  /** OK: what the handler returned as its count, if anything. */
  count: number | null;
  /** ERROR: HANDLER (it threw), TIMEOUT (ran past its timeout), CRASHED (its worker died mid-run). */
  cause: 'HANDLER' | 'TIMEOUT' | 'CRASHED' | null;
  message: string | null;
  /** OK: the JSON the handler returned beside its count; null when it returned none. */
  extra: unknown;
  startedAt: Date | null;
  finishedAt: Date | null;
}

export interface IntervalState {
  /** No cadence: it runs only when triggered. */
  onDemand: boolean;
  timeoutMs: number | null;
  nextDueAt: Date | null;
  running: boolean;
  runningSince: Date | null;
  /** The worker running it now. */
  runningOn: string | null;
  okRuns: number;
  errorRuns: number;
  /** Cadence ticks skipped because a tick was still running when they came due, all time. */
  skippedTicks: number;
  /** Ticks abandoned past their timeout and grace (their slot freed while the handler ran on), all time. */
  abandonedTicks: number;
  /** Abandoned handlers still running now, on live workers. */
  abandonedRunning: number;
  /** Cadence ticks due while a tick runs: skipped (SKIP) or one run right after it (QUEUE). */
  overlap: 'SKIP' | 'QUEUE';
}

export interface RunScheduleState {
  cadence: HandlerCadence;
  nextDueAt: Date | null;
  ticks: number;
  /** Ticks that found a run active and started nothing. */
  ticksOnActiveRun: number;
  lastTickAt: Date | null;
  lastTickOutcome: 'STARTED' | 'RESUMED' | 'ACTIVE' | 'HELD' | null;
  lastTickRunId: string | null;
  lastError: string | null;
  lastErrorAt: Date | null;
}

export interface HandlerInfo {
  kind: HandlerKind;
  name: string;
  /** INTERVAL: its period; RECOVERABLE: its schedule in the caller's workspace; HANDLER: null. */
  cadence: HandlerCadence | null;
  /** The live workers that registered it, oldest first. */
  workers: WorkerInfo[];
  /** INTERVAL only (installation-level). */
  lastOutcome: HandlerOutcome | null;
  interval: IntervalState | null;
  /** RECOVERABLE only, in the caller's workspace. */
  schedule: RunScheduleState | null;
  lastRun: Run | null;
  /** INTERVAL and RECOVERABLE: registered opted out of alerts (by any of its live workers). */
  alertsOptOut: boolean;
}

/** A timestamptz that is a real instant ('infinity' comes back as a number). */
const instant = (v: unknown): Date | null => (v instanceof Date && !Number.isNaN(v.getTime()) ? v : null);
const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** The last outcome held by an interval handler's row; null before its first. */
export function outcomeOf(
  r: Pick<
    IntervalTickRow,
    'last_status' | 'last_count' | 'last_cause' | 'last_error' | 'last_extra' | 'last_started_at' | 'last_finished_at'
  >,
): HandlerOutcome | null {
  if (!r.last_status) return null;
  return {
    status: r.last_status,
    count: num(r.last_count),
    cause: r.last_cause,
    message: r.last_error,
    extra: r.last_extra ?? null,
    startedAt: instant(r.last_started_at),
    finishedAt: instant(r.last_finished_at),
  };
}

/** The catalogue's entries as read, before an actor's view of them; with what the reads need. */
type Entry = HandlerInfo & { timeoutMs: number | null; scheduledHere: boolean };

/** Live workers' registrations, one entry per (kind, name), each with its workers in start order. */
function entriesOf(regs: LiveRegistrationRow[]): Entry[] {
  const byKey = new Map<string, Entry>();
  for (const r of regs) {
    const key = `${r.kind}\u0000${r.name}`;
    let h = byKey.get(key);
    if (!h) {
      h = {
        kind: r.kind,
        name: r.name,
        cadence: null,
        workers: [],
        lastOutcome: null,
        interval: null,
        schedule: null,
        lastRun: null,
        alertsOptOut: false,
        timeoutMs: num(r.timeout_ms),
        scheduledHere: false,
      };
      byKey.set(key, h);
    }
    h.scheduledHere ||= r.scheduled_here;
    h.alertsOptOut ||= r.alerts_opt_out;
    if (!h.workers.some((w) => w.id === r.id))
      h.workers.push({ id: r.id, host: r.host, pid: r.pid, startedAt: r.started_at, heartbeatAt: r.heartbeat_at });
  }
  return [...byKey.values()];
}

/** An interval handler's cadence, tick state and last outcome, from its row. */
function withInterval(h: Entry, r: IntervalHandlerRow & { abandoned_running: number }): void {
  const onDemand = r.every_ms === null;
  h.cadence = onDemand ? null : { everyMs: Number(r.every_ms), cron: null, timezone: null };
  h.interval = {
    onDemand,
    timeoutMs: h.timeoutMs,
    nextDueAt: instant(r.next_due_at),
    running: r.owner !== null,
    runningSince: instant(r.run_started_at),
    runningOn: r.owner,
    okRuns: Number(r.ok_runs),
    errorRuns: Number(r.error_runs),
    skippedTicks: Number(r.skipped_ticks),
    abandonedTicks: Number(r.abandoned_total),
    abandonedRunning: r.abandoned_running,
    overlap: r.overlap === 'QUEUE' ? 'QUEUE' : 'SKIP',
  };
  h.lastOutcome = outcomeOf(r);
}

/** A recoverable handler's schedule in the caller's workspace, from its row. */
function scheduleOf(s: RunScheduleRow): RunScheduleState {
  return {
    cadence: { everyMs: num(s.every_ms), cron: s.cron_expression, timezone: s.timezone },
    nextDueAt: instant(s.next_due_at),
    ticks: Number(s.ticks),
    ticksOnActiveRun: Number(s.ticks_on_active),
    lastTickAt: instant(s.last_tick_at),
    lastTickOutcome: s.last_tick_outcome,
    lastTickRunId: s.last_tick_run_id,
    lastError: s.last_error,
    lastErrorAt: instant(s.last_error_at),
  };
}

/**
 * The catalogue as the installation sees it (see handlerFor for an actor's view): live workers'
 * registrations, by kind and name when given, with interval handlers' state and recoverable
 * handlers' schedule and last run in the caller's workspace.
 */
export async function catalogue(
  ex: Executor,
  actor: Actor,
  filter: { kind?: HandlerKind | null; name?: string | null },
): Promise<HandlerInfo[]> {
  const ws = scoped(actor.workspaceId);
  const all = entriesOf(await liveRegistrations(ex, ws, { kind: filter.kind ?? null, name: filter.name ?? null }));
  const intervals = all.filter((h) => h.kind === 'INTERVAL');
  const recoverables = all.filter((h) => h.kind === 'RECOVERABLE');

  const intervalRows = new Map(
    (
      await intervalHandlersByName(
        ex,
        intervals.map((h) => h.name),
      )
    ).map((r) => [r.name, r]),
  );
  for (const h of intervals) {
    const r = intervalRows.get(h.name);
    if (r) withInterval(h, r);
  }

  const names = recoverables.map((h) => h.name);
  const schedules = new Map((await runSchedulesByName(ex, ws, names)).map((r) => [r.name, r]));
  const lastRuns = new Map((await latestRunsByName(ex, ws, names)).map((r) => [r.name, r]));
  for (const h of recoverables) {
    // A schedule row whose handler is no longer scheduled here (by any live worker) is history, not shown.
    const s = h.scheduledHere ? schedules.get(h.name) : undefined;
    if (s) {
      h.schedule = scheduleOf(s);
      h.cadence = h.schedule.cadence;
    }
    const run = lastRuns.get(h.name);
    if (run) h.lastRun = toRun(run);
  }
  return all.map(({ timeoutMs: _t, scheduledHere: _s, ...h }) => h);
}

/**
 * For a tenant's keys: the catalogue without where workers run and without handler error text or
 * a tick's `extra`, which belong to the installation (an interval handler is installation-wide
 * work, and either can carry anything). Worker ids become their
 * digest, so `runningOn` still matches `workers`.
 */
function withoutInstallationDetails(h: HandlerInfo): HandlerInfo {
  return {
    ...h,
    workers: h.workers.map((w) => ({ ...w, id: opaqueWorkerId(w.id), host: null, pid: null })),
    lastOutcome: h.lastOutcome ? { ...h.lastOutcome, message: null, extra: null } : null,
    interval: h.interval ? { ...h.interval, runningOn: h.interval.runningOn === null ? null : opaqueWorkerId(h.interval.runningOn) } : null,
  };
}

/** Catalogue order: by kind, then name, in code-unit order (the same in every process). */
export function byCatalogueKey(a: { kind: string; name: string }, b: { kind: string; name: string }): number {
  if (a.kind !== b.kind) return a.kind < b.kind ? -1 : 1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export const encodeHandlerCursor = (h: { kind: string; name: string }) => Buffer.from(`h1:${h.kind}:${h.name}`).toString('base64url');

export function decodeHandlerCursor(cursor: string): { kind: HandlerKind; name: string } {
  const match = /^h1:(HANDLER|RECOVERABLE|INTERVAL):(.+)$/s.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match) throw ValidationError.at(['after'], 'is not a cursor returned by this list');
  return { kind: match[1] as HandlerKind, name: match[2]! };
}

/** The catalogue entry as this actor may see it: every answer that carries one goes through here. */
export const handlerFor = (actor: Actor, h: HandlerInfo) => (seesInstallation(actor) ? h : withoutInstallationDetails(h));
