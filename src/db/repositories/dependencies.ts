/**
 * Dependencies between jobs (migration 000047): the edges, what a new dependent reads of its
 * prerequisites, and the one call that settles dependents. What settling means is SQL's
 * (jobgate_settle_dependents), shared with the trigger that runs when a prerequisite ends.
 */
import { sql } from 'kysely';
import type { JobDependencyRow, JobRow } from '../types.js';
import { firstPerParent, ID_ORDER } from './listing.js';
import { isUuid, scoped, type Executor } from './scope.js';

export type PrerequisiteOutcome = 'SUCCEEDED' | 'FAILED' | 'CANCELLED';

export interface Prerequisite {
  jobId: string;
  kind: string;
  /** Its scheduled execution's status, read under a row lock; null when it has none. */
  status: string | null;
}

/**
 * The jobs among `ids` in the workspace, each with its scheduled execution's status, that
 * execution marked as having dependents (has_dependents) and locked: so the update that ends it
 * waits for this transaction, and its trigger then sees the dependent this transaction creates;
 * or it ended before, and the status read here is its end. Executions are locked in id order, as
 * every statement that locks several (src/db/statements/lease.ts). Ids that name no job of the
 * workspace are left out.
 */
export async function markPrerequisites(db: Executor, workspaceId: string, ids: readonly string[]): Promise<Prerequisite[]> {
  const uuids = ids.filter(isUuid);
  if (uuids.length === 0) return [];
  const { rows } = await sql<{ job_id: string; kind: string; status: string | null }>`
    with jobs_asked as materialized (
      -- FOR KEY SHARE, the lock a foreign key took before migration 000059: a prune of the job
      -- (FOR UPDATE) skips it until this transaction ends, or this waits and finds it gone.
      select j.id, j.kind from jobs j where j.workspace_id = ${scoped(workspaceId)} and j.id = any(${uuids}::uuid[])
      order by j.id
      for key share
    ), locked as materialized (
      select e.id from executions e
      where e.workspace_id = ${workspaceId} and e.job_id in (select id from jobs_asked where kind <> 'CRON') and e.trigger = 'SCHEDULE'
      order by e.id
      for no key update
    ), marked as (
      update executions e set has_dependents = true
      from locked l where e.id = l.id
      returning e.job_id, e.status
    )
    select a.id as job_id, a.kind, m.status from jobs_asked a left join marked m on m.job_id = a.id`.execute(db);
  return rows.map((r) => ({ jobId: r.job_id, kind: r.kind, status: r.status }));
}

/** Records that `jobId` depends on each of `prerequisites`, with the outcome each already has (null: not ended). */
export async function insertDependencies(
  db: Executor,
  workspaceId: string,
  jobId: string,
  prerequisites: readonly { jobId: string; outcome: PrerequisiteOutcome | null }[],
): Promise<void> {
  if (prerequisites.length === 0) return;
  await sql`
    insert into job_dependencies (job_id, prerequisite_id, workspace_id, outcome, resolved_at, position)
    select ${jobId}, p.id, ${scoped(workspaceId)}, p.outcome, case when p.outcome is null then null else now() end, p.position
    from unnest(${prerequisites.map((p) => p.jobId)}::uuid[], ${prerequisites.map((p) => p.outcome)}::text[])
      with ordinality p(id, outcome, position)`.execute(db);
}

/**
 * Settles `jobIds` (their rows locked by the caller): released, or retired under CANCEL when a
 * prerequisite failed, or left waiting (jobgate_settle_dependents, migration 000047).
 */
export async function settleDependents(db: Executor, jobIds: readonly string[]): Promise<void> {
  if (jobIds.length === 0) return;
  await sql`select jobgate_settle_dependents(${[...jobIds]}::uuid[])`.execute(db);
}

/** The prerequisites of each of `jobIds` (its edges), in the order its dependsOn named them: for Job.dependsOn, batched. */
export async function dependenciesOf(db: Executor, workspaceId: string, jobIds: readonly string[]): Promise<JobDependencyRow[]> {
  if (jobIds.length === 0) return [];
  return db
    .selectFrom('job_dependencies')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('job_id', 'in', [...jobIds])
    .orderBy('job_id')
    .orderBy('position')
    .execute();
}

/** The edges from `prerequisiteId` to its dependents, a page in dependent id order after `afterJobId`. */
export async function dependentsOf(
  db: Executor,
  workspaceId: string,
  prerequisiteId: string,
  page: { limit: number; afterJobId?: string | null },
): Promise<JobDependencyRow[]> {
  let q = db
    .selectFrom('job_dependencies')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('prerequisite_id', '=', prerequisiteId);
  if (page.afterJobId) q = q.where('job_id', '>', page.afterJobId);
  return q.orderBy('job_id').limit(page.limit).execute();
}

/** Of the jobs `jobIds`, the prerequisites each still waits for (no outcome yet): for waitingFor. */
export async function openPrerequisitesOf(db: Executor, workspaceId: string, jobIds: readonly string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (jobIds.length === 0) return out;
  const rows = await db
    .selectFrom('job_dependencies')
    .select(['job_id', 'prerequisite_id'])
    .where('workspace_id', '=', scoped(workspaceId))
    .where('job_id', 'in', [...jobIds])
    .where('outcome', 'is', null)
    .orderBy('job_id')
    .orderBy('prerequisite_id')
    .execute();
  for (const r of rows) out.set(r.job_id, [...(out.get(r.job_id) ?? []), r.prerequisite_id]);
  return out;
}

/**
 * The first `limit` dependents of each of `prerequisiteIds` (the jobs that name it in their
 * dependsOn), in id order, each with the prerequisite it was read for, as dependentsOf and
 * findJobsByIds read one job's first page, for a page of jobs that each show their dependents
 * (Job.dependents): one statement. Jobs of another workspace, or ids of none, have none.
 */
export async function firstDependentsOf(
  db: Executor,
  workspaceId: string,
  prerequisiteIds: readonly string[],
  limit: number,
): Promise<(JobRow & { prerequisite_id: string })[]> {
  return firstPerParent(
    db,
    'jobs',
    prerequisiteIds,
    scoped(workspaceId),
    // In the dependents' id order: jobs.id is d.job_id.
    'jobs',
    (job) =>
      db
        .selectFrom('job_dependencies as d')
        .innerJoin('jobs', (on) => on.onRef('jobs.id', '=', 'd.job_id').on('jobs.workspace_id', '=', scoped(workspaceId)))
        .selectAll('jobs')
        .select('d.prerequisite_id')
        .where('d.workspace_id', '=', scoped(workspaceId))
        .where('d.prerequisite_id', '=', job),
    ID_ORDER,
    limit,
  );
}
