/**
 * The guards every change to a job goes through, shared by the jobs, schedules, alerts and
 * execution-control areas: who may change a job, whether a lock key is free, the job locked with
 * its endpoint, the payload spec, the first fire time of a schedule.
 */
import * as endpointsRepo from '../../db/repositories/endpoints.js';
import * as executionsRepo from '../../db/repositories/executions.js';
import * as jobsRepo from '../../db/repositories/jobs.js';
import * as specsRepo from '../../db/repositories/payload-specs.js';
import type { Executor } from '../../db/repositories/scope.js';
import type { EndpointRow, JobRow } from '../../db/types.js';
import type { Actor } from '../kernel/actor.js';
import { jobRefusal } from '../access/permissions.js';
import { firstFireAt } from '../cron/expressions.js';
import { LockHeldError, NotFoundError } from '../kernel/errors.js';
import { validateAgainstSpec } from '../endpoints/json-schema.js';
import { assertMayNameInInput } from '../endpoints/config-secrets.js';

/** Throws the refusal of a change to `job` (../access/permissions.ts, jobRefusal): FORBIDDEN, RETIRED. */
export function assertJobMutable(actor: Actor, job: JobRow, endpoint: EndpointRow, opts: { owned?: boolean } = {}): void {
  const refusal = jobRefusal(actor, job, endpoint, opts);
  if (refusal) throw refusal;
}

/**
 * Throws LOCK_HELD, naming the holder, when a pending or running execution of the workspace holds
 * `lockKey`. A check ahead of the insert, so the common refusal leaves the transaction intact;
 * the partial unique index on live executions stays the authority.
 */
export async function assertLockFree(trx: Executor, actor: Actor, lockKey: string | null): Promise<void> {
  if (!lockKey) return;
  const holder = await executionsRepo.findLockHolder(trx, actor.workspaceId, lockKey);
  if (holder) throw new LockHeldError(lockKey, { jobId: holder.job_id, executionId: holder.id });
}

/** The job, locked for update, with its endpoint. Throws NOT_FOUND. */
export async function lockJob(trx: Executor, actor: Actor, id: string): Promise<{ job: JobRow; endpoint: EndpointRow }> {
  const job = await jobsRepo.findJobById(trx, actor.workspaceId, id, { forUpdate: true });
  if (!job) throw new NotFoundError('Job', id);
  const endpoint = await endpointsRepo.findEndpointById(trx, actor.workspaceId, job.endpoint_id);
  if (!endpoint) throw new NotFoundError('Job', id);
  return { job, endpoint };
}

/**
 * The jobs among `ids`, locked for update in id order (see jobsRepo.lockJobsByIds), each with its
 * endpoint, by id; an id not in the workspace is absent. lockJob for many at once.
 */
export async function lockJobs(
  trx: Executor,
  actor: Actor,
  ids: readonly string[],
): Promise<Map<string, { job: JobRow; endpoint: EndpointRow }>> {
  const jobs = await jobsRepo.lockJobsByIds(trx, actor.workspaceId, ids);
  const endpointIds = [...new Set(jobs.map((j) => j.endpoint_id))];
  const endpoints = new Map((await endpointsRepo.findEndpointsByIds(trx, actor.workspaceId, endpointIds)).map((e) => [e.id, e]));
  const locked = new Map<string, { job: JobRow; endpoint: EndpointRow }>();
  for (const job of jobs) {
    const endpoint = endpoints.get(job.endpoint_id);
    if (endpoint) locked.set(job.id, { job, endpoint });
  }
  return locked;
}

/** Throws VALIDATION_FAILED (paths under `input`) when the endpoint has a payload spec the input breaks. */
export async function validateInput(ex: Executor, actor: Actor, endpoint: EndpointRow, input: unknown): Promise<void> {
  await assertMayNameInInput(ex, actor, endpoint, input);
  if (!endpoint.payload_spec_id) return;
  const spec = await specsRepo.findPayloadSpecById(ex, actor.workspaceId, endpoint.payload_spec_id);
  if (spec) validateAgainstSpec(spec, input, ['input']);
}

/** A schedule's first fire time at or after `now`, or null when it has none before its end. */
export function nextFire(job: Pick<JobRow, 'cron_expression' | 'timezone' | 'starts_at' | 'ends_at'>, now: Date): Date | null {
  return firstFireAt(job.cron_expression!, job.timezone!, now, job.starts_at, job.ends_at);
}

export const sameTime = (a: Date | null | undefined, b: Date | null | undefined) => (a?.getTime() ?? null) === (b?.getTime() ?? null);
