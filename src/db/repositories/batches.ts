/**
 * Batches (migration 000048): the rows, the lock a change of one takes, and the one call that
 * completes a closed batch whose members have all ended (jobgate_complete_batch, shared with the
 * trigger that counts a member's end).
 */
import { sql, type RawBuilder } from 'kysely';
import { cancelChannel } from '../channels.js';
import type { BatchRow, JobRow } from '../types.js';
import { cancelLiveExecutionsOf } from './executions.js';
import { firstPerParent, ID_ORDER } from './listing.js';
import { isUuid, scoped, type Executor } from './scope.js';

export async function insertBatch(
  db: Executor,
  row: { workspace_id: string; key: string | null; name: string | null; open: boolean; created_by_key_id: string | null },
): Promise<BatchRow | undefined> {
  scoped(row.workspace_id);
  // A concurrent create with the same key: nothing inserted, the caller reads the winner.
  return db
    .insertInto('batches')
    .values(row)
    .onConflict((oc) => oc.doNothing())
    .returningAll()
    .executeTakeFirst();
}

export async function findBatchByKey(db: Executor, workspaceId: string, key: string): Promise<BatchRow | undefined> {
  return db.selectFrom('batches').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('key', '=', key).executeTakeFirst();
}

export async function findBatchesByIds(db: Executor, workspaceId: string, ids: readonly string[]): Promise<BatchRow[]> {
  const uuids = ids.filter(isUuid);
  if (uuids.length === 0) return [];
  return db.selectFrom('batches').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('id', 'in', uuids).execute();
}

/** The batch each of these jobs is the onComplete job of, by job id (index batches_on_complete). */
export async function findBatchesByOnCompleteJobIds(
  db: Executor,
  workspaceId: string,
  jobIds: readonly string[],
): Promise<Map<string, BatchRow>> {
  const ids = jobIds.filter(isUuid);
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('batches')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('on_complete_job_id', 'in', ids)
    .execute();
  return new Map(rows.map((r) => [r.on_complete_job_id!, r]));
}

/** The batch locked for a change (a member added, closed): a member's end counts under the same lock. */
export async function lockBatch(db: Executor, workspaceId: string, id: string): Promise<BatchRow | undefined> {
  if (!isUuid(id)) return undefined;
  return db
    .selectFrom('batches')
    .selectAll()
    .where('workspace_id', '=', scoped(workspaceId))
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
}

/** One more member: counted before its execution exists, so its end (even at once) counts within the total. */
export async function addMember(db: Executor, id: string): Promise<void> {
  await db
    .updateTable('batches')
    .set({ total: sql`total + 1`, updated_at: sql`now()` })
    .where('id', '=', id)
    .execute();
}

export async function setOnComplete(db: Executor, id: string, jobId: string): Promise<void> {
  await db
    .updateTable('batches')
    .set({ on_complete_job_id: jobId, updated_at: sql`now()` })
    .where('id', '=', id)
    .execute();
}

