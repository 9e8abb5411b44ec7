/**
 * Reading jobs and their executions: one job, lists, the newest execution, a job's state,
 * attempts, and cron previews. Reads only; any authenticated caller.
 */
import * as executionsRepo from '../../db/repositories/executions.js';
import * as executionList from '../../db/repositories/execution-list.js';
import * as jobsRepo from '../../db/repositories/jobs.js';
import { waitingReasons } from '../../db/statements/waiting.js';
import { seesInstallation, type Actor } from '../kernel/actor.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { nextOccurrences, normalizeCron } from '../cron/expressions.js';
import { NotFoundError } from '../kernel/errors.js';
import {
  cronPreviewSchema,
  executionFilterSchema,
  jobFilterSchema,
  pageSchema,
  type CronPreviewInput,
  type ExecutionFilter,
  type JobFilter,
  type PageInput,
} from '../kernel/inputs.js';
import {
  jobState,
  opaqueWorkerId,
  toAttempt,
  toExecution,
  toJob,
  toWaitingFor,
  type Attempt,
  type Execution,
  type Job,
  type JobState,
  type WaitingFor,
} from '../kernel/models.js';
import { batchedRead, byId } from '../kernel/batched-reads.js';
import { checkPageCursor, COUNT_LIMIT, decodeCursor, pageSize, toConnection, type Connection } from '../kernel/pagination.js';

export function createJobReads(ctx: ServiceContext) {
  const { db } = ctx;
  // A list's rows read their links together (../kernel/batched-reads.ts).
  const jobById = batchedRead((ws, ids) => jobsRepo.findJobsByIds(db, ws, ids).then(byId), !ctx.outer);
  const executionById = batchedRead((ws, ids) => executionsRepo.findExecutionsByIds(db, ws, ids).then(byId), !ctx.outer);
  const newestOfJob = batchedRead(
    (ws, ids) => executionsRepo.newestExecutionsOfJobs(db, ws, ids).then((rows) => new Map(rows.map((r) => [r.job_id, r]))),
    !ctx.outer,
  );
  const scheduledOfJob = batchedRead(
    (ws, ids) => executionsRepo.newestExecutionsOfJobs(db, ws, ids, 'SCHEDULE').then((rows) => new Map(rows.map((r) => [r.job_id, r]))),
    !ctx.outer,
  );
  const waitingOf = batchedRead((ws, ids) => waitingReasons(db, ws, ids).then(byId), !ctx.outer);
  const attemptsOf = batchedRead((ws, ids) => executionsRepo.listAttemptsOf(db, ws, ids), !ctx.outer);
  return {
    /** Throws NOT_FOUND. */
    async job(actor: Actor, id: string): Promise<Job> {
      const row = await jobById(actor.workspaceId, id);
      if (!row) throw new NotFoundError('Job', id);
      return toJob(row);
    },

    async jobs(actor: Actor, rawFilter: JobFilter = {}, rawPage: PageInput = {}): Promise<Connection<Job>> {
      const filter = parseInput(jobFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const afterId = page.after ? decodeCursor(page.after) : undefined;
      const from = ctx.reader(actor);
      const rows = await jobsRepo.listJobs(from, actor.workspaceId, { ...filter, limit: size + 1, afterId });
      await checkPageCursor(db, 'jobs', actor.workspaceId, page.after, rows);
      return toConnection(rows, size, toJob, () => jobsRepo.countJobs(from, actor.workspaceId, filter, COUNT_LIMIT));
    },

    /** Throws NOT_FOUND. */
    async execution(actor: Actor, id: string): Promise<Execution> {
      const row = await executionById(actor.workspaceId, id);
      if (!row) throw new NotFoundError('Execution', id);
      return toExecution(row);
    },

    /**
     * Executions, newest first unless `order` says otherwise; by job, endpoint, statuses, trigger,
     * creation time, a job's name or key (a prefix) and text in the last error. An id of another workspace yields an empty list. VALIDATION_FAILED for a
     * bad filter.
     */
    async executions(actor: Actor, rawFilter: ExecutionFilter = {}, rawPage: PageInput = {}): Promise<Connection<Execution>> {
      const filter = parseInput(executionFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const afterId = page.after ? decodeCursor(page.after) : undefined;
      const from = ctx.reader(actor);
      const rows = await executionList.listExecutions(from, actor.workspaceId, { ...filter, limit: size + 1, afterId });
      await checkPageCursor(db, 'executions', actor.workspaceId, page.after, rows);
      return toConnection(rows, size, toExecution, () => executionList.countExecutions(from, actor.workspaceId, filter, COUNT_LIMIT));
    },

    /**
     * Why a PENDING execution is waiting, as of now (src/db/statements/waiting.ts); null when it
     * is not PENDING (any more). Read from the primary: a replica's lag would answer for the past.
     */
    async waitingFor(actor: Actor, executionId: string): Promise<WaitingFor | null> {
      const row = await waitingOf(actor.workspaceId, executionId);
      return row ? toWaitingFor(row) : null;
    },

    /** The newest execution of a job (by creation), or null when it has none yet. */
    async lastExecution(actor: Actor, jobId: string): Promise<Execution | null> {
      const row = await newestOfJob(actor.workspaceId, jobId);
      return row ? toExecution(row) : null;
    },

    /**
     * The execution a job's schedule created, never a "Run now" (trigger MANUAL): for a one-off job
     * the one it was created with, which its dependents wait on and its batch counts; for a cron job
     * its newest firing. Null when it has none yet.
     */
    async scheduledExecution(actor: Actor, jobId: string): Promise<Execution | null> {
      const row = await scheduledOfJob(actor.workspaceId, jobId);
      return row ? toExecution(row) : null;
    },

    /**
     * The state a user reads (see jobState): COMPLETED or FAILED for a one-off job whose
     * execution ended. Reads the newest execution only for an ACTIVE one-off job.
     */
    async jobState(actor: Actor, job: Job): Promise<JobState> {
      if (job.status !== 'ACTIVE' || job.kind === 'CRON') return jobState(job, undefined);
      const row = await newestOfJob(actor.workspaceId, job.id);
      return jobState(job, row?.status);
    },

    /**
     * The attempts of one execution, oldest first, each with the gap to the next one; a
     * workspace's keys see workers by digest and not their host or pid (see ../handlers/handlers.ts).
     */
    async attempts(actor: Actor, executionId: string): Promise<Attempt[]> {
      const rows = ((await attemptsOf(actor.workspaceId, executionId.toLowerCase())) ?? []).map(toAttempt);
      const attempts = rows.map((a, i) => {
        const next = rows[i + 1];
        return next && a.finishedAt ? { ...a, gapBeforeNextMs: Math.max(0, next.startedAt.getTime() - a.finishedAt.getTime()) } : a;
      });
      return seesInstallation(actor)
        ? attempts
        : attempts.map((a) => ({ ...a, workerId: a.workerId && opaqueWorkerId(a.workerId), workerHost: null, workerPid: null }));
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
