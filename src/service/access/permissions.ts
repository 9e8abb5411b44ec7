/**
 * What an actor may do to an endpoint, a job, an execution, a run or a batch: the rules the mutations enforce, written
 * once as refusals (the error the mutation would throw, or undefined). The mutations throw them;
 * the `viewerCan` fields of the API answer from them, so a client shows only the actions the
 * server would accept. A permission is not a promise: the state checks of the moment (a job
 * already running, an execution no longer FAILED) and concurrent changes still decide.
 */
import { findBatchesByIds } from '../../db/repositories/batches.js';
import { findEndpointsByIds } from '../../db/repositories/endpoints.js';
import { findExecutionsByIds } from '../../db/repositories/executions.js';
import { findJobsByIds } from '../../db/repositories/jobs.js';
import type { BatchRow, EndpointRow, ExecutionRow, JobRow, RunRecord } from '../../db/types.js';
import { isSystem, type Actor, type Role } from '../kernel/actor.js';
import { hasRole, ownershipRefusal } from '../kernel/authorisation.js';
import { batchedRead, byId } from '../kernel/batched-reads.js';
import type { ServiceContext } from '../kernel/context.js';
import { ArchivedError, ForbiddenError, NotFoundError, RetiredError, type DomainError } from '../kernel/errors.js';

/** The least role of every action on jobs, executions and runs (triggering, pausing, re-driving, cancelling...). */
export const CHANGE_ROLE: Role = 'OPERATOR';

type JobFacts = Pick<JobRow, 'id' | 'status' | 'created_by_key_id'>;
type EndpointFacts = Pick<EndpointRow, 'type' | 'name'>;

/**
 * Changing an endpoint (update, archive, pause, resume): INTERNAL ones are jobgate's own
 * (FORBIDDEN); OPERATOR keys change only endpoints their key registered (FORBIDDEN); an archived
 * one cannot change (ARCHIVED).
 */
export function endpointRefusal(actor: Actor, endpoint: Pick<EndpointRow, 'id' | 'type' | 'name' | 'created_by_key_id' | 'archived_at'>) {
  if (endpoint.type === 'INTERNAL' && !isSystem(actor))
    return new ForbiddenError(`endpoint "${endpoint.name}" is internal to jobgate and cannot be changed`);
  const refusal = ownershipRefusal(actor, endpoint.created_by_key_id, `endpoint "${endpoint.name}"`);
  if (refusal) return refusal;
  if (endpoint.archived_at) return new ArchivedError(endpoint.id);
  return undefined;
}

/**
 * Changing a job: INTERNAL jobs are jobgate's own (FORBIDDEN); OPERATOR keys may update, pause,
 * resume or cancel only jobs their key created (FORBIDDEN), though they may run and re-drive any
 * (`owned: false`); a retired job cannot change (RETIRED).
 */
export function jobRefusal(actor: Actor, job: JobFacts, endpoint: EndpointFacts, opts: { owned?: boolean } = {}): DomainError | undefined {
  if (endpoint.type === 'INTERNAL' && !isSystem(actor))
    return new ForbiddenError(`job ${job.id} runs on the internal endpoint "${endpoint.name}" and is managed by jobgate`);
  if (opts.owned !== false) {
    const refusal = ownershipRefusal(actor, job.created_by_key_id, `job ${job.id}`);
    if (refusal) return refusal;
  }
  if (job.status === 'RETIRED') return new RetiredError(job.id);
  return undefined;
}

/** Cancelling an execution: not of an INTERNAL job; OPERATOR keys only what their key created (the execution, else its job). */
export function executionCancelRefusal(
  actor: Actor,
  execution: Pick<ExecutionRow, 'id' | 'created_by_key_id'>,
  job: JobFacts,
  endpoint: EndpointFacts,
): DomainError | undefined {
  if (endpoint.type === 'INTERNAL' && !isSystem(actor)) return jobRefusal(actor, job, endpoint, { owned: false });
  return ownershipRefusal(actor, execution.created_by_key_id ?? job.created_by_key_id, `execution ${execution.id}`);
}

/** Re-driving an execution: any OPERATOR, unless its job is retired or INTERNAL. */
export function executionRetryRefusal(actor: Actor, job: JobFacts, endpoint: EndpointFacts): DomainError | undefined {
  if (job.status === 'RETIRED') return new RetiredError(job.id);
  return jobRefusal(actor, job, endpoint, { owned: false });
}

/** Cancelling a run: OPERATOR keys only runs their key triggered. */
export function runCancelRefusal(actor: Actor, run: Pick<RunRecord, 'id' | 'created_by_key_id'>): DomainError | undefined {
  return ownershipRefusal(actor, run.created_by_key_id, `run ${run.id}`);
}

