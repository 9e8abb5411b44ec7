/** Batches (fan-out and fan-in): the Batch type, its inputs and payloads, and Job.batch. */
import type { Batch } from '../service/kernel/models.js';
import type { CancelBatchResult, CreateBatchResult } from '../service/workflows/batches.js';
import { builder } from './builder.js';
import { connectionOf, DateTimeScalar, nodeId, pageArgs } from './common.js';
import { CreateJobInputRef, JobConnectionRef, JobRef } from './job.js';
import { PrerequisiteOutcomeEnum } from './prerequisites.js';

export const BatchStateEnum = builder.enumType('BatchState', {
  description: 'Where a batch stands: taking members, closed and waiting for them to end, or completed.',
  values: {
    OPEN: { description: 'Members may still be added; it completes only once closed.' },
    CLOSED: { description: 'Closed (no more members), not completed: some member has not ended yet.' },
    COMPLETED: { description: 'Closed and every member ended: its onComplete job was released (completedAt is set).' },
  } as const,
});

export const BatchRef = builder.nodeRef<Batch>('Batch', { id: nodeId() }).implement({
  description:
    'Jobs created together (fan-out), or added while the batch is open, and one onComplete job that runs once every member has ended (fan-in), with the counts below in its input under `batch`. The counts are live: batchProgress streams them as they change.',
  fields: (t) => ({
    key: t.exposeString('key', {
      nullable: true,
      description: 'The key that makes createBatch idempotent in the workspace; null when none was given.',
    }),
    name: t.exposeString('name', { nullable: true, description: 'Optional display name.' }),
    open: t.exposeBoolean('open', {
      description: 'Members may still be added (createJob with batchId); it completes only once closed (closeBatch).',
    }),
    total: t.exposeInt('total', { description: 'Members, all told.' }),
    succeeded: t.exposeInt('succeeded', { description: 'Members whose execution succeeded.' }),
    failed: t.exposeInt('failed', { description: 'Members whose execution failed (every attempt).' }),
    cancelled: t.exposeInt('cancelled', { description: 'Members whose execution was cancelled.' }),
    pending: t.int({
      description: 'Members that have not ended: total - succeeded - failed - cancelled.',
      resolve: (b) => b.total - b.succeeded - b.failed - b.cancelled,
    }),
    completedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When the batch completed (closed, every member ended) and its onComplete job was released; null before.',
      resolve: (b) => b.completedAt,
    }),
    onComplete: t.field({
      type: JobRef,
      nullable: true,
      description: 'The job that runs once the batch completes (created with the batch, waiting until then); null when none was given.',
      resolve: (b, _args, ctx) => (b.onCompleteJobId ? ctx.service.job(ctx.actor, b.onCompleteJobId) : null),
    }),
    jobs: t.field({
      type: JobConnectionRef,
      description: 'The members, in id order; `outcome` narrows them to those that ended so.',
      args: {
        ...pageArgs(t.arg),
        outcome: t.arg({ type: PrerequisiteOutcomeEnum, description: 'Only members that ended so.' }),
        ended: t.arg.boolean({ description: 'false: only members that have not ended.' }),
      },
      resolve: (b, { outcome, ended, ...page }, ctx) =>
        ctx.service.batchJobs(ctx.actor, b.id, page, ended === false ? null : (outcome ?? undefined)),
    }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When the batch was created.', resolve: (b) => b.createdAt }),
    updatedAt: t.field({ type: DateTimeScalar, description: 'When its counts or state last changed.', resolve: (b) => b.updatedAt }),
  }),
});

export const BatchConnectionRef = connectionOf('Batch', BatchRef, 'batch');

builder.objectFields(JobRef, (t) => ({
  batch: t.field({
    type: BatchRef,
    nullable: true,
    description: 'The batch this job is a member of; null for a job in none (an onComplete job is not a member).',
    resolve: (j, _args, ctx) => (j.batchId ? ctx.service.batch(ctx.actor, j.batchId) : null),
  }),
  completesBatch: t.field({
    type: BatchRef,
    nullable: true,
    description:
      "The batch whose onComplete job this job is: it runs once that batch completes, with the batch's counts in its input. null for any other job (members included).",
    resolve: (j, _args, ctx) => ctx.service.completesBatch(ctx.actor, j.id),
  }),
  batchOutcome: t.field({
    type: PrerequisiteOutcomeEnum,
    nullable: true,
    description:
      'A batch member: how it ended, as counted into its batch (once: a later re-drive does not count again); null before, or when not a member.',
    resolve: (j, _args, ctx) => (j.batchId ? ctx.service.batchOutcome(ctx.actor, j.id) : null),
  }),
}));

export const CreateBatchInputRef = builder.inputType('CreateBatchInput', {
  description: 'A batch: its members, created as createJob would, and the job to run once they all ended.',
  fields: (t) => ({
    key: t.string({
      description:
        'Makes createBatch idempotent in the workspace: a repeat with the same key returns the batch it made and creates nothing. Omit it for none.',
    }),
    name: t.string({ description: 'Optional display name, 1 to 200 characters.' }),
    jobs: t.field({
      type: [CreateJobInputRef],
      description:
        '0 to 1,000 IMMEDIATE or DELAYED jobs, each as createJob takes it (without batchId). More are added with createJob batchId while the batch is open.',
    }),
    onComplete: t.field({
      type: CreateJobInputRef,
      description:
        'An IMMEDIATE or DELAYED job to run once every member has ended, whatever their outcomes; its input (an object) gets the counts under `batch` { id total succeeded failed cancelled }. Created now, PENDING with waitingFor PREREQUISITES until then.',
    }),
    open: t.boolean({ description: 'true: members may be added until closeBatch. Default false: closed at once.' }),
  }),
});

export const CreateBatchPayloadRef = builder.objectRef<CreateBatchResult>('CreateBatchPayload').implement({
  description: 'The result of createBatch.',
  fields: (t) => ({
    batch: t.field({ type: BatchRef, description: 'The batch: new, or the one its key names.', resolve: (r) => r.batch }),
    created: t.exposeBoolean('created', { description: 'false when the key named a batch made before: nothing was created.' }),
  }),
});

export const CancelBatchPayloadRef = builder.objectRef<CancelBatchResult>('CancelBatchPayload').implement({
  description: 'The result of cancelBatch.',
  fields: (t) => ({
    batch: t.field({ type: BatchRef, description: 'The batch, closed, its cancelled members counted.', resolve: (r) => r.batch }),
    cancelledJobs: t.exposeInt('cancelledJobs', { description: 'Members cancelled by this call (those that had not ended).' }),
  }),
});
