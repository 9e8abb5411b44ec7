/**
 * The runner of recoverable handlers: long scans that talk to the engine only through a store.
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
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { inspect } from 'node:util';
import type pg from 'pg';
import { isConnectionError } from '../../db/unavailable.js';
import { z, type ZodType } from 'zod';
import type { Logger } from '../../log.js';
import { normalizeCron } from '../cron.js';
import { parseInput } from '../context.js';
import { ValidationError } from '../errors.js';
import { jsonValue, storableText } from '../inputs.js';
import type { RunRow, RunStatus, Severity } from '../runs.js';
import { createAvailability, type Availability } from './availability.js';
import { noopObserver, type Observer } from '../observer.js';

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
}

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
  run(store: RunStore<P>, params: P): Promise<RunOutcome>;
}

export class RecoverableRegistry {
  private readonly handlers = new Map<string, RecoverableHandler>();

  register(handler: RecoverableHandler): void {
    if (!/^[A-Za-z0-9_.:-]{1,200}$/.test(handler.name))
      throw new Error(`recoverable name "${handler.name}" must be 1-200 letters, digits, _ . : -`);
    if (this.handlers.has(handler.name)) throw new Error(`a recoverable handler named "${handler.name}" is already registered`);
    const schedule = handler.schedule ? validSchedule(handler.name, handler.schedule) : undefined;
    this.handlers.set(handler.name, { ...handler, schedule });
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

/** The schedule with its cron normalised and time zone defaulted; throws (at registration) when invalid. */
function validSchedule(name: string, schedule: RunSchedule): RunSchedule {
  const fail = (why: string): never => {
    throw new Error(`recoverable "${name}": schedule: ${why}`);
  };
  if ((schedule.cron === undefined) === (schedule.everyMs === undefined)) fail('give exactly one of cron or everyMs');
  if (schedule.everyMs !== undefined && (!Number.isInteger(schedule.everyMs) || schedule.everyMs < 1000))
    fail('everyMs must be a whole number of ms, at least 1000');
  if (schedule.workspace !== undefined && !/^[a-z0-9][a-z0-9-]{0,62}$/.test(schedule.workspace))
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

/** What TAKE returns: the run's row, with its cursor encoding and the epoch this runner now holds. */
type TakenRun = Pick<RunRow, 'id' | 'workspace_id' | 'name' | 'status' | 'params' | 'cursor' | 'stats' | 'started_at'> & {
  cursor_json: boolean;
  epoch: number;
};

/**
 * Takes one unowned live run of a handler this runner has: SKIP LOCKED splits runs between
 * runners, the epoch bump fences out any earlier owner. It records this runner's staleness window
 * on the run, so every sweeper judges the run by its owner's heartbeat cadence.
 */
const TAKE = `
update runs r set owner = $1, epoch = r.epoch + 1, stale_ms = $3, heartbeat_at = now(), resume_after = null, updated_at = now()
where r.id = (
  select id from runs
  where status in ('RUNNING', 'CANCEL_REQUESTED') and owner is null and name = any($2::text[])
    -- Handed back after a database failure: not before its backoff (migration 000015).
    and (resume_after is null or resume_after <= now())
  order by updated_at limit 1
  for update skip locked
)
returning r.id, r.workspace_id, r.name, r.status, r.params, r.cursor, r.cursor_json, r.stats, r.started_at, r.epoch`;

// Handing a run back (shutdown, or its database lost mid-run): unowned and RUNNING for a runner
// to take again, unless an operator asked it to stop, which makes it that operator's pause.
const HAND_BACK = `owner = null,
  status = case when status = 'CANCEL_REQUESTED' then 'PAUSED' else 'RUNNING' end,
  pause_kind = case when status = 'CANCEL_REQUESTED' then 'CANCELLED' end,
  pause_reason = case when status = 'CANCEL_REQUESTED' then 'cancelled by an operator' end`;

/**
 * Runs whose owner stopped heartbeating for longer than the owner's own window (recorded on the
 * run when taken; the sweeper's `$1` only for runs taken before that was recorded): paused with
 * the reason and kind (CRASHED; CANCELLED when an operator had asked it to stop), for an operator
 * or its schedule to resume. A healthy runner with a long window is never swept by
 * one with a short window. Served by the partial index runs_owned_heartbeat.
 */
const SWEEP = `
update runs set status = 'PAUSED', owner = null,
  -- An operator had asked it to stop: it stays an operator's pause (schedules do not resume it).
  pause_kind = case when status = 'CANCEL_REQUESTED' then 'CANCELLED' else 'CRASHED' end,
  pause_reason = 'its worker stopped heartbeating (killed or lost) at ' || to_char(heartbeat_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
  updated_at = now()
where status in ('RUNNING', 'CANCEL_REQUESTED') and owner is not null
  and heartbeat_at < now() - make_interval(secs => coalesce(stale_ms, $1::double precision) / 1000)
returning id, name`;

export interface RunnerOptions {
  pool: pg.Pool;
  registry: RecoverableRegistry;
  log: Logger;
  ownerId?: string;
  heartbeatMs?: number;
  /**
   * A run this runner owns that is not heartbeated for this long is declared crashed (by any
   * runner's sweep: the window is recorded on the run). Default 30 s.
   */
  staleMs?: number;
  pollMs?: number;
  /** Runs executed at once by this runner. Default 4. */
  concurrency?: number;
  /** The process's view of its database: its loops report outages there, so one is logged once. */
  availability?: Availability;
  /** Where checkpoints are reported (metrics). Default: nowhere. */
  observer?: Observer | undefined;
}

/** What a checkpoint's progress must be to be stored (the database would refuse the rest, less clearly). */
const progressSchema = z.object({
  processed: z.number(),
  total: z.number().int().min(0).nullish(),
  stats: jsonValue().optional(),
});

/** The cursor as stored: a Buffer's bytes, or JSON text. Throws ValidationError for what JSON cannot hold. */
function encodeCursor(c: unknown): [Buffer | null, boolean] {
  if (c === null) return [null, false];
  if (Buffer.isBuffer(c)) return [c, false];
  let json: string | undefined;
  try {
    json = JSON.stringify(c);
  } catch (error) {
    throw ValidationError.at(['cursor'], `cannot be stored as JSON (${(error as Error).message})`);
  }
  // Stored as NULL, undefined would silently send a resumed run back to the start.
  if (json === undefined)
    throw ValidationError.at(
      ['cursor'],
      `cannot be stored as JSON (${c === undefined ? 'undefined; checkpoint null to start over' : `a ${typeof c}`})`,
    );
  return [Buffer.from(json), true];
}

/**
 * What the handler returned, as an outcome the database can record. Anything else (a handler
 * that returns nothing) is a failure saying so: an outcome that cannot be written would leave
 * the run owned, unheartbeated, to be swept later as if its worker had crashed.
 */
function recordable(result: unknown): RunOutcome {
  const r = result as Partial<{ kind: string; message: unknown }> | null | undefined;
  if (r?.kind === 'completed' || r?.kind === 'paused') return r as RunOutcome;
  if (r?.kind === 'failed') return { kind: 'failed', message: storableText(String(r.message)).slice(0, 2000) };
  return outcome.failed(
    `the handler returned ${inspect(result, { depth: 1, breakLength: Infinity }).slice(0, 200)}, not an outcome (outcome.completed(), outcome.paused() or outcome.failed())`,
  );
}

function mergeStats(into: Record<string, unknown>, add: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!add) return into;
  const out = { ...into };
  for (const [k, v] of Object.entries(add)) {
    out[k] = typeof v === 'number' && typeof out[k] === 'number' ? (out[k] as number) + v : v;
  }
  return out;
}

