/**
 * Reading a job's prerequisites (createJob's dependsOn) and dependents. Writing them is
 * createJob's (./create.ts); settling them is the database's (migration 000047). Reads only; any
 * authenticated caller.
 */
import * as dependenciesRepo from '../../db/repositories/dependencies.js';
import * as jobsRepo from '../../db/repositories/jobs.js';
import type { Actor } from '../kernel/actor.js';
import { isUuid } from '../../db/repositories/scope.js';
import { batchedFirstPages, batchedRead, byId } from '../kernel/batched-reads.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { pageSchema, type PageInput } from '../kernel/inputs.js';
import { toJob, toJobDependency, type Job, type JobDependency } from '../kernel/models.js';
import { decodeCursor, pageSize, toConnection, type Connection } from '../kernel/pagination.js';

export function createDependencyReads(ctx: ServiceContext) {
  const { db } = ctx;
  // A list's rows read their prerequisites together (../kernel/batched-reads.ts).
  const prerequisitesOf = batchedRead(async (ws, ids) => {
    const byJob = new Map<string, JobDependency[]>();
    for (const row of await dependenciesRepo.dependenciesOf(db, ws, ids))
      byJob.set(row.job_id, [...(byJob.get(row.job_id) ?? []), toJobDependency(row)]);
    return byJob;
  }, !ctx.outer);
  // And their first pages of dependents.
  const firstDependents = batchedFirstPages(
    (ws, ids, _args: null, limit) => dependenciesRepo.firstDependentsOf(db, ws, ids, limit),
    (row) => row.prerequisite_id,
    undefined,
    !ctx.outer,
  );
  return {
    /** A job's prerequisites (createJob's dependsOn), in the order they were named, each with its outcome once it has one. */
    async jobDependencies(actor: Actor, jobId: string): Promise<JobDependency[]> {
      return (await prerequisitesOf(actor.workspaceId, jobId)) ?? [];
    },

    /** The jobs that name `jobId` among their prerequisites, a page in id order. */
    async jobDependents(actor: Actor, jobId: string, rawPage: PageInput = {}): Promise<Connection<Job>> {
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      // A first page is read with the other jobs' on the same page of jobs.
      if (!page.after && isUuid(jobId)) return toConnection(await firstDependents(actor.workspaceId, jobId, null, size).rows, size, toJob);
      const afterJobId = page.after ? decodeCursor(page.after) : undefined;
      const edges = await dependenciesRepo.dependentsOf(db, actor.workspaceId, jobId, { limit: size + 1, afterJobId });
      const jobs = byId(
        await jobsRepo.findJobsByIds(
          db,
          actor.workspaceId,
          edges.map((e) => e.job_id),
        ),
      );
      const rows = edges.map((e) => jobs.get(e.job_id)).filter((j) => j !== undefined);
      return toConnection(rows, size, toJob);
    },
  };
}
