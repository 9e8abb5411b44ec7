/** Child jobs: an execution's children and how they stand, and a job's parent execution. */
import type { ChildProgress } from '../service/workflows/children.js';
import { builder } from './builder.js';
import { pageArgs } from './common.js';
import { ExecutionRef } from './execution.js';
import { JobConnectionRef, JobRef } from './job.js';

export const ChildProgressRef = builder.objectRef<ChildProgress>('ChildProgress').implement({
  description: "How an execution's child jobs stand, by their executions' status: the parent's progress is its children's.",
  fields: (t) => ({
    total: t.exposeInt('total', { description: 'Child jobs, all told.' }),
    pending: t.exposeInt('pending', { description: 'Children waiting to start (or to be retried).' }),
    running: t.exposeInt('running', { description: 'Children running now.' }),
    succeeded: t.exposeInt('succeeded', { description: 'Children that succeeded.' }),
    failed: t.exposeInt('failed', { description: 'Children that failed (every attempt).' }),
    cancelled: t.exposeInt('cancelled', { description: 'Children cancelled (with their parent, or one by one).' }),
  }),
});

builder.objectFields(ExecutionRef, (t) => ({
  children: t.field({
    type: JobConnectionRef,
    description:
      'The jobs created as children of this execution (createJob parentExecutionId, typically by its handler in its fenced transaction), in id order. Cancelling this execution cancels those not ended.',
    args: { ...pageArgs(t.arg) },
    resolve: (e, page, ctx) => ctx.service.executionChildren(ctx.actor, e.id, page),
  }),
  childProgress: t.field({
    type: ChildProgressRef,
    description: "How this execution's children stand (all zero when it has none).",
    resolve: (e, _args, ctx) => ctx.service.childProgress(ctx.actor, e.id),
  }),
}));

builder.objectFields(JobRef, (t) => ({
  parentExecution: t.field({
    type: ExecutionRef,
    nullable: true,
    description: 'The execution this job is a child of; null for a job that is no child.',
    resolve: (j, _args, ctx) => (j.parentExecutionId ? ctx.service.execution(ctx.actor, j.parentExecutionId) : null),
  }),
}));
