import { builder } from '../schema/builder.js';
import { DateTimeScalar, pageArgs } from '../schema/common.js';
import {
  BulkResultRef,
  ExecutionConnectionRef,
  ExecutionFilterInputRef,
  ExecutionRef,
  ExecutionStatusEnum,
  TriggerJobPayloadRef,
} from '../schema/execution.js';
import {
  CancelJobPayloadRef,
  CreateJobInputRef,
  CreateJobPayloadRef,
  CreateJobsInputRef,
  CreateJobsPayloadRef,
  createJobValidation,
  JobConnectionRef,
  JobFilterInputRef,
  JobRef,
  TriggerJobInputRef,
  triggerJobValidation,
  UpdateJobInputRef,
  updateJobValidation,
} from '../schema/job.js';

const id = (v: string | number) => String(v);

builder.queryFields((t) => ({
  jobs: t.field({
    type: JobConnectionRef,
    description: 'Jobs of the workspace, newest first.',
    args: { ...pageArgs(t.arg), filter: t.arg({ type: JobFilterInputRef, description: 'Only jobs matching this.' }) },
    resolve: (_root, { filter, ...page }, ctx) => ctx.service.jobs(ctx.actor, (filter ?? {}) as never, page),
  }),
  job: t.field({
    type: JobRef,
    description: 'One job. NOT_FOUND when no job of your workspace has this id.',
    args: { id: t.arg.id({ required: true, description: 'The job id.' }) },
    resolve: (_root, args, ctx) => ctx.service.job(ctx.actor, id(args.id)),
  }),
  executions: t.field({
    type: ExecutionConnectionRef,
    description:
      'Executions of the workspace, newest first unless `filter.order` says otherwise; narrowed by `filter` (and, as before it existed, by `jobId` and `status`).',
    args: {
      ...pageArgs(t.arg),
      jobId: t.arg.id({ description: 'Only executions of this job (as `filter.jobId`).' }),
      status: t.arg({ type: ExecutionStatusEnum, description: 'Only executions in this status.' }),
      filter: t.arg({ type: ExecutionFilterInputRef, description: 'Only executions matching this.' }),
    },
    resolve: (_root, { jobId, status, filter, ...page }, ctx) =>
      ctx.service.executions(ctx.actor, { ...(filter ?? {}), ...(jobId == null ? {} : { jobId: id(jobId) }), status } as never, page),
  }),
  execution: t.field({
    type: ExecutionRef,
    description: 'One execution. NOT_FOUND when no execution of your workspace has this id.',
    args: { id: t.arg.id({ required: true, description: 'The execution id.' }) },
    resolve: (_root, args, ctx) => ctx.service.execution(ctx.actor, id(args.id)),
  }),
  cronPreview: t.field({
    type: [DateTimeScalar],
    description:
      'The next fire times of a cron expression, so a schedule can be shown before it is saved; fewer than `count` when the schedule has no more before the end of year 9999.',
    args: {
      expression: t.arg.string({ required: true, description: 'Five-field cron expression or @daily-style nickname.' }),
      timezone: t.arg.string({ description: 'IANA time zone. Default "UTC".' }),
      from: t.arg({ type: DateTimeScalar, description: 'Start after this instant, 1970-01-01T00:00:00Z or later. Default now.' }),
      count: t.arg.int({ description: 'How many fire times, 1 to 100. Default 5.' }),
    },
    resolve: (_root, args, ctx) => ctx.service.cronPreview(ctx.actor, args),
  }),
}));

