import { builder } from '../schema/builder.js';
import { pageArgs } from '../schema/common.js';
import {
  BatchConnectionRef,
  BatchRef,
  BatchStateEnum,
  CancelBatchPayloadRef,
  CreateBatchInputRef,
  CreateBatchPayloadRef,
} from '../schema/batch.js';

builder.queryFields((t) => ({
  batch: t.field({
    type: BatchRef,
    description: 'One batch. NOT_FOUND when no batch of your workspace has this id.',
    args: { id: t.arg.id({ required: true, description: 'The batch id.' }) },
    resolve: (_root, args, ctx) => ctx.service.batch(ctx.actor, String(args.id)),
  }),
  batches: t.field({
    type: BatchConnectionRef,
    description: 'Batches of the workspace, newest first; `state` narrows them.',
    args: { ...pageArgs(t.arg), state: t.arg({ type: BatchStateEnum, description: 'Only batches that stand so; omit it for all.' }) },
    resolve: (_root, { state, ...page }, ctx) => ctx.service.batches(ctx.actor, page, state ?? undefined),
  }),
}));

builder.mutationFields((t) => ({
  createBatch: t.field({
    type: CreateBatchPayloadRef,
    description:
      'Creates a batch, its onComplete job and its members in one transaction, all or nothing (OPERATOR). ' +
      "Errors: VALIDATION_FAILED (paths under jobs.<i> or onComplete), and createJob's errors naming the job.",
    args: { input: t.arg({ type: CreateBatchInputRef, required: true, description: 'The batch.' }) },
    resolve: (_root, { input }, ctx) => ctx.service.createBatch(ctx.actor, input as never),
  }),
  closeBatch: t.field({
    type: BatchRef,
    description:
      'Closes a batch: no member can be added any more; once every member has ended it completes and its onComplete job starts (at once, if they all have). Idempotent (OPERATOR; an OPERATOR key only a batch it created). Errors: NOT_FOUND, FORBIDDEN.',
    args: { id: t.arg.id({ required: true, description: 'The batch.' }) },
    resolve: (_root, args, ctx) => ctx.service.closeBatch(ctx.actor, String(args.id)),
  }),
  cancelBatch: t.field({
    type: CancelBatchPayloadRef,
    description:
      'Cancels a batch (OPERATOR): closes it, cancels its onComplete job (nothing fans in), then cancels its members that have not ended, as cancelJob would (pending ones at once, running ones asked to abort); they count as cancelled. Members that ended stay as they ended. An OPERATOR key may cancel only a batch it created. Errors: NOT_FOUND, FORBIDDEN.',
    args: { id: t.arg.id({ required: true, description: 'The batch.' }) },
    resolve: (_root, args, ctx) => ctx.service.cancelBatch(ctx.actor, String(args.id)),
  }),
}));
