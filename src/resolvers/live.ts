import { BatchRef } from '../schema/batch.js';
import { EndpointTypeEnum } from '../schema/endpoint.js';
import { builder } from '../schema/builder.js';
import { ExecutionEventRef, JobEventRef, RunEventRef } from '../schema/live.js';
import { FindingRef, RunRef } from '../schema/run.js';

const AFTER =
  'The `cursor` of the last event you received: the stream replays what came after it, then goes live. Omit to start from now ("0" replays everything kept). A cursor whose next events are past the retention window is refused with CURSOR_EXPIRED.';

builder.subscriptionFields((t) => ({
  runProgress: t.field({
    type: RunRef,
    description:
      "A run's state at once, then after each checkpoint and status change; completes when the run is COMPLETED or FAILED. Bursts may coalesce, the latest state always arrives.",
    args: { runId: t.arg.id({ required: true, description: 'The run to watch.' }) },
    subscribe: (_root, args, ctx) => ctx.live.runProgress(ctx.actor, String(args.runId)),
    resolve: (run) => run,
  }),
  batchProgress: t.field({
    type: BatchRef,
    description:
      "A batch's counts and state at once, then each time they change: a member added or counted as it ends (succeeded, failed, cancelled, pending), the batch closed, the batch completed (completedAt set); completes once it has completed. Bursts may coalesce, the latest state always arrives. An id of another workspace is NOT_FOUND.",
    args: { batchId: t.arg.id({ required: true, description: 'The batch to watch.' }) },
    subscribe: (_root, args, ctx) => ctx.live.batchProgress(ctx.actor, String(args.batchId)),
    resolve: (batch) => batch,
  }),
  runFindings: t.field({
    type: FindingRef,
    description:
      "A run's findings in the order recorded: those after `after` first, then new ones as they are recorded. No gap and no duplicate across that boundary or across reconnects.",
    args: {
      runId: t.arg.id({ required: true, description: 'The run whose findings to stream.' }),
      after: t.arg.string({ description: 'The `id` of the last finding you received; omit to start from now ("0" replays all).' }),
    },
    subscribe: (_root, args, ctx) => ctx.live.runFindings(ctx.actor, String(args.runId), args.after),
    resolve: (finding) => finding,
  }),
  executionUpdates: t.field({
    type: ExecutionEventRef,
    description: 'Execution state changes in your workspace, optionally of one job, one endpoint or one type of endpoint, in order.',
    args: {
      jobId: t.arg.id({ description: 'Only executions of this job.' }),
      endpointId: t.arg.id({ description: 'Only executions delivered to this endpoint.' }),
      endpointType: t.arg({
        type: EndpointTypeEnum,
        description:
          "Only executions on endpoints of this type: USER for your own work, INTERNAL for jobgate's (alert evaluations and deliveries, the reaper, retention), as `executions(filter: {endpointType:})` reads them. Default: both.",
      }),
      after: t.arg.string({ description: AFTER }),
    },
    subscribe: (_root, args, ctx) =>
      ctx.live.executionUpdates(ctx.actor, {
        jobId: args.jobId == null ? null : String(args.jobId),
        endpointId: args.endpointId == null ? null : String(args.endpointId),
        endpointType: args.endpointType,
        after: args.after,
      }),
    resolve: (event) => event,
  }),
  jobEvents: t.field({
    type: JobEventRef,
    description: 'Jobs created, paused, resumed or retired in your workspace, optionally of one job, in order.',
    args: { jobId: t.arg.id({ description: 'Only this job.' }), after: t.arg.string({ description: AFTER }) },
    subscribe: (_root, args, ctx) =>
      ctx.live.jobEvents(ctx.actor, { jobId: args.jobId == null ? null : String(args.jobId), after: args.after }),
    resolve: (event) => event,
  }),
  runEvents: t.field({
    type: RunEventRef,
    description: 'Recoverable runs started or changing status in your workspace, optionally of one handler, in order.',
    args: { name: t.arg.string({ description: 'Only runs of this recoverable handler.' }), after: t.arg.string({ description: AFTER }) },
    subscribe: (_root, args, ctx) => ctx.live.runEvents(ctx.actor, { name: args.name, after: args.after }),
    resolve: (event) => event,
  }),
}));
