/**
 * createJob's rules, on its two paths.
 *
 *  - The full path (`createJobIn`), in a transaction its caller owns: every rule, every error.
 *  - The one-statement path (`createOneStatementPath`): the jobs that no rule could refuse or
 *    change (see `oneStatementJob`, the only place that decides it) are written by one SQL
 *    statement, src/db/statements/create-job.ts, which restates the rules it needs (endpoint live, not
 *    INTERNAL, no payload spec; max attempts from the job, else the endpoint, else the default).
 *    Any request it declines takes the full path. test/service/jobs.create-paths.test.ts pins
 *    the two together: the same rows for every request the statement takes, and a decline for
 *    every request the full path refuses.
 */
import * as batchesRepo from '../../db/repositories/batches.js';
import * as childrenRepo from '../../db/repositories/children.js';
import * as dependenciesRepo from '../../db/repositories/dependencies.js';
import * as executionsRepo from '../../db/repositories/executions.js';
import * as jobsRepo from '../../db/repositories/jobs.js';
import type { EndpointRow, JobRow, NewJob } from '../../db/types.js';
import type { Transaction } from 'kysely';
import type { DB } from '../../db/types.js';
import { createJobBatcher, insertJobInOneStatement, type OneStatementJob } from '../../db/statements/create-job.js';
import { canonicalJson } from '../kernel/canonical-json.js';
import { isSystem, type Actor } from '../kernel/actor.js';
import { auditInput, auditingFailure } from '../kernel/audited-mutation.js';
import { hasRole, mayChangeAny } from '../kernel/authorisation.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { normalizeCron } from '../cron/expressions.js';
import { ArchivedError, ConflictError, InternalEndpointError, LockHeldError, NotFoundError, ValidationError } from '../kernel/errors.js';
import { resolveEndpoint } from '../endpoints/endpoints.js';
import { configKeysIn } from '../endpoints/template.js';
import { batchRefusal } from '../access/permissions.js';
import { createJobSchema, type CreateJobInput } from '../kernel/inputs.js';
import { toJob, type Job } from '../kernel/models.js';
import { assertLockFree, nextFire, sameTime, validateInput } from './guards.js';
import type { z } from 'zod';

/**
 * What createJob did: CREATED a job; found the job its idempotency key names (EXISTING); left
 * the pending job holding its lock key as it was and created nothing (THROTTLED); or gave that
 * pending job this request's input and start instead of creating one (DEBOUNCED).
 */
export type CreateJobOutcome = 'CREATED' | 'EXISTING' | 'THROTTLED' | 'DEBOUNCED';

export interface CreateJobResult {
  job: Job;
  /** false unless a job was created (`outcome` CREATED): the job returned is an existing one. */
  created: boolean;
  outcome: CreateJobOutcome;
}

type ParsedCreateJob = z.output<typeof createJobSchema>;

const ACTION = 'job.create';

/**
 * The first field in which a repeated request differs from the job its key already names, if any.
 * Max attempts and priority count only when the request gives them: otherwise they are resolved
 * from the endpoint, whose setting may have changed since, and the same request would conflict
 * with itself.
 */
function differingField(
  existing: JobRow,
  wanted: NewJob,
  askedMaxAttempts: number | null | undefined,
  askedPriority: number | null | undefined,
): string | undefined {
  if (existing.kind !== wanted.kind) return 'kind';
  if (canonicalJson(existing.input) !== canonicalJson(JSON.parse(wanted.input as string))) return 'input';
  if (!sameTime(existing.run_at, wanted.run_at as Date | null)) return 'runAt';
  if (existing.cron_expression !== (wanted.cron_expression ?? null)) return 'cron.expression';
  if (existing.timezone !== (wanted.timezone ?? null)) return 'cron.timezone';
  if (existing.name !== (wanted.name ?? null)) return 'name';
  if (askedMaxAttempts != null && existing.max_attempts !== askedMaxAttempts) return 'maxAttempts';
  if (existing.lock_key !== (wanted.lock_key ?? null)) return 'lockKey';
  if (askedPriority != null && existing.priority !== askedPriority) return 'priority';
  if (existing.concurrency_key !== (wanted.concurrency_key ?? null)) return 'concurrencyKey';
  if (existing.batch_id !== (wanted.batch_id ?? null)) return 'batchId';
  if (existing.parent_execution_id !== (wanted.parent_execution_id ?? null)) return 'parentExecutionId';
  if (!sameTime(existing.starts_at, wanted.starts_at as Date | null)) return 'cron.startsAt';
  if (!sameTime(existing.ends_at, wanted.ends_at as Date | null)) return 'cron.endsAt';
  if (existing.misfire_policy !== (wanted.misfire_policy ?? null)) return 'cron.misfirePolicy';
  if (existing.overlap_policy !== (wanted.overlap_policy ?? null)) return 'cron.overlapPolicy';
  return undefined;
}

