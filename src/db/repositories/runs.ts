/**
 * Recoverable runs as operators drive them: read, trigger (insert or resume), cancel, list. The
 * runner's own statements (take, checkpoint, fence) are the engine's. At most one live run per
 * (workspace, name) is the partial unique index `runs_one_live_per_name`; the writes here lean
 * on it and on the row lock the caller took.
 */
import { sql, type Expression, type SqlBool } from 'kysely';
import { runWaitingChannel } from '../channels.js';
import type { RunRecord, RunStatus } from '../types.js';
import { afterCursor } from './keyset.js';
import { scoped, type Executor } from './scope.js';

/** The workspace's run with this id (locked for update when asked), if any. `id` must be a UUID. */
export async function findRunById(
  ex: Executor,
  workspaceId: string,
  id: string,
  opts: { forUpdate?: boolean } = {},
): Promise<RunRecord | undefined> {
  const lock = opts.forUpdate ? sql` for update` : sql``;
  const { rows } = await sql<RunRecord>`select * from runs where workspace_id = ${scoped(workspaceId)} and id = ${id}${lock}`.execute(ex);
  return rows[0];
}

/** The live (RUNNING, CANCEL_REQUESTED or PAUSED) run of this name, locked for update; at most one exists. */
export async function findLiveRunForUpdate(ex: Executor, workspaceId: string, name: string): Promise<RunRecord | undefined> {
  const { rows } = await sql<RunRecord>`
    select * from runs where workspace_id = ${scoped(workspaceId)} and name = ${name}
      and status in ('RUNNING', 'CANCEL_REQUESTED', 'PAUSED') for update`.execute(ex);
  return rows[0];
}

/**
 * A fresh RUNNING run, unless a live one of the name exists (the partial unique index refuses
 * it: undefined, and the caller's transaction stays usable to read the winner).
 */
export async function insertRunUnlessLive(
  ex: Executor,
  run: { workspaceId: string; name: string; params: unknown; createdByKeyId: string | null },
): Promise<RunRecord | undefined> {
  const { rows } = await sql<RunRecord>`
    insert into runs (workspace_id, name, params, created_by_key_id)
    values (${scoped(run.workspaceId)}, ${run.name}, ${JSON.stringify(run.params)}, ${run.createdByKeyId})
    on conflict do nothing returning *`.execute(ex);
  return rows[0];
}

/** Wakes the runners that have handler `name` (sent with the caller's transaction, so they see its run). */
export async function notifyRunWaiting(ex: Executor, name: string): Promise<void> {
  await sql`select pg_notify(${runWaitingChannel.name}, ${runWaitingChannel.encode({ name })})`.execute(ex);
}

/**
 * Resumes a PAUSED run with its cursor, stats and started_at: RUNNING again, owned by no runner
 * (any runner with the handler takes it), at once and with its retry budget whole (an operator
 * resumed it: a backoff it was cancelled in does not hold it back). Undefined when it is not PAUSED.
 */
export async function resumePausedRun(ex: Executor, id: string): Promise<RunRecord | undefined> {
  const { rows } = await sql<RunRecord>`
    update runs set status = 'RUNNING', owner = null, pause_reason = null, pause_kind = null, retry_attempts = 0, resume_after = null,
      updated_at = now()
    where id = ${id} and status = 'PAUSED' returning *`.execute(ex);
  return rows[0];
}

/** The newest run of this name, locked for update (what a trigger from its checkpoint would resume). */
export async function findLatestRunForUpdate(ex: Executor, workspaceId: string, name: string): Promise<RunRecord | undefined> {
  const { rows } = await sql<RunRecord>`
    select * from runs where workspace_id = ${scoped(workspaceId)} and name = ${name}
    order by created_at desc, id desc limit 1 for update`.execute(ex);
  return rows[0];
}

/**
 * A FAILED run live again from its last checkpoint (cursor, stats, processed and started_at kept),
 * RUNNING and owned by no runner, its retry budget whole. Undefined when it is not FAILED. The
 * partial unique index refuses it (unique violation) when another run of the name is live.
 */
