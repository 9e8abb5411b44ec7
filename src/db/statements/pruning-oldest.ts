/**
 * The retention kinds pruned oldest first by age alone (the audit log, alert notifications, live
 * events): each batch deletes the workspace's oldest rows past the window, and a batch short of
 * its limit is the slice's last. Fenced, audited and paced by the pruner (./pruning.ts).
 */
import type pg from 'pg';

/**
 * The workspace's oldest $3 audit rows, those of them past the window ($2 ms). Ids grow with
 * time, so the walk stops at the first young rows instead of reading every kept one.
 */
const PRUNE_AUDIT = `
with oldest as (
  select id, created_at from audit_log where workspace_id = $1 order by id limit $3
), gone as (
  delete from audit_log a using oldest o
  where a.id = o.id and o.created_at < now() - make_interval(secs => $2::double precision / 1000)
  returning 1
)
select count(*)::int as n, (select count(*) from oldest)::int as scanned from gone`;

/** The workspace's oldest $3 alert notifications, those of them past the window (as PRUNE_AUDIT). */
const PRUNE_ALERT_NOTIFICATIONS = `
with oldest as (
  select id, created_at from alert_notifications where workspace_id = $1 order by created_at, id limit $3
), gone as (
  delete from alert_notifications a using oldest o
  where a.id = o.id and o.created_at < now() - make_interval(secs => $2::double precision / 1000)
  returning 1
)
select count(*)::int as n from gone`;

/**
 * Live events past their window, at most $3 (the workspace's by the EVENTS slice, as the hub reads
 * them by id): the workspace's replay horizon (migration 000014) moves past the newest one gone,
 * in the same statement, so a subscription asking to replay from before it is told its cursor
 * expired instead of missing them.
 */
const PRUNE_EVENTS = `
with gone as (
  delete from events where id in (
    select id from events where workspace_id = $1 and created_at < now() - make_interval(secs => $2::double precision / 1000)
    limit $3)
  returning id
), horizon as (
  update workspaces set events_pruned_through = greatest(events_pruned_through, (select max(id) from gone))
  where id = $1 and exists (select 1 from gone)
)
select count(*)::int as n from gone`;

/**
 * Live events to a batch's row: an event takes about 3 µs to delete, a batch of 10,000 about 30 ms,
 * near what a batch of 1,000 executions with their attempts takes (and one audit row for them all).
 */
export const EVENTS_PER_BATCH_ROW = 10;

const STATEMENTS = { AUDIT: PRUNE_AUDIT, ALERTS: PRUNE_ALERT_NOTIFICATIONS, EVENTS: PRUNE_EVENTS } as const;

/** Deletes at most `limit` of the workspace's rows of `kind` older than `windowMs`; returns how many. */
export async function deleteOldestRows(
  client: pg.PoolClient,
  kind: keyof typeof STATEMENTS,
  workspaceId: string,
  windowMs: number,
  limit: number,
): Promise<number> {
  const { rows } = await client.query<{ n: number }>(STATEMENTS[kind], [workspaceId, windowMs, limit]);
  return rows[0]!.n;
}
