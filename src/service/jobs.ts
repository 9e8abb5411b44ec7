/**
 * Jobs and their executions: the jobs service. Each function that changes state runs in one
 * transaction, and every guard (internal endpoints, retired jobs, payload specs, idempotency) is
 * checked in the service and nowhere else: the guards in ./job-guards.ts, createJob's rules in
 * ./job-create.ts, updateJob's and cancelJob's in ./job-change.ts.
 */
import * as executionsRepo from '../db/repos/executions.js';
import * as jobsRepo from '../db/repos/jobs.js';
import type { JobPatch } from '../db/types.js';
import type { Transaction } from 'kysely';
import type { DB } from '../db/types.js';
import { seesInstallation, type Actor } from './actor.js';
import { mutate } from './audit.js';
import { parseInput, type ServiceContext } from './context.js';
import { nextOccurrences, normalizeCron } from './cron.js';
import { NotFoundError } from './errors.js';
import {
  cronPreviewSchema,
  executionFilterSchema,
  jobFilterSchema,
  pageSchema,
  type CreateJobInput,
  type CronPreviewInput,
  type ExecutionFilter,
  type JobFilter,
  type PageInput,
  type UpdateJobInput,
} from './inputs.js';
import {
  jobState,
  opaqueWorkerId,
  toAttempt,
  toExecution,
  toJob,
  type Attempt,
  type Execution,
  type Job,
  type JobState,
} from './models.js';
import { COUNT_LIMIT, decodeCursor, pageSize, toConnection, type Connection } from './pagination.js';
import { withEventCursor } from './event-cursor.js';
import { createJobIn, createOneStatementPath, type CreateJobResult } from './job-create.js';
import { cancelJobIn, updateJobIn, type CancelJobResult } from './job-change.js';
import { assertJobMutable, lockJob, nextFire } from './job-guards.js';

export type { CreateJobResult } from './job-create.js';
export type { CancelJobResult } from './job-change.js';
// The guards, for the areas that compose them (alerts, execution control).
export { assertJobMutable, assertLockFree, lockJob } from './job-guards.js';

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

