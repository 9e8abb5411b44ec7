import { LOCK_CLASS } from '../advisory-locks.js';
import { sql, type Expression, type RawBuilder, type SelectQueryBuilder } from 'kysely';
import { cancelChannel, workChannel } from '../channels.js';
import type { AttemptRow, DB, ExecutionRow, JobRow } from '../types.js';
import { isUuid, scoped, type Executor } from './scope.js';

export interface NewExecutionRow {
  workspace_id: string;
  job_id: string;
  endpoint_id: string;
  /** A time, or the database's clock (DATABASE_NOW in ../transaction.ts). */
  scheduled_for: Date | string | Expression<Date>;
  max_attempts: number;
  /** Its job's priority (pinned: a later change of the job's does not reach it). */
  priority: number;
  /** Its job's concurrency key (pinned, as the priority); '' for none. */
  concurrency_key: string;
  lock_key?: string | null;
  trigger?: 'SCHEDULE' | 'MANUAL';
  request_id?: string | null;
  created_by_key_id?: string | null;
  /** The input to deliver, as JSON text: pinned now, whatever later edits do to the job. */
  input?: string;
  /** Waits for its job's prerequisites (migration 000047), or its batch (000048), until they are settled. */
  blocked?: boolean;
  /** Its end settles dependents or counts into a batch (the trigger of migration 000047). */
  has_dependents?: boolean;
}

/**
 * Inserts an execution unless a unique index refuses it: the live lock key, the (job, request
 * id) pair, or the (job, scheduled_for) occurrence. `on conflict do nothing` turns any of those
 * into an empty result, so the caller's transaction stays usable and it can find out which.
 */
export async function insertExecutionUnlessTaken(db: Executor, row: NewExecutionRow): Promise<ExecutionRow | undefined> {
  scoped(row.workspace_id);
  return db
    .insertInto('executions')
    .values({ ...row, run_after: row.scheduled_for })
    .onConflict((oc) => oc.doNothing())
    .returningAll()
    .executeTakeFirst();
}

/**
 * Wakes the workers (inside the caller's transaction, so they see what it committed): for a
 * change that makes executions already due claimable, which no worker's due timer covers.
 */
export async function notifyWork(db: Executor): Promise<void> {
  await sql`select pg_notify(${workChannel.name}, ${workChannel.encode({ kind: 'work' })})`.execute(db);
}

/** The pending or running execution holding a lock key in the workspace, if any. */
/**
 * Makes creates with this lock key in the workspace take turns, until the transaction ends (a
 * transaction-scoped advisory lock on the key's hash; a collision only makes two keys take turns).
 */
