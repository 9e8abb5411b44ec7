/**
 * Pausing and resuming jobs, for one job (pauseJob, resumeJob) or many (pauseJobs, resumeJobs):
 * one body, so the bulk action does exactly what the single one does, in a few statements for
 * all its jobs instead of a transaction each. Inside a transaction the caller owns.
 */
import * as executionsRepo from '../../db/repositories/executions.js';
import * as jobsRepo from '../../db/repositories/jobs.js';
import type { JobRow } from '../../db/types.js';
import type { Transaction } from 'kysely';
import type { DB } from '../../db/types.js';
import type { Actor } from '../kernel/actor.js';
import type { ServiceContext } from '../kernel/context.js';
import { NotFoundError, type DomainError } from '../kernel/errors.js';
import { lockJobs, nextFire } from './guards.js';
import { jobRefusal } from '../access/permissions.js';

/** Each id's job as the action left it, or the refusal the single action throws for it. */
export type JobOutcomes = Map<string, JobRow | DomainError>;

/** The locked jobs among `ids` the actor may change; the others' refusals (NOT_FOUND, FORBIDDEN, RETIRED) in `outcomes`. */
async function changeable(trx: Transaction<DB>, actor: Actor, ids: readonly string[], outcomes: JobOutcomes): Promise<JobRow[]> {
  const locked = await lockJobs(trx, actor, ids);
  const jobs: JobRow[] = [];
  for (const id of ids) {
    const found = locked.get(id);
    const refusal = found ? jobRefusal(actor, found.job, found.endpoint) : new NotFoundError('Job', id);
    if (refusal) outcomes.set(id, refusal);
    else jobs.push(found!.job);
  }
  return jobs;
}

/**
 * Pauses the jobs (distinct ids): pending executions wait, a cron schedule fires nothing. A job
 * already paused is left as it is (idempotent). Refusals: NOT_FOUND, RETIRED, FORBIDDEN.
 */
export async function pauseJobsIn(trx: Transaction<DB>, actor: Actor, ids: readonly string[]): Promise<JobOutcomes> {
  const outcomes: JobOutcomes = new Map();
  const jobs = await changeable(trx, actor, ids, outcomes);
  for (const job of jobs) if (job.status === 'PAUSED') outcomes.set(job.id, job);
  const active = jobs.filter((j) => j.status !== 'PAUSED').map((j) => j.id);
  for (const paused of await jobsRepo.pauseActiveJobs(trx, actor.workspaceId, active)) outcomes.set(paused.id, paused);
  return outcomes;
}

/**
 * Resumes the paused jobs (distinct ids): a cron schedule continues from now, with no backlog. A
 * job already active is left as it is (idempotent). Refusals: NOT_FOUND, RETIRED, FORBIDDEN.
 */
export async function resumeJobsIn(ctx: ServiceContext, trx: Transaction<DB>, actor: Actor, ids: readonly string[]): Promise<JobOutcomes> {
  const outcomes: JobOutcomes = new Map();
  const jobs = await changeable(trx, actor, ids, outcomes);
  for (const job of jobs) if (job.status === 'ACTIVE') outcomes.set(job.id, job);
  const paused = jobs.filter((j) => j.status !== 'ACTIVE');
  const now = paused.some((j) => j.kind === 'CRON') ? await ctx.now(trx) : undefined;
  const resumed = await jobsRepo.resumePausedJobs(
    trx,
    actor.workspaceId,
    paused.map((j) => ({ id: j.id, cron: j.kind === 'CRON', nextFireAt: j.kind === 'CRON' ? nextFire(j, now!) : null })),
  );
  for (const job of resumed) outcomes.set(job.id, job);
  // Their pending executions that came due while paused are claimable now.
  if (resumed.length > 0) await executionsRepo.notifyWork(trx);
  return outcomes;
}
