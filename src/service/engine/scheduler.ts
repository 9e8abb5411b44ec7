/**
 * The cron scheduler. Any number may run (one per worker process, or a serverless pass); each
 * due occurrence becomes exactly one execution:
 *
 *  - due jobs are taken with FOR UPDATE SKIP LOCKED, so concurrent schedulers split the work
 *    and never hold the same job;
 *  - the tick is claimed with a compare-and-set on `next_fire_at` (the value this pass read),
 *    and the executions are inserted in the same transaction, unique on (job, scheduled_for):
 *    even a scheduler that somehow read a stale row cannot fire an occurrence twice.
 *
 * "Now" is one injectable clock (tests step through months and DST changes in milliseconds);
 * in production it is the database's `now()`, read once per pass.
 *
 * Misfires (occurrences older than the grace period when the pass sees them, e.g. after
 * downtime), per job: FIRE_LATEST fires the latest and counts the rest as missed; SKIP fires
 * none of them; FIRE_ALL fires each, up to FIRE_ALL_CAP (the latest ones), counting the rest.
 * Overlap (the previous execution still pending or running): SKIP records a skipped tick with
 * how long the previous one has been live; QUEUE inserts it to run after the previous (serial
 * executions, see the claim query); ALLOW inserts it to run alongside.
 */
import type pg from 'pg';
import type { Logger } from '../../log.js';
import { specOf } from '../cron.js';
import { nextFireAfter } from '../cron-walk.js';
import { createAvailability, type Availability } from './availability.js';
import { noopObserver, type Observer } from '../observer.js';

export const FIRE_ALL_CAP = 100;
/**
 * Walking missed occurrences one by one stops here (an every-minute job down for a week). Past
 * it, the walk resumes from TAIL_WINDOW_MS before now to find the most recent ones, and the
 * missed count records what was walked: a lower bound.
 */
const MISSED_WALK_CAP = 10_000;
const TAIL_WINDOW_MS = 3 * 3_600_000;

export interface SchedulerOptions {
  pool: pg.Pool;
  log: Logger;
  /** Injected clock for tests; default: the database's now(). */
  clock?: () => Date;
  /** Jobs handled per transaction. Default 500. */
  batchSize?: number;
  /** An occurrence older than this when seen is a misfire. Default 60 s. */
  misfireGraceMs?: number;
  /** Longest sleep between passes. Default 1 s. */
  pollMs?: number;
  /** The process's view of its database: its loops report outages there, so one is logged once. */
  availability?: Availability;
  /** Where fired, missed and skipped occurrences are reported (metrics). Default: nowhere. */
  observer?: Observer | undefined;
}

export interface TickResult {
  /** Executions inserted. */
  fired: number;
  /** Occurrences skipped by overlap policy or a held lock key. */
  skipped: number;
  /** Occurrences missed (misfire policy). */
  missed: number;
  /** Jobs whose schedule could not be computed. */
  errors: number;
  /** Due jobs this pass handled. */
  jobs: number;
}

interface DueJob {
  id: string;
  workspace_id: string;
  endpoint_id: string;
  cron_expression: string;
  timezone: string;
  ends_at: Date | null;
  next_fire_at: Date;
  seen: string;
  misfire_policy: 'FIRE_LATEST' | 'SKIP' | 'FIRE_ALL';
  /** The last pass could not compute the schedule: next_fire_at is its retry time, not an occurrence. */
  retrying: boolean;
  overlap_policy: 'SKIP' | 'QUEUE' | 'ALLOW';
  max_attempts: number;
  lock_key: string | null;
  live_id: string | null;
  live_status: string | null;
  live_since: Date | null;
}

const TAKE_DUE = `
select j.id, j.workspace_id, j.endpoint_id, j.cron_expression, j.timezone, j.ends_at, j.next_fire_at,
       -- Exact, for the compare-and-set: a JS Date would drop the microseconds.
       j.next_fire_at::text as seen,
       j.misfire_policy, j.overlap_policy, j.max_attempts, j.lock_key,
       j.schedule_error is not null as retrying,
       live.id as live_id, live.status as live_status, live.created_at as live_since
from jobs j
left join lateral (
  select e.id, e.status, e.created_at from executions e
  where e.job_id = j.id and e.status in ('PENDING', 'RUNNING')
  order by e.created_at limit 1
) live on true
where j.kind = 'CRON' and j.status = 'ACTIVE' and j.next_fire_at <= $1
order by j.next_fire_at
limit $2
for update of j skip locked`;

/**
 * The tick claim: a compare-and-set on the next_fire_at this pass read. Rows whose value moved
 * (another pass, an update, a pause) are left alone, and none of their executions is inserted.
 */