export async function takeLockKeyTurn(db: Executor, workspaceId: string, lockKey: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(${LOCK_CLASS.lockKeyTurns}, hashtext(${scoped(workspaceId)} || ':' || ${lockKey}))`.execute(db);
}

export async function findLockHolder(db: Executor, workspaceId: string, lockKey: string): Promise<ExecutionRow | undefined> {
  return db
    .selectFrom('executions')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('lock_key', '=', lockKey)
    .where('status', 'in', ['PENDING', 'RUNNING'])
    .executeTakeFirst();
}

export async function findByRequestId(
  db: Executor,
  workspaceId: string,
  jobId: string,
  requestId: string,
): Promise<ExecutionRow | undefined> {
  return db
    .selectFrom('executions')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('job_id', '=', jobId)
    .where('request_id', '=', requestId)
    .executeTakeFirst();
}

/**
 * The job's earliest live execution. Named by its workspace and endpoint too (an execution's are
 * its job's), so that it is found among the live executions (executions_workspace_live), not by
 * reading the job's whole history.
 */
export async function findLiveExecution(
  db: Executor,
  workspaceId: string,
  job: Pick<JobRow, 'id' | 'endpoint_id'>,
): Promise<ExecutionRow | undefined> {
  return db
    .selectFrom('executions')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('endpoint_id', '=', job.endpoint_id)
    .where('job_id', '=', job.id)
    .where('status', 'in', ['PENDING', 'RUNNING'])
    .orderBy('created_at')
    .executeTakeFirst();
}

/**
 * The workspace's executions among `ids`, locked for update in id order: two calls locking
 * overlapping sets take their locks in one order, so they cannot deadlock. Ids that are not
 * uuids match nothing.
 */
export async function lockExecutionsByIds(db: Executor, workspaceId: string, ids: readonly string[]): Promise<ExecutionRow[]> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return [];
  return db
    .selectFrom('executions')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', 'in', valid)
    .orderBy('id')
    .forUpdate()
    .execute();
}

/** The workspace's executions among `ids` (not locked). Ids that are not uuids match nothing. */
export async function findExecutionsByIds(db: Executor, workspaceId: string, ids: readonly string[]): Promise<ExecutionRow[]> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return [];
  return db.selectFrom('executions').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('id', 'in', valid).execute();
}

/** Cancels pending executions at once, one statement for all. Compare-and-set on PENDING: returns those it cancelled. */
export async function cancelPendingByIds(
  db: Executor,
  workspaceId: string,
  ids: readonly string[],
  reason: string,
): Promise<ExecutionRow[]> {
  if (ids.length === 0) return [];
  return (
    db
      .updateTable('executions')
      // No longer waiting for prerequisites either (blocked means PENDING and waiting).
      .set({ status: 'CANCELLED', blocked: false, finished_at: sql<Date>`now()`, updated_at: sql<Date>`now()`, last_error: reason })
      .where('workspace_id', '=', scoped(workspaceId))
      .where('id', 'in', ids)
      .where('status', '=', 'PENDING')
      .returningAll()
      .execute()
  );
}

/**
 * Asks the workers running these executions to abort them: each ends CANCELLED when its attempt
 * returns. The NOTIFY (one per execution, in one statement) is a hint; heartbeats carry the
 * request too. The caller holds the rows locked. Returns those still RUNNING, now asked.
 */
export async function requestCancelOfRunningByIds(db: Executor, workspaceId: string, ids: readonly string[]): Promise<ExecutionRow[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .updateTable('executions')
    .set({ cancel_requested_at: sql<Date>`coalesce(cancel_requested_at, now())`, updated_at: sql<Date>`now()` })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('status', '=', 'RUNNING')
    .where('id', 'in', ids)
    .returningAll()
    .execute();
  if (rows.length > 0) {
    const payloads = rows.map((r) => cancelChannel.encode({ executionId: r.id }));
    await sql`select pg_notify(${cancelChannel.name}, payload) from unnest(${payloads}::text[]) payload`.execute(db);
  }
  return rows;
}

/**
 * Re-drives FAILED executions, each with a fresh attempt budget (as many attempts again as its
 * job allows: `freshAttempts`), due now; one statement for all, and one wake-up for the workers.
 * Compare-and-set on FAILED: returns those it re-drove.
 */
export async function redriveFailedByIds(
  db: Executor,
  workspaceId: string,
  items: readonly { id: string; freshAttempts: number }[],
): Promise<ExecutionRow[]> {
  if (items.length === 0) return [];
  const { rows } = await sql<ExecutionRow>`
    update executions e
    set status = 'PENDING', max_attempts = e.attempt_count + v.fresh, run_after = now(), finished_at = null,
        cancel_requested_at = null, updated_at = now()
    from unnest(${items.map((i) => i.id)}::uuid[], ${items.map((i) => i.freshAttempts)}::int[]) v(id, fresh)
    where e.workspace_id = ${scoped(workspaceId)} and e.id = v.id and e.status = 'FAILED'
    returning e.*`.execute(db);
  if (rows.length > 0) await notifyWork(db);
  return rows;
}

/**
 * The newest execution (by creation, as lists order them) of each job among `jobIds` that has
 * one, in one query; with `trigger`, the newest created that way.
 */
export async function newestExecutionsOfJobs(
  db: Executor,
  workspaceId: string,
  jobIds: readonly string[],
  trigger?: 'SCHEDULE',
): Promise<ExecutionRow[]> {
  const valid = jobIds.filter(isUuid);
  if (valid.length === 0) return [];
  return db
    .selectFrom('executions')
    .selectAll()
    .distinctOn('job_id')
    .where('workspace_id', '=', scoped(workspaceId))
    .where('job_id', 'in', valid)
    .$if(trigger !== undefined, (q) => q.where('trigger', '=', trigger!))
    .orderBy('job_id')
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
}

export async function findExecutionById(db: Executor, workspaceId: string, id: string): Promise<ExecutionRow | undefined> {
  if (!isUuid(id)) return undefined;
  return db.selectFrom('executions').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('id', '=', id).executeTakeFirst();
}

/**
 * Cancels a job's live executions: pending ones at once, running ones asked to abort (they end
 * CANCELLED when their attempt returns or their lease is reconciled). Returns how many were
 * cancelled at once. Must run inside the caller's transaction when the job changes with it.
 */
export async function cancelLiveExecutions(
  db: Executor,
  workspaceId: string,
  job: Pick<JobRow, 'id' | 'endpoint_id'>,
  reason: string,
): Promise<{ cancelled: number; stopping: number }> {
  const { rows } = await cancelLiveExecutionsOf(
    sql`workspace_id = ${scoped(workspaceId)} and endpoint_id = ${job.endpoint_id} and job_id = ${job.id}`,
    reason,
  ).execute(db);
  for (const row of rows) {
    if (row.status === 'RUNNING')
      await sql`select pg_notify(${cancelChannel.name}, ${cancelChannel.encode({ executionId: row.id })})`.execute(db);
  }
  return { cancelled: rows.filter((r) => r.status === 'CANCELLED').length, stopping: rows.filter((r) => r.status === 'RUNNING').length };
}

/**
 * The statement that cancels live executions, the one definition (cancelJob's, and the reaper's
 * retiring ended cron jobs, src/db/statements/reap.ts): `jobs` selects the executions by job,
 * naming their workspace and endpoint too, so that they are read among the live executions
 * (executions_workspace_live) rather than through each job's whole history. One
 * UPDATE over both states, on purpose: a row is re-read when it is locked, so an attempt's
 * outcome or the reconciler turning it from RUNNING back to PENDING (a retry) while this runs
 * still has it cancelled. Two statements (pending, then running) each missed a row that moved
 * between them, and left it PENDING on a retired job, never claimed, holding its lock key for
 * good. Returns each execution with its new status (RUNNING: asked to abort).
 *
 * The rows are locked first, in id order, then updated: a worker's heartbeat and outcome batch
 * lock the running ones in id order too (src/db/statements/lease.ts), and an UPDATE alone locks
 * rows in whatever order its plan visits them, which could close a cycle with them. The lock
 * re-reads a row that moved meanwhile as the UPDATE did, so the case above still holds.
 */
export function cancelLiveExecutionsOf(jobs: RawBuilder<unknown>, reason: string): RawBuilder<{ id: string; status: string }> {
  return sql<{ id: string; status: string }>`
    with locked as materialized (
      select id from executions where ${jobs} and status in ('PENDING', 'RUNNING') order by id for no key update
    )
    update executions
    set status = case when status = 'PENDING' then 'CANCELLED' else status end,
        blocked = false,
        finished_at = case when status = 'PENDING' then now() else finished_at end,
        last_error = case when status = 'PENDING' then ${reason} else last_error end,
        cancel_requested_at = case when status = 'RUNNING' then coalesce(cancel_requested_at, now()) else cancel_requested_at end,
        updated_at = now()
    where id in (select id from locked) and status in ('PENDING', 'RUNNING')
    returning id, status`;
}

/**
 * The job's pending executions (`match` narrows them), locked in id order as a materialized CTE
 * `locked`, for an update of those rows: every statement that locks several executions takes them
 * in id order (src/db/statements/lease.ts), so none waits on another in a cycle.
 */
function lockPendingOf(db: Executor, workspaceId: string, jobId: string, match: (q: PendingQuery) => PendingQuery) {
  return db.with(
    (cte) => cte('locked').materialized(),
    (d) =>
      match(
        d
          .selectFrom('executions')
          .select('id')
          .where('workspace_id', '=', scoped(workspaceId))
          .where('job_id', '=', jobId)
          .where('status', '=', 'PENDING'),
      )
        .orderBy('id')
        .forNoKeyUpdate(),
  );
}
type PendingQuery = SelectQueryBuilder<DB, 'executions', { id: string }>;

/** Moves the job's not-yet-started scheduled execution (a DELAYED job has one) to a new time. */
export async function reschedulePendingExecutions(db: Executor, workspaceId: string, jobId: string, at: Date): Promise<number> {
  // Manual triggers keep their own time.
  const result = await lockPendingOf(db, workspaceId, jobId, (q) => q.where('attempt_count', '=', 0).where('trigger', '=', 'SCHEDULE'))
    .updateTable('executions')
    .set({ scheduled_for: at, run_after: at, updated_at: sql<Date>`now()` })
    .where('id', 'in', (eb) => eb.selectFrom('locked').select('locked.id'))
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

export async function setPendingMaxAttempts(db: Executor, workspaceId: string, jobId: string, maxAttempts: number): Promise<void> {
  await lockPendingOf(db, workspaceId, jobId, (q) => q.where('attempt_count', '<', maxAttempts))
    .updateTable('executions')
    .set({ max_attempts: maxAttempts, updated_at: sql<Date>`now()` })
    .where('id', 'in', (eb) => eb.selectFrom('locked').select('locked.id'))
    .execute();
}

/**
 * The attempts of the workspace's executions among `executionIds`, each execution's in order: the
 * ended ones are rows; the one in progress, if the execution is RUNNING, is read from the
 * execution itself (its row is written when it ends), with its worker's host and pid from that
 * worker's presence row. By execution id; an execution with none (or not found) is left out.
 */
export async function listAttemptsOf(
  db: Executor,
  workspaceId: string,
  executionIds: readonly string[],
): Promise<Map<string, AttemptRow[]>> {
  const ids = executionIds.filter(isUuid);
  const byExecution = new Map<string, AttemptRow[]>();
  if (ids.length === 0) return byExecution;
  const ws = scoped(workspaceId);
  const { rows } = await sql<AttemptRow>`
    select workspace_id, execution_id, attempt_number, lease_epoch, worker_id, started_at, finished_at,
           outcome, status_code, duration_ms, error, response_excerpt, target, worker_host, worker_pid, error_stack
    from attempts
    where workspace_id = ${ws} and execution_id = any(${ids}::uuid[])
    union all
    select workspace_id, id, attempt_count, lease_epoch, coalesce(lease_owner, ''), coalesce(attempt_started_at, updated_at), null,
           null, null, null, null, null, null,
           -- The process's row: a second worker in a process holds leases as its id and /2 (src/composition-root.ts).
           (select w.host from workers w where w.id = split_part(lease_owner, '/', 1)),
           (select w.pid from workers w where w.id = split_part(lease_owner, '/', 1)), null
    from executions
    where workspace_id = ${ws} and id = any(${ids}::uuid[]) and status = 'RUNNING'
    order by execution_id, attempt_number`.execute(db);
  for (const row of rows) {
    const list = byExecution.get(row.execution_id);
    if (list) list.push(row);
    else byExecution.set(row.execution_id, [row]);
  }
  return byExecution;
}
