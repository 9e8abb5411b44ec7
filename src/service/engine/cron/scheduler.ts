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
 * With a lead (`leadMs`), a job's next occurrence is written before its time: a PENDING execution
 * whose run_after is that time, which workers claim when it comes, so that it starts on time
 * however many fall due at once. `jobs.ahead_at` records it and next_fire_at moves past it. An
 * edit, a pause or a manual trigger before its time withdraws it (the jobs_withdraw_ahead
 * trigger, migration 000054), and it is written again as the job then is. Under overlap SKIP,
 * a job with a live execution is not written ahead: the policy decides at its time.
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
import { MAX_CRON_LEAD_MS } from '../../../defaults.js';
import type { Logger } from '../../../log.js';
import { specOf } from '../../cron/expressions.js';
import { nextFireAfter } from '../../cron/walk.js';
import { createAvailability, type Availability } from '../runtime/availability.js';
import { noopObserver, type Observer } from '../../kernel/observer.js';
import { createPollLoop } from '../runtime/poll-loop.js';
import { inTransaction } from '../../../db/transaction.js';
import { databaseNow } from '../../../db/statements/clock.js';
import {
  advanceCronJobs,
  countRefusedOccurrences,
  insertOccurrences,
  nextCronFireInMs,
  takeDueCronJobs,
  type DueJob,
} from '../../../db/statements/cron-ticks.js';

export const FIRE_ALL_CAP = 100;
/**
 * Walking missed occurrences one by one stops here (an every-minute job down for a week). Past
 * it, the walk resumes from TAIL_WINDOW_MS before now to find the most recent ones, and the
 * missed count records what was walked: a lower bound.
 */
const MISSED_WALK_CAP = 10_000;
const TAIL_WINDOW_MS = 3 * 3_600_000;