/** The job row a request asks for, on `endpoint`, max attempts resolved (job, else endpoint, else default). */
function jobRowFor(
  ctx: ServiceContext,
  actor: Actor,
  input: ParsedCreateJob,
  endpoint: EndpointRow,
  extra: { scheduleName?: string },
): NewJob {
  const cron = input.cron;
  return {
    workspace_id: actor.workspaceId,
    endpoint_id: endpoint.id,
    name: input.name ?? null,
    kind: input.kind,
    input: JSON.stringify(input.input ?? {}),
    max_attempts: input.maxAttempts ?? endpoint.max_attempts ?? ctx.defaultMaxAttempts,
    idempotency_key: input.idempotencyKey ?? null,
    run_at: input.kind === 'DELAYED' ? input.runAt! : null,
    cron_expression: cron ? normalizeCron(cron.expression, ['cron', 'expression']) : null,
    timezone: cron ? (cron.timezone ?? 'UTC') : null,
    starts_at: cron?.startsAt ?? null,
    ends_at: cron?.endsAt ?? null,
    misfire_policy: cron ? (cron.misfirePolicy ?? 'FIRE_LATEST') : null,
    overlap_policy: cron ? (cron.overlapPolicy ?? 'SKIP') : null,
    lock_key: input.lockKey ?? null,
    priority: input.priority ?? endpoint.default_priority,
    concurrency_key: input.concurrencyKey ?? null,
    created_by_key_id: actor.keyId ?? null,
    schedule_name: extra.scheduleName ?? null,
    on_prerequisite_failure: input.dependsOn ? (input.onPrerequisiteFailure ?? 'CANCEL') : null,
    batch_id: input.batchId ?? null,
    parent_execution_id: input.parentExecutionId ?? null,
  };
}

/** 'dependsOn' or 'onPrerequisiteFailure' when a repeated request names other prerequisites, or another policy, than the job its key names. */
async function differingPrerequisites(
  trx: Transaction<DB>,
  actor: Actor,
  existing: JobRow,
  wanted: NewJob,
  dependsOn: readonly string[],
): Promise<string | undefined> {
  const had = (await dependenciesRepo.dependenciesOf(trx, actor.workspaceId, [existing.id])).map((d) => d.prerequisite_id).sort();
  const asked = [...dependsOn].map((id) => id.toLowerCase()).sort();
  if (had.length !== asked.length || had.some((id, i) => id !== asked[i])) return 'dependsOn';
  if (existing.on_prerequisite_failure !== (wanted.on_prerequisite_failure ?? null)) return 'onPrerequisiteFailure';
  return undefined;
}

/**
 * The prerequisites `dependsOn` names, each with the outcome it already has (null: not ended),
 * their scheduled executions marked and locked (dependenciesRepo.markPrerequisites). NOT_FOUND for
 * an id that names no job of the workspace; VALIDATION_FAILED for a CRON job (no one outcome) or a
 * job whose scheduled execution is gone (pruned).
 */
async function prerequisitesFor(
  trx: Transaction<DB>,
  actor: Actor,
  dependsOn: readonly string[],
): Promise<{ jobId: string; outcome: dependenciesRepo.PrerequisiteOutcome | null }[]> {
  const found = new Map((await dependenciesRepo.markPrerequisites(trx, actor.workspaceId, dependsOn)).map((p) => [p.jobId, p]));
  return dependsOn.map((id, i) => {
    const p = found.get(id.toLowerCase());
    if (!p) throw new NotFoundError('Job', id);
    if (p.kind === 'CRON')
      throw ValidationError.at(['dependsOn', i], 'is a CRON job: a prerequisite is a job that runs once (IMMEDIATE or DELAYED)');
    if (p.status === null)
      throw ValidationError.at(['dependsOn', i], 'has no scheduled execution left (pruned by retention): it cannot be waited for');
    const ended = p.status === 'SUCCEEDED' || p.status === 'FAILED' || p.status === 'CANCELLED';
    return { jobId: p.jobId, outcome: ended ? (p.status as dependenciesRepo.PrerequisiteOutcome) : null };
  });
}

