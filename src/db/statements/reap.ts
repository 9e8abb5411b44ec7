/**
 * The reaper's statement: retires a workspace's cron jobs past their endsAt as cancelJob does, in
 * one statement (the jobs retired, their pending executions cancelled and their running ones
 * asked to stop by the same statement as cancelJob's, each retirement audited as jobgate itself).
 * Locks are taken as cancelJob takes them: the jobs first, then their executions, each in id order.
 * And the workspace's full key rate buckets, which mean no more than no row (deleteFullKeyBuckets).
 */
import { Kysely, PostgresDialect, sql } from 'kysely';
import type pg from 'pg';
import { cancelChannel } from '../channels.js';
import { cancelLiveExecutionsOf } from '../repositories/executions.js';
import type { DB } from '../types.js';
import { tokensNow } from './claim.js';

// The reaper runs on the engine's pool; its statement is built with the repository's fragment.
const kyselyOf = new WeakMap<pg.Pool, Kysely<DB>>();
function over(pool: pg.Pool): Kysely<DB> {
  let db = kyselyOf.get(pool);
  if (!db) kyselyOf.set(pool, (db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) })));
  return db;
}

/** Retires ended cron jobs of one workspace; returns how many jobs, and the executions asked to stop. */
export async function reapEndedCronJobsOf(pool: pg.Pool, workspaceId: string): Promise<{ jobs: number; asked: string[] }> {
  const { rows } = await sql<{ jobs: number; asked: string[] }>`
    with ended_jobs as materialized (
      -- Ended: a cron job whose endsAt has passed and that is not retired yet. Locked in id order
      -- (re-checked once locked), then updated, so two passes over the same jobs wait in turn.
      select id from jobs
      where workspace_id = ${workspaceId} and kind = 'CRON' and status <> 'RETIRED' and ends_at is not null and ends_at <= now()
      order by id
      for no key update
    ), reaped as (
      update jobs set status = 'RETIRED', retired_at = now(), next_fire_at = null, updated_at = now()
      where id in (select id from ended_jobs) and status <> 'RETIRED'
      returning id, workspace_id, endpoint_id
    ), ended as (${cancelLiveExecutionsOf(sql`(workspace_id, endpoint_id, job_id) in (select workspace_id, endpoint_id, id from reaped)`, 'job ended (endsAt passed)')}
    ), audited as (
      insert into audit_log (workspace_id, actor_kind, action, target_type, target_id, input, result_code)
      select workspace_id, 'system', 'job.reap', 'Job', id::text, '{}'::jsonb, 'OK' from reaped
    )
    select (select count(*) from reaped)::int as jobs, coalesce((select array_agg(id) from ended where status = 'RUNNING'), '{}') as asked`.execute(
    over(pool),
  );
  return rows[0]!;
}

/** Asks the workers running these executions to abort them (a hint; heartbeats carry it too). */
export async function notifyCancel(pool: pg.Pool, executionIds: string[]): Promise<void> {
  for (const id of executionIds)
    await pool.query('select pg_notify($1, $2)', [cancelChannel.name, cancelChannel.encode({ executionId: id })]);
}

/**
 * Deletes the concurrency keys' rate buckets of a workspace's endpoints that are full now (or
 * whose endpoint no longer limits keys): no row reads as a full bucket, so nothing changes but
 * the table's size, which would otherwise grow with every key ever started. The rows are locked
 * first, in key order, skipping any a claim holds (a claim spends several keys' buckets in one
 * statement: waiting for one of them while holding others could deadlock with it); a row a claim
 * wrote since this statement began is read again, and left if no longer full. At most `batch`
 * rows; returns how many.
 */
export async function deleteFullKeyBuckets(pool: pg.Pool, workspaceId: string, batch = 10_000): Promise<number> {
  const { rowCount } = await pool.query(
    `delete from endpoint_key_rate_buckets kb
     where (kb.endpoint_id, kb.concurrency_key) in (
       select b.endpoint_id, b.concurrency_key
       from endpoint_key_rate_buckets b join endpoints en on en.id = b.endpoint_id
       where en.workspace_id = $1
         and (en.key_rate_limit_count is null or ${tokensNow('en', 'b', 'key_rate_limit')} >= en.key_rate_limit_burst)
       order by b.endpoint_id, b.concurrency_key
       limit $2
       for update of b skip locked)`,
    [workspaceId, batch],
  );
  return rowCount ?? 0;
}
