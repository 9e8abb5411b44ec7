/**
 * Reading an execution's child jobs and how they stand. A child is created by createJob with
 * parentExecutionId (./../jobs/create.ts takes its turn against the parent's cancellation);
 * cancelling children with their parent is the database's (migration 000050). Reads only.
 */
import * as childrenRepo from '../../db/repositories/children.js';
import type { Actor } from '../kernel/actor.js';
import { isUuid } from '../../db/repositories/scope.js';
import { batchedFirstPages, batchedRead, perReader } from '../kernel/batched-reads.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { pageSchema, type PageInput } from '../kernel/inputs.js';
import { toJob, type Job } from '../kernel/models.js';
import { decodeCursor, pageSize, toConnection, type Connection } from '../kernel/pagination.js';

export type ChildProgress = childrenRepo.ChildCounts;

const NONE: ChildProgress = { total: 0, pending: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0 };

export function createChildReads(ctx: ServiceContext) {
  const { db } = ctx;
  // A list's rows read their children's counts together (../kernel/batched-reads.ts).
  const countsOf = batchedRead((ws, ids) => childrenRepo.childCountsOf(db, ws, ids), !ctx.outer);
  // And their first pages of children, from where the actor's lists read.
  const firstChildren = perReader(ctx.reader, (from) =>
    batchedFirstPages(
      (ws, ids, _args: null, limit) => childrenRepo.firstChildrenOf(from, ws, ids, limit),
      (row) => row.parent_execution_id!,
      undefined,
      !ctx.outer,
    ),
  );
  return {
    /** The child jobs of an execution, in id order. */
    async executionChildren(actor: Actor, executionId: string, rawPage: PageInput = {}): Promise<Connection<Job>> {
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      // A first page is read with the other executions' on the same page of executions.
      if (!page.after && isUuid(executionId))
        return toConnection(await firstChildren(actor)(actor.workspaceId, executionId, null, size).rows, size, toJob);
      const afterId = page.after ? decodeCursor(page.after) : undefined;
      const rows = await childrenRepo.childrenOf(ctx.reader(actor), actor.workspaceId, executionId, { limit: size + 1, afterId });
      return toConnection(rows, size, toJob);
    },

    /** How an execution's children stand, by their scheduled executions' status (all zero without children). */
    async childProgress(actor: Actor, executionId: string): Promise<ChildProgress> {
      return (await countsOf(actor.workspaceId, executionId)) ?? NONE;
    },
  };
}
