import { createJobSchema, triggerJobSchema, updateJobSchema } from '../service/kernel/inputs.js';
import type { CancelJobResult, CreateJobResult } from '../service/jobs/jobs.js';
import type { CronSchedule, Job } from '../service/kernel/models.js';
import { builder } from './builder.js';
import { connectionOf, DateTimeScalar, JSONScalar, ListOrderEnum, nodeId, pageArgs, zodInput } from './common.js';
import { EndpointRef } from './endpoint.js';
import { PrerequisiteFailurePolicyEnum } from './prerequisites.js';

export const JobKindEnum = builder.enumType('JobKind', {
  description: 'When a job runs.',
  values: {
    IMMEDIATE: { description: 'Once, as soon as a worker is free.' },
    DELAYED: { description: 'Once, at `runAt`.' },
    CRON: { description: 'On a cron schedule, in a time zone.' },
  } as const,
});

export const JobStatusEnum = builder.enumType('JobStatus', {
  description: 'Lifecycle of a job.',
  values: {
    ACTIVE: { description: 'Runs as scheduled.' },
    PAUSED: { description: 'Runs nothing until resumed; a cron schedule resumes from then, with no backlog.' },
    RETIRED: { description: 'Cancelled for good: pending executions were cancelled and nothing more runs.' },
  } as const,
});

export const JobStateEnum = builder.enumType('JobState', {
  description:
    'What a job is doing, as a list screen shows it. A one-off job (IMMEDIATE, DELAYED) keeps `status` ACTIVE after it ran ' +
    '(so that a re-drive can run it again); its state follows its newest execution.',
  values: {
    ACTIVE: { description: 'Will run: a cron job on schedule, or a one-off job whose execution is pending or running.' },
    PAUSED: { description: 'Runs nothing until resumed.' },
    RETIRED: { description: 'Cancelled for good.' },
    COMPLETED: { description: 'A one-off job whose execution succeeded.' },
    FAILED: { description: 'A one-off job whose execution failed (every attempt); retryExecution runs it again.' },
    CANCELLED: { description: 'A one-off job whose execution was cancelled; triggerJob runs it again.' },
  } as const,
});

export const MisfirePolicyEnum = builder.enumType('MisfirePolicy', {
  description: 'What a cron job does about occurrences missed while no scheduler ran.',
  values: {
    FIRE_LATEST: { description: 'One execution for the latest missed occurrence, then continue (default).' },
    SKIP: { description: 'None; continue from now.' },
    FIRE_ALL: { description: 'One execution per missed occurrence, up to a cap.' },
  } as const,
});

export const OverlapPolicyEnum = builder.enumType('OverlapPolicy', {
  description: 'What a cron job does when an occurrence comes while its previous execution is still pending or running.',
  values: {
    SKIP: { description: 'Skip this occurrence and record the skip (default).' },
    QUEUE: { description: 'Queue it to run after the previous one.' },
    ALLOW: { description: 'Run it alongside the previous one.' },
  } as const,
});

export const CronScheduleRef = builder.objectRef<CronSchedule>('CronSchedule').implement({
  description: 'The schedule of a CRON job.',
  fields: (t) => ({
    expression: t.exposeString('expression', { description: 'Five-field cron expression: minute hour day-of-month month day-of-week.' }),
    timezone: t.exposeString('timezone', { description: 'IANA time zone the expression is read in, e.g. "Europe/Paris".' }),
    startsAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'No occurrence before this instant.',
      resolve: (c) => c.startsAt,
    }),
    endsAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'No occurrence at or after this instant.',
      resolve: (c) => c.endsAt,
    }),
    misfirePolicy: t.field({ type: MisfirePolicyEnum, description: 'Missed occurrences policy.', resolve: (c) => c.misfirePolicy }),
    overlapPolicy: t.field({ type: OverlapPolicyEnum, description: 'Overlapping occurrences policy.', resolve: (c) => c.overlapPolicy }),
    nextFireAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description:
        'The next occurrence (its execution may already be written, PENDING until then: occurrences are written up to the lead before their time); null while paused or retired, or when the schedule has ended.',
      resolve: (c) => c.nextFireAt,
    }),
    lastFiredAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'The occurrence most recently fired (its scheduled time), once that time has come.',
      resolve: (c) => c.lastFiredAt,
    }),
    skippedTicks: t.exposeInt('skippedTicks', {
      description:
        'Occurrences skipped because the previous execution was still pending or running (overlap SKIP) or the lock key was held.',
    }),
    lastSkipAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When an occurrence was last skipped.',
      resolve: (c) => c.lastSkipAt,
    }),
    lastSkipReason: t.exposeString('lastSkipReason', {
      nullable: true,
      description: 'Why the last occurrence was skipped, e.g. how long the previous execution had been running.',
    }),
    missedTicks: t.exposeInt('missedTicks', {
      description: 'Occurrences missed while no scheduler ran and not fired, per the misfire policy.',
    }),
    scheduleError: t.exposeString('scheduleError', {
      nullable: true,
      description:
        'Why the schedule could not be computed at the last pass, if it could not; it continues from the next computable occurrence.',
    }),
  }),
});