// eslint-disable-next-line max-lines-per-function -- a list of field declarations, one per mutation, each a line or two of resolver
builder.mutationFields((t) => ({
  createJob: t.field({
    type: CreateJobPayloadRef,
    description:
      'Creates a job with its first execution (or, for CRON, its schedule) in one transaction. ' +
      'Errors: VALIDATION_FAILED, NOT_FOUND, ARCHIVED, INTERNAL_ENDPOINT, CONFLICT (idempotency key reused with a different request), ' +
      'LOCK_HELD (another pending or running execution holds its lock key).',
    args: { input: t.arg({ type: CreateJobInputRef, required: true, description: 'The job.', validate: createJobValidation }) },
    resolve: (_root, args, ctx) => ctx.service.createJob(ctx.actor, args.input as never),
  }),
  createJobs: t.field({
    type: CreateJobsPayloadRef,
    description:
      "Creates 1 to 1,000 jobs in one transaction, each by createJob's rules, all or nothing. " +
      "An item refused rolls every item back; the error is createJob's, naming the item (`extensions.index`; " +
      'validation paths under `jobs.<i>`). Errors: those of createJob.',
    args: { input: t.arg({ type: CreateJobsInputRef, required: true, description: 'The jobs.' }) },
    resolve: (_root, args, ctx) => ctx.service.createJobs(ctx.actor, args.input.jobs as never),
  }),
  updateJob: t.field({
    type: JobRef,
    description: 'Changes a job. RETIRED for a retired job; FORBIDDEN for an internal one.',
    args: { input: t.arg({ type: UpdateJobInputRef, required: true, description: 'The changes.', validate: updateJobValidation }) },
    resolve: (_root, args, ctx) => ctx.service.updateJob(ctx.actor, args.input as never),
  }),
  pauseJob: t.field({
    type: JobRef,
    description: 'Pauses a job. Idempotent. RETIRED for a retired job; FORBIDDEN for an internal one.',
    args: { id: t.arg.id({ required: true, description: 'The job to pause.' }) },
    resolve: (_root, args, ctx) => ctx.service.pauseJob(ctx.actor, id(args.id)),
  }),
  resumeJob: t.field({
    type: JobRef,
    description: 'Resumes a paused job; a cron schedule continues from now with no backlog. Idempotent.',
    args: { id: t.arg.id({ required: true, description: 'The job to resume.' }) },
    resolve: (_root, args, ctx) => ctx.service.resumeJob(ctx.actor, id(args.id)),
  }),
  cancelJob: t.field({
    type: CancelJobPayloadRef,
    description:
      'Cancels a job: retires it, cancels its pending executions and stops its schedule, in one transaction. ' +
      'RETIRED when already retired; FORBIDDEN for an internal job.',
    args: { id: t.arg.id({ required: true, description: 'The job to cancel.' }) },
    resolve: (_root, args, ctx) => ctx.service.cancelJob(ctx.actor, id(args.id)),
  }),
  triggerJob: t.field({
    type: TriggerJobPayloadRef,
    description:
      'Runs a job now, outside its schedule. CONFLICT while it is paused or has a live execution, unless `force`; ' +
      'RETIRED for a retired job; LOCK_HELD when its lock key is taken.',
    args: {
      input: t.arg({ type: TriggerJobInputRef, required: true, description: 'Which job, and how.', validate: triggerJobValidation }),
    },
    resolve: (_root, args, ctx) => ctx.service.triggerJob(ctx.actor, args.input as never),
  }),
  cancelExecution: t.field({
    type: ExecutionRef,
    description:
      'Cancels an execution: a pending one at once; a running one has its attempt aborted and ends CANCELLED when it returns. ' +
      'CONFLICT when it has already finished.',
    args: { id: t.arg.id({ required: true, description: 'The execution to cancel.' }) },
    resolve: (_root, args, ctx) => ctx.service.cancelExecution(ctx.actor, id(args.id)),
  }),
  retryExecution: t.field({
    type: ExecutionRef,
    description:
      'Re-drives a FAILED execution with a fresh attempt budget, due now. CONFLICT when it is not FAILED; ' +
      'RETIRED when its job was cancelled; LOCK_HELD when its lock key is held by another pending or running execution.',
    args: { id: t.arg.id({ required: true, description: 'The failed execution.' }) },
    resolve: (_root, args, ctx) => ctx.service.retryExecution(ctx.actor, id(args.id)),
  }),
  retryExecutions: t.field({
    type: BulkResultRef,
    description:
      'Re-drives the FAILED executions matching `filter` (the dead-letter view\'s "retry all"), newest first, each as retryExecution would. ' +
      'At most `limit` per call (default 100, at most 1000): call again while `more`. OPERATOR or ADMIN.',
    args: {
      filter: t.arg({
        type: ExecutionFilterInputRef,
        description:
          'Which executions; statuses other than FAILED in it are ignored. With `ids` and no status, every execution named is an item, whatever `limit`: one not FAILED is in `skipped` (CONFLICT), one the rest of the filter leaves out or that does not exist NOT_FOUND.',
      }),
      limit: t.arg.int({ description: 'Most executions to take, 1 to 1000. Default 100.' }),
    },
    resolve: (_root, args, ctx) => ctx.service.retryExecutions(ctx.actor, args as never),
  }),
  cancelExecutions: t.field({
    type: BulkResultRef,
    description:
      'Cancels the PENDING and RUNNING executions matching `filter`, each as cancelExecution would. At most `limit` per call (default 100, at most 1000). OPERATOR or ADMIN.',
    args: {
      filter: t.arg({
        type: ExecutionFilterInputRef,
        description:
          'Which executions; statuses other than PENDING and RUNNING in it are ignored. With `ids` and no status, every execution named is an item, whatever `limit`: one already finished is in `skipped` (CONFLICT), one the rest of the filter leaves out or that does not exist NOT_FOUND.',
      }),
      limit: t.arg.int({ description: 'Most executions to take, 1 to 1000. Default 100.' }),
    },
    resolve: (_root, args, ctx) => ctx.service.cancelExecutions(ctx.actor, args as never),
  }),
  pauseJobs: t.field({
    type: BulkResultRef,
    description: 'Pauses each job, as pauseJob would. 1 to 1000 ids; an id given more than once is one item. OPERATOR or ADMIN.',
    args: { ids: t.arg.idList({ required: true, description: 'The jobs.' }) },
    resolve: (_root, args, ctx) => ctx.service.pauseJobs(ctx.actor, args.ids.map(id)),
  }),
  cancelJobs: t.field({
    type: BulkResultRef,
    description:
      'Cancels each job, as cancelJob would: retired, its pending executions cancelled, its running ones asked to abort, its schedule stopped. ' +
      '1 to 1000 ids; an id given more than once is one item; a job cancelJob would refuse (RETIRED, FORBIDDEN, NOT_FOUND) is skipped with that code. OPERATOR or ADMIN.',
    args: { ids: t.arg.idList({ required: true, description: 'The jobs.' }) },
    resolve: (_root, args, ctx) => ctx.service.cancelJobs(ctx.actor, args.ids.map(id)),
  }),
  resumeJobs: t.field({
    type: BulkResultRef,
    description: 'Resumes each job, as resumeJob would. 1 to 1000 ids; an id given more than once is one item. OPERATOR or ADMIN.',
    args: { ids: t.arg.idList({ required: true, description: 'The jobs.' }) },
    resolve: (_root, args, ctx) => ctx.service.resumeJobs(ctx.actor, args.ids.map(id)),
  }),
}));
