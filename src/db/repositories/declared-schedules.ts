/**
 * Declared schedules are cron jobs with a `schedule_name` (unique among live jobs: the partial
 * index `jobs_live_schedule_name`). What declaring them reads and locks.
 */
import { LOCK_CLASS } from '../advisory-locks.js';
import { sql } from 'kysely';
import type { JobRow } from '../types.js';
import { scoped, type Executor } from './scope.js';

/** The advisory-lock class of schedule declarations (its key is the workspace). */
const SCHEDULE_LOCK = LOCK_CLASS.scheduleDeclarations;

/**
 * Takes the workspace's declaration lock until the caller's transaction ends: replicas declaring
 * at once run one after another, and every one after the first finds its work done.
 */
export async function lockScheduleDeclarations(ex: Executor, workspaceId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(${SCHEDULE_LOCK}, hashtext(${scoped(workspaceId)}))`.execute(ex);
}

/** The live (not retired) job declared under this name, locked for update, if any. */
export async function findDeclaredJobForUpdate(ex: Executor, workspaceId: string, name: string): Promise<JobRow | undefined> {
  const { rows } = await sql<JobRow>`select * from jobs where workspace_id = ${scoped(workspaceId)} and schedule_name = ${name}
                                     and status <> 'RETIRED' for update`.execute(ex);
  return rows[0];
}

/** The ids of the live declared jobs whose names are not in `names`, by schedule name. */
export async function declaredJobsNotNamed(ex: Executor, workspaceId: string, names: string[]): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`select id from jobs where workspace_id = ${scoped(workspaceId)}
    and schedule_name is not null and status <> 'RETIRED' and not (schedule_name = any(${names}::text[])) order by schedule_name`.execute(
    ex,
  );
  return rows.map((r) => r.id);
}
