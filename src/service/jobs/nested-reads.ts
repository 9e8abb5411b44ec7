/**
 * The connections each row of a page holds: a job's executions (Job.executions) and an endpoint's
 * jobs (Endpoint.jobs). A page of 50 jobs, each with `executions(first: 5)`, asked two list
 * queries per job (the rows and, for totalCount, the count); now the first pages of every row are
 * read together, one statement for the rows and one for the counts (../kernel/batched-reads.ts).
 * A later page (`after`) is read as the root list reads it, one parent at a time. Both read where
 * the root lists read for the actor (ServiceContext.reader).
 */
import * as executionList from '../../db/repositories/execution-list.js';
import * as jobsRepo from '../../db/repositories/jobs.js';
import { isUuid, type Executor } from '../../db/repositories/scope.js';
import type { Actor } from '../kernel/actor.js';
import { batchedFirstPages, perReader, type FirstPage } from '../kernel/batched-reads.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import {
  executionFilterSchema,
  jobFilterSchema,
  pageSchema,
  type ExecutionFilter,
  type JobFilter,
  type PageInput,
} from '../kernel/inputs.js';
import { toExecution, toJob, type Execution, type Job } from '../kernel/models.js';
import { COUNT_LIMIT, pageSize, toConnection, type Connection } from '../kernel/pagination.js';

/** What a job's executions may be narrowed by, nested. */
export type JobExecutionsFilter = Pick<ExecutionFilter, 'status'>;
/** What an endpoint's jobs may be narrowed by, nested. */
export type EndpointJobsFilter = Pick<JobFilter, 'status' | 'kind' | 'includeInternal'>;

/** The root lists, for pages after the first. */
interface Lists {
  jobs(actor: Actor, filter: JobFilter, page: PageInput): Promise<Connection<Job>>;
  executions(actor: Actor, filter: ExecutionFilter, page: PageInput): Promise<Connection<Execution>>;
}

/** The first pages of both connections, read from `from` (../kernel/batched-reads.ts). */
function firstPagesFrom(from: Executor, batch: boolean) {
  return {
    executionsOfJob: batchedFirstPages(
      (ws, jobIds, filter: JobExecutionsFilter, limit) => executionList.firstExecutionsOfJobs(from, ws, jobIds, filter, limit),
      (row) => row.job_id,
      (ws, jobIds, filter) => executionList.countExecutionsOfJobs(from, ws, jobIds, filter, COUNT_LIMIT),
      batch,
    ),
    jobsOfEndpoint: batchedFirstPages(
      (ws, endpointIds, filter: EndpointJobsFilter, limit) => jobsRepo.firstJobsOfEndpoints(from, ws, endpointIds, filter, limit),
      (row) => row.endpoint_id,
      (ws, endpointIds, filter) => jobsRepo.countJobsOfEndpoints(from, ws, endpointIds, filter, COUNT_LIMIT),
      batch,
    ),
  };
}

/** An empty first page, with its count: what a list answers for an id that names nothing. */
const NO_PAGE: FirstPage<never> = { rows: Promise.resolve([]), count: async () => 0 };

export function createNestedReads(ctx: ServiceContext, lists: Lists) {
  // Read where the root lists read for the actor, so rows of a replica and of the primary are read apart.
  const firstPages = perReader(ctx.reader, (from) => firstPagesFrom(from, !ctx.outer));
  return {
    /** A job's executions, newest first, as `executions(jobId:)` lists them. VALIDATION_FAILED for a bad id or page. */
    async jobExecutions(
      actor: Actor,
      jobId: string,
      rawFilter: JobExecutionsFilter = {},
      rawPage: PageInput = {},
    ): Promise<Connection<Execution>> {
      const { status } = parseInput(executionFilterSchema, { ...rawFilter, jobId });
      const page = parseInput(pageSchema, rawPage);
      if (page.after) return lists.executions(actor, { jobId, status }, page);
      const size = pageSize(page);
      const first = isUuid(jobId) ? firstPages(actor).executionsOfJob(actor.workspaceId, jobId, { status }, size) : NO_PAGE;
      return toConnection(await first.rows, size, toExecution, first.count);
    },

    /** An endpoint's jobs, newest first, as `jobs` lists them by endpoint. VALIDATION_FAILED for a bad id or page. */
    async endpointJobs(
      actor: Actor,
      endpointId: string,
      rawFilter: EndpointJobsFilter = {},
      rawPage: PageInput = {},
    ): Promise<Connection<Job>> {
      const { status, kind, includeInternal } = parseInput(jobFilterSchema, { ...rawFilter, endpointId });
      const page = parseInput(pageSchema, rawPage);
      if (page.after) return lists.jobs(actor, { status, kind, includeInternal, endpointId }, page);
      const size = pageSize(page);
      const first = isUuid(endpointId)
        ? firstPages(actor).jobsOfEndpoint(actor.workspaceId, endpointId, { status, kind, includeInternal }, size)
        : NO_PAGE;
      return toConnection(await first.rows, size, toJob, first.count);
    },
  };
}
