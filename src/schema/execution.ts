import type { BulkResult, BulkSkip } from '../service/jobs/bulk.js';
import type { TriggerJobResult } from '../service/jobs/execution-control.js';
import type { Attempt, AttemptTarget, Execution, WaitingFor } from '../service/kernel/models.js';
import { builder } from './builder.js';
import { CAPPED_MS_NOTE, cappedMs, connectionOf, DateTimeScalar, JSONScalar, ListOrderEnum, nodeId, pageArgs } from './common.js';
import { EndpointTypeEnum } from './endpoint.js';
import { ErrorCodeEnum } from './errors.js';
import { JobRef } from './job.js';

export const ExecutionStatusEnum = builder.enumType('ExecutionStatus', {
  description: 'Lifecycle of an execution.',
  values: {
    PENDING: { description: 'Waiting for its time, or for a retry after backoff.' },
    RUNNING: { description: 'An attempt is in flight on a worker.' },
    SUCCEEDED: { description: 'An attempt succeeded.' },
    FAILED: { description: 'Every attempt failed, or one failed unrecoverably. An operator may re-drive it.' },
    CANCELLED: { description: 'Cancelled before it could succeed.' },
  } as const,
});

export const ExecutionTriggerEnum = builder.enumType('ExecutionTrigger', {
  description: 'What created an execution.',
  values: {
    SCHEDULE: { description: "The job's creation (IMMEDIATE, DELAYED) or its cron schedule." },
    MANUAL: { description: 'An operator ran the job with triggerJob.' },
  } as const,
});

export const AttemptOutcomeEnum = builder.enumType('AttemptOutcome', {
  description: 'How one attempt ended.',
  values: {
    SUCCEEDED: { description: 'The endpoint accepted the work.' },
    FAILED: { description: 'The endpoint or handler reported an error.' },
    TIMED_OUT: { description: 'The attempt ran past its timeout and was aborted.' },
    LEASE_EXPIRED: { description: 'The worker lost its lease (crashed or stalled); the attempt counts.' },
    CANCELLED: { description: 'The execution was cancelled while the attempt ran.' },
  } as const,
});

export const AttemptTargetRef = builder.objectRef<AttemptTarget>('AttemptTarget').implement({
  description: 'The HTTP request an attempt sent, as sent: placeholders rendered, secret config values shown as [redacted].',
  fields: (t) => ({
    url: t.exposeString('url', { description: 'The url called.' }),
    method: t.exposeString('method', { description: 'The HTTP method used.' }),
    headers: t.field({
      type: JSONScalar,
      description: 'The request headers sent (lower-case names to values), signature headers included.',
      resolve: (a) => a.headers,
    }),
  }),
});

export const AttemptRef = builder.objectRef<Attempt>('Attempt').implement({
  description: 'One try at delivering an execution.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Stable identifier.' }),
    attemptNumber: t.exposeInt('attemptNumber', { description: '1 for the first attempt.' }),
    workerId: t.exposeString('workerId', {
      description:
        'The worker that made the attempt: the id of its process as `handlers` lists it (a second worker in one process adds `/2`, `/3`), for installation admins; for other keys a stable digest of it, as in `handlers`.',
    }),
    startedAt: t.field({ type: DateTimeScalar, description: 'When it started.', resolve: (a) => a.startedAt }),
    finishedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When it ended; null while running.',
      resolve: (a) => a.finishedAt,
    }),
    outcome: t.field({
      type: AttemptOutcomeEnum,
      nullable: true,
      description: 'How it ended; null while running.',
      resolve: (a) => a.outcome,
    }),
    statusCode: t.exposeInt('statusCode', { nullable: true, description: 'HTTP status code, for HTTP endpoints.' }),
    durationMs: t.exposeInt('durationMs', { nullable: true, description: 'How long it took, in milliseconds.' }),
    error: t.exposeString('error', { nullable: true, description: 'What went wrong, when it failed.' }),
    responseExcerpt: t.exposeString('responseExcerpt', { nullable: true, description: 'The start of the response body, capped.' }),
    workerHost: t.exposeString('workerHost', {
      nullable: true,
      description:
        'Host name of the worker that made the attempt (installation admins only; null for other keys, for attempts that ended without their worker, such as LEASE_EXPIRED, and for attempts from before it was recorded).',
    }),
    workerPid: t.exposeInt('workerPid', {
      nullable: true,
      description: "That worker's process id on its host (installation admins only; null whenever workerHost is).",
    }),
    errorStack: t.exposeString('errorStack', {
      nullable: true,
      description:
        'HANDLER endpoints: the stack of the error the handler threw, redacted as `error` is and capped at 8000 characters. Null otherwise, and for attempts from before stacks were recorded.',
    }),
    gapBeforeNextMs: t.int({
      nullable: true,
      description:
        "Milliseconds from this attempt's end to the next attempt's start: the retry backoff plus any wait for a free worker (or, for a retry an operator asked for, the time until then). Null for the latest attempt (while the execution is PENDING, its nextAttemptAt says when the next may start)." +
        CAPPED_MS_NOTE,
      resolve: (a) => cappedMs(a.gapBeforeNextMs),
    }),
    target: t.field({
      type: AttemptTargetRef,
      nullable: true,
      description:
        'HTTP endpoints: the request this attempt sent, as the endpoint was when it was made (a later change of the endpoint does not rewrite it). Null for handlers, for attempts that never built a request, and for attempts from before targets were recorded.',
      resolve: (a) => a.target,
    }),
  }),
});