export async function resumeFailedRun(ex: Executor, id: string): Promise<RunRecord | undefined> {
  const { rows } = await sql<RunRecord>`
    update runs set status = 'RUNNING', owner = null, error = null, finished_at = null, retry_attempts = 0,
      resume_after = null, updated_at = now()
    where id = ${id} and status = 'FAILED' returning *`.execute(ex);
  return rows[0];
}

/**
 * A run already paused (by a crash or its handler) marked as cancelled by an operator, keeping
 * why it had paused in its reason: its schedule no longer resumes it.
 */
export async function markPausedRunCancelled(ex: Executor, id: string): Promise<RunRecord> {
  const { rows } = await sql<RunRecord>`
    update runs set pause_kind = 'CANCELLED', pause_reason = 'cancelled by an operator (was: ' || coalesce(pause_reason, 'paused') || ')', updated_at = now()
    where id = ${id} returning *`.execute(ex);
  return rows[0]!;
}

/** A live run no runner holds, paused at once as cancelled by an operator. */
export async function pauseRunCancelled(ex: Executor, id: string): Promise<RunRecord> {
  const { rows } = await sql<RunRecord>`
    update runs set status = 'PAUSED', pause_kind = 'CANCELLED', pause_reason = 'cancelled by an operator', updated_at = now()
    where id = ${id} returning *`.execute(ex);
  return rows[0]!;
}

/** A held, RUNNING run asked to stop at its next safe boundary (its handler sees CANCEL_REQUESTED). */
export async function requestRunCancel(ex: Executor, id: string): Promise<RunRecord> {
  const { rows } =
    await sql<RunRecord>`update runs set status = 'CANCEL_REQUESTED', updated_at = now() where id = ${id} returning *`.execute(ex);
  return rows[0]!;
}

export interface RunListFilter {
  name?: string | null | undefined;
  status?: RunStatus | null | undefined;
}

/** The workspace's runs, newest first, after the cursor row `afterId` when given, at most `limit`. */
export async function runPage(
  ex: Executor,
  workspaceId: string,
  filter: RunListFilter,
  opts: { limit: number; afterId?: string | undefined },
): Promise<RunRecord[]> {
  const ws = scoped(workspaceId);
  const after: Expression<SqlBool> = opts.afterId ? afterCursor('runs', opts.afterId, ws) : sql<SqlBool>`true`;
  const { rows } = await sql<RunRecord>`
    select * from runs where workspace_id = ${ws}
      and (${filter.name ?? null}::text is null or name = ${filter.name ?? null})
      and (${filter.status ?? null}::text is null or status = ${filter.status ?? null})
      and ${after}
    order by created_at desc, id desc limit ${opts.limit}`.execute(ex);
  return rows;
}

/** How many of the workspace's runs match `filter`, counting at most `limit` (COUNT_LIMIT): the scan stops there. */
export async function countRuns(ex: Executor, workspaceId: string, filter: RunListFilter, limit: number): Promise<number> {
  const ws = scoped(workspaceId);
  const { rows } = await sql<{ n: string }>`
    select count(*) as n from (
      select 1 from runs where workspace_id = ${ws}
        and (${filter.name ?? null}::text is null or name = ${filter.name ?? null})
        and (${filter.status ?? null}::text is null or status = ${filter.status ?? null})
      limit ${limit}) matching`.execute(ex);
  return Number(rows[0]!.n);
}

/**
 * The newest run of each name: one probe per name of `runs_workspace_name_created` (migration
 * 000011), not a sort of every run the handler ever had.
 */
export async function latestRunsByName(ex: Executor, workspaceId: string, names: string[]): Promise<RunRecord[]> {
  if (names.length === 0) return [];
  const { rows } = await sql<RunRecord>`
    select r.* from unnest(${names}::text[]) as n(name)
    cross join lateral (
      select * from runs where workspace_id = ${scoped(workspaceId)} and name = n.name order by created_at desc, id desc limit 1
    ) r`.execute(ex);
  return rows;
}
