import { sql } from 'kysely';
import type { JobPatch, JobRow, JobStatus, NewJob } from '../types.js';
import type { ListOrder } from './keyset.js';
import { countAtMost, countPerParent, likePrefix, firstPerParent, NEWEST_FIRST, orderedPage, searchedPage } from './listing.js';
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

/** The workspace's jobs among `ids` (malformed ids name none), in no order. */
export async function findJobsByIds(db: Executor, workspaceId: string, ids: readonly string[]): Promise<JobRow[]> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return [];
  return db.selectFrom('jobs').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('id', 'in', valid).execute();
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

/**
 * The workspace's jobs among `ids`, locked for update in id order: two calls locking overlapping
 * sets take their locks in one order, so they cannot deadlock. Ids that are not uuids match nothing.
 */
export async function lockJobsByIds(db: Executor, workspaceId: string, ids: readonly string[]): Promise<JobRow[]> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return [];
  return db
    .selectFrom('jobs')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', 'in', valid)
    .orderBy('id')
    .forUpdate()
    .execute();
}

/** Pauses the ACTIVE jobs among `ids` (locked by the caller): no next fire time. Returns the jobs it paused. */
export async function pauseActiveJobs(db: Executor, workspaceId: string, ids: readonly string[]): Promise<JobRow[]> {
  if (ids.length === 0) return [];
  return db
    .updateTable('jobs')
    .set({ status: 'PAUSED', next_fire_at: null, updated_at: sql<Date>`now()` })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', 'in', ids)
    .where('status', '=', 'ACTIVE')
    .returningAll()
    .execute();
}

/**
 * Withdraws the job's occurrence written ahead of its time, if one is still ahead (clearing
 * ahead_at: the jobs_withdraw_ahead trigger deletes it and puts next_fire_at back to it, so the
 * scheduler writes it again, or decides it at its time under overlap SKIP).
 */
export async function withdrawAheadOccurrence(db: Executor, workspaceId: string, jobId: string): Promise<void> {
  await db
    .updateTable('jobs')
    .set({ ahead_at: null })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', jobId)
    .where('ahead_at', '>', sql<Date>`now()`)
    .execute();
}

/**
 * Resumes the PAUSED jobs among `items` (locked by the caller), one statement for all: a CRON
 * job's next fire time is set to the one given (`cron: true`), any other job's left as it is.
 * Compare-and-set on PAUSED: returns the jobs it resumed.
 */