export const WaitReasonEnum = builder.enumType('WaitReason', {
  description:
    "Why a PENDING execution has not started: the first gate that holds it, in this order (a lever an operator pulled, then time, then the queue's rules, then capacity).",
  values: {
    ENDPOINT_PAUSED: { description: 'Its endpoint is paused (pauseEndpoint); it starts after resumeEndpoint.' },
    JOB_PAUSED: { description: 'Its job is paused (pauseJob); only a manual run of a paused job starts.' },
    PREREQUISITES: {
      description:
        'Its job was created with dependsOn and some of those jobs have not ended yet (`prerequisites` lists them): it starts once each has SUCCEEDED (or, with onPrerequisiteFailure RUN, ended at all).',
    },
    NOT_DUE: { description: 'Its time has not come: `until` is when it becomes due.' },
    RETRY_BACKOFF: { description: 'An attempt failed and the next waits out its backoff (or a Retry-After) until `until`.' },
    ENDPOINT_RETRY_AFTER: {
      description:
        "Its endpoint's target answered 429 or 503 with Retry-After: no execution of the endpoint starts before `until`, on any worker, unless an operator lifts it with resumeEndpoint.",
    },
    PREVIOUS_OCCURRENCE: {
      description:
        'Its job runs one occurrence at a time (a cron job with overlapPolicy QUEUE) and an earlier occurrence is running or waiting.',
    },
    ENDPOINT_CONCURRENCY_FULL: { description: "Its endpoint's concurrencyLimit of attempts is in flight; it starts when one ends." },
    WORKSPACE_CONCURRENCY_FULL: {
      description:
        "Its workspace's concurrencyLimit of attempts is in flight, across its endpoints (jobgate's internal ones apart); it starts when one ends.",
    },
    KEY_CONCURRENCY_FULL: {
      description: "Its endpoint's keyConcurrencyLimit of attempts with its concurrencyKey is in flight; it starts when one of them ends.",
    },
    RATE_LIMITED: { description: "Its endpoint's rateLimit is spent for now: `until` is when its next start is allowed." },
    KEY_RATE_LIMITED: {
      description: "Its endpoint's keyRateLimit is spent for its concurrencyKey for now: `until` is when the key's next start is allowed.",
    },
    NO_LIVE_WORKER: {
      description:
        "No running worker can deliver it: none has registered its HANDLER endpoint's handler (or, for HTTP, none runs at all) within its heartbeat. A deployment that drains only through run-due has none between passes.",
    },
    READY: { description: 'Nothing holds it: due, and the next worker with room claims it, in due order.' },
  } as const,
});

export const WaitingForRef = builder.objectRef<WaitingFor>('WaitingFor').implement({
  description: 'Why a PENDING execution is waiting, read at the moment of the query (it may have started since).',
  fields: (t) => ({
    reason: t.field({ type: WaitReasonEnum, description: 'The first gate that holds it.', resolve: (w) => w.reason }),
    until: t.field({
      type: DateTimeScalar,
      nullable: true,
      description:
        "NOT_DUE and RETRY_BACKOFF: when it becomes due; ENDPOINT_RETRY_AFTER: when its target's Retry-After runs out; RATE_LIMITED: when its endpoint may start the next; KEY_RATE_LIMITED: when its key may. null for the other reasons, which end when something changes, not at a time.",
      resolve: (w) => w.until,
    }),
    detail: t.exposeString('detail', {
      description: 'The reason in words, with its figures (the limit and how many are in flight, the handler).',
    }),
    prerequisites: t.field({
      type: [JobRef],
      description:
        'PREREQUISITES: the jobs it still waits for (at most ten, in id order; `detail` gives the count). Empty for the other reasons.',
      resolve: (w, _args, ctx) => Promise.all(w.prerequisiteIds.map((id) => ctx.service.job(ctx.actor, id))),
    }),
  }),
});

