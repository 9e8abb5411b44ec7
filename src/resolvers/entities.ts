/**
 * Federation entities: a router resolves a Job, Execution, Run or Endpoint another subgraph
 * refers to by its `id`, through `_entities`, as the caller (the router passes the caller's key on;
 * every request here is authenticated as any other). Each reference is the service's own read,
 * with its workspace scope and batching (a page of references is one query per type): a
 * reference to an object of another workspace, or to nothing, resolves to null, exactly as an id
 * of nothing does, so a reference tells its sender nothing it could not learn from a made-up id.
 */
import { builder } from '../schema/builder.js';
import { EndpointRef } from '../schema/endpoint.js';
import { ExecutionRef } from '../schema/execution.js';
import { JobRef } from '../schema/job.js';
import { RunRef } from '../schema/run.js';
import { NotFoundError } from '../service/kernel/errors.js';

/** null for NOT_FOUND (another workspace's id, or nobody's); any other error stays an error. */
async function orNull<T>(read: Promise<T>): Promise<T | null> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof NotFoundError) return null;
    throw error;
  }
}

const byId = builder.selection<{ id: string }>('id');

builder.asEntity(JobRef, { key: byId, resolveReference: (ref, ctx) => orNull(ctx.service.job(ctx.actor, String(ref.id))) });
builder.asEntity(ExecutionRef, { key: byId, resolveReference: (ref, ctx) => orNull(ctx.service.execution(ctx.actor, String(ref.id))) });
builder.asEntity(RunRef, { key: byId, resolveReference: (ref, ctx) => orNull(ctx.service.run(ctx.actor, String(ref.id))) });
builder.asEntity(EndpointRef, {
  key: byId,
  resolveReference: (ref, ctx) => orNull(ctx.service.endpoint(ctx.actor, { id: String(ref.id) })),
});
