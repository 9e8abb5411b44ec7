import { builder } from '../schema/builder.js';
import { pageArgs } from '../schema/common.js';
import { RunConnectionRef, RunRef, RunStatusEnum, TriggerRunInputRef, TriggerRunPayloadRef, triggerRunValidation } from '../schema/run.js';

/** The filters both run lists take. */
function runFilterArgs(arg: Parameters<typeof pageArgs>[0]) {
  return {
    name: arg.string({ description: 'Only runs of this handler.' }),
    status: arg({ type: RunStatusEnum, description: 'Only runs in this status.' }),
  };
}

builder.queryFields((t) => ({
  runConnection: t.field({
    type: RunConnectionRef,
    description: 'Recoverable runs of the workspace, newest first, by handler name and/or status.',
    args: { ...pageArgs(t.arg), ...runFilterArgs(t.arg) },
    resolve: (_root, { name, status, ...page }, ctx) => ctx.service.runConnection(ctx.actor, { name, status }, page),
  }),
  runs: t.field({
    type: [RunRef],
    description: 'The newest 100 recoverable runs, by handler name and/or status.',
    deprecationReason: 'Use runConnection: it pages past the newest 100.',
    args: runFilterArgs(t.arg),
    resolve: (_root, args, ctx) => ctx.service.runs(ctx.actor, args),
  }),
  run: t.field({
    type: RunRef,
    description: 'One run. NOT_FOUND when no run of your workspace has this id.',
    args: { id: t.arg.id({ required: true, description: 'The run id.' }) },
    resolve: (_root, args, ctx) => ctx.service.run(ctx.actor, String(args.id)),
  }),
}));

builder.mutationFields((t) => ({
  triggerRun: t.field({
    type: TriggerRunPayloadRef,
    description:
      'Runs a recoverable handler, idempotently: returns the active run, resumes a paused one, or starts a fresh one. ' +
      'NOT_FOUND (`extensions.reason: NO_LIVE_WORKER`) when no live worker has registered the handler, unless `force`.',
    args: { input: t.arg({ type: TriggerRunInputRef, required: true, description: 'Which handler.', validate: triggerRunValidation }) },
    resolve: (_root, args, ctx) => ctx.service.triggerRun(ctx.actor, args.input as never),
  }),
  cancelRun: t.field({
    type: RunRef,
    description: 'Asks a running run to stop at its next safe boundary; it becomes PAUSED and can be resumed. CONFLICT when finished.',
    args: { id: t.arg.id({ required: true, description: 'The run to cancel.' }) },
    resolve: (_root, args, ctx) => ctx.service.cancelRun(ctx.actor, String(args.id)),
  }),
}));