export const ExecutionRef = builder.nodeRef<Execution>('Execution', { id: nodeId() }).implement({
  description: 'One firing of a job, with its attempts. Unique per job and scheduled time.',
  fields: (t) => ({
    eventCursor: t.string({
      nullable: true,
      description:
        'Set only on the object cancelExecution or retryExecution returns: the event cursor from just before that mutation changed anything; pass it as `after` to ' +
        'executionUpdates and every event it caused arrives, none twice. null when the object was read by a query.',
      resolve: (r) => r.eventCursor ?? null,
    }),
    job: t.field({
      type: JobRef,
      description: 'The job this execution belongs to.',
      resolve: (e, _a, ctx) => ctx.service.job(ctx.actor, e.jobId),
    }),
    scheduledFor: t.field({ type: DateTimeScalar, description: 'The occurrence this execution is for.', resolve: (e) => e.scheduledFor }),
    status: t.field({ type: ExecutionStatusEnum, description: 'Where it is in its lifecycle.', resolve: (e) => e.status }),
    attemptCount: t.exposeInt('attemptCount', { description: 'Attempts made so far.' }),
    maxAttempts: t.exposeInt('maxAttempts', { description: 'Attempts allowed before it is FAILED.' }),
    concurrencyKey: t.exposeString('concurrencyKey', {
      nullable: true,
      description: "Its job's concurrency key when it was created (see Endpoint.keyConcurrencyLimit).",
    }),
    priority: t.exposeInt('priority', {
      description: "Its job's priority when it was created (-100 to 100): due executions of a higher priority start first.",
    }),
    nextAttemptAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'While PENDING: when the next attempt may start.',
      resolve: (e) => e.nextAttemptAt,
    }),
    trigger: t.field({ type: ExecutionTriggerEnum, description: 'What created this execution.', resolve: (e) => e.trigger }),
    cancelRequestedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When cancellation of the running attempt was requested; it ends CANCELLED when the attempt returns.',
      resolve: (e) => e.cancelRequestedAt,
    }),
    input: t.field({
      type: JSONScalar,
      nullable: true,
      description:
        'The input this execution is delivered with, fixed when it was created: every attempt and retry uses it, and updateJob changes only executions created after the update. Null only for executions that had finished before inputs were pinned.',
      resolve: (e) => e.input,
    }),
    waitingFor: t.field({
      type: WaitingForRef,
      nullable: true,
      description: 'While PENDING: why it has not started yet (read now, from the primary). null in any other status.',
      resolve: (e, _a, ctx) => (e.status === 'PENDING' ? ctx.service.waitingFor(ctx.actor, e.id) : null),
    }),
    lastError: t.exposeString('lastError', { nullable: true, description: 'The most recent error or the reason it ended.' }),
    finishedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When it reached a final status.',
      resolve: (e) => e.finishedAt,
    }),
    attempts: t.field({
      type: [AttemptRef],
      description:
        'Every attempt, oldest first; while the execution is RUNNING the last one is the attempt in progress (no finishedAt or outcome yet).',
      resolve: (e, _a, ctx) => ctx.service.attempts(ctx.actor, e.id),
    }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When the execution was created.', resolve: (e) => e.createdAt }),
    updatedAt: t.field({ type: DateTimeScalar, description: 'When it last changed.', resolve: (e) => e.updatedAt }),
  }),
});

export const ExecutionConnectionRef = connectionOf('Execution', ExecutionRef, 'execution');

export const ExecutionFilterInputRef = builder.inputType('ExecutionFilter', {
  description: 'Narrows an execution list. All given conditions must hold.',
  fields: (t) => ({
    ids: t.idList({
      description: 'Only these executions: a selection made in a list, 1 to 1000 ids (an id not of your workspace matches nothing).',
    }),
    jobId: t.id({ description: 'Only executions of this job.' }),
    endpointId: t.id({ description: 'Only executions on this endpoint.' }),
    endpointType: t.field({
      type: EndpointTypeEnum,
      description:
        "Only executions on endpoints of this type: USER for your own work, INTERNAL for jobgate's (alert deliveries, the reaper, retention). Default: both.",
    }),
    statuses: t.field({ type: [ExecutionStatusEnum], description: 'Only executions in one of these statuses.' }),
    trigger: t.field({ type: ExecutionTriggerEnum, description: 'Only executions created this way.' }),
    createdAfter: t.field({ type: DateTimeScalar, description: 'Only executions created at or after this instant.' }),
    createdBefore: t.field({ type: DateTimeScalar, description: 'Only executions created before this instant.' }),
    search: t.string({
      description:
        "Only executions of jobs whose name starts with this (in any case) or whose idempotency key starts with it (exactly), as JobFilter's search. 1 to 200 characters.",
    }),
    errorContains: t.string({
      description:
        'Only executions whose last error (the one `lastError` shows) contains this text, in any case: `timeout`, `ECONNREFUSED`, `HTTP 503`. 3 to 200 characters.',
    }),
    order: t.field({ type: ListOrderEnum, description: 'NEWEST_FIRST (default) or OLDEST_FIRST, by creation time.' }),
  }),
});