interface RunState {
  stopping: boolean;
  lost: boolean;
  done: Promise<void>;
}

export function createRunner(options: RunnerOptions) {
  const { pool, log } = options;
  const owner = options.ownerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const heartbeatMs = options.heartbeatMs ?? 5000;
  const staleMs = options.staleMs ?? 30_000;
  const pollMs = options.pollMs ?? 1000;
  const concurrency = options.concurrency ?? 4;
  const availability = options.availability ?? createAvailability(log, `runner ${owner}`);
  // By run and epoch: a run taken again by this runner (swept while its heartbeat was late, then
  // resumed) while its earlier execution winds down is two entries, each counted and waited for.
  const active = new Map<string, RunState>();
  // Polls in flight: stop() waits for them, so a run one takes is stopped and handed back like any other.
  const polling = new Set<Promise<void>>();
  let running = false;
  let timer: NodeJS.Timeout | undefined;

  async function execute(run: TakenRun, state: RunState) {
    const handler = options.registry.get(run.name)!;
    let stats = run.stats ?? {};
    let cursor: unknown = run.cursor === null ? null : run.cursor_json ? JSON.parse(run.cursor.toString('utf8')) : run.cursor;
    const fence = [run.id, run.epoch, owner] as const;
    const write = async (text: string, values: unknown[]) => {
      const res = await pool.query(
        `${text} and id = $${values.length + 1} and epoch = $${values.length + 2} and owner = $${values.length + 3} returning status`,
        [...values, ...fence],
      );
      if (res.rowCount === 0) {
        state.lost = true;
        throw new RunLostError(`run ${run.id} is no longer this worker's`);
      }
      return res.rows[0].status as RunStatus;
    };
    // Whether the last store call found the database unreachable (a later one that works clears
    // it). If so when the handler ends by throwing or failing, the run is handed back, after a
    // backoff, rather than recorded FAILED; a pause or completion it returns stands.
    let unavailable = false;
    const reach = async <T>(call: () => Promise<T>): Promise<T> => {
      try {
        const result = await call();
        unavailable = false;
        return result;
      } catch (error) {
        if (!isConnectionError(error)) throw error;
        unavailable = true;
        throw new RunStoreUnavailableError(`run ${run.id}: the database could not be reached (${(error as Error).message})`, {
          cause: error,
        });
      }
    };
    const store: RunStore = {
      runId: run.id,
      startedAt: run.started_at,
      params: run.params,
      loadCursor: async () => cursor,
      async checkpoint(next, progress) {
        parseInput(progressSchema, progress);
        const [bytes, json] = encodeCursor(next);
        const merged = mergeStats(stats, progress.stats);
        await reach(() =>
          write(
            `update runs set cursor = $1, cursor_json = $2, processed = processed + $3, total = coalesce($4, total), stats = $5,
               outage_hand_backs = 0, heartbeat_at = now(), updated_at = now() where status in ('RUNNING', 'CANCEL_REQUESTED')`,
            [bytes, json, Math.max(0, Math.floor(progress.processed)), progress.total ?? null, JSON.stringify(merged)],
          ),
        );
        (options.observer ?? noopObserver).runCheckpointed();
        // Only once written: a checkpoint retried after a failure does not count its stats twice.
        stats = merged;
        cursor = next;
      },
      async status() {
        if (state.stopping || state.lost) return 'CANCEL_REQUESTED';
        // The run as this runner took it (same owner and epoch), still live. Anything else (swept
        // and paused, resumed and taken by another runner, finished) means: stop now.
        const { rows } = await reach(() =>
          pool.query<{ status: RunStatus }>(
            `select status from runs where id = $1 and epoch = $2 and owner = $3 and status in ('RUNNING', 'CANCEL_REQUESTED')`,
            [...fence],
          ),
        );
        if (!rows[0]) {
          state.lost = true;
          return 'CANCEL_REQUESTED';
        }
        return rows[0].status;
      },
      async recordFinding(f) {
        if (state.lost) throw new RunLostError(`run ${run.id} is no longer this worker's`);
        // Fenced like every other write: only while the run is still this runner's (same owner
        // and epoch, live). FOR SHARE waits for a takeover committing now and re-reads the run
        // after it, so a finding never lands on a run another runner has taken.
        const { rows } = await reach(() =>
          pool.query<{ live: boolean; inserted: boolean }>(
            `with live as (
             select workspace_id from runs
             where id = $1 and epoch = $2 and owner = $3 and status in ('RUNNING', 'CANCEL_REQUESTED')
             for share
           ), inserted as (
             insert into findings (workspace_id, run_id, kind, severity, resource_id, detail)
             select workspace_id, $1, $4, $5, $6, $7 from live
             on conflict (run_id, kind, resource_id) do nothing
             returning 1
           )
           select exists (select 1 from live) as live, exists (select 1 from inserted) as inserted`,
            [...fence, f.kind, f.severity, f.resourceId, JSON.stringify(f.detail ?? {})],
          ),
        );
        if (!rows[0]!.live) {
          state.lost = true;
          throw new RunLostError(`run ${run.id} is no longer this worker's`);
        }
        return rows[0]!.inserted;
      },
    };

    const beat = setInterval(() => {
      pool
        .query(`update runs set heartbeat_at = now() where id = $1 and epoch = $2 and owner = $3`, [...fence])
        .then((r) => {
          if (r.rowCount === 0) state.lost = true;
        })
        .catch(
          (e: Error) =>
            availability.unreachable(e, 'run heartbeat') || log.warn(`runner ${owner}: heartbeat of run ${run.id} failed: ${e.message}`),
        );
    }, heartbeatMs);
    beat.unref();

    let result: unknown;
    try {
      let params = run.params;
      if (handler.params) {
        const parsed = handler.params.safeParse(params);
        if (!parsed.success)
          throw new Error(
            `params rejected: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(params)'}: ${i.message}`).join('; ')}`,
          );
        params = parsed.data;
      }
      result = await handler.run(store, params);
    } catch (error) {
      result =
        error instanceof RunLostError
          ? { kind: 'failed', message: error.message }
          : outcome.failed(`${(error as Error).name}: ${(error as Error).message}`);
    } finally {
      clearInterval(beat);
    }
    if (state.lost) {
      log.warn(`runner ${owner}: run ${run.id} was taken from this worker; its outcome is not recorded`);
      return;
    }
    let final = recordable(result);
    let pausedAt: [Buffer | null, boolean] = [null, false];
    if (final.kind === 'paused') {
      try {
        pausedAt = encodeCursor(final.cursor === undefined ? cursor : final.cursor);
      } catch (error) {
        // Its last checkpoint stays in the row.
        final = outcome.failed(`${(error as Error).name}: ${(error as Error).message}`);
      }
    }
    try {
      if (unavailable && final.kind === 'failed') {
        // The database failed the run, not its handler. The cursor, processed count and stats
        // the database holds were committed together by the last checkpoint that got through:
        // they stay (a checkpoint whose answer was lost may have committed; writing the cursor
        // known here could rewind past it). Taken again after a backoff, unless an operator
        // asked it to stop.
        log.warn(
          `runner ${owner}: run ${run.id} (${run.name}) lost its database mid-run; handing it back to resume from its last checkpoint`,
        );
        await write(
          `update runs set ${HAND_BACK},
             resume_after = now() + make_interval(secs => least(60, 2 ^ least(outage_hand_backs, 6))),
             outage_hand_backs = outage_hand_backs + 1,
             updated_at = now() where true`,
          [],
        );
      } else if (final.kind === 'completed') {
        await write(`update runs set status = 'COMPLETED', owner = null, finished_at = now(), updated_at = now() where true`, []);
      } else if (final.kind === 'failed') {
        await write(`update runs set status = 'FAILED', owner = null, error = $1, finished_at = now(), updated_at = now() where true`, [
          final.message.slice(0, 2000),
        ]);
      } else {
        const [bytes, json] = pausedAt;
        if (state.stopping) {
          // Shutdown: hand the run back for another runner, unless an operator asked to cancel.
          await write(
            `update runs set cursor = $1, cursor_json = $2, ${HAND_BACK},
               updated_at = now() where true`,
            [bytes, json],
          );
        } else {
          await write(
            `update runs set cursor = $1, cursor_json = $2, owner = null, status = 'PAUSED',
               pause_kind = case when status = 'CANCEL_REQUESTED' then 'CANCELLED' else 'HANDLER' end,
               pause_reason = case when status = 'CANCEL_REQUESTED' then 'cancelled by an operator' else 'paused by its handler' end,
               updated_at = now() where true`,
            [bytes, json],
          );
        }
      }
    } catch (error) {
      if (!(error instanceof RunLostError))
        log.error(`runner ${owner}: recording the outcome of run ${run.id} failed: ${(error as Error).message}`);
    }
  }

  function poll(): Promise<void> {
    const p = pollOnce();
    polling.add(p);
    void p.finally(() => polling.delete(p));
    return p;
  }

  async function pollOnce() {
    if (!running) return;
    try {
      // Heartbeats that stopped while nobody could reach the database are not crashes: for
      // staleMs after an outage the runners that lived through it get to heartbeat first.
      if (!availability.down && availability.sinceBack() >= staleMs) {
        const askedAt = performance.now();
        await pool.query(SWEEP, [staleMs]).then((r) => {
          for (const row of r.rows) log.warn(`runner ${owner}: run ${row.id} (${row.name}) stopped heartbeating; paused`);
        });
        availability.reached(askedAt);
      }
      const names = options.registry.names();
      while (running && names.length > 0 && active.size < concurrency) {
        const askedAt = performance.now();
        const { rows } = await pool.query<TakenRun>(TAKE, [owner, names, staleMs]);
        availability.reached(askedAt);
        const run = rows[0];
        if (!run) break;
        const state: RunState = { stopping: false, lost: false, done: Promise.resolve() };
        const key = `${run.id}#${run.epoch}`;
        active.set(key, state);
        // A failure outside the handler (its outcome could not be written, a stored cursor that
        // does not parse) is logged, never an unhandled rejection: the sweep pauses the run once
        // its heartbeat stops.
        state.done = execute(run, state)
          .catch((error: unknown) =>
            log.error(
              `runner ${owner}: run ${run.id} (${run.name}) failed outside its handler: ${(error as Error)?.message ?? String(error)}`,
            ),
          )
          .finally(() => {
            active.delete(key);
            if (running) void poll();
          });
      }
    } catch (error) {
      if (!availability.unreachable(error, 'recoverable runner')) log.warn(`runner ${owner}: poll failed: ${(error as Error).message}`);
    }
  }

  return {
    owner,
    /** Wakes the runner (tests and in-process triggers). */
    kick: () => void poll(),
    active: () => active.size,
    async start() {
      if (running) return;
      running = true;
      await poll();
      timer = setInterval(() => void poll(), pollMs);
      timer.unref();
    },
    /** Asks running handlers to stop at their next boundary and hands their runs back. */
    async stop({ graceMs = 10_000 } = {}) {
      running = false;
      clearInterval(timer);
      await Promise.all([...polling]);
      for (const s of active.values()) s.stopping = true;
      await Promise.race([Promise.all([...active.values()].map((s) => s.done)), new Promise((r) => setTimeout(r, graceMs).unref())]);
    },
  };
}

export type Runner = ReturnType<typeof createRunner>;
