/**
 * The recoverable runner's statements (src/service/engine/runs/recoverable.ts, src/service/engine/runs/run-store.ts).
 *
 * The fence: a runner holds a run while the row has its owner id and the epoch its take set,
 * and the run is live. Every write a runner makes says so in its WHERE clause
 * (`id = $1 and epoch = $2 and owner = $3`), so a runner that lost the run (swept as crashed,
 * resumed and taken by another) changes nothing; a write that matches no row tells it so.
 */
import type pg from 'pg';
import type { RunRecord, RunStatus, Severity } from '../types.js';

export type { RunStatus, Severity } from '../types.js';

/** Which run, under which take: the fence of every write below. */
export interface RunFence {
  runId: string;
  epoch: number;
  owner: string;
}

const fenceValues = (f: RunFence) => [f.runId, f.epoch, f.owner];

/** What takeRun returns: the run's row, with its cursor encoding and the epoch this runner now holds. */
export type TakenRun = Pick<
  RunRecord,
  | 'id'
  | 'workspace_id'
  | 'name'
  | 'status'
  | 'params'
  | 'cursor'
  | 'cursor_json'
  | 'stats'
  | 'processed'
  | 'started_at'
  | 'epoch'
  | 'retry_attempts'
>;

/**
 * Takes one unowned live run of a handler this runner has: SKIP LOCKED splits runs between
 * runners, the epoch bump fences out any earlier owner. It records this runner's staleness window
 * on the run, so every sweeper judges the run by its owner's heartbeat cadence.
 */
const TAKE = `
update runs r set owner = $1, epoch = r.epoch + 1, stale_ms = $3, heartbeat_at = now(), resume_after = null, updated_at = now()
where r.id = (
  select id from runs
  where status in ('RUNNING', 'CANCEL_REQUESTED') and owner is null and name = any($2::text[])
    -- Handed back after a database failure: not before its backoff (migration 000015).
    and (resume_after is null or resume_after <= now())
  order by updated_at limit 1
  for update skip locked
)
returning r.id, r.workspace_id, r.name, r.status, r.params, r.cursor, r.cursor_json, r.stats, r.processed, r.started_at, r.epoch, r.retry_attempts`;

export async function takeRun(pool: pg.Pool, owner: string, names: string[], staleMs: number): Promise<TakenRun | undefined> {
  const { rows } = await pool.query<TakenRun>(TAKE, [owner, names, staleMs]);
  return rows[0];
}

/**
 * Runs whose owner stopped heartbeating for longer than the owner's own window (recorded on the
 * run when taken; the sweeper's `$1` only for runs taken before that was recorded): paused with
 * the reason and kind (CRASHED; CANCELLED when an operator had asked it to stop), for an operator
 * or its schedule to resume. A healthy runner with a long window is never swept by
 * one with a short window. Served by the partial index runs_owned_heartbeat. The stale runs are
 * locked in id order (re-checked once locked) before the update, so sweepers of several workers
 * running at once wait on each other in turn instead of in a cycle.
 */
const SWEEP = `
with stale as materialized (
  select id from runs
  where status in ('RUNNING', 'CANCEL_REQUESTED') and owner is not null
    and heartbeat_at < now() - make_interval(secs => coalesce(stale_ms, $1::double precision) / 1000)
  order by id
  for no key update
)
update runs set status = 'PAUSED', owner = null,
  -- An operator had asked it to stop: it stays an operator's pause (schedules do not resume it).
  pause_kind = case when status = 'CANCEL_REQUESTED' then 'CANCELLED' else 'CRASHED' end,
  pause_reason = 'its worker stopped heartbeating (killed or lost) at ' || to_char(heartbeat_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
  updated_at = now()
where id in (select id from stale)
returning id, name`;

export async function sweepStaleRuns(pool: pg.Pool, staleMs: number): Promise<{ id: string; name: string }[]> {
  return (await pool.query<{ id: string; name: string }>(SWEEP, [staleMs])).rows;
}

/** The run's heartbeat; false when the run is no longer this runner's. */
export async function heartbeatRun(pool: pg.Pool, fence: RunFence): Promise<boolean> {
  const res = await pool.query(`update runs set heartbeat_at = now() where id = $1 and epoch = $2 and owner = $3`, fenceValues(fence));
  return res.rowCount !== 0;
}

/**
 * Whether the run is this runner's and live. With `lock`, the row is locked (and heartbeated) so
 * nobody can take the run over before the caller's transaction ends.
 */
