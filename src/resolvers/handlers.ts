import { builder } from '../schema/builder.js';
import { pageArgs } from '../schema/common.js';
import {
  HandlerConnectionRef,
  HandlerKindEnum,
  HandlerRef,
  TriggerHandlerInputRef,
  TriggerHandlerPayloadRef,
  triggerHandlerValidation,
} from '../schema/handler.js';

builder.queryFields((t) => ({
  handlerConnection: t.field({
    type: HandlerConnectionRef,
    description:
      'The catalogue of handlers registered by live workers (HANDLER, RECOVERABLE, INTERVAL), by kind, then name, a page at a time, with cadence, workers and last outcome. ' +
      "Installation-wide, readable by any key; recoverable runs and schedules shown are your workspace's.",
    args: {
      ...pageArgs(t.arg),
      kind: t.arg({ type: HandlerKindEnum, description: 'Only handlers of this kind.' }),
      name: t.arg.string({ description: 'Only the handler(s) with this name.' }),
    },
    resolve: (_root, { first, after, ...filter }, ctx) => ctx.service.handlerConnection(ctx.actor, filter, { first, after }),
  }),
  handlers: t.field({
    deprecationReason: 'Use handlerConnection: a Relay connection like every other list, with totalCount.',
    type: [HandlerRef],
    description:
      'The catalogue of handlers registered by live workers (HANDLER, RECOVERABLE, INTERVAL), by kind and name, with cadence, workers and last outcome. ' +
      "Installation-wide, readable by any key; recoverable runs and schedules shown are your workspace's.",
    args: {
      kind: t.arg({ type: HandlerKindEnum, description: 'Only handlers of this kind.' }),
      name: t.arg.string({ description: 'Only the handler(s) with this name.' }),
    },
    resolve: (_root, args, ctx) => ctx.service.handlers(ctx.actor, args),
  }),
}));

builder.mutationFields((t) => ({
  triggerHandler: t.field({
    type: TriggerHandlerPayloadRef,
    description:
      'Runs an interval handler now (its next tick becomes due). CONFLICT while a tick is running, unless `force`, which queues one more tick right after it. ' +
      "NOT_FOUND (`extensions.reason: NO_LIVE_WORKER`) when no live worker has it. With `wait`, answers with the tick's outcome once it has one (or when the wait runs out). " +
      'ADMIN only: interval handlers are installation-wide.',
    args: {
      input: t.arg({ type: TriggerHandlerInputRef, required: true, description: 'Which handler.', validate: triggerHandlerValidation }),
    },
    resolve: (_root, args, ctx) => ctx.service.triggerHandler(ctx.actor, args.input as never),
  }),
}));
