/**
 * Schedules of recoverable handlers. A handler registered with a `schedule` (cron in a time zone,
 * or an interval) has a row in `run_schedules` for its workspace; every worker that registered it
 * ticks it:
 *
 *  - a due row is taken with FOR UPDATE SKIP LOCKED, so one worker handles a tick, and its
 *    next_due_at is moved with a compare-and-set on the value read, in the same transaction;
 *  - the tick calls the idempotent `triggerRun` (as jobgate itself, audited): it starts a run,
 *    resumes one paused by a crash or by its handler, leaves one an operator cancelled paused
 *    (HELD: a scan an operator stopped stays stopped), or finds one active and starts nothing. The outcome is noted on the
 *    row (a tick on an active run bumps `ticks_on_active`);
 *  - the trigger commits before the tick does: a worker dying in between leaves the tick due, and
 *    the worker that takes it again finds the run active. Ticks missed while no worker ran
 *    coalesce into one; cron times come from the same walk as cron jobs (src/service/cron-walk.ts).
 */
import type pg from 'pg';
import type { Logger } from '../../log.js';
import type { Actor } from '../actor.js';
import { firstFireAt, specOf } from '../cron.js';
import { nextFireAfter } from '../cron-walk.js';
import type { TriggerRunInput, TriggerRunOptions, TriggerRunResult } from '../runs.js';
import type { RecoverableRegistry, RunSchedule } from './recoverable.js';
import { createAvailability, type Availability } from './availability.js';

export interface RunSchedulerOptions {
  pool: pg.Pool;
  log: Logger;
  registry: RecoverableRegistry;
  /** The service's triggerRun. */
  trigger: (actor: Actor, input: TriggerRunInput, options?: TriggerRunOptions) => Promise<TriggerRunResult>;
  /** Injected clock for tests; default: the database's now(). */
  clock?: () => Date;
  /** How often due ticks are looked for. Default 1 s. */
  pollMs?: number;
  /** The process's view of its database: its loops report outages there, so one is logged once. */
  availability?: Availability;
}

export interface ScheduleTick {
  workspaceId: string;
  name: string;
  outcome: TriggerRunResult['outcome'] | 'ERROR';
  runId: string | null;
  error?: string;
}

interface DueRow {
  workspace_id: string;
  name: string;
  cron_expression: string | null;
  timezone: string | null;
  every_ms: string | null;
  params: unknown;
  next_due_at: Date;
  seen: string;
}

/**
 * Registers (or updates) a schedule. Its first tick is the next cron time, or one period from now;
 * a changed cadence recomputes it, an unchanged one keeps the tick already planned.
 */
const UPSERT = `
insert into run_schedules (workspace_id, name, cron_expression, timezone, every_ms, params, next_due_at)
values ($1, $2, $3, $4, $5, $6, $7)
on conflict (workspace_id, name) do update set
  cron_expression = excluded.cron_expression, timezone = excluded.timezone, every_ms = excluded.every_ms, params = excluded.params,
  next_due_at = case when (run_schedules.cron_expression, run_schedules.timezone, run_schedules.every_ms)
                          is distinct from (excluded.cron_expression, excluded.timezone, excluded.every_ms)
                     then excluded.next_due_at else run_schedules.next_due_at end,
  updated_at = now()`;

/**
 * Due schedules this worker registered (handler and workspace: a row left by an older
 * registration elsewhere is not ticked); SKIP LOCKED splits them between workers.
 */
const TAKE_DUE = `
select workspace_id, name, cron_expression, timezone, every_ms, params, next_due_at,
       next_due_at::text as seen -- exact, for the compare-and-set
from run_schedules
where (workspace_id, name) in (select * from unnest($1::uuid[], $2::text[])) and next_due_at <= $3
order by next_due_at
limit 100
for update skip locked`;

/** The tick's claim: a compare-and-set on the next_due_at this pass read, with the tick's outcome. */
const ADVANCE = `
update run_schedules set next_due_at = $4, ticks = ticks + 1, last_tick_at = $5,
  last_tick_outcome = coalesce($6, last_tick_outcome), last_tick_run_id = coalesce($7, last_tick_run_id),
  ticks_on_active = ticks_on_active + ($6 is not distinct from 'ACTIVE')::int,
  last_error = $8, last_error_at = case when $8::text is not null then $5 else last_error_at end, updated_at = now()
where workspace_id = $1 and name = $2 and next_due_at = $3::timestamptz`;

function nextAfter(
  row: { cron_expression: string | null; timezone: string | null; every_ms: string | number | null },
  from: Date,
): Date | null {
  if (row.cron_expression) {
    const t = nextFireAfter(specOf(row.cron_expression), row.timezone ?? 'UTC', from.getTime());
    return t === null ? null : new Date(t);
  }
  return new Date(from.getTime() + Number(row.every_ms));
}

