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
 * Each kind's statement, the table it counts in, and its rows to a batch's row: an event takes
 * about 3 µs to delete, so 10,000 of them (about 30 ms) are near what a batch of 1,000 executions
 * with their attempts takes, with one audit row for them all.
 */
const KINDS = {
  AUDIT: { statement: PRUNE_AUDIT, table: 'audit_log', perRow: 1 },
  ALERTS: { statement: PRUNE_ALERT_NOTIFICATIONS, table: 'alert_notifications', perRow: 1 },
  EVENTS: { statement: PRUNE_EVENTS, table: 'events', perRow: 10 },
} as const;

export type OldestKind = keyof typeof KINDS;

/** Live events to a batch's row (KINDS). */
export const EVENTS_PER_BATCH_ROW = KINDS.EVENTS.perRow;

/**
 * Deletes the workspace's rows of `kind` older than `windowMs`, at most a batch of `batch` rows
 * (scaled for the kind); returns the table, how many went, and whether that was the last batch.
 */
export async function deleteOldestRows(
  client: pg.PoolClient,
  kind: OldestKind,
  workspaceId: string,
  windowMs: number,
  batch: number,
): Promise<{ table: (typeof KINDS)[OldestKind]['table']; n: number; last: boolean }> {
  const { statement, table, perRow } = KINDS[kind];
  const limit = batch * perRow;
  const { rows } = await client.query<{ n: number }>(statement, [workspaceId, windowMs, limit]);
  const n = rows[0]!.n;
  return { table, n, last: n < limit };
}
