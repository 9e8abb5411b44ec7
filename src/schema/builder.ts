/**
 * The one Pothos builder. It registers plugins and the root types and defines nothing else.
 */
import SchemaBuilder from '@pothos/core';
import DirectivesPlugin from '@pothos/plugin-directives';
import FederationPlugin from '@pothos/plugin-federation';
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
}>({
  // Federation last: it reads the types the others have finished (./federation.ts).
  plugins: [ZodPlugin, DirectivesPlugin, FederationPlugin],
  defaultFieldNullability: false,
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