/**
 * Takes a new child's turn against its parent's cancellation (childrenRepo.takeChildTurn): NOT_FOUND
 * unless the parent is an execution of the workspace; CONFLICT once it has ended, or its
 * cancellation has begun (a child then would outlive a parent that is gone).
 */
async function liveParentFor(trx: Transaction<DB>, actor: Actor, parentId: string): Promise<void> {
  const parent = await childrenRepo.takeChildTurn(trx, actor.workspaceId, parentId);
  if (!parent) throw new NotFoundError('Execution', parentId);
  if (parent.cancelled || parent.cancelRequested || (parent.status !== 'PENDING' && parent.status !== 'RUNNING'))
    throw new ConflictError(
      `parent execution ${parentId} is ${parent.cancelled || parent.cancelRequested ? 'cancelled' : parent.status}: a child can be added only while it is pending or running`,
      { executionId: parentId, field: 'parentExecutionId' },
    );
}

/**
 * Locks the batch a new member joins: NOT_FOUND unless it is the workspace's, FORBIDDEN to an
 * OPERATOR key that did not create it (a member changes when the batch completes and how), CONFLICT
 * once it is closed.
 */
async function openBatchFor(trx: Transaction<DB>, actor: Actor, batchId: string): Promise<void> {
  const batch = await batchesRepo.lockBatch(trx, actor.workspaceId, batchId);
  if (!batch) throw new NotFoundError('Batch', batchId);
  const refusal = batchRefusal(actor, batch);
  if (refusal) throw refusal;
  if (!batch.open) throw new ConflictError(`batch ${batchId} is closed: no member can be added`, { batchId, field: 'batchId' });
}

/** The job a reused idempotency key names (created: false), CONFLICT naming the field when the request differs. */
async function existingFor(
  trx: Transaction<DB>,
  actor: Actor,
  row: NewJob,
  asked: { maxAttempts?: number | null | undefined; priority?: number | null | undefined; dependsOn?: readonly string[] | null },
): Promise<CreateJobResult | undefined> {
  const key = row.idempotency_key!;
  const existing = await jobsRepo.findJobByIdempotencyKey(trx, actor.workspaceId, row.endpoint_id as string, key);
  if (!existing) return undefined;
  const field =
    differingField(existing, row, asked.maxAttempts, asked.priority) ??
    (await differingPrerequisites(trx, actor, existing, row, asked.dependsOn ?? []));
  if (field) {
    throw new ConflictError(`idempotency key "${key}" was already used for a job with a different ${field}`, {
      jobId: existing.id,
      field,
    });
  }
  return { job: toJob(existing), created: false, outcome: 'EXISTING' };
}

/** An IMMEDIATE or DELAYED job's first execution; LOCK_HELD (rolling the job back) when its lock key was taken meanwhile. */
async function insertFirstExecution(
  trx: Transaction<DB>,
  actor: Actor,
  inserted: JobRow,
  input: string,
  now: Date,
  hold: { blocked: boolean; batchMember: boolean },
): Promise<void> {
  const execution = await executionsRepo.insertExecutionUnlessTaken(trx, {
    workspace_id: actor.workspaceId,
    job_id: inserted.id,
    endpoint_id: inserted.endpoint_id,
    scheduled_for: inserted.kind === 'DELAYED' ? inserted.run_at! : now,
    max_attempts: inserted.max_attempts,
    priority: inserted.priority,
    concurrency_key: inserted.concurrency_key ?? '',
    lock_key: inserted.lock_key,
    created_by_key_id: actor.keyId ?? null,
    input,
    blocked: hold.blocked,
    // Its end is counted into its batch (migration 000048).
    has_dependents: hold.batchMember,
  });
  if (!execution) {
    // Only the live-lock index can refuse a new job's first execution: a concurrent job
    // took the key after our check. Throwing rolls this job back with it.
    await assertLockFree(trx, actor, inserted.lock_key);
    throw new LockHeldError(inserted.lock_key ?? '', { jobId: 'unknown', executionId: 'unknown' });
  }
}

