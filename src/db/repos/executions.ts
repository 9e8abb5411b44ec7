import { sql } from 'kysely';
import type { AttemptRow, ExecutionRow, ExecutionStatus } from '../types.js';
import { afterCursor } from '../../service/pagination.js';
import { isUuid, scoped, type Executor } from './scope.js';

export async function insertExecution(
  db: Executor,
  row: { workspace_id: string; job_id: string; scheduled_for: Date | string; max_attempts: number },
): Promise<ExecutionRow> {
  scoped(row.workspace_id);
  return db
    .insertInto('executions')
    .values({ ...row, run_after: row.scheduled_for })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findExecutionById(db: Executor, workspaceId: string, id: string): Promise<ExecutionRow | undefined> {
  if (!isUuid(id)) return undefined;
  return db
    .selectFrom('executions')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', id)
    .executeTakeFirst();
}

/** Cancels every execution of the job that has not started. Returns how many. */
export async function cancelPendingExecutions(db: Executor, workspaceId: string, jobId: string, reason: string): Promise<number> {
  const result = await db
    .updateTable('executions')
    .set({ status: 'CANCELLED', finished_at: sql<Date>`now()`, updated_at: sql<Date>`now()`, last_error: reason })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('job_id', '=', jobId)
    .where('status', '=', 'PENDING')
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Moves the job's not-yet-started executions (a DELAYED job has at most one) to a new time. */
export async function reschedulePendingExecutions(db: Executor, workspaceId: string, jobId: string, at: Date): Promise<number> {
  const result = await db
    .updateTable('executions')
    .set({ scheduled_for: at, run_after: at, updated_at: sql<Date>`now()` })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('job_id', '=', jobId)
    .where('status', '=', 'PENDING')
    .where('attempt_count', '=', 0)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

export async function setPendingMaxAttempts(db: Executor, workspaceId: string, jobId: string, maxAttempts: number): Promise<void> {
  await db
    .updateTable('executions')
    .set({ max_attempts: maxAttempts, updated_at: sql<Date>`now()` })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('job_id', '=', jobId)
    .where('status', '=', 'PENDING')
    .where('attempt_count', '<', maxAttempts)
    .execute();
}

export async function listExecutions(
  db: Executor,
  workspaceId: string,
  opts: { limit: number; afterId?: string | undefined; jobId?: string | null | undefined; status?: ExecutionStatus | null | undefined },
): Promise<ExecutionRow[]> {
  let q = db.selectFrom('executions').selectAll().where('workspace_id', '=', scoped(workspaceId));
  if (opts.jobId) {
    if (!isUuid(opts.jobId)) return [];
    q = q.where('job_id', '=', opts.jobId);
  }
  if (opts.status) q = q.where('status', '=', opts.status);
  if (opts.afterId) q = q.where(afterCursor('executions', opts.afterId, workspaceId));
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(opts.limit).execute();
}

export async function listAttempts(db: Executor, workspaceId: string, executionId: string): Promise<AttemptRow[]> {
  if (!isUuid(executionId)) return [];
  return db
    .selectFrom('attempts')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('execution_id', '=', executionId)
    .orderBy('attempt_number', 'asc')
    .execute();
}