export function createRunScheduler(options: RunSchedulerOptions) {
  const { pool, log } = options;
  const availability = options.availability ?? createAvailability(log, 'run schedules');
  const pollMs = options.pollMs ?? 1000;
  const ensured = new Map<string, string>();
  /** name -> the workspace its schedule (as registered here) triggers runs in. */
  const workspaceOf = new Map<string, string>();
  let running = false;
  let passing: Promise<unknown> | undefined;
  let timer: NodeJS.Timeout | undefined;

  async function dbNow(ex: pg.Pool | pg.PoolClient): Promise<Date> {
    if (options.clock) return options.clock();
    return (await ex.query<{ now: Date }>('select now() as now')).rows[0]!.now;
  }

  /** Writes the rows of scheduled handlers not written yet (or whose schedule changed). */
  async function ensure(): Promise<void> {
    for (const h of options.registry.list()) {
      if (!h.schedule) continue;
      const s: RunSchedule = h.schedule;
      const slug = s.workspace ?? 'default';
      const key = JSON.stringify([s.cron, s.timezone, s.everyMs, s.params ?? {}, slug]);
      if (ensured.get(h.name) === key) continue;
      const ws = await pool.query<{ id: string }>('select id from workspaces where slug = $1', [slug]);
      if (!ws.rows[0]) {
        log.error(`run schedule of ${h.name}: workspace "${slug}" does not exist; not scheduled`);
        ensured.set(h.name, key);
        workspaceOf.delete(h.name);
        continue;
      }
      const now = await dbNow(pool);
      // Infinity: a cron expression with no further occurrence never ticks.
      const first = s.cron ? (firstFireAt(s.cron, s.timezone ?? 'UTC', now) ?? 'infinity') : new Date(now.getTime() + s.everyMs!);
      await pool.query(UPSERT, [
        ws.rows[0].id,
        h.name,
        s.cron ?? null,
        s.cron ? (s.timezone ?? 'UTC') : null,
        s.everyMs ?? null,
        JSON.stringify(s.params ?? {}),
        first,
      ]);
      ensured.set(h.name, key);
      workspaceOf.set(h.name, ws.rows[0].id);
    }
  }

  /** One pass: every due tick of this worker's scheduled handlers. */
  async function tick(): Promise<ScheduleTick[]> {
    await ensure();
    const mine = [...workspaceOf.entries()];
    if (mine.length === 0) return [];
    const out: ScheduleTick[] = [];
    const client = await pool.connect();
    try {
      await client.query('begin');
      const now = await dbNow(client);
      const { rows } = await client.query<DueRow>(TAKE_DUE, [mine.map(([, ws]) => ws), mine.map(([name]) => name), now]);
      for (const row of rows) {
        const next = nextAfter(row, new Date(Math.max(now.getTime(), row.next_due_at.getTime())));
        const actor: Actor = { workspaceId: row.workspace_id, kind: 'system', role: 'ADMIN' };
        let result: ScheduleTick;
        try {
          // A run an operator cancelled stays paused (HELD); one paused by a crash or its handler resumes.
          // force: this worker has the handler registered (a tick is taken only by one that
          // does), even when its catalogue row lags behind (at start, after an outage).
          const r = await options.trigger(actor, { name: row.name, params: row.params, force: true }, { resumeCancelled: false });
          result = { workspaceId: row.workspace_id, name: row.name, outcome: r.outcome, runId: r.run.id };
        } catch (error) {
          // A failed trigger (e.g. a run that finished in the very moment) is noted; the next tick tries again.
          result = {
            workspaceId: row.workspace_id,
            name: row.name,
            outcome: 'ERROR',
            runId: null,
            error: `${(error as Error).message}`.slice(0, 1000),
          };
          log.warn(`run schedule of ${row.name}: the trigger failed: ${result.error}`);
        }
        await client.query(ADVANCE, [
          row.workspace_id,
          row.name,
          row.seen,
          next ?? 'infinity',
          now,
          result.outcome === 'ERROR' ? null : result.outcome,
          result.runId,
          result.error ?? null,
        ]);
        out.push(result);
      }
      await client.query('commit');
      return out;
    } catch (error) {
      await client.query('rollback').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  async function loop() {
    if (!running) return;
    try {
      passing = tick();
      await passing;
    } catch (error) {
      if (!availability.unreachable(error, 'run schedules')) log.warn(`run schedules: pass failed: ${(error as Error).message}`);
    } finally {
      passing = undefined;
    }
    if (running) {
      timer = setTimeout(() => void loop(), pollMs);
      timer.unref();
    }
  }

  return {
    tick,
    start() {
      if (running) return;
      running = true;
      void loop();
    },
    async stop() {
      running = false;
      clearTimeout(timer);
      await passing?.catch(() => {});
    },
  };
}

export type RunScheduler = ReturnType<typeof createRunScheduler>;