export interface JobPermissions {
  trigger: boolean;
  pause: boolean;
  resume: boolean;
  update: boolean;
  cancel: boolean;
}
export interface EndpointPermissions {
  update: boolean;
  archive: boolean;
  pause: boolean;
  resume: boolean;
}
export interface ExecutionPermissions {
  retry: boolean;
  cancel: boolean;
}
export interface RunPermissions {
  cancel: boolean;
  resume: boolean;
}
export interface BatchPermissions {
  close: boolean;
  cancel: boolean;
  addMember: boolean;
}

/**
 * Closing, cancelling or adding a member to a batch: OPERATOR keys only the batches their key
 * created (cancelling one cancels its members; a member changes when and how it completes).
 */
export function batchRefusal(actor: Actor, batch: Pick<BatchRow, 'id' | 'created_by_key_id'>): DomainError | undefined {
  return ownershipRefusal(actor, batch.created_by_key_id, `batch ${batch.id}`);
}

/** Which actions on the run the actor may take (cancelRun, triggerRun to resume it), by the rules they enforce. */
export function runPermissions(actor: Actor, run: Pick<RunRecord, 'id' | 'created_by_key_id'>): RunPermissions {
  const role = hasRole(actor, CHANGE_ROLE);
  return { cancel: role && !runCancelRefusal(actor, run), resume: role };
}

export function createPermissionsService(ctx: ServiceContext) {
  const { db } = ctx;

  // A list's rows ask theirs together (../kernel/batched-reads.ts): one query per step for a page.
  const jobById = batchedRead((ws, ids) => findJobsByIds(db, ws, ids).then(byId), !ctx.outer);
  const endpointById = batchedRead((ws, ids) => findEndpointsByIds(db, ws, ids).then(byId), !ctx.outer);
  const executionById = batchedRead((ws, ids) => findExecutionsByIds(db, ws, ids).then(byId), !ctx.outer);
  const batchById = batchedRead((ws, ids) => findBatchesByIds(db, ws, ids).then(byId), !ctx.outer);

  async function jobAndEndpoint(actor: Actor, jobId: string): Promise<{ job: JobRow; endpoint: EndpointRow }> {
    const job = await jobById(actor.workspaceId, jobId);
    if (!job) throw new NotFoundError('Job', jobId);
    const endpoint = await endpointById(actor.workspaceId, job.endpoint_id);
    if (!endpoint) throw new NotFoundError('Job', jobId);
    return { job, endpoint };
  }

  return {
    /** Which actions on the batch the actor may take (closeBatch, cancelBatch, createJob with its batchId), by the rules they enforce. Throws NOT_FOUND. */
    async batchPermissions(actor: Actor, batchId: string): Promise<BatchPermissions> {
      const batch = await batchById(actor.workspaceId, batchId);
      if (!batch) throw new NotFoundError('Batch', batchId);
      const may = hasRole(actor, CHANGE_ROLE) && !batchRefusal(actor, batch);
      return { close: may, cancel: may, addMember: may };
    },

    /**
     * Which actions on the job the actor may take, by the rules its mutations enforce
     * (jobRefusal, CHANGE_ROLE). Whether pausing or resuming makes sense (the job's status) is
     * the caller's to see. Throws NOT_FOUND.
     */
    async jobPermissions(actor: Actor, jobId: string): Promise<JobPermissions> {
      const { job, endpoint } = await jobAndEndpoint(actor, jobId);
      const role = hasRole(actor, CHANGE_ROLE);
      if (!role) return { trigger: false, pause: false, resume: false, update: false, cancel: false };
      const change = role && !jobRefusal(actor, job, endpoint);
      return {
        trigger: role && !jobRefusal(actor, job, endpoint, { owned: false }),
        pause: change,
        resume: change,
        update: change,
        cancel: change,
      };
    },

    /** Which actions on the endpoint the actor may take, by the rules its mutations enforce (endpointRefusal). Throws NOT_FOUND. */
    async endpointPermissions(actor: Actor, endpointId: string): Promise<EndpointPermissions> {
      const endpoint = await endpointById(actor.workspaceId, endpointId);
      if (!endpoint) throw new NotFoundError('Endpoint', endpointId);
      const may = hasRole(actor, CHANGE_ROLE) && !endpointRefusal(actor, endpoint);
      return { update: may, archive: may, pause: may, resume: may };
    },

    /** Which actions on the execution the actor may take, by the rules its mutations enforce. Throws NOT_FOUND. */
    async executionPermissions(actor: Actor, executionId: string): Promise<ExecutionPermissions> {
      const execution = await executionById(actor.workspaceId, executionId);
      if (!execution) throw new NotFoundError('Execution', executionId);
      const role = hasRole(actor, CHANGE_ROLE);
      // Below the role, nothing to read further (a list of a VIEWER's costs one probe a row).
      if (!role) return { retry: false, cancel: false };
      const { job, endpoint } = await jobAndEndpoint(actor, execution.job_id);
      return {
        retry: role && !executionRetryRefusal(actor, job, endpoint),
        cancel: role && !executionCancelRefusal(actor, execution, job, endpoint),
      };
    },
  };
}
