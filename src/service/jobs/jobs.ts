/**
 * Jobs and their executions: the jobs service. Each function that changes state runs in one
 * transaction, and every guard (internal endpoints, retired jobs, payload specs, idempotency) is
 * checked in the service and nowhere else: the guards in ./guards.ts, createJob's rules in
 * ./create.ts, updateJob's and cancelJob's in ./change.ts, the reads in ./reads.ts.
 */
import type { Transaction } from 'kysely';
import type { DB } from '../../db/types.js';
import type { Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { CHANGE_ROLE } from '../access/permissions.js';
import type { ServiceContext } from '../kernel/context.js';
import type { CreateJobInput, UpdateJobInput } from '../kernel/inputs.js';
import { toJob, type Job } from '../kernel/models.js';
import { withEventCursor } from '../live/event-cursor.js';
import { createJobIn, createOneStatementPath, type CreateJobResult } from './create.js';
import { createJobs } from './create-many.js';
import { cancelJobIn, updateJobIn, type CancelJobResult } from './change.js';
import { pauseJobsIn, resumeJobsIn } from './pause.js';
import { unwrap } from '../kernel/errors.js';
import { createDependencyReads } from './dependencies.js';
import { createNestedReads } from './nested-reads.js';
import { createJobReads } from './reads.js';

export type { CreateJobResult } from './create.js';
export type { CancelJobResult } from './change.js';
// The guards, for the areas that compose them (alerts, execution control).
export { assertJobMutable, assertLockFree, lockJob } from './guards.js';

/**
 * The bodies of createJob, updateJob and cancelJob, inside a transaction the caller owns (their
 * own mutate, or declareSchedules', which composes them under one lock and one audit row).
 */
export function createJobsInternals(ctx: ServiceContext) {
  return {
    createJobIn: (trx: Transaction<DB>, actor: Actor, raw: CreateJobInput, extra: { scheduleName?: string } = {}) =>
      createJobIn(ctx, trx, actor, raw, extra),
    updateJobIn: (trx: Transaction<DB>, actor: Actor, raw: UpdateJobInput) => updateJobIn(ctx, trx, actor, raw),
    cancelJobIn: (trx: Transaction<DB>, actor: Actor, id: string): Promise<CancelJobResult> => cancelJobIn(trx, actor, id),
  };
}

/**
 * The jobs area of the service (createJobService brings every area together): create, update,
 * pause, resume, cancel and read jobs, and read their executions and attempts.
 */
export function createJobLifecycleService(ctx: ServiceContext) {
  const { createJobIn, updateJobIn, cancelJobIn } = createJobsInternals(ctx);

  const createInOneStatement = createOneStatementPath(ctx);
  const reads = createJobReads(ctx);

  return {
    /**
     * Creates a job and, in the same transaction, its first execution (IMMEDIATE: due now;
     * DELAYED: due at `runAt`) or, for CRON, its first `next_fire_at`. In order: endpoint by id
     * or name; INTERNAL endpoints refused; input checked against the endpoint's payload spec;
     * max attempts resolved (job, else endpoint, else default); idempotency key honoured.
     *
     * A reused idempotency key returns the existing job with `created: false`; reused with a
     * different request it is CONFLICT. A concurrent create with the same key converges on the
     * one job that won the unique index, without aborting this transaction.
     *
     * A `lockKey` is refused with LOCK_HELD while another execution holding it is pending or running.
     *
     * Throws VALIDATION_FAILED, NOT_FOUND, ARCHIVED, INTERNAL_ENDPOINT, CONFLICT, LOCK_HELD.
     */
    async createJob(actor: Actor, raw: CreateJobInput): Promise<CreateJobResult> {
      const quick = await createInOneStatement(actor, raw);
      if (quick) return quick;
      const target = (r: CreateJobResult) => ({ type: 'Job', id: r.job.id });
      return mutate(ctx, actor, { action: 'job.create', role: 'OPERATOR', input: raw, target }, (trx) => createJobIn(trx, actor, raw));
    },

    /**
     * Creates many jobs (1 to 1,000) in one transaction, each by createJob's rules, all or
     * nothing: the results in the order asked. An item refused rolls every item back; the error
     * is createJob's, naming the item (`details.index`; validation paths under `jobs.<i>`).
     * See ./create-many.ts. Throws VALIDATION_FAILED, FORBIDDEN, and createJob's errors.
     */
    createJobs(actor: Actor, raws: readonly CreateJobInput[]): Promise<CreateJobResult[]> {
      return createJobs(ctx, actor, raws);
    },

    /**
     * Changes a job's name, input (re-validated against the payload spec; null is {}; executions
     * already created keep the input they were created with), max attempts (also
     * for its pending executions), DELAYED `runAt` (moving its not-yet-started execution) or
     * CRON schedule (next fire time recomputed from now when the expression, zone or start
     * changes; a change of policies or end keeps a due occurrence).
     * Throws NOT_FOUND, VALIDATION_FAILED, RETIRED, FORBIDDEN (internal job), CONFLICT.
     */
    async updateJob(actor: Actor, raw: UpdateJobInput): Promise<Job> {
      return mutate(ctx, actor, { action: 'job.update', role: CHANGE_ROLE, input: raw, target: { type: 'Job', id: raw?.id } }, (trx) =>
        updateJobIn(trx, actor, raw),
      );
    },

    /**
     * Pauses a job: its pending executions wait and a cron schedule fires nothing. Idempotent.
     * Throws NOT_FOUND, RETIRED, FORBIDDEN (internal job).
     */
    async pauseJob(actor: Actor, id: string): Promise<Job> {
      return withEventCursor(ctx, actor.workspaceId, () =>
        mutate(ctx, actor, { action: 'job.pause', role: CHANGE_ROLE, input: { id }, target: { type: 'Job', id } }, async (trx) =>
          toJob(unwrap((await pauseJobsIn(trx, actor, [id])).get(id)!)),
        ),
      );
    },

    /**
     * Resumes a paused job. A cron schedule continues from now, with no backlog. Idempotent.
     * Throws NOT_FOUND, RETIRED, FORBIDDEN (internal job).
     */
    async resumeJob(actor: Actor, id: string): Promise<Job> {
      return withEventCursor(ctx, actor.workspaceId, () =>
        mutate(ctx, actor, { action: 'job.resume', role: CHANGE_ROLE, input: { id }, target: { type: 'Job', id } }, async (trx) =>
          toJob(unwrap((await resumeJobsIn(ctx, trx, actor, [id])).get(id)!)),
        ),
      );
    },

    /**
     * Cancels a job, in one transaction: the job is retired, its pending executions are
     * cancelled, its running ones are asked to abort (they end CANCELLED) and its schedule stops. Throws NOT_FOUND, RETIRED (already retired),
     * FORBIDDEN (internal job).
     */
    async cancelJob(actor: Actor, id: string): Promise<CancelJobResult> {
      return withEventCursor(ctx, actor.workspaceId, () =>
        mutate(ctx, actor, { action: 'job.cancel', role: CHANGE_ROLE, input: { id }, target: { type: 'Job', id } }, (trx) =>
          cancelJobIn(trx, actor, id),
        ),
      );
    },

    ...reads,
    ...createNestedReads(ctx, reads),
    ...createDependencyReads(ctx),
  };
}