export async function resumePausedJobs(
  db: Executor,
  workspaceId: string,
  items: readonly { id: string; cron: boolean; nextFireAt: Date | null }[],
): Promise<JobRow[]> {
  if (items.length === 0) return [];
  const { rows } = await sql<JobRow>`
    update jobs j
    set status = 'ACTIVE', next_fire_at = case when v.cron then v.next_fire_at else j.next_fire_at end, updated_at = now()
    from unnest(${items.map((i) => i.id)}::uuid[], ${items.map((i) => i.cron)}::boolean[],
                ${items.map((i) => i.nextFireAt)}::timestamptz[]) v(id, cron, next_fire_at)
    where j.workspace_id = ${scoped(workspaceId)} and j.id = v.id and j.status = 'PAUSED'
    returning j.*`.execute(db);
  return rows;
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

export interface JobListFilter {
  status?: JobStatus | null | undefined;
  kind?: string | null | undefined;
  endpointId?: string | null | undefined;
  includeInternal?: boolean | null | undefined;
  /** A prefix of the name (any case) or of the idempotency key (exact case). */
  search?: string | null | undefined;
}

/**
 * The rows of a workspace's job list, before order and page; undefined when a filter names an
 * id that cannot exist. Search is served by two prefix indexes (migration 000017): on
 * lower(name) and on idempotency_key, both per workspace.
 */
function filteredJobs(db: Executor, workspaceId: string, f: JobListFilter) {
  let q = db.selectFrom('jobs').where('jobs.workspace_id', '=', scoped(workspaceId));
  if (!f.includeInternal) {
    q = q.where(({ exists, selectFrom }) =>
      exists(selectFrom('endpoints as en').select('en.id').whereRef('en.id', '=', 'jobs.endpoint_id').where('en.type', '=', 'USER')),
    );
  }
  if (f.status) q = q.where('status', '=', f.status);
  if (f.kind) q = q.where('kind', '=', f.kind as JobRow['kind']);
  if (f.endpointId) {
    if (!isUuid(f.endpointId)) return undefined;
    q = q.where('endpoint_id', '=', f.endpointId);
  }
  if (f.search) {
    const pattern = likePrefix(f.search);
    const lowered = likePrefix(f.search.toLowerCase());
    q = q.where((eb) => eb.or([eb(sql`lower(jobs.name)`, 'like', lowered), eb('idempotency_key', 'like', pattern)]));
  }
  return q;
}

export async function listJobs(
  db: Executor,
  workspaceId: string,
  opts: JobListFilter & { limit: number; afterId?: string | undefined; order?: ListOrder | null | undefined },
): Promise<JobRow[]> {
  const base = filteredJobs(db, workspaceId, opts);
  if (!base) return [];
  if (opts.search) return searchedPage(db, base, 'jobs', workspaceId, opts);
  return orderedPage(base.selectAll(), 'jobs', workspaceId, opts).execute();
}

/** How many jobs match, counting at most `limit` (see COUNT_LIMIT). */
export async function countJobs(db: Executor, workspaceId: string, filter: JobListFilter, limit: number): Promise<number> {
  const base = filteredJobs(db, workspaceId, filter);
  return base ? countAtMost(db, base, limit) : 0;
}

/**
 * DEBOUNCE (createJob): the job's execution, while it is PENDING with no attempt made, takes a new
 * input and start; the job's input (and a DELAYED job's run_at) follow. The job as it is then, or
 * undefined when the execution is past that point (claimed since it was read).
 */
export async function debounceJob(
  db: Executor,
  workspaceId: string,
  jobId: string,
  executionId: string,
  change: { input: string; startAt: Date },
): Promise<JobRow | undefined> {
  const moved = await db
    .updateTable('executions')
    .set({ input: change.input, run_after: change.startAt, scheduled_for: change.startAt, updated_at: sql<Date>`now()` })
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', executionId)
    .where('job_id', '=', jobId)
    .where('status', '=', 'PENDING')
    .where('attempt_count', '=', 0)
    .returning('id')
    .executeTakeFirst();
  if (!moved) return undefined;
  return db
    .updateTable('jobs')
    .set((eb) => ({
      input: change.input,
      run_at: eb.case().when('kind', '=', 'DELAYED').then(change.startAt).else(eb.ref('run_at')).end(),
      updated_at: sql<Date>`now()`,
    }))
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', jobId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * The first `limit` jobs of each of `endpointIds` that `filter` matches, newest first, for a page
 * of endpoints that each show their jobs (Endpoint.jobs): one probe of the endpoint's jobs per
 * endpoint, in one statement. Endpoints of another workspace, or ids of none, have none.
 */
export async function firstJobsOfEndpoints(
  db: Executor,
  workspaceId: string,
  endpointIds: readonly string[],
  filter: Omit<JobListFilter, 'endpointId' | 'search'>,
  limit: number,
): Promise<JobRow[]> {
  const base = filteredJobs(db, workspaceId, { ...filter, endpointId: null, search: null })!;
  return firstPerParent(
    db,
    'endpoints',
    endpointIds,
    scoped(workspaceId),
    'jobs',
    (endpoint) => base.where('jobs.endpoint_id', '=', endpoint).selectAll('jobs'),
    NEWEST_FIRST,
    limit,
  );
}

/** How many jobs of each of `endpointIds` match `filter`, counting at most `limit` each (0 for none); ids of no endpoint of the workspace are left out. */
export async function countJobsOfEndpoints(
  db: Executor,
  workspaceId: string,
  endpointIds: readonly string[],
  filter: Omit<JobListFilter, 'endpointId' | 'search'>,
  limit: number,
): Promise<Map<string, number>> {
  const base = filteredJobs(db, workspaceId, { ...filter, endpointId: null, search: null })!;
  return countPerParent(
    db,
    'endpoints',
    endpointIds,
    scoped(workspaceId),
    (endpoint) => base.where('jobs.endpoint_id', '=', endpoint),
    limit,
  );
}