export async function runHeld(ex: pg.Pool | pg.ClientBase, fence: RunFence, opts: { lock: boolean }): Promise<boolean> {
  const res = opts.lock
    ? await ex.query(
        `update runs set heartbeat_at = now() where id = $1 and epoch = $2 and owner = $3 and status in ('RUNNING', 'CANCEL_REQUESTED')`,
        fenceValues(fence),
      )
    : await ex.query(
        `select 1 from runs where id = $1 and epoch = $2 and owner = $3 and status in ('RUNNING', 'CANCEL_REQUESTED')`,
        fenceValues(fence),
      );
  return res.rowCount !== 0;
}

/** The run's status while it is this runner's and live; undefined once it is not. */
export async function ownedRunStatus(pool: pg.Pool, fence: RunFence): Promise<RunStatus | undefined> {
  const { rows } = await pool.query<{ status: RunStatus }>(
    `select status from runs where id = $1 and epoch = $2 and owner = $3 and status in ('RUNNING', 'CANCEL_REQUESTED')`,
    fenceValues(fence),
  );
  return rows[0]?.status;
}

export interface Checkpoint {
  cursor: Buffer | null;
  cursorJson: boolean;
  processed: number;
  total: number | null;
  /** The run's stats after this checkpoint, as JSON text. */
  stats: string;
}

/**
 * Stores a checkpoint (and counts as a heartbeat) while the run is this runner's and live; false
 * when it is not. A cursor that moved is progress: the run's retry budget is whole again. On a
 * transaction's client (RunStore.transaction) the row lock it takes holds the fence to the commit.
 */
export async function checkpointRun(ex: pg.Pool | pg.ClientBase, fence: RunFence, c: Checkpoint): Promise<boolean> {
  const res = await ex.query(
    `update runs set cursor = $4, cursor_json = $5, processed = processed + $6, total = coalesce($7, total), stats = $8,
       outage_hand_backs = 0, retry_attempts = case when cursor is distinct from $4 then 0 else retry_attempts end,
       heartbeat_at = now(), updated_at = now()
     where id = $1 and epoch = $2 and owner = $3 and status in ('RUNNING', 'CANCEL_REQUESTED')`,
    [...fenceValues(fence), c.cursor, c.cursorJson, c.processed, c.total, c.stats],
  );
  return res.rowCount !== 0;
}

/**
 * Records a finding, idempotent per (run, kind, resource), only while the run is this runner's
 * and live. FOR SHARE waits for a takeover committing now and re-reads the run after it, so a
 * finding never lands on a run another runner has taken. `live` false: the run was lost.
 */
export async function recordFindingFenced(
  pool: pg.Pool,
  fence: RunFence,
  f: { kind: string; severity: Severity; resourceId: string; detail: string },
): Promise<{ live: boolean; inserted: boolean }> {
  const { rows } = await pool.query<{ live: boolean; inserted: boolean }>(
    `with live as (
       select workspace_id from runs
       where id = $1 and epoch = $2 and owner = $3 and status in ('RUNNING', 'CANCEL_REQUESTED')
       for share
     ), inserted as (
       insert into findings (workspace_id, run_id, kind, severity, resource_id, detail)
       select workspace_id, $1, $4, $5, $6, $7 from live
       on conflict (run_id, kind, resource_id) do nothing
       returning 1
     )
     select exists (select 1 from live) as live, exists (select 1 from inserted) as inserted`,
    [...fenceValues(fence), f.kind, f.severity, f.resourceId, f.detail],
  );
  return rows[0]!;
}

// Handing a run back (shutdown, or its database lost mid-run): unowned and RUNNING for a runner
// to take again, unless an operator asked it to stop, which makes it that operator's pause.
const HAND_BACK = `owner = null,
  status = case when status = 'CANCEL_REQUESTED' then 'PAUSED' else 'RUNNING' end,
  pause_kind = case when status = 'CANCEL_REQUESTED' then 'CANCELLED' end,
  pause_reason = case when status = 'CANCEL_REQUESTED' then 'cancelled by an operator' end`;

