/**
 * Jobs and their executions. Each function that changes state runs in one transaction, and
 * every guard (internal endpoints, retired jobs, payload specs, idempotency) is checked here
 * and nowhere else.
 */
import * as endpointsRepo from '../db/repos/endpoints.js';
import * as executionsRepo from '../db/repos/executions.js';
import * as jobsRepo from '../db/repos/jobs.js';
import * as specsRepo from '../db/repos/payload-specs.js';
import type { Executor } from '../db/repos/scope.js';
import type { EndpointRow, JobPatch, JobRow, NewJob } from '../db/types.js';
import { sql, type Transaction } from 'kysely';
import type { DB } from '../db/types.js';
import { canonicalJson } from './canonical-json.js';
import { isSystem, seesInstallation, type Actor } from './actor.js';
import { auditInput, auditingFailure, hasRole, mutate } from './audit.js';
import { CHANGE_ROLE, jobRefusal } from './permissions.js';
import { insertJobInOneStatement } from '../db/queries/create-job.js';
import { parseInput, type ServiceContext } from './context.js';
import { firstFireAt, nextOccurrences, normalizeCron } from './cron.js';
import { ArchivedError, ConflictError, InternalEndpointError, LockHeldError, NotFoundError, ValidationError } from './errors.js';
import { resolveEndpoint } from './endpoints.js';
import {
  createJobSchema,
  cronPreviewSchema,
  executionFilterSchema,
  jobFilterSchema,
  pageSchema,
  updateJobSchema,
  type CreateJobInput,
  type CronPreviewInput,
  type ExecutionFilter,
  type JobFilter,
  type PageInput,
  type UpdateJobInput,
} from './inputs.js';
import { validateAgainstSpec } from './json-schema.js';
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

export interface CreateJobResult {
  job: Job;
  /** false when an idempotency key matched an existing job, which is returned instead. */
  created: boolean;
}

export interface CancelJobResult {
  job: Job;
  /** How many pending executions the cancellation cancelled. */
  cancelledExecutions: number;
  /**
   * Set on the object a mutation returns (see ./event-cursor.ts): the event cursor from just
   * before the mutation, to subscribe `after`. Absent on objects read by queries.
   */
  eventCursor?: string;
}

const sameTime = (a: Date | null | undefined, b: Date | null | undefined) => (a?.getTime() ?? null) === (b?.getTime() ?? null);

/**
 * The first field in which a repeated request differs from the job its key already names, if any.
 * Max attempts counts only when the request gives it: otherwise it is resolved from the endpoint,
 * whose setting may have changed since, and the same request would conflict with itself.
 */
function differingField(existing: JobRow, wanted: NewJob, askedMaxAttempts: number | null | undefined): string | undefined {
  if (existing.kind !== wanted.kind) return 'kind';
  if (canonicalJson(existing.input) !== canonicalJson(JSON.parse(wanted.input as string))) return 'input';
  if (!sameTime(existing.run_at, wanted.run_at as Date | null)) return 'runAt';
  if (existing.cron_expression !== (wanted.cron_expression ?? null)) return 'cron.expression';
  if (existing.timezone !== (wanted.timezone ?? null)) return 'cron.timezone';
  if (existing.name !== (wanted.name ?? null)) return 'name';
  if (askedMaxAttempts != null && existing.max_attempts !== askedMaxAttempts) return 'maxAttempts';
  if (existing.lock_key !== (wanted.lock_key ?? null)) return 'lockKey';
  if (!sameTime(existing.starts_at, wanted.starts_at as Date | null)) return 'cron.startsAt';
  if (!sameTime(existing.ends_at, wanted.ends_at as Date | null)) return 'cron.endsAt';
  if (existing.misfire_policy !== (wanted.misfire_policy ?? null)) return 'cron.misfirePolicy';
  if (existing.overlap_policy !== (wanted.overlap_policy ?? null)) return 'cron.overlapPolicy';
  return undefined;
}

