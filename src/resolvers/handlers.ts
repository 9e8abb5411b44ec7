import { builder } from '../schema/builder.js';
import { pageArgs } from '../schema/common.js';
import {
  HandlerCatalogRef,
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
      'Runs an interval handler now (its next tick becomes due; with `force`, its handler is told to skip its own grace window). ' +
      'While a tick is running, `ifRunning` decides: CONFLICT (REFUSE), ALREADY_RUNNING with its start (SKIP), or one more tick right after it (QUEUE; the default with `force`). ' +
      "NOT_FOUND (`extensions.reason: NO_LIVE_WORKER`) when no live worker has it. With `wait`, answers with the tick's outcome once it has one (or when the wait runs out). " +
      'ADMIN only: interval handlers are installation-wide.',
    args: {
      input: t.arg({ type: TriggerHandlerInputRef, required: true, description: 'Which handler.', validate: triggerHandlerValidation }),
    },
    resolve: (_root, args, ctx) => ctx.service.triggerHandler(ctx.actor, args.input as never),
  }),
}));

builder.subscriptionFields((t) => ({
  handlerCatalog: t.field({
    type: HandlerCatalogRef,
    description:
      'The handler catalogue at once, then again each time it changes: a worker starts, stops or stops heartbeating (past its staleness window), ' +
      "an interval handler's tick is taken or its outcome recorded (counts, last outcome, next tick), a recoverable's schedule ticks, " +
      'or a run starts or changes status (last run). Each payload is the whole catalogue, as `handlerConnection` lists it, and readable as it is: by any key, ' +
      'with where workers run and handler error text for installation admins only, and the runs and schedules of your workspace. Bursts coalesce, the latest catalogue always arrives; ' +
      'one equal to the last is not sent again (heartbeat times alone do not count as a change). No cursor: subscribing again starts from the catalogue as it is then.',
    args: {
      kind: t.arg({ type: HandlerKindEnum, description: 'Only handlers of this kind.' }),
      name: t.arg.string({ description: 'Only the handler(s) with this name.' }),
    },
    subscribe: (_root, args, ctx) => ctx.live.handlerCatalog(ctx.actor, { kind: args.kind, name: args.name }),
    resolve: (handlers) => handlers,
  }),
}));