export interface CronJobSchedulerOptions {
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
  /**
   * How long before its time a job's next occurrence is written (a PENDING execution due then),
   * so that it starts on time however many fall due at once. 0 (the default) writes each when it
   * is due; at most MAX_CRON_LEAD_MS, so that no job has more than one occurrence ahead.
   */
  leadMs?: number;
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

interface Plan {
  job: DueJob;
  fires: Date[];
  skipped: number;
  skipReason: string | null;
  missed: number;
  next: Date | null;
  /** The occurrence written before its time (also the last of `fires`), if any. */
  ahead: Date | null;
  error: string | null;
}

function describeAge(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`;
}

/**
 * Decides what one due job fires now, and whether its next occurrence is written ahead (when it
 * falls within `leadMs`). Pure: no I/O.
 */
export function planJob(job: DueJob, now: Date, graceMs: number, leadMs = 0): Plan {
  const plan: Plan = { job, fires: [], skipped: 0, skipReason: null, missed: 0, next: null, ahead: null, error: null };
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
    // The walk stopped at the first occurrence after now: the next one, unless ends_at came first.
    const upcoming = t !== null && t < end ? t : null;
    // Written ahead unless the overlap policy is to decide at its time: SKIP with an execution
    // live, or one firing now, skips or fires it when it is due, as it would have unwritten.
    const ahead =
      upcoming !== null &&
      upcoming - now.getTime() <= leadMs &&
      (job.overlap_policy !== 'SKIP' || (job.live_id === null && fires.length === 0));
    if (ahead) {
      plan.ahead = new Date(upcoming);
      plan.fires.push(plan.ahead);
      const after = nextFireAfter(spec, job.timezone, upcoming);
      plan.next = after !== null && after < end ? new Date(after) : null;
    } else {
      plan.next = upcoming === null ? null : new Date(upcoming);
    }
  } catch (error) {
    // A schedule that cannot be computed must not stall: record why, try again in a minute.
    plan.error = `cannot compute the schedule: ${(error as Error).message}`.slice(0, 1000);
    plan.fires = [];
    plan.next = new Date(now.getTime() + 60_000);
  }
  return plan;
}

// eslint-disable-next-line max-lines-per-function -- a loop's factory: batch, insertClaimed and tick are short functions sharing its settings
export function createCronJobScheduler(options: CronJobSchedulerOptions) {
  const { pool, log } = options;
  const availability = options.availability ?? createAvailability(log, 'scheduler');
  const batchSize = options.batchSize ?? 500;
  const graceMs = options.misfireGraceMs ?? 60_000;
  const pollMs = options.pollMs ?? 1000;
  const observer = options.observer ?? noopObserver;
  const leadMs = Math.min(options.leadMs ?? 0, MAX_CRON_LEAD_MS);

  async function nowOf(client: pg.PoolClient): Promise<Date> {
    if (options.clock) return options.clock();
    return databaseNow(client);
  }

  /** One batch in one transaction: the due jobs' ticks claimed and their occurrences inserted. */
  async function batch(): Promise<TickResult> {
    const result: TickResult = { fired: 0, skipped: 0, missed: 0, errors: 0, jobs: 0 };
    const done = await inTransaction(pool, async (client) => {
      const now = await nowOf(client);
      const rows = await takeDueCronJobs(client, now, leadMs, batchSize);
      result.jobs = rows.length;
      if (rows.length === 0) return undefined;
      const plans = rows.map((job) => planJob(job, now, graceMs, leadMs));
      const claimed = await advanceCronJobs(
        client,
        plans.map((p) => ({
          id: p.job.id,
          seen: p.job.seen,
          next_fire_at: p.next,
          last_fired_at: (p.ahead ? p.fires.at(-2) : p.fires.at(-1)) ?? null,
          ahead_at: p.ahead,
          skipped: p.skipped,
          skip_reason: p.skipReason,
          missed: p.missed,
          error: p.error,
        })),
        now,
      );
      const inserted = await insertClaimed(client, plans, claimed, now, result);
      return { now, plans, claimed, inserted };
    });
    if (!done) return result;
    const { now, plans, claimed, inserted } = done;
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
      // An occurrence written ahead is on time.
      plans.flatMap((p) => (claimed.has(p.job.id) ? p.fires.map((at) => Math.max(0, now.getTime() - at.getTime()) / 1000) : [])),
      result.missed,
      result.skipped,
    );
    return result;
  }

  /** Inserts the occurrences of the claimed jobs; returns how many. Refused ones count as skipped ticks. */
  async function insertClaimed(client: pg.PoolClient, plans: Plan[], claimed: Set<string>, now: Date, result: TickResult): Promise<number> {
    const executions = plans
      .filter((p) => claimed.has(p.job.id))
      .flatMap((p) =>
        p.fires.map((at) => ({
          workspace_id: p.job.workspace_id,
          job_id: p.job.id,
          endpoint_id: p.job.endpoint_id,
          scheduled_for: at,
          max_attempts: p.job.max_attempts,
          priority: p.job.priority,
          concurrency_key: p.job.concurrency_key,
          lock_key: p.job.lock_key,
          serial: p.job.overlap_policy === 'QUEUE',
        })),
      );
    if (executions.length === 0) return 0;
    const rows = await insertOccurrences(client, executions);
    // An occurrence refused by a unique index: already fired (never twice), or its lock key is held.
    const refused = executions.length - rows.length;
    if (refused > 0) {
      const got = new Set(rows.map((r) => `${r.job_id}@${r.scheduled_for.getTime()}`));
      const byJob = new Map<string, number>();
      for (const e of executions)
        if (!got.has(`${e.job_id}@${e.scheduled_for.getTime()}`)) byJob.set(e.job_id, (byJob.get(e.job_id) ?? 0) + 1);
      await countRefusedOccurrences(client, byJob, now);
      result.skipped += refused;
    }
    return rows.length;
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

  const loop = createPollLoop({
    everyMs: pollMs,
    async pass() {
      await tick();
      if (options.clock) return undefined;
      const askedAt = performance.now();
      const wait = await nextCronFireInMs(pool, leadMs);
      // A pass may fail job by job and still return: this answer is the one that counts.
      availability.reached(askedAt);
      return wait === null ? undefined : Math.max(0, Math.min(pollMs, wait));
    },
    onError: (error) => {
      if (!availability.unreachable(error, 'scheduler')) log.warn(`scheduler: pass failed: ${(error as Error).message}`);
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

export type CronJobScheduler = ReturnType<typeof createCronJobScheduler>;
