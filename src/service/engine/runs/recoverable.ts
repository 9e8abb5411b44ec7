/**
 * Recoverable handlers: long scans that talk to the engine only through a store. What a handler
 * is, returns and is given, and the registry of a process's handlers; the runner that executes
 * them is runner.ts (one execution: run-store.ts).
 *
 *  - A runner takes an unowned RUNNING run of a handler it has (compare-and-set: owner, epoch
 *    + 1) and runs it; every write the handler's store makes is fenced on that epoch, so a
 *    runner that lost a run (declared crashed) cannot overwrite the one that took it over.
 *  - It heartbeats while the handler runs. A run whose runner stopped heartbeating (killed,
 *    host lost) is moved to PAUSED with the reason recorded — by the sweep every runner runs,
 *    also at start — and is resumed by an operator or its schedule, not automatically.
 *  - The engine never aborts a handler mid-batch: cancellation and shutdown only make
 *    `store.status()` answer CANCEL_REQUESTED, and the handler stops at its next safe boundary.
 *    A shutdown hands the run back (RUNNING, unowned) for another runner; a cancel pauses it.
 */
import type pg from 'pg';
import type { ZodType } from 'zod';
import { normalizeCron } from '../../cron/expressions.js';
import type { RunStatus, Severity } from '../../runs/runs.js';
import { HANDLER_NAME_RULE, isHandlerName } from '../../../db/handler-name.js';
import { WORKSPACE_SLUG } from '../../../db/workspace-slug.js';

export type RunOutcome = { kind: 'completed' } | { kind: 'paused'; cursor?: unknown } | { kind: 'failed'; message: string };

/** What a recoverable handler returns. */
export const outcome = {
  completed: (): RunOutcome => ({ kind: 'completed' }),
  paused: (cursor?: unknown): RunOutcome => ({ kind: 'paused', cursor }),
  failed: (message: string): RunOutcome => ({ kind: 'failed', message }),
};

export interface RunStore<P = unknown> {
  runId: string;
  /** Fixed when the run started; use it as "now" so a long scan does not drift. */
  startedAt: Date;
  params: P;
  /** null on a fresh run; else the last checkpointed cursor (a Buffer, or the JSON value given). */
  loadCursor(): Promise<unknown>;
  /**
   * Advances the cursor, adds `processed`, merges `stats` (numbers add up), bumps the heartbeat.
   * Throws ValidationError (VALIDATION_FAILED), writing nothing, for a cursor JSON cannot hold
   * (undefined, a cycle, a bigint; checkpoint null to start over), stats jsonb cannot hold, or
   * counts that are not numbers.
   */
  checkpoint(cursor: unknown, progress: { processed: number; total?: number; stats?: Record<string, unknown> }): Promise<void>;
  /**
   * Poll between batches: CANCEL_REQUESTED means stop at the next safe boundary. Also answered
   * when the run is no longer this runner's (declared crashed, taken over, or not live any more).
   */
  status(): Promise<RunStatus>;
  /** Idempotent per (run, kind, resourceId); returns whether it was new. */
  recordFinding(finding: { kind: string; severity: Severity; resourceId: string; detail?: unknown }): Promise<boolean>;
  /**
   * The handler's own writes to jobgate's database and a checkpoint, committed together under the
   * run's fence: `fn` writes through `client` and calls `tx.checkpoint` (at most once; same
   * arguments as `checkpoint`); both commit only if the run is still this runner's at the commit,
   * else everything rolls back and RunLostError is thrown. A throw from `fn` rolls back both.
   */
  transaction<T>(fn: (client: pg.PoolClient, tx: RunTransaction) => Promise<T>): Promise<T>;
}

/** What a run's transaction (RunStore.transaction) can do besides the handler's own writes. */
export interface RunTransaction {
  /** The checkpoint to commit with the transaction (the last call wins); see RunStore.checkpoint. */
  checkpoint(cursor: unknown, progress: { processed: number; total?: number; stats?: Record<string, unknown> }): void;
}

/**
 * How a run whose handler throws is retried: from its last checkpoint, after a backoff, while it
 * has budget left. A checkpoint that moves the cursor (progress) gives the budget back; a handler
 * that returns `outcome.failed()` fails at once.
 */
export interface RunRetry {
  /** Retries after a throw before the run ends FAILED, counted since its last progress. Default 3; 0: none. */
  budget?: number | undefined;
  /** Wait before the first retry, doubling with each (ms). Default 1000. */
  backoffMs?: number | undefined;
  /** Longest wait between retries (ms). Default 60 000. */
  maxBackoffMs?: number | undefined;
}

