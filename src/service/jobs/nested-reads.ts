/**
 * The connections each row of a page holds: a job's executions (Job.executions) and an endpoint's
 * jobs (Endpoint.jobs). A page of 50 jobs, each with `executions(first: 5)`, asked two list
 * queries per job (the rows and, for totalCount, the count); now the first pages of every row are
 * read together, one statement for the rows and one for the counts (../kernel/batched-reads.ts).
 * A later page (`after`) is read as the root list reads it, one parent at a time.
 */
import * as executionList from '../../db/repositories/execution-list.js';
import * as jobsRepo from '../../db/repositories/jobs.js';
import type { Actor } from '../kernel/actor.js';
import { batchedFirstPages } from '../kernel/batched-reads.js';
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
export type EndpointJobsFilter = Omit<JobFilter, 'endpointId' | 'search'>;

/** The root lists, for pages after the first. */
interface Lists {
  jobs(actor: Actor, filter: JobFilter, page: PageInput): Promise<Connection<Job>>;
  executions(actor: Actor, filter: ExecutionFilter, page: PageInput): Promise<Connection<Execution>>;
}

export function createNestedReads(ctx: ServiceContext, lists: Lists) {
  const { db } = ctx;
  const executionsOfJob = batchedFirstPages(
    (ws, jobIds, filter: JobExecutionsFilter, limit) => executionList.firstExecutionsOfJobs(db, ws, jobIds, filter, limit),
    (row) => row.job_id,
    (ws, jobIds, filter) => executionList.countExecutionsOfJobs(db, ws, jobIds, filter, COUNT_LIMIT),
    !ctx.outer,
  );
  const jobsOfEndpoint = batchedFirstPages(
    (ws, endpointIds, filter: EndpointJobsFilter, limit) => jobsRepo.firstJobsOfEndpoints(db, ws, endpointIds, filter, limit),
    (row) => row.endpoint_id,
    (ws, endpointIds, filter) => jobsRepo.countJobsOfEndpoints(db, ws, endpointIds, filter, COUNT_LIMIT),
    !ctx.outer,
  );
  return {
    /** A job's executions, newest first, as `executions(jobId:)` lists them. VALIDATION_FAILED for a bad page. */
    async jobExecutions(
      actor: Actor,
      jobId: string,
      rawFilter: JobExecutionsFilter = {},
      rawPage: PageInput = {},
    ): Promise<Connection<Execution>> {
      const { status } = parseInput(executionFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      if (page.after) return lists.executions(actor, { jobId, status }, page);
      const size = pageSize(page);
      const first = executionsOfJob(actor.workspaceId, jobId, { status }, size);
      return toConnection(await first.rows, size, toExecution, first.count);
    },

    /** An endpoint's jobs, newest first, as `jobs` lists them by endpoint. VALIDATION_FAILED for a bad page. */
    async endpointJobs(
      actor: Actor,
      endpointId: string,
      rawFilter: EndpointJobsFilter = {},
      rawPage: PageInput = {},
    ): Promise<Connection<Job>> {
      const { status, kind, includeInternal } = parseInput(jobFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      if (page.after) return lists.jobs(actor, { status, kind, includeInternal, endpointId }, page);
      const size = pageSize(page);
      const first = jobsOfEndpoint(actor.workspaceId, endpointId, { status, kind, includeInternal }, size);
      return toConnection(await first.rows, size, toJob, first.count);
    },
  };
}