const ADVANCE = `
update jobs j
set next_fire_at = v.next_fire_at,
    last_fired_at = coalesce(v.last_fired_at, j.last_fired_at),
    skipped_ticks = j.skipped_ticks + v.skipped,
    last_skip_at = case when v.skipped > 0 then $2::timestamptz else j.last_skip_at end,
    last_skip_reason = case when v.skipped > 0 then v.skip_reason else j.last_skip_reason end,
    missed_ticks = j.missed_ticks + v.missed,
    schedule_error = v.error,
    schedule_error_at = case when v.error is not null then $2::timestamptz else j.schedule_error_at end,
    updated_at = now()
from jsonb_to_recordset($1::jsonb) as v(id uuid, seen timestamptz, next_fire_at timestamptz, last_fired_at timestamptz,
                                        skipped int, skip_reason text, missed int, error text)
where j.id = v.id and j.next_fire_at = v.seen and j.status = 'ACTIVE'
returning j.id`;

const INSERT_EXECUTIONS = `
insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, lock_key, serial)
select v.workspace_id, v.job_id, v.endpoint_id, v.scheduled_for, v.scheduled_for, v.max_attempts, v.lock_key, v.serial
from jsonb_to_recordset($1::jsonb) as v(workspace_id uuid, job_id uuid, endpoint_id uuid, scheduled_for timestamptz,
                                        max_attempts int, lock_key text, serial boolean)
on conflict do nothing
returning job_id, scheduled_for`;

interface Plan {
  job: DueJob;
  fires: Date[];
  skipped: number;
  skipReason: string | null;
  missed: number;
  next: Date | null;
  error: string | null;
}