/** Closes the batch (no more members) and completes it if every member has ended; the caller holds its lock. */
export async function closeBatch(db: Executor, id: string): Promise<BatchRow> {
  await db
    .updateTable('batches')
    .set({ open: false, updated_at: sql`now()` })
    .where('id', '=', id)
    .where('open', '=', true)
    .execute();
  await sql`select jobgate_complete_batch(${id}::uuid)`.execute(db);
  return db.selectFrom('batches').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

export type BatchState = 'OPEN' | 'CLOSED' | 'COMPLETED';

/** Each state as its predicate: CLOSED is closed and not completed, so the three never overlap. */
const inState: Record<BatchState, RawBuilder<boolean>> = {
  OPEN: sql<boolean>`open`,
  CLOSED: sql<boolean>`not open and completed_at is null`,
  COMPLETED: sql<boolean>`completed_at is not null`,
};

/** The workspace's batches, newest first, a page after `afterId`; `state` narrows them. */
export async function listBatches(
  db: Executor,
  workspaceId: string,
  page: { limit: number; afterId?: string; state?: BatchState | undefined },
): Promise<BatchRow[]> {
  let q = db.selectFrom('batches').selectAll().where('workspace_id', '=', scoped(workspaceId));
  if (page.state) q = q.where(inState[page.state]);
  if (page.afterId) {
    const afterId = page.afterId;
    q = q.where(({ eb, selectFrom, refTuple }) =>
      eb(
        refTuple('created_at', 'id'),
        '<',
        selectFrom('batches').select(['created_at', 'id']).where('id', '=', afterId).$asTuple('created_at', 'id'),
      ),
    );
  }
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(page.limit).execute();
}

/**
 * A member counted into its batch (`outcome`), or not yet (null): its scheduled execution carries
 * how it first ended (migration 000051). Retention keeps that execution while its job is kept
 * (src/db/statements/pruning.ts), so a member never reads as not ended once it has.
 */
const counted = (outcome: string | null) =>
  sql<boolean>`exists (select 1 from executions e where e.job_id = jobs.id and e.trigger = 'SCHEDULE' and ${
    outcome ? sql`e.batch_outcome = ${outcome}` : sql`e.batch_outcome is null`
  })`;

/** A batch's members, in id order, a page after `afterId`; `outcome` narrows them (null: not ended yet). */
export async function listMembers(
  db: Executor,
  workspaceId: string,
  batchId: string,
  page: { limit: number; afterId?: string; outcome?: 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | null | undefined },
): Promise<JobRow[]> {
  let q = db.selectFrom('jobs').selectAll().where('workspace_id', '=', scoped(workspaceId)).where('batch_id', '=', batchId);
  if (page.afterId) q = q.where('id', '>', page.afterId);
  if (page.outcome !== undefined) q = q.where(counted(page.outcome));
  return q.orderBy('id').limit(page.limit).execute();
}

/** How each of these members was counted into its batch (absent: not yet). */
export async function memberOutcomes(db: Executor, workspaceId: string, jobIds: readonly string[]): Promise<Map<string, string>> {
  const ids = jobIds.filter(isUuid);
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('executions')
    .select(['job_id', 'batch_outcome'])
    .where('workspace_id', '=', scoped(workspaceId))
    .where('job_id', 'in', ids)
    .where('trigger', '=', 'SCHEDULE')
    .where('batch_outcome', 'is not', null)
    .execute();
  return new Map(rows.map((r) => [r.job_id, r.batch_outcome!]));
}

/** Whether the batch has a member that has not ended and is not being cancelled (retired). */
export async function hasUnfinishedMembers(db: Executor, workspaceId: string, batchId: string): Promise<boolean> {
  const row = await db
    .selectFrom('jobs')
    .select('id')
    .where('workspace_id', '=', scoped(workspaceId))
    .where('batch_id', '=', batchId)
    .where('status', '<>', 'RETIRED')
    .where(counted(null))
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Cancels a batch's members that have not ended, as cancelJob cancels a job: retired, their
 * pending executions cancelled and their running ones asked to abort. One statement, which locks
 * the jobs, then their executions, each in id order, and takes the batch's row only in the trigger
 * that counts each cancelled member: so a worker ending a member (which holds its execution and
 * then wants the batch's row, never the job's: migration 000051) never waits on this in a cycle. Returns how many members it retired.
 */
export async function cancelUnfinishedMembers(db: Executor, workspaceId: string, batchId: string): Promise<number> {
  const { rows } = await sql<{ jobs: number; asked: string[] }>`
    with members as materialized (
      select id from jobs
      where workspace_id = ${scoped(workspaceId)} and batch_id = ${batchId} and status <> 'RETIRED' and ${counted(null)}
      order by id
      for no key update
    ), retired as (
      update jobs set status = 'RETIRED', retired_at = now(), next_fire_at = null, updated_at = now()
      where id in (select id from members) and status <> 'RETIRED'
      returning id, workspace_id, endpoint_id
    ), ended as (${cancelLiveExecutionsOf(sql`(workspace_id, endpoint_id, job_id) in (select workspace_id, endpoint_id, id from retired)`, 'batch cancelled')}
    )
    select (select count(*) from retired)::int as jobs, coalesce((select array_agg(id) from ended where status = 'RUNNING'), '{}') as asked`.execute(
    db,
  );
  const { jobs, asked } = rows[0]!;
  if (asked.length > 0) await sql`select pg_notify(${cancelChannel.name}, id::text) from unnest(${asked}::uuid[]) id`.execute(db);
  return jobs;
}

/**
 * The first `limit` members of each of `batchIds`, in id order, as listMembers reads one batch's
 * first page, for a page of batches that each show their members (Batch.jobs): one statement.
 * Batches of another workspace, or ids of none, have none.
 */
export async function firstMembersOf(
  db: Executor,
  workspaceId: string,
  batchIds: readonly string[],
  outcome: 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | null | undefined,
  limit: number,
): Promise<JobRow[]> {
  return firstPerParent(
    db,
    'batches',
    batchIds,
    scoped(workspaceId),
    'jobs',
    (batch) => {
      const members = db
        .selectFrom('jobs')
        .selectAll('jobs')
        .where('jobs.workspace_id', '=', scoped(workspaceId))
        .where('jobs.batch_id', '=', batch);
      return outcome === undefined ? members : members.where(counted(outcome));
    },
    ID_ORDER,
    limit,
  );
}