export const DEFAULT_RUN_RETRY = { budget: 3, backoffMs: 1000, maxBackoffMs: 60_000 } as const;

/**
 * When a recoverable handler runs on its own: each tick calls the idempotent trigger, so a tick
 * that finds a run active starts nothing (it is counted). Exactly one of `cron` or `everyMs`.
 */
export interface RunSchedule {
  /** Five-field cron expression (or `@daily`-style nickname), in `timezone`. */
  cron?: string | undefined;
  /** IANA time zone of `cron`. Default UTC. */
  timezone?: string | undefined;
  /** Or: a tick every this many ms. */
  everyMs?: number | undefined;
  /** Params of the runs it starts. */
  params?: unknown;
  /** Slug of the workspace its runs belong to. Default "default". */
  workspace?: string | undefined;
}

export interface RecoverableHandler<P = any> {
  name: string;
  params?: ZodType<P> | undefined;
  /** Runs it on a cron or an interval (in one workspace). */
  schedule?: RunSchedule | undefined;
  /** Never raise alerts about this handler's runs (published in the catalogue, read by the alert evaluator). */
  alertsOptOut?: boolean | undefined;
  /** Retries of a run whose handler throws (default: 3, from 1 s doubling up to a minute). */
  retry?: RunRetry | undefined;
  run(store: RunStore<P>, params: P): Promise<RunOutcome>;
}

export class RecoverableRegistry {
  private readonly handlers = new Map<string, RecoverableHandler>();

  register(handler: RecoverableHandler): void {
    if (!isHandlerName(handler.name)) throw new Error(`recoverable name "${handler.name}" ${HANDLER_NAME_RULE}`);
    if (this.handlers.has(handler.name)) throw new Error(`a recoverable handler named "${handler.name}" is already registered`);
    const schedule = handler.schedule ? validSchedule(handler.name, handler.schedule) : undefined;
    this.handlers.set(handler.name, { ...handler, schedule, retry: validRetry(handler.name, handler.retry) });
  }

  get(name: string): RecoverableHandler | undefined {
    return this.handlers.get(name);
  }

  names(): string[] {
    return [...this.handlers.keys()];
  }

  list(): RecoverableHandler[] {
    return [...this.handlers.values()];
  }
}

/** The retry policy with its defaults filled in; throws (at registration) when invalid. */
function validRetry(name: string, retry: RunRetry | undefined): Required<RunRetry> {
  const r = {
    budget: retry?.budget ?? DEFAULT_RUN_RETRY.budget,
    backoffMs: retry?.backoffMs ?? DEFAULT_RUN_RETRY.backoffMs,
    maxBackoffMs: retry?.maxBackoffMs ?? DEFAULT_RUN_RETRY.maxBackoffMs,
  };
  for (const [key, value] of Object.entries(r))
    if (!Number.isInteger(value) || value < 0 || value > 2_000_000_000)
      throw new Error(`recoverable "${name}": retry: ${key} must be a whole number from 0 to 2000000000`);
  return r;
}

/** The schedule with its cron normalised and time zone defaulted; throws (at registration) when invalid. */
function validSchedule(name: string, schedule: RunSchedule): RunSchedule {
  const fail = (why: string): never => {
    throw new Error(`recoverable "${name}": schedule: ${why}`);
  };
  if ((schedule.cron === undefined) === (schedule.everyMs === undefined)) fail('give exactly one of cron or everyMs');
  if (schedule.everyMs !== undefined && (!Number.isInteger(schedule.everyMs) || schedule.everyMs < 1000))
    fail('everyMs must be a whole number of ms, at least 1000');
  if (schedule.workspace !== undefined && !WORKSPACE_SLUG.test(schedule.workspace))
    fail(`workspace "${schedule.workspace}" is not a workspace slug`);
  if (schedule.cron === undefined) return { ...schedule, timezone: undefined };
  const timezone = schedule.timezone ?? 'UTC';
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    fail(`"${timezone}" is not a known IANA time zone`);
  }
  let cron = '';
  try {
    cron = normalizeCron(schedule.cron, ['schedule', 'cron']);
  } catch (error) {
    fail((error as Error).message);
  }
  return { ...schedule, cron, timezone };
}

/** Thrown from store writes when this runner no longer owns the run. */
export class RunLostError extends Error {
  override name = 'RunLostError';
}

/**
 * What a store call throws when jobgate's database could not be reached (a restart, a cut
 * connection, every pooled connection held): the run is handed back, to resume from its last
 * checkpoint, instead of ending FAILED. Handlers should let it propagate.
 */
export class RunStoreUnavailableError extends Error {
  override name = 'RunStoreUnavailableError';
}
