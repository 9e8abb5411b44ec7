import { sql } from 'kysely';
import type { JobPatch, JobRow, JobStatus, NewJob } from '../types.js';
import { afterCursor } from '../../service/pagination.js';
import { isUuid, scoped, type Executor } from './scope.js';

export async function findJobById(
  db: Executor,
  workspaceId: string,
  id: string,
  opts: { forUpdate?: boolean } = {},
): Promise<JobRow | undefined> {
  if (!isUuid(id)) return undefined;
  let q = db.selectFrom('jobs').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('id', '=', id);
  if (opts.forUpdate) q = q.forUpdate();
  return q.executeTakeFirst();
}

export async function findJobByIdempotencyKey(
  db: Executor,
  workspaceId: string,
  endpointId: string,
  key: string,
): Promise<JobRow | undefined> {
  return db
    .selectFrom('jobs')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('endpoint_id', '=', endpointId)
    .where('idempotency_key', '=', key)
    .executeTakeFirst();
}

/**
 * Inserts the job unless a job with the same (workspace, endpoint, idempotency key) exists.
 * `on conflict do nothing` makes a lost race an empty result instead of a unique violation, so
 * the caller's transaction stays usable and it can read the winner. Keyless jobs (key NULL)
 * never conflict: NULLs are distinct in the unique index.
 */
export async function insertJobUnlessKeyTaken(db: Executor, row: NewJob): Promise<JobRow | undefined> {
  scoped(row.workspace_id);
  return db
    .insertInto('jobs')
    .values(row)
    .onConflict((oc) => oc.columns(['workspace_id', 'endpoint_id', 'idempotency_key']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export async function updateJob(db: Executor, workspaceId: string, id: string, patch: JobPatch): Promise<JobRow> {
  return db
    .updateTable('jobs')
    .set(patch)
    .set({ updated_at: sql<Date>`now()` })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function countLiveJobsOnEndpoint(db: Executor, workspaceId: string, endpointId: string): Promise<number> {
  const row = await db
    .selectFrom('jobs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('workspace_id', '=', scoped(workspaceId))
    .where('endpoint_id', '=', endpointId)
    .where('status', '<>', 'RETIRED')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function listJobs(
  db: Executor,
  workspaceId: string,
  opts: {
    limit: number;
    afterId?: string | undefined;
    status?: JobStatus | null | undefined;
    kind?: string | null | undefined;
    endpointId?: string | null | undefined;
    includeInternal?: boolean | null | undefined;
  },
): Promise<JobRow[]> {
  let q = db.selectFrom('jobs').selectAll().where('workspace_id', '=', scoped(workspaceId));
  if (!opts.includeInternal) {
    q = q.where(({ exists, selectFrom }) =>
      exists(selectFrom('endpoints as en').select('en.id').whereRef('en.id', '=', 'jobs.endpoint_id').where('en.type', '=', 'USER')),
    );
  }
  if (opts.status) q = q.where('status', '=', opts.status);
  if (opts.kind) q = q.where('kind', '=', opts.kind as JobRow['kind']);
  if (opts.endpointId) {
    if (!isUuid(opts.endpointId)) return [];
    q = q.where('endpoint_id', '=', opts.endpointId);
  }
  if (opts.afterId) q = q.where(afterCursor('jobs', opts.afterId, workspaceId));
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(opts.limit).execute();
}