/**
 * THROTTLE and DEBOUNCE: what a create does when another job holds its lock key. Creates with one
 * key take turns (a transaction-scoped advisory lock on the key), so of twenty at once one creates
 * and the others each find the job it made. THROTTLE returns the holder, pending or running, and
 * creates nothing. DEBOUNCE gives a holder that has not started (PENDING, no attempt yet, a job on
 * the same endpoint that is not a cron job's occurrence) this request's input and start, and
 * creates nothing; a holder past that point is LOCK_HELD, as without a policy, since its run
 * cannot be changed any more. Undefined when no job holds the key: the create goes on.
 */
async function onLockHeld(
  ctx: ServiceContext,
  trx: Transaction<DB>,
  actor: Actor,
  row: NewJob,
  policy: 'THROTTLE' | 'DEBOUNCE',
): Promise<CreateJobResult | undefined> {
  const key = row.lock_key!;
  await executionsRepo.takeLockKeyTurn(trx, actor.workspaceId, key);
  const holder = await executionsRepo.findLockHolder(trx, actor.workspaceId, key);
  if (!holder) return undefined;
  // The job first, then its execution (in debounceJob): the order every job mutation locks in.
  const holderJob = await jobsRepo.findJobById(trx, actor.workspaceId, holder.job_id, { forUpdate: true });
  if (!holderJob) return undefined;
  if (policy === 'THROTTLE') return { job: toJob(holderJob), created: false, outcome: 'THROTTLED' };
  const refused = new LockHeldError(key, { jobId: holder.job_id, executionId: holder.id });
  if (holder.endpoint_id !== row.endpoint_id || holderJob.kind === 'CRON') throw refused;
  const startAt = row.kind === 'DELAYED' ? (row.run_at as Date) : await ctx.now(trx);
  // Undefined when the execution started (or ended) since it was read: too late to change it.
  const job = await jobsRepo.debounceJob(trx, actor.workspaceId, holderJob.id, holder.id, { input: row.input as string, startAt });
  if (!job) throw refused;
  // Brought forward, it may be due now: idle workers look at once.
  if (startAt <= (await ctx.now(trx))) await executionsRepo.notifyWork(trx);
  return { job: toJob(job), created: false, outcome: 'DEBOUNCED' };
}

/**
 * createJob's rules, in `trx` (the full path); `extra.scheduleName` marks a declared schedule
 * (declareSchedules). See the jobs service's createJob for what it guarantees and throws.
 */
export async function createJobIn(
  ctx: ServiceContext,
  trx: Transaction<DB>,
  actor: Actor,
  raw: CreateJobInput,
  extra: { scheduleName?: string; onCompleteOf?: string } = {},
): Promise<CreateJobResult> {
  const input = parseInput(createJobSchema, raw);
  if (input.cron) normalizeCron(input.cron.expression, ['cron', 'expression']);
  // FOR SHARE: an archive running now waits for this job, or this job sees the archive.
  const endpoint = await resolveEndpoint(trx, actor, { id: input.endpointId, name: input.endpointName }, { forShare: true });
  if (endpoint.archived_at) throw new ArchivedError(endpoint.id);
  if (endpoint.type === 'INTERNAL' && !isSystem(actor)) throw new InternalEndpointError(endpoint.name);
  await validateInput(trx, actor, endpoint, input.input ?? {});
  const row = jobRowFor(ctx, actor, input, endpoint, extra);

  if (row.idempotency_key) {
    const existing = await existingFor(trx, actor, row, input);
    if (existing) return existing;
  }
  if (row.lock_key && (input.whenLocked === 'THROTTLE' || input.whenLocked === 'DEBOUNCE')) {
    const answered = await onLockHeld(ctx, trx, actor, row, input.whenLocked);
    if (answered) return answered;
  }
  await assertLockFree(trx, actor, row.lock_key ?? null);
  const prerequisites = input.dependsOn ? await prerequisitesFor(trx, actor, input.dependsOn) : [];
  if (input.batchId) await openBatchFor(trx, actor, input.batchId);
  if (input.parentExecutionId) await liveParentFor(trx, actor, input.parentExecutionId);
  const now = await ctx.now(trx);
  if (row.kind === 'CRON') {
    row.next_fire_at = nextFire(row as JobRow, now);
    if (!row.next_fire_at) throw ValidationError.at(['cron'], 'the schedule has no occurrence before endsAt');
  }
  const inserted = await jobsRepo.insertJobUnlessKeyTaken(trx, row);
  if (!inserted) {
    // Lost the race on the unique index: the winner is committed and visible now.
    const winner = await existingFor(trx, actor, row, input);
    if (winner) return winner;
    throw new Error('idempotency insert conflicted but no job holds the key');
  }
  // A batch's onComplete job waits for the batch (held, migration 000048); a member is counted first.
  if (extra.onCompleteOf) await batchesRepo.setOnComplete(trx, extra.onCompleteOf, inserted.id);
  if (input.batchId) await batchesRepo.addMember(trx, input.batchId);
  const hold = { blocked: prerequisites.length > 0 || extra.onCompleteOf !== undefined, batchMember: input.batchId != null };
  if (inserted.kind !== 'CRON') await insertFirstExecution(trx, actor, inserted, row.input as string, now, hold);
  if (prerequisites.length === 0) return { job: toJob(inserted), created: true, outcome: 'CREATED' };
  // Its execution waits (blocked) until the prerequisites are settled; some may be already.
  await dependenciesRepo.insertDependencies(trx, actor.workspaceId, inserted.id, prerequisites);
  await dependenciesRepo.settleDependents(trx, [inserted.id]);
  const settled = await jobsRepo.findJobById(trx, actor.workspaceId, inserted.id);
  return { job: toJob(settled ?? inserted), created: true, outcome: 'CREATED' };
}