/** Throws the refusal of a change to `job` (./permissions.ts, jobRefusal): FORBIDDEN, RETIRED. */
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
 * The bodies of createJob, updateJob and cancelJob, inside a transaction the caller owns (their
 * own mutate, or declareSchedules', which composes them under one lock and one audit row).
 */
export function createJobsInternals(ctx: ServiceContext) {
  async function validateInput(ex: Executor, actor: Actor, endpoint: EndpointRow, input: unknown): Promise<void> {
    if (!endpoint.payload_spec_id) return;
    const spec = await specsRepo.findPayloadSpecById(ex, actor.workspaceId, endpoint.payload_spec_id);
    if (spec) validateAgainstSpec(spec, input, ['input']);
  }

  function nextFire(job: Pick<JobRow, 'cron_expression' | 'timezone' | 'starts_at' | 'ends_at'>, now: Date): Date | null {
    return firstFireAt(job.cron_expression!, job.timezone!, now, job.starts_at, job.ends_at);
  }

  /** createJob's rules, in `trx`; `extra.scheduleName` marks a declared schedule (declareSchedules). */
  async function createJobIn(
    trx: Transaction<DB>,
    actor: Actor,
    raw: CreateJobInput,
    extra: { scheduleName?: string } = {},
  ): Promise<CreateJobResult> {
    const input = parseInput(createJobSchema, raw);
    const expression = input.cron ? normalizeCron(input.cron.expression, ['cron', 'expression']) : null;
    const jobInput = input.input ?? {};
    // FOR SHARE: an archive running now waits for this job, or this job sees the archive.
    const endpoint = await resolveEndpoint(trx, actor, { id: input.endpointId, name: input.endpointName }, { forShare: true });
    if (endpoint.archived_at) throw new ArchivedError(endpoint.id);
    if (endpoint.type === 'INTERNAL' && !isSystem(actor)) throw new InternalEndpointError(endpoint.name);
    await validateInput(trx, actor, endpoint, jobInput);
    const maxAttempts = input.maxAttempts ?? endpoint.max_attempts ?? ctx.defaultMaxAttempts;

    const row: NewJob = {
      workspace_id: actor.workspaceId,
      endpoint_id: endpoint.id,
      name: input.name ?? null,
      kind: input.kind,
      input: JSON.stringify(jobInput),
      max_attempts: maxAttempts,
      idempotency_key: input.idempotencyKey ?? null,
      run_at: input.kind === 'DELAYED' ? input.runAt! : null,
      cron_expression: expression,
      timezone: input.cron ? (input.cron.timezone ?? 'UTC') : null,
      starts_at: input.cron?.startsAt ?? null,
      ends_at: input.cron?.endsAt ?? null,
      misfire_policy: input.cron ? (input.cron.misfirePolicy ?? 'FIRE_LATEST') : null,
      overlap_policy: input.cron ? (input.cron.overlapPolicy ?? 'SKIP') : null,
      lock_key: input.lockKey ?? null,
      created_by_key_id: actor.keyId ?? null,
      schedule_name: extra.scheduleName ?? null,
    };

    const existingFor = async (key: string): Promise<CreateJobResult | undefined> => {
      const existing = await jobsRepo.findJobByIdempotencyKey(trx, actor.workspaceId, endpoint.id, key);
      if (!existing) return undefined;
      const field = differingField(existing, row, input.maxAttempts);
      if (field) {
        throw new ConflictError(`idempotency key "${key}" was already used for a job with a different ${field}`, {
          jobId: existing.id,
          field,
        });
      }
      return { job: toJob(existing), created: false };
    };
    if (row.idempotency_key) {
      const existing = await existingFor(row.idempotency_key);
      if (existing) return existing;
    }

    await assertLockFree(trx, actor, row.lock_key ?? null);
    const now = await ctx.now(trx);
    if (row.kind === 'CRON') {
      row.next_fire_at = nextFire(row as JobRow, now);
      if (!row.next_fire_at) throw ValidationError.at(['cron'], 'the schedule has no occurrence before endsAt');
    }
    const inserted = await jobsRepo.insertJobUnlessKeyTaken(trx, row);
    if (!inserted) {
      // Lost the race on the unique index: the winner is committed and visible now.
      const winner = await existingFor(row.idempotency_key!);
      if (winner) return winner;
      throw new Error('idempotency insert conflicted but no job holds the key');
    }
    if (inserted.kind !== 'CRON') {
      const execution = await executionsRepo.insertExecutionUnlessTaken(trx, {
        workspace_id: actor.workspaceId,
        job_id: inserted.id,
        endpoint_id: endpoint.id,
        scheduled_for: inserted.kind === 'DELAYED' ? inserted.run_at! : now,
        max_attempts: maxAttempts,
        lock_key: inserted.lock_key,
        created_by_key_id: actor.keyId ?? null,
        input: row.input as string,
      });
      if (!execution) {
        // Only the live-lock index can refuse a new job's first execution: a concurrent job
        // took the key after our check. Throwing rolls this job back with it.
        await assertLockFree(trx, actor, inserted.lock_key);
        throw new LockHeldError(inserted.lock_key ?? '', { jobId: 'unknown', executionId: 'unknown' });
      }
    }
    return { job: toJob(inserted), created: true };
  }

  /** updateJob's rules, in `trx`. */
  async function updateJobIn(trx: Transaction<DB>, actor: Actor, raw: UpdateJobInput): Promise<Job> {
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
      const c = input.cron;
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
      if (job.status === 'ACTIVE') {
        const rescheduled =
          merged.cron_expression !== job.cron_expression || merged.timezone !== job.timezone || !sameTime(merged.starts_at, job.starts_at);
        // Same fire times: keep the stored next one, which may be due right now or a backlog
        // the misfire policy is to handle; recomputing from now would drop it.
        if (rescheduled || !job.next_fire_at) patch.next_fire_at = nextFire(merged, await ctx.now(trx));
        else if (merged.ends_at && job.next_fire_at >= merged.ends_at) patch.next_fire_at = null;
      }
    }
    return toJob(await jobsRepo.updateJob(trx, actor.workspaceId, job.id, patch));
  }

  /** cancelJob's rules, in `trx`. */
  async function cancelJobIn(trx: Transaction<DB>, actor: Actor, id: string): Promise<CancelJobResult> {
    const { job, endpoint } = await lockJob(trx, actor, id);
    assertJobMutable(actor, job, endpoint);
    const retired = await jobsRepo.updateJob(trx, actor.workspaceId, job.id, {
      status: 'RETIRED',
      retired_at: sql<Date>`now()` as never,
      next_fire_at: null,
    });
    const cancelledExecutions = await executionsRepo.cancelLiveExecutions(trx, actor.workspaceId, job.id, 'job cancelled');
    return { job: toJob(retired), cancelledExecutions };
  }

  return { validateInput, nextFire, createJobIn, updateJobIn, cancelJobIn };
}

