/**
 * Child jobs (migration 000050): the turn a new child takes against its parent's cancellation,
 * and the reads of a parent's children. Cancelling children with their parent is the database's
 * (jobgate_parent_cancelled).
 */
import { sql } from 'kysely';
import type { JobRow } from '../types.js';
import { firstPerParent, ID_ORDER } from './listing.js';
import { isUuid, scoped, type Executor } from './scope.js';

export interface ParentState {
  status: string;
  cancelRequested: boolean;
  /** The parent's cancellation has begun or committed: no child may be added. */
  cancelled: boolean;
}

/**
 * Takes a new child's turn on its parent's row of execution_children (waiting for a cancellation
 * in progress), then reads the parent: undefined when no execution of the workspace has that id.
 */
export async function takeChildTurn(db: Executor, workspaceId: string, parentId: string): Promise<ParentState | undefined> {
  if (!isUuid(parentId)) return undefined;
  const { rows } = await sql<{ cancelled: boolean }>`
    insert into execution_children as c (parent_execution_id)
    -- FOR KEY SHARE, the lock a foreign key took before migration 000059: a prune of the parent
    -- (FOR UPDATE) skips it until this transaction ends, or this waits and finds it gone.
    select e.id from executions e where e.workspace_id = ${scoped(workspaceId)} and e.id = ${parentId} for key share
    on conflict (parent_execution_id) do update set cancelled = c.cancelled
    returning c.cancelled`.execute(db);
  if (rows.length === 0) return undefined;
  // A statement of its own: it sees a cancellation that committed while the upsert waited.
  const parent = await db
    .selectFrom('executions')
    .select(['status', 'cancel_requested_at'])
    .where('id', '=', parentId)
    .executeTakeFirstOrThrow();
  return { status: parent.status, cancelRequested: parent.cancel_requested_at !== null, cancelled: rows[0]!.cancelled };
}

/** A parent's children, in id order, a page after `afterId`. */
export async function childrenOf(
  db: Executor,
  workspaceId: string,
  parentId: string,
  page: { limit: number; afterId?: string },
): Promise<JobRow[]> {
  if (!isUuid(parentId)) return [];
  let q = db.selectFrom('jobs').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('parent_execution_id', '=', parentId);
  if (page.afterId) q = q.where('id', '>', page.afterId);
  return q.orderBy('id').limit(page.limit).execute();
}

export interface ChildCounts {
  total: number;
  pending: number;
  running: number;
  succeeded: number;
  failed: number;
  cancelled: number;
}

/** How each parent's children stand, by their scheduled executions' status, for `parentIds` at once. */
export async function childCountsOf(db: Executor, workspaceId: string, parentIds: readonly string[]): Promise<Map<string, ChildCounts>> {
  const ids = parentIds.filter(isUuid);
  const out = new Map<string, ChildCounts>();
  if (ids.length === 0) return out;
  const { rows } = await sql<ChildCounts & { parent: string }>`
    select j.parent_execution_id as parent, count(*)::int as total,
           count(*) filter (where e.status = 'PENDING')::int as pending,
           count(*) filter (where e.status = 'RUNNING')::int as running,
           count(*) filter (where e.status = 'SUCCEEDED')::int as succeeded,
           count(*) filter (where e.status = 'FAILED')::int as failed,
           count(*) filter (where e.status = 'CANCELLED')::int as cancelled
    from jobs j
    left join executions e on e.job_id = j.id and e.trigger = 'SCHEDULE'
    where j.workspace_id = ${scoped(workspaceId)} and j.parent_execution_id = any(${ids}::uuid[])
    group by 1`.execute(db);
  for (const { parent, ...counts } of rows) out.set(parent, counts);
  return out;
}

/**
 * The first `limit` children of each of `parentIds`, in id order, as childrenOf reads one
 * parent's first page, for a page of executions that each show their children
 * (Execution.children): one statement. Executions of another workspace, or ids of none, have none.
 */
export async function firstChildrenOf(db: Executor, workspaceId: string, parentIds: readonly string[], limit: number): Promise<JobRow[]> {
  return firstPerParent(
    db,
    'executions',
    parentIds,
    scoped(workspaceId),
    'jobs',
    (execution) =>
      db
        .selectFrom('jobs')
        .selectAll('jobs')
        .where('jobs.workspace_id', '=', scoped(workspaceId))
        .where('jobs.parent_execution_id', '=', execution),
    ID_ORDER,
    limit,
  );
}