/**
 * The one-statement form of a request, when nothing the statement cannot check could refuse it
 * or change its outcome: the database's clock (no injected one), a role that may create jobs,
 * input that parses, an IMMEDIATE or DELAYED job without an idempotency key, a lock key, prerequisites or a parent (a batch's
 * member is one: the statement adds it only to an open batch of the workspace that the actor may join, as openBatchFor).
 * Undefined sends it down the full path. The only place this is decided.
 */
export function oneStatementJob(ctx: ServiceContext, actor: Actor, raw: CreateJobInput): OneStatementJob | undefined {
  if (!ctx.databaseClock || !hasRole(actor, 'OPERATOR')) return undefined;
  const parsed = createJobSchema.safeParse(raw);
  if (!parsed.success) return undefined;
  const input = parsed.data;
  const { kind } = input;
  if (kind !== 'IMMEDIATE' && kind !== 'DELAYED') return undefined;
  if (input.idempotencyKey || input.lockKey || input.dependsOn || input.parentExecutionId) return undefined;
  // Naming a config entry may name a secret, which not every key may send (src/service/endpoints/config-secrets.ts).
  // Read from the value with the renderer's own pattern: its JSON text escapes the whitespace a
  // placeholder may hold (`{{\tconfig.token}}`), which a test of the text would miss.
  if (configKeysIn(input.input ?? {}).size > 0) return undefined;
  return {
    workspaceId: actor.workspaceId,
    endpoint: input.endpointId ? { id: input.endpointId } : { name: input.endpointName ?? '' },
    system: isSystem(actor),
    name: input.name ?? null,
    kind,
    input: JSON.stringify(input.input ?? {}),
    maxAttempts: input.maxAttempts ?? null,
    defaultMaxAttempts: ctx.defaultMaxAttempts,
    runAt: kind === 'DELAYED' ? input.runAt! : null,
    priority: input.priority ?? null,
    concurrencyKey: input.concurrencyKey ?? null,
    batchId: input.batchId ?? null,
    anyBatch: mayChangeAny(actor),
    createdByKeyId: actor.keyId ?? null,
    audit: { actorKind: actor.kind, actorKeyId: actor.keyId ?? null, action: ACTION, input: auditInput(raw) },
  };
}

/**
 * createJob in one statement when `oneStatementJob` allows it; undefined sends the caller down
 * the full path, which holds every rule (and raises every error). The same rows as the full
 * path: job, execution, audit row. On the pool, concurrent requests share a statement (see
 * src/db/statements/create-job.ts); in a caller's transaction each is its own statement, in a savepoint.
 */
export function createOneStatementPath(ctx: ServiceContext) {
  const batcher = ctx.pool ? createJobBatcher(ctx.db, ctx.pool) : undefined;
  return async (actor: Actor, raw: CreateJobInput): Promise<CreateJobResult | undefined> => {
    const job = oneStatementJob(ctx, actor, raw);
    if (!job) return undefined;
    const inserted = await auditingFailure(ctx, actor, ACTION, raw, () =>
      batcher ? batcher.insert(job) : insertJobInOneStatement(ctx.db, ctx.pool, job),
    );
    return inserted ? { job: toJob(inserted), created: true, outcome: 'CREATED' } : undefined;
  };
}
