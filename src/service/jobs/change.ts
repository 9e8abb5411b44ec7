/**
 * updateJob's and cancelJob's rules, inside a transaction the caller owns (their own mutate, or
 * declareSchedules', which composes them under one lock and one audit row).
 */
import * as executionsRepo from '../../db/repositories/executions.js';
import * as jobsRepo from '../../db/repositories/jobs.js';
import type { JobPatch, JobRow } from '../../db/types.js';
import type { Transaction } from 'kysely';
import { DATABASE_NOW } from '../../db/transaction.js';
import type { DB } from '../../db/types.js';
import type { Actor } from '../kernel/actor.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { normalizeCron } from '../cron/expressions.js';
import { ConflictError, ValidationError } from '../kernel/errors.js';
import { updateJobSchema, type UpdateJobInput } from '../kernel/inputs.js';
import { toJob, type Job } from '../kernel/models.js';
import { assertJobMutable, lockJob, nextFire, sameTime, validateInput } from './guards.js';

export interface CancelJobResult {
  job: Job;
  /** How many pending executions the cancellation cancelled. */
  cancelledExecutions: number;
  /** How many running executions it asked to stop: each ends CANCELLED when its attempt returns. */
  stoppingExecutions: number;
  /**
   * Set on the object a mutation returns (see ../live/event-cursor.ts): the event cursor from just
   * before the mutation, to subscribe `after`. Absent on objects read by queries.
   */
  eventCursor?: string;
}

type CronChange = NonNullable<ReturnType<typeof updateJobSchema.parse>['cron']>;

/** The patch for a CRON job's schedule change; the next fire time recomputed when the fire times change. */
async function cronPatch(ctx: ServiceContext, trx: Transaction<DB>, job: JobRow, c: CronChange, patch: JobPatch): Promise<void> {
  if (c.expression != null) patch.cron_expression = normalizeCron(c.expression, ['cron', 'expression']);
  if (c.timezone != null) patch.timezone = c.timezone;
  if (c.startsAt !== undefined) patch.starts_at = c.startsAt;
  if (c.endsAt !== undefined) patch.ends_at = c.endsAt;
  if (c.misfirePolicy != null) patch.misfire_policy = c.misfirePolicy;
  if (c.overlapPolicy != null) patch.overlap_policy = c.overlapPolicy;
  const merged = {
    cron_expression: (patch.cron_expression as string | undefined) ?? job.cron_expression,
    timezone: (patch.timezone as string | undefined) ?? job.timezone,
    starts_at: patch.starts_at !== undefined ? (patch.starts_at as Date | null) : job.starts_at,
    ends_at: patch.ends_at !== undefined ? (patch.ends_at as Date | null) : job.ends_at,
  };
  if (merged.starts_at && merged.ends_at && merged.ends_at <= merged.starts_at) {
    throw ValidationError.at(['cron', 'endsAt'], 'must be after startsAt');
  }
  if (job.status !== 'ACTIVE') return;
  const rescheduled =
    merged.cron_expression !== job.cron_expression || merged.timezone !== job.timezone || !sameTime(merged.starts_at, job.starts_at);
  // Same fire times: keep the stored next one, which may be due right now or a backlog
  // the misfire policy is to handle; recomputing from now would drop it.
  if (rescheduled || !job.next_fire_at) patch.next_fire_at = nextFire(merged, await ctx.now(trx));
  else if (merged.ends_at && job.next_fire_at >= merged.ends_at) patch.next_fire_at = null;
}

/** updateJob's rules, in `trx`. */
export async function updateJobIn(ctx: ServiceContext, trx: Transaction<DB>, actor: Actor, raw: UpdateJobInput): Promise<Job> {
  const input = parseInput(updateJobSchema, raw);
  const { job, endpoint } = await lockJob(trx, actor, input.id);
  assertJobMutable(actor, job, endpoint);
  const patch: JobPatch = {};
  if (input.name !== undefined) patch.name = input.name;
  if (input.input !== undefined) {
    // null is no input, as in createJob: a job's input is never JSON null (Job.input is non-null).
    const jobInput = input.input ?? {};
    await validateInput(trx, actor, endpoint, jobInput);
    patch.input = JSON.stringify(jobInput);
  }
  if (input.maxAttempts != null) {
    patch.max_attempts = input.maxAttempts;
    await executionsRepo.setPendingMaxAttempts(trx, actor.workspaceId, job.id, input.maxAttempts);
  }
  if (input.runAt != null) {
    if (job.kind !== 'DELAYED') throw ValidationError.at(['runAt'], 'is only for DELAYED jobs');
    const moved = await executionsRepo.reschedulePendingExecutions(trx, actor.workspaceId, job.id, input.runAt);
    if (moved === 0) throw new ConflictError('the delayed execution has already started; runAt can no longer change');
    patch.run_at = input.runAt;
  }
  if (input.cron != null) {
    if (job.kind !== 'CRON') throw ValidationError.at(['cron'], 'is only for CRON jobs');
    await cronPatch(ctx, trx, job, input.cron, patch);
  }
  return toJob(await jobsRepo.updateJob(trx, actor.workspaceId, job.id, patch));
}

/** cancelJob's rules, in `trx`. */
export async function cancelJobIn(trx: Transaction<DB>, actor: Actor, id: string): Promise<CancelJobResult> {
  const { job, endpoint } = await lockJob(trx, actor, id);
  assertJobMutable(actor, job, endpoint);
  const retired = await jobsRepo.updateJob(trx, actor.workspaceId, job.id, {
    status: 'RETIRED',
    retired_at: DATABASE_NOW as never,
    next_fire_at: null,
  });
  const { cancelled, stopping } = await executionsRepo.cancelLiveExecutions(trx, actor.workspaceId, job, 'job cancelled');
  return { job: toJob(retired), cancelledExecutions: cancelled, stoppingExecutions: stopping };
}