export function createJobsService(ctx: ServiceContext) {
  const { db } = ctx;
  const { createJobIn, updateJobIn, cancelJobIn } = createJobsInternals(ctx);

  const createInOneStatement = createOneStatementPath(ctx);

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
     * Changes a job's name, input (re-validated against the payload spec; null is {}; executions
     * already created keep the input they were created with), max attempts (also
     * for its pending executions), DELAYED `runAt` (moving its not-yet-started execution) or
     * CRON schedule (next fire time recomputed from now when the expression, zone or start
     * changes; a change of policies or end keeps a due occurrence).
     * Throws NOT_FOUND, VALIDATION_FAILED, RETIRED, FORBIDDEN (internal job), CONFLICT.
     */
    async updateJob(actor: Actor, raw: UpdateJobInput): Promise<Job> {
      return mutate(ctx, actor, { action: 'job.update', role: 'OPERATOR', input: raw, target: { type: 'Job', id: raw?.id } }, (trx) =>
        updateJobIn(trx, actor, raw),
      );
    },

    /**
     * Pauses a job: its pending executions wait and a cron schedule fires nothing. Idempotent.
     * Throws NOT_FOUND, RETIRED, FORBIDDEN (internal job).
     */
    async pauseJob(actor: Actor, id: string): Promise<Job> {
      return withEventCursor(ctx, actor.workspaceId, () =>
        mutate(ctx, actor, { action: 'job.pause', role: 'OPERATOR', input: { id }, target: { type: 'Job', id } }, async (trx) => {
          const { job, endpoint } = await lockJob(trx, actor, id);
          assertJobMutable(actor, job, endpoint);
          if (job.status === 'PAUSED') return toJob(job);
          return toJob(await jobsRepo.updateJob(trx, actor.workspaceId, job.id, { status: 'PAUSED', next_fire_at: null }));
        }),
      );
    },

    /**
     * Resumes a paused job. A cron schedule continues from now, with no backlog. Idempotent.
     * Throws NOT_FOUND, RETIRED, FORBIDDEN (internal job).
     */
    async resumeJob(actor: Actor, id: string): Promise<Job> {
      return withEventCursor(ctx, actor.workspaceId, () =>
        mutate(ctx, actor, { action: 'job.resume', role: 'OPERATOR', input: { id }, target: { type: 'Job', id } }, async (trx) => {
          const { job, endpoint } = await lockJob(trx, actor, id);
          assertJobMutable(actor, job, endpoint);
          if (job.status === 'ACTIVE') return toJob(job);
          const patch: JobPatch = { status: 'ACTIVE' };
          if (job.kind === 'CRON') patch.next_fire_at = nextFire(job, await ctx.now(trx));
          const resumed = await jobsRepo.updateJob(trx, actor.workspaceId, job.id, patch);
          // Its pending executions that came due while paused are claimable now.
          await executionsRepo.notifyWork(trx);
          return toJob(resumed);
        }),
      );
    },

    /**
     * Cancels a job, in one transaction: the job is retired, its pending executions are
     * cancelled, its running ones are asked to abort (they end CANCELLED) and its schedule stops. Throws NOT_FOUND, RETIRED (already retired),
     * FORBIDDEN (internal job).
     */
    async cancelJob(actor: Actor, id: string): Promise<CancelJobResult> {
      return withEventCursor(ctx, actor.workspaceId, () =>
        mutate(ctx, actor, { action: 'job.cancel', role: 'OPERATOR', input: { id }, target: { type: 'Job', id } }, (trx) =>
          cancelJobIn(trx, actor, id),
        ),
      );
    },

    /** Throws NOT_FOUND. */
    async job(actor: Actor, id: string): Promise<Job> {
      const row = await jobsRepo.findJobById(db, actor.workspaceId, id);
      if (!row) throw new NotFoundError('Job', id);
      return toJob(row);
    },

    async jobs(actor: Actor, rawFilter: JobFilter = {}, rawPage: PageInput = {}): Promise<Connection<Job>> {
      const filter = parseInput(jobFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const afterId = page.after ? decodeCursor(page.after) : undefined;
      const rows = await jobsRepo.listJobs(db, actor.workspaceId, { ...filter, limit: size + 1, afterId });
      return toConnection(rows, size, toJob, () => jobsRepo.countJobs(db, actor.workspaceId, filter, COUNT_LIMIT));
    },

    /** Throws NOT_FOUND. */
    async execution(actor: Actor, id: string): Promise<Execution> {
      const row = await executionsRepo.findExecutionById(db, actor.workspaceId, id);
      if (!row) throw new NotFoundError('Execution', id);
      return toExecution(row);
    },

    /**
     * Executions, newest first unless `order` says otherwise; by job, endpoint, statuses, trigger
     * and creation time. An id of another workspace yields an empty list. VALIDATION_FAILED for a
     * bad filter.
     */
    async executions(actor: Actor, rawFilter: ExecutionFilter = {}, rawPage: PageInput = {}): Promise<Connection<Execution>> {
      const filter = parseInput(executionFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const afterId = page.after ? decodeCursor(page.after) : undefined;
      const rows = await executionsRepo.listExecutions(db, actor.workspaceId, { ...filter, limit: size + 1, afterId });
      return toConnection(rows, size, toExecution, () => executionsRepo.countExecutions(db, actor.workspaceId, filter, COUNT_LIMIT));
    },

    /** The newest execution of a job (by creation), or null when it has none yet. */
    async lastExecution(actor: Actor, jobId: string): Promise<Execution | null> {
      const [row] = await executionsRepo.listExecutions(db, actor.workspaceId, { limit: 1, jobId });
      return row ? toExecution(row) : null;
    },

    /**
     * The state a user reads (see jobState): COMPLETED or FAILED for a one-off job whose
     * execution ended. Reads the newest execution only for an ACTIVE one-off job.
     */
    async jobState(actor: Actor, job: Job): Promise<JobState> {
      if (job.status !== 'ACTIVE' || job.kind === 'CRON') return jobState(job, undefined);
      const [row] = await executionsRepo.listExecutions(db, actor.workspaceId, { limit: 1, jobId: job.id });
      return jobState(job, row?.status);
    },

    /** The attempts of one execution, oldest first; a workspace's keys see workers by digest (see handlers.ts). */
    async attempts(actor: Actor, executionId: string): Promise<Attempt[]> {
      const attempts = (await executionsRepo.listAttempts(db, actor.workspaceId, executionId)).map(toAttempt);
      return seesInstallation(actor) ? attempts : attempts.map((a) => ({ ...a, workerId: a.workerId && opaqueWorkerId(a.workerId) }));
    },

    /**
     * The next fire times of a cron expression in a time zone, after `from` (default now), so a
     * frontend can show a schedule before saving it. Throws VALIDATION_FAILED naming the bad field.
     */
    async cronPreview(_actor: Actor, raw: CronPreviewInput): Promise<Date[]> {
      const input = parseInput(cronPreviewSchema, raw);
      const expression = normalizeCron(input.expression, ['expression']);
      const from = input.from ?? (await ctx.now(db));
      return nextOccurrences(expression, input.timezone ?? 'UTC', from, input.count ?? 5);
    },
  };
}
