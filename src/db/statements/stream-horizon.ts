/**
 * Where a replayable stream's positions stand, for checking an `after` cursor when a stream is
 * opened: the last id each sequence handed out (a cursor above it names nothing), and the
 * workspace's highest pruned event id (a cursor below it would skip what was pruned).
 */
import { sql } from 'kysely';
import { scoped, type Executor } from '../repositories/scope.js';

/** The workspace's pruned-through event id and the last event id handed out (0 before the first). */
export async function eventHorizon(ex: Executor, workspaceId: string): Promise<{ prunedThrough: bigint; latest: bigint }> {
  const { rows } = await sql<{ pruned: string | number; latest: string | number }>`
    select events_pruned_through as pruned,
           (select case when is_called then last_value else 0 end from events_id_seq) as latest
    from workspaces where id = ${scoped(workspaceId)}`.execute(ex);
  return { prunedThrough: BigInt(rows[0]!.pruned), latest: BigInt(rows[0]!.latest) };
}

/** The last finding id handed out, installation-wide (0 before the first). */
export async function latestFindingId(ex: Executor): Promise<bigint> {
  const { rows } = await sql<{ latest: string | number }>`
    select case when is_called then last_value else 0 end as latest from findings_id_seq`.execute(ex);
  return BigInt(rows[0]!.latest);
}