builder.objectFields(JobRef, (t) => ({
  executions: t.field({
    type: ExecutionConnectionRef,
    description: "This job's executions, newest first.",
    args: { ...pageArgs(t.arg), status: t.arg({ type: ExecutionStatusEnum, description: 'Only executions in this status.' }) },
    resolve: (j, { status, ...page }, ctx) => ctx.service.jobExecutions(ctx.actor, j.id, { status }, page),
  }),
  lastExecution: t.field({
    type: ExecutionRef,
    nullable: true,
    description: "This job's newest execution; null before its first (a cron job before it first fires).",
    resolve: (j, _args, ctx) => ctx.service.lastExecution(ctx.actor, j.id),
  }),
  scheduledExecution: t.field({
    type: ExecutionRef,
    nullable: true,
    description:
      'The execution its schedule created, never a "Run now" (triggerJob): for an IMMEDIATE or DELAYED job the one it was created with, ' +
      'which its dependents wait on and its batch counts (retry this one to re-drive a batch member); for a cron job its newest firing. null when it has none yet.',
    resolve: (j, _args, ctx) => ctx.service.scheduledExecution(ctx.actor, j.id),
  }),
}));

export const TriggerJobPayloadRef = builder.objectRef<TriggerJobResult>('TriggerJobPayload').implement({
  description: 'The result of triggerJob.',
  fields: (t) => ({
    execution: t.field({ type: ExecutionRef, description: 'The execution that runs the job now.', resolve: (r) => r.execution }),
    created: t.exposeBoolean('created', { description: 'false when the requestId was seen before and its execution is returned.' }),
    eventCursor: t.string({
      description:
        'The event cursor from just before this trigger changed anything: pass it as `after` to executionUpdates(jobId:) or jobEvents(jobId:) ' +
        'and every event it caused arrives, none twice, however late the subscription starts. A repeated request (the same requestId, created false) ' +
        "changes nothing: its cursor is from the repeat, so keep the first answer's cursor to see the execution from its start.",
      resolve: (r) => r.eventCursor!,
    }),
  }),
});

const BulkSkipRef = builder.objectRef<BulkSkip>('BulkSkip').implement({
  description: 'An item a bulk action left as it was, and why.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'The execution or job.' }),
    code: t.field({
      type: ErrorCodeEnum,
      description: 'The code the single action gave, e.g. CONFLICT or LOCK_HELD.',
      resolve: (s) => s.code,
    }),
    message: t.exposeString('message', { description: 'What the single action said.' }),
  }),
});

export const BulkResultRef = builder.objectRef<BulkResult>('BulkResult').implement({
  description:
    'What a bulk action did. Each item got what its single action does (its guards, its events and its audit row); the selection is audited ' +
    'once more as a whole. Items are done up to 250 to a transaction: a refused item is skipped and the others go on; should the database ' +
    'fail, the call fails and the transactions before it stay committed (call again: what is done no longer matches, or is left as it is).',
  fields: (t) => ({
    matched: t.exposeInt('matched', { description: 'Items selected (at most the limit); an id given more than once is one item.' }),
    changed: t.exposeInt('changed', { description: 'Items changed, or already as asked (pausing a paused job).' }),
    skipped: t.field({
      type: [BulkSkipRef],
      description: 'Items left as they were, each once with its reason, in the order they were given.',
      resolve: (r) => r.skipped,
    }),
    more: t.exposeBoolean('more', { description: 'Whether more items matched than the limit took: call again for the next ones.' }),
    eventCursor: t.string({
      description:
        'The event cursor from just before this bulk action changed anything: pass it as `after` to executionUpdates or jobEvents ' +
        'and every event it caused arrives, none twice, however late the subscription starts.',
      resolve: (r) => r.eventCursor!,
    }),
  }),
});
