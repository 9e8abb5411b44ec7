/**
 * The one Pothos builder. It registers plugins and the root types and defines nothing else; the
 * relay plugin's options below say how its shared types (Node, PageInfo, every connection's and
 * edge's common fields, `node(id:)`) read.
 */
import SchemaBuilder, { brandWithType } from '@pothos/core';
import DirectivesPlugin from '@pothos/plugin-directives';
import FederationPlugin from '@pothos/plugin-federation';
import RelayPlugin from '@pothos/plugin-relay';
import ZodPlugin from '@pothos/plugin-zod';
import type { Logger } from '../log.js';
import type { Actor } from '../service/kernel/actor.js';
import { ValidationError } from '../service/kernel/errors.js';
import type { JobService } from '../service/index.js';
import type { LiveFeeds } from '../subscriptions/live-feeds.js';

export interface GraphQLContext {
  actor: Actor;
  service: JobService;
  /** Live subscriptions (the gateway's hub). */
  live: LiveFeeds;
  /** This request's id (x-request-id), also in its errors' extensions and its log lines. */
  requestId: string;
  /** The process's logger with this request's id on every line. */
  log: Logger;
}

export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  DefaultFieldNullability: false;
  DefaultInputFieldRequiredness: false;
  Scalars: {
    DateTime: { Input: Date; Output: Date };
    JSON: { Input: unknown; Output: unknown };
  };
  // What a service page carries besides its edges and page info (../service/kernel/pagination.ts):
  // the count that `totalCount` and `totalCountCapped` read.
  Connection: { count?: () => Promise<number> };
}>({
  // Federation last: it reads the types the others have finished (./federation.ts).
  plugins: [ZodPlugin, DirectivesPlugin, RelayPlugin, FederationPlugin],
  defaultFieldNullability: false,
  relay: {
    // Ids are the rows' own (UUIDs, unique across every table; sealed ids for audit entries and
    // findings), as they were before the plugin and as clients and stored references hold them:
    // no type prefix, no base64. `node(id:)` learns the type from the service, not from the id.
    encodeGlobalID: (_typename, id) => String(id),
    decodeGlobalID: (id) => ({ typename: 'Node', id }),
    clientMutationId: 'omit',
    cursorType: 'String',
    idFieldOptions: { description: 'Globally unique identifier.' },
    nodeTypeOptions: { description: 'An object with a globally unique id: `node(id:)` fetches it again by that id alone.' },
    nodeQueryOptions: {
      description:
        "Any object of your workspace by its id alone (Relay's refetch): a Job, Execution, Endpoint, PayloadSpec, Config, Run, Batch, Finding, ApiKey or AuditEntry (these two ADMIN only: FORBIDDEN otherwise), or your Workspace. null when no such object is yours.",
      args: { id: { description: 'The id.' } },
      // The service finds which table holds the id; the brand (the type's name, which the plugin's
      // resolveType looks up) tells the Node interface which object it is. Types are not named in
      // this builder's generics, hence the cast.
      resolve: async (_root, args, ctx) => {
        const found = await ctx.service.node(ctx.actor, args.id.id);
        if (!found) return null;
        brandWithType(found.value, found.kind as never);
        return found.value;
      },
    },
    // No `nodes(ids:)`: the schema never had it (adding a root field is a schema change of its own).
    nodesQueryOptions: false,
    pageInfoTypeOptions: { description: 'Where a page sits in its list. Pages are read forwards with `first` and `after`.' },
    hasNextPageFieldOptions: { description: 'Whether more items follow this page.' },
    hasPreviousPageFieldOptions: { description: 'Always false: lists are read forwards only (keyset pagination).' },
    startCursorFieldOptions: { description: 'Cursor of the first item of the page.' },
    endCursorFieldOptions: { description: 'Cursor of the last item of the page; pass it as `after` to read the next page.' },
    pageInfoFieldOptions: { description: 'Whether there is a next page, and the cursor to get it.' },
    edgesFieldOptions: { description: 'The items of this page, each with its cursor.' },
    nodesOnConnection: { description: 'The items of this page, without cursors.' },
    cursorFieldOptions: { description: 'Opaque cursor of this item; pass it as `after` to continue after it.' },
  },
  zod: {
    // The same error a library caller gets from the service: VALIDATION_FAILED with paths
    // relative to the service input. A mutation's single `input` argument *is* that input, so
    // its name is dropped from the path: a bad `input.cron.timezone` reads ["cron", "timezone"]
    // whether the plugin or the service caught it.
    validationError: (zodError, args) => {
      const single = Object.keys(args).length === 1 && 'input' in args;
      const error = ValidationError.fromZod(zodError);
      if (!single) return error;
      return new ValidationError(error.issues.map((i) => ({ ...i, path: i.path[0] === 'input' ? i.path.slice(1) : i.path })));
    },
  },
});

builder.queryType({ description: 'Read the workspace: endpoints, payload specs, configs, jobs and executions.' });
builder.mutationType({ description: 'Change the workspace. Every mutation is one transaction: it fully happens or not at all.' });
builder.subscriptionType({
  description:
    'Watch the workspace live: run progress and findings, execution, job and run events. Over graphql-ws on /graphql, or Server-Sent Events.',
});
