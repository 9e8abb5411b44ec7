/**
 * The one Pothos builder. It registers plugins and the root types and defines nothing else.
 */
import SchemaBuilder from '@pothos/core';
import ZodPlugin from '@pothos/plugin-zod';
import type { Actor } from '../service/actor.js';
import { ValidationError } from '../service/errors.js';
import type { JobService } from '../service/index.js';

export interface GraphQLContext {
  actor: Actor;
  service: JobService;
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
  plugins: [ZodPlugin],
  defaultFieldNullability: false,
  zod: {
    // The same error a library caller gets from the service: VALIDATION_FAILED with paths.
    validationError: (zodError) => ValidationError.fromZod(zodError),
  },
});

builder.queryType({ description: 'Read the workspace: endpoints, payload specs, configs, jobs and executions.' });
builder.mutationType({ description: 'Change the workspace. Every mutation is one transaction: it fully happens or not at all.' });