export const JobRef = builder.nodeRef<Job>('Job', { id: nodeId() }).implement({
  description: 'Work to run on an endpoint: once now, once later, or on a cron schedule. Each firing is an Execution.',
  fields: (t) => ({
    name: t.exposeString('name', { nullable: true, description: 'Optional display name.' }),
    eventCursor: t.string({
      nullable: true,
      description:
        'Set only on the object pauseJob or resumeJob returns: the event cursor from just before that mutation changed anything; pass it as `after` to ' +
        'jobEvents and every event it caused arrives, none twice. null when the object was read by a query.',
      resolve: (r) => r.eventCursor ?? null,
    }),
    kind: t.field({ type: JobKindEnum, description: 'IMMEDIATE, DELAYED or CRON.', resolve: (j) => j.kind }),
    status: t.field({ type: JobStatusEnum, description: 'ACTIVE, PAUSED or RETIRED.', resolve: (j) => j.status }),
    state: t.field({
      type: JobStateEnum,
      description: 'What the job is doing: `status`, with COMPLETED, FAILED or CANCELLED for a one-off job whose execution ended.',
      resolve: (j, _args, ctx) => ctx.service.jobState(ctx.actor, j),
    }),
    endpoint: t.field({
      type: EndpointRef,
      description: 'Where the job is delivered.',
      resolve: (j, _args, ctx) => ctx.service.endpoint(ctx.actor, { id: j.endpointId }),
    }),
    input: t.field({ type: JSONScalar, description: 'The payload delivered to the endpoint.', resolve: (j) => j.input }),
    maxAttempts: t.exposeInt('maxAttempts', { description: 'Attempts per execution (job override, else endpoint, else default).' }),
    concurrencyKey: t.exposeString('concurrencyKey', {
      nullable: true,
      description:
        "What its executions count against for their endpoint's keyConcurrencyLimit (e.g. a customer's id); null when none was given.",
    }),
    priority: t.exposeInt('priority', {
      description:
        "Higher first, -100 to 100 (the job's own, else its endpoint's defaultPriority when it was created). Each execution keeps the priority it was created with.",
    }),
    scheduleName: t.exposeString('scheduleName', {
      nullable: true,
      description:
        "Set on a cron job the embedding application's code declares by name (the library's gate.schedule): re-declaring it at start-up updates this job instead of creating another. Null for jobs created through createJob.",
    }),
    idempotencyKey: t.exposeString('idempotencyKey', {
      nullable: true,
      description: 'The key that makes creating this job idempotent, unique per endpoint; null when none was given.',
    }),
    lockKey: t.exposeString('lockKey', {
      nullable: true,
      description: 'While an execution of a job with this key is pending or running, no other job with the same key may start one.',
    }),
    runAt: t.field({ type: DateTimeScalar, nullable: true, description: 'DELAYED only: when it runs.', resolve: (j) => j.runAt }),
    cron: t.field({ type: CronScheduleRef, nullable: true, description: 'CRON only: the schedule.', resolve: (j) => j.cron }),
    retiredAt: t.field({ type: DateTimeScalar, nullable: true, description: 'When the job was cancelled.', resolve: (j) => j.retiredAt }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When the job was created.', resolve: (j) => j.createdAt }),
    updatedAt: t.field({ type: DateTimeScalar, description: 'When the job last changed.', resolve: (j) => j.updatedAt }),
  }),
});

export const JobConnectionRef = connectionOf('Job', JobRef, 'job');

builder.objectFields(EndpointRef, (t) => ({
  jobs: t.field({
    type: JobConnectionRef,
    description: 'Jobs on this endpoint, newest first.',
    args: {
      ...pageArgs(t.arg),
      status: t.arg({ type: JobStatusEnum, description: 'Only jobs in this status.' }),
      kind: t.arg({ type: JobKindEnum, description: 'Only jobs of this kind.' }),
    },
    resolve: (e, { status, kind, ...page }, ctx) =>
      ctx.service.endpointJobs(ctx.actor, e.id, { status, kind, includeInternal: true }, page),
  }),
}));

export const WhenLockedEnum = builder.enumType('WhenLocked', {
  description: 'What createJob does when another job holds its lock key (a pending or running execution with that key).',
  values: {
    REFUSE: { description: 'Refuse with LOCK_HELD, creating nothing (the default).' },
    THROTTLE: {
      description:
        'Create nothing and answer with the job holding the key (outcome THROTTLED), whether its execution is pending or running.',
    },
    DEBOUNCE: {
      description:
        "While the holder's execution has not started (PENDING, no attempt yet, a job on the same endpoint that is not a cron job): give it this request's input and start (runAt, or now for IMMEDIATE) instead of creating a job (outcome DEBOUNCED). Once it has started it cannot change: LOCK_HELD, as with REFUSE.",
    },
  } as const,
});

export const CreateJobOutcomeEnum = builder.enumType('CreateJobOutcome', {
  description: 'What createJob did.',
  values: {
    CREATED: { description: 'A new job was created.' },
    EXISTING: { description: 'The idempotency key was already used with the same request: the existing job is returned.' },
    THROTTLED: { description: 'whenLocked THROTTLE: another job holds the lock key; nothing was created and that job is returned.' },
    DEBOUNCED: {
      description:
        "whenLocked DEBOUNCE: the pending job holding the lock key took this request's input and start; nothing was created and that job is returned.",
    },
  } as const,
});

export const CreateJobPayloadRef = builder.objectRef<CreateJobResult>('CreateJobPayload').implement({
  description: 'The result of createJob.',
  fields: (t) => ({
    job: t.field({
      type: JobRef,
      description: 'The job: new, or the existing one its idempotency key names, or the one holding its lock key (THROTTLED, DEBOUNCED).',
      resolve: (r) => r.job,
    }),
    created: t.exposeBoolean('created', {
      description: 'true when a job was created; false when an existing job is returned (see outcome for which and why).',
    }),
    outcome: t.field({ type: CreateJobOutcomeEnum, description: 'What createJob did.', resolve: (r) => r.outcome }),
    eventCursor: t.string({
      description:
        'Pass as `after` to executionUpdates(jobId:) or jobEvents(jobId:) right after createJob: every event of the job arrives, ' +
        'from its creation (the first execution PENDING), none twice, however late the subscription starts.',
      resolve: (r, _args, ctx) => ctx.service.eventCursorBeforeJob(ctx.actor, r.job),
    }),
  }),
});

export const CreateJobsInputRef = builder.inputType('CreateJobsInput', {
  description: 'Jobs to create together, in one transaction (createJobs).',
  fields: (t) => ({
    jobs: t.field({
      type: [CreateJobInputRef],
      required: true,
      description: '1 to 1,000 jobs, each as createJob takes it.',
    }),
  }),
});

export const CreateJobsPayloadRef = builder.objectRef<CreateJobResult[]>('CreateJobsPayload').implement({
  description: 'The result of createJobs.',
  fields: (t) => ({
    results: t.field({
      type: [CreateJobPayloadRef],
      description: "One per job asked, in the order asked: each as createJob's result.",
      resolve: (r) => r,
    }),
  }),
});

export const CancelJobPayloadRef = builder.objectRef<CancelJobResult>('CancelJobPayload').implement({
  description: 'The result of cancelJob.',
  fields: (t) => ({
    job: t.field({ type: JobRef, description: 'The job, now RETIRED.', resolve: (r) => r.job }),
    cancelledExecutions: t.exposeInt('cancelledExecutions', {
      description: 'How many pending executions were cancelled (running ones are counted in `stoppingExecutions`).',
    }),
    stoppingExecutions: t.exposeInt('stoppingExecutions', {
      description:
        'How many running executions were asked to stop: their workers are told at once, and each ends CANCELLED when its attempt returns (or its lease ends).',
    }),
    eventCursor: t.string({
      description:
        'The event cursor from just before this cancellation changed anything: pass it as `after` to jobEvents(jobId:) or executionUpdates(jobId:) ' +
        'and every event it caused arrives, none twice, however late the subscription starts.',
      resolve: (r) => r.eventCursor!,
    }),
  }),
});

const cronFields = (t: Parameters<Parameters<typeof builder.inputType>[1]['fields']>[0], required: boolean) => ({
  expression: t.string({
    required,
    description: 'Five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly.',
  }),
  timezone: t.string({ description: 'IANA time zone, e.g. "America/New_York". Default "UTC".' }),
  startsAt: t.field({ type: DateTimeScalar, description: 'No occurrence before this instant.' }),
  endsAt: t.field({ type: DateTimeScalar, description: 'No occurrence at or after this instant.' }),
  misfirePolicy: t.field({ type: MisfirePolicyEnum, description: 'Default FIRE_LATEST.' }),
  overlapPolicy: t.field({ type: OverlapPolicyEnum, description: 'Default SKIP.' }),
});

export const CronScheduleInputRef = builder.inputType('CronScheduleInput', {
  description: 'A cron schedule.',
  fields: (t) => cronFields(t, true),
});

export const CronScheduleUpdateInputRef = builder.inputType('CronScheduleUpdateInput', {
  description:
    'Changes to a cron schedule. Absent fields stay as they are; the next fire time is recomputed from now. ' +
    'Unlike createJob, which refuses a schedule with no occurrence before `endsAt`, an update may end one: an `endsAt` ' +
    'before the next occurrence leaves the job ACTIVE with no next fire until `endsAt` passes (then it is retired), and ' +
    'moving `endsAt` later, or to null, before then resumes it from now. cancelJob ends it at once.',
  fields: (t) => cronFields(t, false),
});

export const CreateJobInputRef = builder.inputType('CreateJobInput', {
  description:
    'A new job. Name the endpoint by `endpointId` or `endpointName` (exactly one). ' +
    'DELAYED jobs need `runAt`; CRON jobs need `cron`; IMMEDIATE jobs need neither.',
  fields: (t) => ({
    endpointId: t.id({ description: 'The endpoint, by id.' }),
    endpointName: t.string({ description: 'The endpoint, by name.' }),
    kind: t.field({ type: JobKindEnum, required: true, description: 'IMMEDIATE, DELAYED or CRON.' }),
    name: t.string({ description: 'Optional display name.' }),
    input: t.field({ type: JSONScalar, description: "The payload; checked against the endpoint's payload spec. Default {}." }),
    maxAttempts: t.int({ description: "Attempts per execution, 1 to 100; default the endpoint's, else the installation's." }),
    concurrencyKey: t.string({
      description:
        '1 to 200 characters, e.g. a customer\'s id: on an endpoint with a keyConcurrencyLimit, at most that many of its executions with this key run at once, and claims rotate between keys. Omit it for none (never send "").',
    }),
    priority: t.int({
      description:
        "-100 to 100: due executions of a higher priority start first, and within one priority the earliest due first. Default the endpoint's defaultPriority (0). One claim in every ten takes the earliest due work whatever its priority, so a low priority is delayed, never starved.",
    }),
    idempotencyKey: t.string({
      description:
        'Makes creation idempotent per endpoint: a repeat with the same key and request returns the existing job; ' +
        'with a different request it is CONFLICT. Omit it (never send "") for no key.',
    }),
    lockKey: t.string({
      description:
        'Mutual exclusion in the workspace: while another job with this key has a pending or running execution, creation is refused with LOCK_HELD, unless `whenLocked` says otherwise.',
    }),
    whenLocked: t.field({
      type: WhenLockedEnum,
      description: 'What to do when another job holds `lockKey` (IMMEDIATE and DELAYED jobs; needs `lockKey`). Default REFUSE.',
    }),
    runAt: t.field({ type: DateTimeScalar, description: 'DELAYED: when to run.' }),
    cron: t.field({ type: CronScheduleInputRef, description: 'CRON: the schedule.' }),
    dependsOn: t.idList({
      description:
        "IMMEDIATE and DELAYED: 1 to 100 jobs of the workspace (IMMEDIATE or DELAYED, created earlier or earlier in the same transaction) that must SUCCEED before this job's execution starts; until then it is PENDING with waitingFor PREREQUISITES. A DELAYED job starts at the later of its runAt and their end. An id of no job of the workspace is NOT_FOUND. Since a job can only name jobs that exist, there is never a cycle.",
    }),
    onPrerequisiteFailure: t.field({
      type: PrerequisiteFailurePolicyEnum,
      description: 'With dependsOn: what happens when one of them FAILED or was CANCELLED. Default CANCEL.',
    }),
    parentExecutionId: t.id({
      description:
        'IMMEDIATE and DELAYED: make the job a child of this execution, typically from its handler (ctx.executionId, in ctx.transaction). Cancelling the parent cancels its children that have not ended. NOT_FOUND for no execution of the workspace; CONFLICT once the parent has ended or is being cancelled.',
    }),
    batchId: t.id({
      description:
        'IMMEDIATE and DELAYED: add the job to this open batch as a member (createBatch with open: true). NOT_FOUND for no batch of the workspace; FORBIDDEN to an OPERATOR key that did not create the batch; CONFLICT once it is closed.',
    }),
  }),
});
export const createJobValidation = zodInput(createJobSchema);

export const UpdateJobInputRef = builder.inputType('UpdateJobInput', {
  description: 'Changes to a job that is not retired. Absent fields stay as they are.',
  fields: (t) => ({
    id: t.id({ required: true, description: 'The job to change.' }),
    name: t.string({ description: 'New display name; null clears it.' }),
    input: t.field({
      type: JSONScalar,
      description: "New payload; checked against the endpoint's payload spec. null sets it to {}, as in createJob.",
    }),
    maxAttempts: t.int({ description: 'New attempts per execution; pending executions take it too.' }),
    runAt: t.field({ type: DateTimeScalar, description: 'DELAYED: new time, while the execution has not started.' }),
    cron: t.field({ type: CronScheduleUpdateInputRef, description: 'CRON: schedule changes.' }),
  }),
});
export const updateJobValidation = zodInput(updateJobSchema);

export const JobFilterInputRef = builder.inputType('JobFilter', {
  description: 'Narrows a job list. All given conditions must hold.',
  fields: (t) => ({
    status: t.field({ type: JobStatusEnum, description: 'Only jobs in this status.' }),
    kind: t.field({ type: JobKindEnum, description: 'Only jobs of this kind.' }),
    endpointId: t.id({ description: 'Only jobs on this endpoint.' }),
    includeInternal: t.boolean({ description: "Include jobgate's own system jobs (such as each workspace's reaper). Default false." }),
    search: t.string({
      description:
        'Only jobs whose name starts with this (in any case) or whose idempotency key starts with it (exactly). 1 to 200 characters.',
    }),
    order: t.field({ type: ListOrderEnum, description: 'NEWEST_FIRST (default) or OLDEST_FIRST, by creation time.' }),
  }),
});

export const TriggerJobInputRef = builder.inputType('TriggerJobInput', {
  description: 'Run a job now, outside its schedule.',
  fields: (t) => ({
    id: t.id({ required: true, description: 'The job to run.' }),
    force: t.boolean({ description: 'Run even if the job is paused or already has a pending or running execution. Default false.' }),
    requestId: t.string({
      description:
        'Your id for this request: repeating it (a retry after a timeout, say) returns the same execution instead of starting another.',
    }),
  }),
});
export const triggerJobValidation = zodInput(triggerJobSchema);