function describeAge(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`;
}

/** Decides what one due job fires now. Pure: no I/O. */
export function planJob(job: DueJob, now: Date, graceMs: number): Plan {
  const plan: Plan = { job, fires: [], skipped: 0, skipReason: null, missed: 0, next: null, error: null };
  try {
    const spec = specOf(job.cron_expression);
    const end = job.ends_at?.getTime() ?? Infinity;
    const due: number[] = [];
    let t: number | null = job.retrying ? nextFireAfter(spec, job.timezone, job.next_fire_at.getTime() - 1) : job.next_fire_at.getTime();
    let total = 0;
    let walked = 0;
    while (t !== null && t <= now.getTime() && t < end) {
      if (walked === MISSED_WALK_CAP) {
        // Long downtime on a dense schedule: skip ahead to the recent past.
        walked = 0;
        const resume = now.getTime() - TAIL_WINDOW_MS;
        if (t < resume) {
          t = nextFireAfter(spec, job.timezone, resume - 1);
          continue;
        }
      }
      total++;
      walked++;
      // Keep only the tail we might fire; count the rest.
      due.push(t);
      if (due.length > FIRE_ALL_CAP) due.shift();
      t = nextFireAfter(spec, job.timezone, t);
    }
    const late = (o: number) => now.getTime() - o > graceMs;
    let fires: number[];
    if (job.misfire_policy === 'FIRE_ALL') fires = due;
    else if (job.misfire_policy === 'SKIP') fires = due.filter((o) => !late(o)).slice(-1);
    else fires = due.slice(-1);
    plan.missed = total - fires.length;

    if (fires.length > 0 && job.overlap_policy === 'SKIP') {
      // At most one per pass under SKIP, and none while the previous one is live.
      const live = job.live_id !== null;
      const keep = live ? [] : fires.slice(-1);
      plan.skipped = fires.length - keep.length;
      if (live) {
        plan.skipReason = `previous execution ${job.live_id} ${job.live_status?.toLowerCase()} for ${describeAge(now.getTime() - job.live_since!.getTime())}`;
      } else if (plan.skipped > 0) {
        plan.skipReason = 'overlapping occurrences in one pass';
      }
      fires = keep;
    }
    plan.fires = fires.map((o) => new Date(o));
    const next = nextFireAfter(spec, job.timezone, Math.max(now.getTime(), job.next_fire_at.getTime()));
    plan.next = next !== null && next < end ? new Date(next) : null;
  } catch (error) {
    // A schedule that cannot be computed must not stall: record why, try again in a minute.
    plan.error = `cannot compute the schedule: ${(error as Error).message}`.slice(0, 1000);
    plan.fires = [];
    plan.next = new Date(now.getTime() + 60_000);
  }
  return plan;
}

export function createScheduler(options: SchedulerOptions) {
  const { pool, log } = options;
  const availability = options.availability ?? createAvailability(log, 'scheduler');
  const batchSize = options.batchSize ?? 500;
  const graceMs = options.misfireGraceMs ?? 60_000;
  const pollMs = options.pollMs ?? 1000;
  const observer = options.observer ?? noopObserver;
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let passing: Promise<unknown> | undefined;

  async function nowOf(client: pg.PoolClient): Promise<Date> {
    if (options.clock) return options.clock();
    const { rows } = await client.query<{ now: Date }>('select now() as now');
    return rows[0]!.now;
  }

  /** One batch in one transaction. */
  async function batch(): Promise<TickResult> {
    const result: TickResult = { fired: 0, skipped: 0, missed: 0, errors: 0, jobs: 0 };
    const client = await pool.connect();
    try {
      await client.query('begin');
      const now = await nowOf(client);
      const { rows } = await client.query<DueJob>(TAKE_DUE, [now, batchSize]);
      result.jobs = rows.length;
      if (rows.length === 0) {
        await client.query('commit');
        return result;
      }
      const plans = rows.map((job) => planJob(job, now, graceMs));
      const advanced = await client.query<{ id: string }>(ADVANCE, [
        JSON.stringify(
          plans.map((p) => ({
            id: p.job.id,
            seen: p.job.seen,
            next_fire_at: p.next,
            last_fired_at: p.fires.at(-1) ?? null,
            skipped: p.skipped,
            skip_reason: p.skipReason,
            missed: p.missed,
            error: p.error,
          })),
        ),
        now,
      ]);
      const claimed = new Set(advanced.rows.map((r) => r.id));
      const executions = plans
        .filter((p) => claimed.has(p.job.id))
        .flatMap((p) =>
          p.fires.map((at) => ({
            workspace_id: p.job.workspace_id,
            job_id: p.job.id,
            endpoint_id: p.job.endpoint_id,
            scheduled_for: at,
            max_attempts: p.job.max_attempts,
            lock_key: p.job.lock_key,
            serial: p.job.overlap_policy === 'QUEUE',
          })),
        );
      let inserted = 0;
      if (executions.length > 0) {
        const ins = await client.query<{ job_id: string; scheduled_for: Date }>(INSERT_EXECUTIONS, [JSON.stringify(executions)]);
        inserted = ins.rowCount ?? 0;
        // An occurrence refused by a unique index: already fired (never twice), or its lock key is held.
        const refused = executions.length - inserted;
        if (refused > 0) {
          const got = new Set(ins.rows.map((r) => `${r.job_id}@${r.scheduled_for.getTime()}`));
          const byJob = new Map<string, number>();
          for (const e of executions)
            if (!got.has(`${e.job_id}@${e.scheduled_for.getTime()}`)) byJob.set(e.job_id, (byJob.get(e.job_id) ?? 0) + 1);
          await client.query(
            `update jobs j set skipped_ticks = j.skipped_ticks + v.n, last_skip_at = $2, last_skip_reason = 'lock key held or occurrence already fired'
             from jsonb_to_recordset($1::jsonb) as v(id uuid, n int) where j.id = v.id`,
            [JSON.stringify([...byJob].map(([id, n]) => ({ id, n }))), now],
          );
          result.skipped += refused;
        }
      }
      await client.query('commit');
      for (const p of plans) {
        if (!claimed.has(p.job.id)) continue;
        result.skipped += p.skipped;
        result.missed += p.missed;
        if (p.error) {
          result.errors++;
          log.warn(`scheduler: job ${p.job.id}: ${p.error}`);
        }
      }
      result.fired += inserted;
      observer.cronFired(
        plans.flatMap((p) => (claimed.has(p.job.id) ? p.fires.map((at) => (now.getTime() - at.getTime()) / 1000) : [])),
        result.missed,
        result.skipped,
      );
      return result;
    } catch (error) {
      await client.query('rollback').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /**
   * Runs batches until no due job is left (or `maxBatches`); returns the totals. Two batches run
   * at once on their own connections (SKIP LOCKED splits the due jobs between them), so the
   * database works on one while this process plans the other.
   */
  async function tick(maxBatches = 100): Promise<TickResult> {
    const total: TickResult = { fired: 0, skipped: 0, missed: 0, errors: 0, jobs: 0 };
    let batches = 0;
    let more = true;
    const lane = async () => {
      while (more && batches < maxBatches) {
        batches++;
        const r = await batch();
        total.fired += r.fired;
        total.skipped += r.skipped;
        total.missed += r.missed;
        total.errors += r.errors;
        total.jobs += r.jobs;
        if (r.jobs < batchSize) more = false;
      }
    };
    await Promise.all([lane(), lane()]);
    return total;
  }

  async function loop() {
    if (!running) return;
    let delay = pollMs;
    try {
      passing = tick();
      await passing;
      if (!options.clock) {
        const askedAt = performance.now();
        const { rows } = await pool.query<{ wait: number | null }>(
          `select extract(epoch from (min(next_fire_at) - now())) * 1000 as wait from jobs where kind = 'CRON' and status = 'ACTIVE'`,
        );
        // A pass may fail job by job and still return: this answer is the one that counts.
        availability.reached(askedAt);
        const wait = rows[0]?.wait;
        if (wait !== null && wait !== undefined) delay = Math.max(0, Math.min(pollMs, Number(wait)));
      }
    } catch (error) {
      if (!availability.unreachable(error, 'scheduler')) log.warn(`scheduler: pass failed: ${(error as Error).message}`);
    } finally {
      passing = undefined;
    }
    if (running) {
      timer = setTimeout(loop, delay);
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

export type Scheduler = ReturnType<typeof createScheduler>;