export function createJobsService(ctx: ServiceContext) {
  const { db } = ctx;
  const { nextFire, createJobIn, updateJobIn, cancelJobIn } = createJobsInternals(ctx);

  /**
   * createJob in one statement when nothing can refuse it or change its outcome (see
   * db/queries/create-job.ts); undefined sends the caller down the full path, which holds every
   * rule (and raises every error). The same rows as the full path: job, execution, audit row.
   */
  async function createInOneStatement(actor: Actor, raw: CreateJobInput): Promise<CreateJobResult | undefined> {
    if (!ctx.databaseClock || !hasRole(actor, 'OPERATOR')) return undefined;
    const parsed = createJobSchema.safeParse(raw);
    if (!parsed.success) return undefined;
    const input = parsed.data;
    const { kind } = input;
    if ((kind !== 'IMMEDIATE' && kind !== 'DELAYED') || input.idempotencyKey || input.lockKey) return undefined;
    const action = 'job.create';
    const inserted = await auditingFailure(ctx, actor, action, raw, () =>
      insertJobInOneStatement(db, ctx.pool, {
        workspaceId: actor.workspaceId,
        endpoint: input.endpointId ? { id: input.endpointId } : { name: input.endpointName ?? '' },
        system: isSystem(actor),
        name: input.name ?? null,
        kind,
        input: JSON.stringify(input.input ?? {}),
        maxAttempts: input.maxAttempts ?? null,
        defaultMaxAttempts: ctx.defaultMaxAttempts,
        runAt: kind === 'DELAYED' ? input.runAt! : null,
        createdByKeyId: actor.keyId ?? null,
        audit: { actorKind: actor.kind, actorKeyId: actor.keyId ?? null, action, input: auditInput(raw) },
      }),
    );
    return inserted ? { job: toJob(inserted), created: true } : undefined;
  }

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
        mutate(ctx, actor, { action: 'job.pause', role: CHANGE_ROLE, input: { id }, target: { type: 'Job', id } }, async (trx) => {
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
        mutate(ctx, actor, { action: 'job.resume', role: CHANGE_ROLE, input: { id }, target: { type: 'Job', id } }, async (trx) => {
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
        mutate(ctx, actor, { action: 'job.cancel', role: CHANGE_ROLE, input: { id }, target: { type: 'Job', id } }, (trx) =>
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
