import { builder } from '../schema/builder.js';
import { pageArgs } from '../schema/common.js';
import {
  EndpointConnectionRef,
  EndpointRef,
  registerEndpointValidation,
  RegisterEndpointInputRef,
  updateEndpointValidation,
  UpdateEndpointInputRef,
} from '../schema/endpoint.js';

builder.queryFields((t) => ({
  endpoints: t.field({
    type: EndpointConnectionRef,
    description: 'Endpoints of the workspace, newest first.',
    args: {
      ...pageArgs(t.arg),
      includeArchived: t.arg.boolean({ description: 'Include archived endpoints. Default false.' }),
      includeInternal: t.arg.boolean({ description: "Include jobgate's own INTERNAL endpoints. Default false." }),
    },
    resolve: (_root, { includeArchived, includeInternal, ...page }, ctx) =>
      ctx.service.endpoints(ctx.actor, page, { includeArchived: includeArchived ?? false, includeInternal: includeInternal ?? false }),
  }),
  endpoint: t.field({
    type: EndpointRef,
    description: 'One endpoint, by `id` or by `name` (exactly one). NOT_FOUND when your workspace has none such.',
    args: {
      id: t.arg.id({ description: 'The endpoint id (archived endpoints too).' }),
      name: t.arg.string({ description: 'The name of a live endpoint.' }),
    },
    resolve: (_root, args, ctx) => ctx.service.endpoint(ctx.actor, { id: args.id == null ? args.id : String(args.id), name: args.name }),
  }),
}));

builder.mutationFields((t) => ({
  registerEndpoint: t.field({
    type: EndpointRef,
    description: 'Registers an endpoint. CONFLICT when a live endpoint has the name.',
    args: {
      input: t.arg({ type: RegisterEndpointInputRef, required: true, description: 'The endpoint.', validate: registerEndpointValidation }),
    },
    resolve: (_root, args, ctx) => ctx.service.registerEndpoint(ctx.actor, args.input as never),
  }),
  updateEndpoint: t.field({
    type: EndpointRef,
    description: 'Changes an endpoint. FORBIDDEN for internal endpoints; ARCHIVED for archived ones.',
    args: {
      input: t.arg({ type: UpdateEndpointInputRef, required: true, description: 'The changes.', validate: updateEndpointValidation }),
    },
    resolve: (_root, args, ctx) => ctx.service.updateEndpoint(ctx.actor, args.input as never),
  }),
  pauseEndpoint: t.field({
    type: EndpointRef,
    description:
      'Pauses an endpoint: none of its executions starts, on any worker, until resumeEndpoint; attempts already running finish, new jobs are still accepted and wait in order. Holds across restarts. Idempotent. ARCHIVED for an archived endpoint; FORBIDDEN for internal ones.',
    args: { id: t.arg.id({ required: true, description: 'The endpoint to pause.' }) },
    resolve: (_root, args, ctx) => ctx.service.pauseEndpoint(ctx.actor, String(args.id)),
  }),
  resumeEndpoint: t.field({
    type: EndpointRef,
    description:
      'Resumes a paused endpoint: its due executions start in their order, within its concurrency limit. Also lifts a hold its target asked for with Retry-After (waitingFor ENDPOINT_RETRY_AFTER). Idempotent. ARCHIVED for an archived endpoint.',
    args: { id: t.arg.id({ required: true, description: 'The endpoint to resume.' }) },
    resolve: (_root, args, ctx) => ctx.service.resumeEndpoint(ctx.actor, String(args.id)),
  }),
  archiveEndpoint: t.field({
    type: EndpointRef,
    description: 'Archives an endpoint: it takes no new jobs and its name is free again. CONFLICT while it has jobs that are not retired.',
    args: { id: t.arg.id({ required: true, description: 'The endpoint to archive.' }) },
    resolve: (_root, args, ctx) => ctx.service.archiveEndpoint(ctx.actor, String(args.id)),
  }),
}));