/** How a run ends in this runner; each is written only while the run is still its (the fence). */
export type RunEnding =
  /** The database failed the run, not its handler: handed back, taken again after a backoff; the stored checkpoint stays. */
  | { kind: 'outage' }
  /**
   * Its handler threw with retry budget left: handed back with why, taken again from its stored
   * checkpoint after `backoffMs` doubled per retry already spent (at most `maxBackoffMs`).
   */
  | { kind: 'retry'; message: string; budget: number; backoffMs: number; maxBackoffMs: number }
  | { kind: 'completed' }
  | { kind: 'failed'; message: string; budget?: number }
  /** Shutdown: handed back at this cursor for another runner. */
  | { kind: 'hand-back'; cursor: Buffer | null; cursorJson: boolean }
  /** Paused by its handler (or by the operator's cancel it honoured) at this cursor. */
  | { kind: 'paused'; cursor: Buffer | null; cursorJson: boolean };

/**
 * Records how the run ended; undefined when it was no longer this runner's (nothing written). A
 * retry or failure answers the status written (an operator's cancel makes either PAUSED); the
 * other endings answer 'recorded'.
 */
export async function endRun(pool: pg.Pool, fence: RunFence, ending: RunEnding): Promise<string | undefined> {
  const f = fenceValues(fence);
  let res: pg.QueryResult;
  switch (ending.kind) {
    case 'outage':
      res = await pool.query(
        `update runs set ${HAND_BACK},
           resume_after = now() + make_interval(secs => least(60, 2 ^ least(outage_hand_backs, 6))),
           outage_hand_backs = outage_hand_backs + 1, updated_at = now()
         where id = $1 and epoch = $2 and owner = $3`,
        f,
      );
      break;
    case 'retry':
      // An operator's cancel wins over the retry: the run is that operator's pause (HAND_BACK),
      // with why the handler threw, no retry spent and no wait to resume.
      res = await pool.query(
        `update runs set ${HAND_BACK}, error = $4, retry_budget = $5,
           resume_after = case when status = 'CANCEL_REQUESTED' then null
                               else now() + make_interval(secs => least($7::double precision, $6 * 2 ^ least(retry_attempts, 40)) / 1000) end,
           retry_attempts = case when status = 'CANCEL_REQUESTED' then retry_attempts else retry_attempts + 1 end, updated_at = now()
         where id = $1 and epoch = $2 and owner = $3
         returning status`,
        [...f, ending.message.slice(0, 2000), ending.budget, ending.backoffMs, ending.maxBackoffMs],
      );
      break;
    case 'completed':
      // A failure it recovered from is no longer why anything: error says why a run failed.
      res = await pool.query(
        `update runs set status = 'COMPLETED', owner = null, error = null, finished_at = now(), updated_at = now()
         where id = $1 and epoch = $2 and owner = $3`,
        f,
      );
      break;
    case 'failed':
      // Asked to stop, it stopped: an operator's cancel makes the run that operator's pause (with
      // why its handler threw), not FAILED, so nothing resuming failed runs takes it up again.
      res = await pool.query(
        `update runs set owner = null, error = $4, retry_budget = coalesce($5, retry_budget), updated_at = now(),
           status = case when status = 'CANCEL_REQUESTED' then 'PAUSED' else 'FAILED' end,
           pause_kind = case when status = 'CANCEL_REQUESTED' then 'CANCELLED' end,
           pause_reason = case when status = 'CANCEL_REQUESTED' then 'cancelled by an operator' end,
           finished_at = case when status = 'CANCEL_REQUESTED' then finished_at else now() end
         where id = $1 and epoch = $2 and owner = $3
         returning status`,
        [...f, ending.message.slice(0, 2000), ending.budget ?? null],
      );
      break;
    case 'hand-back':
      res = await pool.query(
        `update runs set cursor = $4, cursor_json = $5, ${HAND_BACK}, updated_at = now()
         where id = $1 and epoch = $2 and owner = $3`,
        [...f, ending.cursor, ending.cursorJson],
      );
      break;
    case 'paused':
      res = await pool.query(
        `update runs set cursor = $4, cursor_json = $5, owner = null, status = 'PAUSED',
           pause_kind = case when status = 'CANCEL_REQUESTED' then 'CANCELLED' else 'HANDLER' end,
           pause_reason = case when status = 'CANCEL_REQUESTED' then 'cancelled by an operator' else 'paused by its handler' end,
           updated_at = now()
         where id = $1 and epoch = $2 and owner = $3`,
        [...f, ending.cursor, ending.cursorJson],
      );
      break;
  }
  if (res.rowCount === 0) return undefined;
  return (res.rows[0]?.status as string | undefined) ?? 'recorded';
}
