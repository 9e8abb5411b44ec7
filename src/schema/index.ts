/**
 * Assembles the schema: area type files, then the root fields in src/resolvers. This is the only
 * module under src/schema that imports src/resolvers.
 */
import './node.js';
import './workspace.js';
import './specs-and-configs.js';
import './endpoint.js';
import './job.js';
import './execution.js';
import './access.js';
import './run.js';
import './live.js';
import './handler.js';
import './errors.js';
import './alert.js';
import './viewer.js';
import './stats.js';
import './retention.js';
import './permissions.js';
import '../resolvers/workspace.js';
import '../resolvers/node.js';
import '../resolvers/specs-and-configs.js';
import '../resolvers/endpoints.js';
import '../resolvers/jobs.js';
import '../resolvers/access.js';
import '../resolvers/runs.js';
import '../resolvers/live.js';
import '../resolvers/handlers.js';
import '../resolvers/alerts.js';
import '../resolvers/viewer.js';
import '../resolvers/stats.js';
import '../resolvers/retention.js';
import { lexicographicSortSchema, printSchema, type GraphQLSchema } from 'graphql';
import { builder } from './builder.js';
import { boxJsonOutputs } from './json-output.js';

export const schema: GraphQLSchema = boxJsonOutputs(builder.toSchema({ sortSchema: true }));

/** The SDL as checked in to `schema.graphql`. */
export function printSdl(): string {
  return printSchema(lexicographicSortSchema(schema)) + '\n';
}
