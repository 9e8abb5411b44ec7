/**
 * Assembles the schema: area type files, then the root fields in src/resolvers. This is the only
 * module under src/schema that imports src/resolvers.
 */
import './workspace.js';
import './specs-and-configs.js';
import './endpoint.js';
import './job.js';
import './job-dependencies.js';
import './batch.js';
import './children.js';
import './execution.js';
import './access.js';
import './run.js';
import './live.js';
import './handler.js';
import './errors.js';
import './alert.js';
import './alert-triage.js';
import './viewer.js';
import './stats.js';
import './retention.js';
import './permissions.js';
import '../resolvers/workspace.js';
import '../resolvers/specs-and-configs.js';
import '../resolvers/endpoints.js';
import '../resolvers/jobs.js';
import '../resolvers/batches.js';
import '../resolvers/access.js';
import '../resolvers/runs.js';
import '../resolvers/live.js';
import '../resolvers/handlers.js';
import '../resolvers/alerts.js';
import '../resolvers/alert-triage.js';
import '../resolvers/viewer.js';
import '../resolvers/stats.js';
import '../resolvers/retention.js';
import '../resolvers/entities.js';
import { printSubgraphSchema } from '@apollo/subgraph';
import { GraphQLSchema, lexicographicSortSchema, printSchema } from 'graphql';
import { builder } from './builder.js';
import { describeFederation, FEDERATION_LINK, withoutFederation } from './federation.js';
import { boxJsonOutputs } from './json-output.js';

/** What introspection's `__schema { description }` and the SDL's schema definition say of the whole API. */
const DESCRIPTION =
  'jobgate: register endpoints, create jobs (immediate, delayed, cron), watch their executions run, live. Every object of your workspace is a Node; errors carry `extensions.code`, one of ErrorCode.';

/** The served schema: the API, plus federation's `_service` and `_entities` (./federation.ts). */
export const schema: GraphQLSchema = boxJsonOutputs(
  described(describeFederation(builder.toSubGraphSchema({ sortSchema: true, linkUrl: FEDERATION_LINK }))),
);

function described(built: GraphQLSchema): GraphQLSchema {
  return new GraphQLSchema({ ...built.toConfig(), description: DESCRIPTION });
}

/** The SDL as checked in to `schema.graphql`: the public API, without federation's plumbing. */
export function printSdl(): string {
  return printSchema(lexicographicSortSchema(withoutFederation(schema))) + '\n';
}

/** The subgraph SDL a router composes (as `_service { sdl }` serves it), for composing without a running gateway. */
export function printSubgraphSdl(): string {
  return printSubgraphSchema(schema) + '\n';
}
