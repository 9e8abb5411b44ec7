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
 *    coalesce into one; cron times come from the same walk as cron jobs (src/service/cron/walk.ts).
 */
import type pg from 'pg';
import type { Logger } from '../../../log.js';
import type { Actor } from '../../kernel/actor.js';
import { firstFireAt, specOf } from '../../cron/expressions.js';
import { nextFireAfter } from '../../cron/walk.js';
import type { TriggerRunInput, TriggerRunOptions, TriggerRunResult } from '../../runs/runs.js';
import type { RecoverableRegistry, RunSchedule } from './recoverable.js';
import { createAvailability, type Availability } from '../runtime/availability.js';
import { createPollLoop } from '../runtime/poll-loop.js';
import { inTransaction } from '../../../db/transaction.js';
import { databaseNow } from '../../../db/statements/clock.js';
import { advanceSchedule, takeDueSchedules, upsertRunSchedule, workspaceIdOf } from '../../../db/statements/run-schedules.js';

export interface RunScheduleTickerOptions {
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

// eslint-disable-next-line max-lines-per-function -- a loop's factory: ensuring schedules and ticking them are short functions sharing its registrations
export function createRunScheduleTicker(options: RunScheduleTickerOptions) {
  const { pool, log } = options;
  const availability = options.availability ?? createAvailability(log, 'run schedules');
  const pollMs = options.pollMs ?? 1000;
  const ensured = new Map<string, string>();
  /** name -> the workspace its schedule (as registered here) triggers runs in. */
  const workspaceOf = new Map<string, string>();

  async function dbNow(ex: pg.Pool | pg.PoolClient): Promise<Date> {
    if (options.clock) return options.clock();
    return databaseNow(ex);
  }

  /** Writes the rows of scheduled handlers not written yet (or whose schedule changed). */
  async function ensure(): Promise<void> {
    for (const h of options.registry.list()) {
      if (!h.schedule) continue;
      const s: RunSchedule = h.schedule;
      const slug = s.workspace ?? 'default';
      const key = JSON.stringify([s.cron, s.timezone, s.everyMs, s.params ?? {}, slug]);
      if (ensured.get(h.name) === key) continue;
      const workspaceId = await workspaceIdOf(pool, slug);
      if (!workspaceId) {
        log.error(`run schedule of ${h.name}: workspace "${slug}" does not exist; not scheduled`);
        ensured.set(h.name, key);
        workspaceOf.delete(h.name);
        continue;
      }
      const now = await dbNow(pool);
      // Infinity: a cron expression with no further occurrence never ticks.
      const first = s.cron ? (firstFireAt(s.cron, s.timezone ?? 'UTC', now) ?? 'infinity') : new Date(now.getTime() + s.everyMs!);
      await upsertRunSchedule(pool, {
        workspaceId,
        name: h.name,
        cron: s.cron ?? null,
        timezone: s.cron ? (s.timezone ?? 'UTC') : null,
        everyMs: s.everyMs ?? null,
        params: JSON.stringify(s.params ?? {}),
        firstDueAt: first,
      });
      ensured.set(h.name, key);
      workspaceOf.set(h.name, workspaceId);
    }
  }

  /** One pass: every due tick of this worker's scheduled handlers. */
  async function tick(): Promise<ScheduleTick[]> {
    await ensure();
    const mine = [...workspaceOf.entries()];
    if (mine.length === 0) return [];
    return inTransaction(pool, async (client) => {
      const out: ScheduleTick[] = [];
      const now = await dbNow(client);
      for (const row of await takeDueSchedules(client, mine, now)) {
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
        await advanceSchedule(client, {
          workspaceId: row.workspace_id,
          name: row.name,
          seen: row.seen,
          next: next ?? 'infinity',
          now,
          outcome: result.outcome === 'ERROR' ? null : result.outcome,
          runId: result.runId,
          error: result.error ?? null,
        });
        out.push(result);
      }
      return out;
    });
  }

  const loop = createPollLoop({
    everyMs: pollMs,
    pass: async () => void (await tick()),
    onError: (error) => {
      if (!availability.unreachable(error, 'run schedules')) log.warn(`run schedules: pass failed: ${(error as Error).message}`);
    },
  });

  return {
    tick,
    start() {
      void loop.start();
    },
    stop: () => loop.stop(),
  };
}

export type RunScheduleTicker = ReturnType<typeof createRunScheduleTicker>;
