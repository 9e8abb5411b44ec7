/**
 * Cancelling and re-driving executions, for one (cancelExecution, retryExecution) or many
 * (cancelExecutions, retryExecutions): one body, so the bulk action does exactly what the single
 * one does, in a few statements for all its executions instead of a transaction each. Inside a
 * transaction the caller owns.
 */
import * as executionsRepo from '../../db/repositories/executions.js';
import { isPgError, UNIQUE_VIOLATION } from '../../db/sqlstate.js';
import { inSavepoint } from '../../db/transaction.js';
import type { EndpointRow, ExecutionRow, JobRow } from '../../db/types.js';
import type { Transaction } from 'kysely';
import type { DB } from '../../db/types.js';
import type { Actor } from '../kernel/actor.js';
import { ConflictError, DomainError, NotFoundError } from '../kernel/errors.js';
import { assertLockFree, lockJobs } from './guards.js';
import { executionCancelRefusal, executionRetryRefusal } from '../access/permissions.js';

/** Each id's execution as the action left it, or the refusal the single action throws for it. */
export type ExecutionOutcomes = Map<string, ExecutionRow | DomainError>;

interface Locked {
  execution: ExecutionRow;
  job: JobRow;
  endpoint: EndpointRow;
}

const byId = <T extends { id: string }>(rows: T[]) => new Map(rows.map((r) => [r.id, r]));

/**
 * The executions among `ids`, locked with their jobs: jobs first, then executions, the order
 * cancelJob and updateJob lock them in (no deadlock), each set in id order. An id not found is a
 * NOT_FOUND in `outcomes`.
 */
async function lockWithJobs(trx: Transaction<DB>, actor: Actor, ids: readonly string[], outcomes: ExecutionOutcomes): Promise<Locked[]> {
  const peeks = await executionsRepo.findExecutionsByIds(trx, actor.workspaceId, ids);
  const jobs = await lockJobs(trx, actor, [...new Set(peeks.map((p) => p.job_id))]);
  const current = byId(await executionsRepo.lockExecutionsByIds(trx, actor.workspaceId, ids));
  const locked: Locked[] = [];
  for (const id of ids) {
    const execution = current.get(id);
    const job = execution && jobs.get(execution.job_id);
    if (!execution) outcomes.set(id, new NotFoundError('Execution', id));
    else if (!job) outcomes.set(id, new NotFoundError('Job', execution.job_id));
    else locked.push({ execution, ...job });
  }
  return locked;
}

export interface CancelledExecutions {
  outcomes: ExecutionOutcomes;
  /** Pending executions cancelled at once, by endpoint name (no worker records those; the caller reports them once committed). */
  pendingCancelled: Map<string, number>;
}

/**
 * Cancels the executions (distinct ids): a pending one is CANCELLED at once; a running one has
 * its attempt aborted and ends CANCELLED when the attempt returns (`cancel_requested_at`).
 * Refusals: NOT_FOUND, FORBIDDEN (internal job, or an OPERATOR's not own), CONFLICT (finished).
 */
export async function cancelExecutionsIn(trx: Transaction<DB>, actor: Actor, ids: readonly string[]): Promise<CancelledExecutions> {
  const outcomes: ExecutionOutcomes = new Map();
  const pending: Locked[] = [];
  const running: Locked[] = [];
  for (const item of await lockWithJobs(trx, actor, ids, outcomes)) {
    const { execution, job, endpoint } = item;
    const refusal = executionCancelRefusal(actor, execution, job, endpoint);
    if (refusal) outcomes.set(execution.id, refusal);
    else if (execution.status === 'PENDING') pending.push(item);
    else if (execution.status === 'RUNNING') running.push(item);
    else {
      const { id, status } = execution;
      outcomes.set(id, new ConflictError(`execution ${id} has already finished (${status})`, { status }));
    }
  }
  const ws = actor.workspaceId;
  const cancelled = await executionsRepo.cancelPendingByIds(
    trx,
    ws,
    pending.map((p) => p.execution.id),
    'cancelled by an operator',
  );
  // Their jobs' next serial occurrences, due already and waiting for these, have their turn.
  if (cancelled.some((c) => c.serial)) await executionsRepo.notifyWork(trx);
  const asked = await executionsRepo.requestCancelOfRunningByIds(
    trx,
    ws,
    running.map((r) => r.execution.id),
  );
  // Locked, so each is as it was read; the read row stands in for one a statement did not return.
  for (const { execution } of [...pending, ...running]) outcomes.set(execution.id, execution);
  for (const row of [...cancelled, ...asked]) outcomes.set(row.id, row);
  const done = new Set(cancelled.map((c) => c.id));
  const pendingCancelled = new Map<string, number>();
  for (const p of pending) {
    if (done.has(p.execution.id)) pendingCancelled.set(p.endpoint.name, (pendingCancelled.get(p.endpoint.name) ?? 0) + 1);
  }
  return { outcomes, pendingCancelled };
}

/**
 * Re-drives the FAILED executions (distinct ids): a fresh attempt budget (their job's max attempts
 * again), due now. Refusals: NOT_FOUND, RETIRED (job cancelled), FORBIDDEN (internal job),
 * CONFLICT (not FAILED), LOCK_HELD (its lock key taken meanwhile, by another execution or one
 * re-driven before it in this call).
 */
export async function retryExecutionsIn(trx: Transaction<DB>, actor: Actor, ids: readonly string[]): Promise<ExecutionOutcomes> {
  const outcomes: ExecutionOutcomes = new Map();
  const free: { id: string; freshAttempts: number }[] = [];
  const keyed: Locked[] = [];
  for (const item of await lockWithJobs(trx, actor, ids, outcomes)) {
    const { execution, job, endpoint } = item;
    const refusal = executionRetryRefusal(actor, job, endpoint);
    if (refusal) outcomes.set(execution.id, refusal);
    else if (execution.status !== 'FAILED') {
      const { id, status } = execution;
      outcomes.set(id, new ConflictError(`only FAILED executions can be retried; execution ${id} is ${status}`, { status }));
    } else if (execution.lock_key) keyed.push(item);
    else free.push({ id: execution.id, freshAttempts: job.max_attempts });
  }
  for (const row of await executionsRepo.redriveFailedByIds(trx, actor.workspaceId, free)) outcomes.set(row.id, row);
  // A lock key is checked and taken one execution at a time: two of this call may share one.
  for (const { execution, job } of keyed) {
    try {
      outcomes.set(execution.id, await redriveHoldingKey(trx, actor, execution, job.max_attempts));
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      outcomes.set(execution.id, error);
    }
  }
  return outcomes;
}

/** Re-drives a FAILED execution that has a lock key, once the key is free. Throws LOCK_HELD. */
async function redriveHoldingKey(
  trx: Transaction<DB>,
  actor: Actor,
  execution: ExecutionRow,
  freshAttempts: number,
): Promise<ExecutionRow> {
  await assertLockFree(trx, actor, execution.lock_key);
  // The check cannot see a key taken by a transaction not yet committed: the update then waits
  // on the live-lock index and fails with a unique violation once that one commits. The
  // savepoint keeps this transaction usable, so the refusal can name the holder.
  try {
    const [row] = await inSavepoint(trx, 'redrive', () =>
      executionsRepo.redriveFailedByIds(trx, actor.workspaceId, [{ id: execution.id, freshAttempts }]),
    );
    return row ?? execution;
  } catch (error) {
    if (!isPgError(error, UNIQUE_VIOLATION)) throw error;
    await assertLockFree(trx, actor, execution.lock_key);
    throw error;
  }
}
