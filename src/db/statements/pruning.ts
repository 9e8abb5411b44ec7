/**
 * Retention's SQL (migration 000026): taking a slice of pruning work, and the bounded batches
 * that delete finished history. Each batch is one short transaction on one connection, fenced
 * on the slice's epoch: it deletes at most `batch` rows (and their attempts or findings), never a
 * live row, and writes one audit row with its counts.
 *
 * Durations cross into SQL as milliseconds (null: keep forever); the time is the database's.
 */
import type pg from 'pg';
import type { RetentionKind } from '../types.js';
import { deleteOldestRows, type OldestKind } from './pruning-oldest.js';

export { EVENTS_PER_BATCH_ROW } from './pruning-oldest.js';

export type { RetentionKind } from '../types.js';

/** What each table lost in one batch. */
export interface PrunedRows {
  executions: number;
  attempts: number;
  audit_log: number;
  runs: number;
  findings: number;
  /** Live events (the EVENTS slice, migration 000061). */
  events: number;
  /** Whole jobs (one-off and retired ones), after their executions. */
  jobs: number;
  alert_notifications: number;
  /** Completed batches left with nothing (their jobs gone), after their jobs. */
  batches: number;
}

export interface TakenSlice {
  workspaceId: string;
  kind: RetentionKind;
  epoch: string;
  /** Where the last unfinished pass over this slice got to (it goes on from there). */
  position?: ExecutionsPosition | undefined;
  /** The workspace's own windows (null: the installation's default). */
  overrides: {
    executionsDays: number | null;
    failedExecutionsDays: number | null;
    auditDays: number | null;
    runsDays: number | null;
    eventsHours: number | null;
  };
}

/**
 * Takes one due slice that nobody holds (or whose holder's lease ran out): the read skips rows
 * another worker is taking at the same moment, and the update makes this worker the holder with
 * a new epoch, so the slice is pruned by one worker at a time and a former holder is fenced out.
 */
const TAKE = `
update retention_slices s
set owner = $1, epoch = s.epoch + 1, lease_until = now() + make_interval(secs => $2::double precision / 1000), last_started_at = now()
from (
  select workspace_id, kind from retention_slices
  -- Any workspace's due slice; or, on demand ($3), one of that workspace's, due or not, but
  -- none it already pruned in this call ($4).
  where ($3::uuid is null and next_due_at <= now() or workspace_id = $3::uuid and kind <> all($4::text[]))
    and (owner is null or lease_until < now())
  order by next_due_at
  limit 1
  for update skip locked
) c
where s.workspace_id = c.workspace_id and s.kind = c.kind
returning s.workspace_id, s.kind, s.epoch::text as epoch, s.resume_created_at::text as resume_created_at, s.resume_id,
  (select row_to_json(r) from workspace_retention r where r.workspace_id = s.workspace_id) as overrides`;

/**
 * `only`: take one of this workspace's slices whether it is due or not, except the kinds in
 * `skip` (an on-demand prune); without it, any workspace's due slice.
 */
export async function takeSlice(
  pool: pg.Pool,
  owner: string,
  leaseMs: number,
  only?: { workspaceId: string; skip: readonly RetentionKind[] },
): Promise<TakenSlice | undefined> {
  const { rows } = await pool.query<{
    workspace_id: string;
    kind: RetentionKind;
    epoch: string;
    resume_created_at: string | null;
    resume_id: string | null;
    overrides: Record<string, number | null> | null;
  }>(TAKE, [owner, leaseMs, only?.workspaceId ?? null, only?.skip ?? []]);
  const row = rows[0];
  if (!row) return undefined;
  const o = row.overrides ?? {};
  return {
    workspaceId: row.workspace_id,
    kind: row.kind,
    epoch: row.epoch,
    position: row.resume_created_at && row.resume_id ? { createdAt: row.resume_created_at, id: row.resume_id } : undefined,
    overrides: {
      executionsDays: o.executions_days ?? null,
      failedExecutionsDays: o.failed_executions_days ?? null,
      auditDays: o.audit_days ?? null,
      runsDays: o.runs_days ?? null,
      eventsHours: o.events_hours ?? null,
    },
  };
}

/**
 * The fence, first statement of each batch's transaction: extends the lease only while this
 * worker still holds the slice at its epoch, and locks the slice row until the batch commits.
 */
const FENCE = `
update retention_slices set lease_until = now() + make_interval(secs => $4::double precision / 1000)
where workspace_id = $1 and kind = $2 and owner = $3 and epoch = $5
returning 1`;

/** Adds a batch's count to the slice and audits the batch (as jobgate itself), in the batch's transaction. */
const RECORD_BATCH = `
with counted as (
  update retention_slices set pruned_total = pruned_total + $3 where workspace_id = $1 and kind = $2
)
insert into audit_log (workspace_id, actor_kind, action, target_type, target_id, input, result_code)
values ($1, 'system', 'retention.prune', 'Workspace', $1::text, $4::jsonb, 'OK')`;

/** Ends a pass: frees the slice and sets its next due time (fenced). */
const FINISH = `
update retention_slices set owner = null, lease_until = null, last_finished_at = now(), last_pruned = $5,
  next_due_at = now() + make_interval(secs => $6::double precision / 1000), resume_created_at = null, resume_id = null
where workspace_id = $1 and kind = $2 and owner = $3 and epoch = $4`;

/**
 * Hands a slice back unfinished (shutdown, a failure, a bounded prune's budget spent): due at once
 * for any worker, behind the slices already due, with where its pass got to (fenced).
 */
const HAND_BACK = `
update retention_slices set owner = null, lease_until = null, next_due_at = greatest(next_due_at, now()),
  resume_created_at = $5::timestamptz, resume_id = $6::uuid
where workspace_id = $1 and kind = $2 and owner = $3 and epoch = $4`;

export async function finishSlice(pool: pg.Pool, slice: TakenSlice, owner: string, pruned: number, everyMs: number): Promise<void> {
  await pool.query(FINISH, [slice.workspaceId, slice.kind, owner, slice.epoch, pruned, everyMs]);
}

/** `position`: where the pass got to (undefined: the next pass starts from the beginning). */
export async function handBackSlice(pool: pg.Pool, slice: TakenSlice, owner: string, position?: ExecutionsPosition): Promise<void> {
  await pool.query(HAND_BACK, [slice.workspaceId, slice.kind, owner, slice.epoch, position?.createdAt ?? null, position?.id ?? null]);
}

/**
 * What refers to the executions of CTE `gone` (their ids) when they are deleted: migration 000059
 * dropped the foreign keys that saw to it with a trigger per deleted row (the one other delete of
 * executions, a withdrawn cron occurrence's, does the same in jobgate_withdraw_ahead). A child job
 * outlives its parent execution, without a parent (was ON DELETE SET NULL), unless it goes in the
 * same statement (`alsoGoingJobs`, an array of job ids: a row changed twice by one statement would
 * keep only one of the changes); the parent's turn row (execution_children) goes with it. Both
 * through their indexes on the parent's id.
 */
const UNLINK_EXECUTIONS = (gone: string, alsoGoingJobs: string) => `unparented as (
  update jobs j set parent_execution_id = null
  where j.parent_execution_id = any(array(select id from ${gone})) and j.id <> all(${alsoGoingJobs})
), gone_turns as (
  delete from execution_children c where c.parent_execution_id = any(array(select id from ${gone}))
)`;

/**
 * Finished executions past their window, with their attempts, oldest first, never one of the
 * newest `keep` of its job. The walk goes up the workspace's creation-time index from `after`
 * (an execution finishes after it is created, so nothing older than the shorter window can be
 * due), at most `batch` rows a batch, so the kept rows (the newest per job, FAILED ones in their
 * longer window) are read once a pass, not once a batch.
 *
 *  - Live rows are never touched: the lock re-checks status and age on the row as it is now
 *    (READ COMMITTED re-evaluates a locked row's predicate), so a FAILED execution re-driven to
 *    PENDING meanwhile is kept; a row another transaction holds is skipped (pruned next pass).
 *  - The newest `keep` per recurring job (cron, not retired): each one's `keep`-th newest
 *    execution is its floor, read on the job's creation-time index; only rows below it go. New
 *    executions only raise the floor. A one-off or retired job keeps none past their window: its
 *    executions thin out here, in bounded batches, and the job itself goes with the JOBS slice.
 *  - Attempts have no foreign key to executions (migration 000013): both go in one statement.
 *  - What referred to a pruned execution is seen to here, for the whole batch at once
 *    (UNLINK_EXECUTIONS; migration 000059 took the foreign keys that did it row by row).
 */
const PRUNE_EXECUTIONS = `
with scanned as (
  select e.id, e.job_id, e.status, e.finished_at, e.created_at, (e.trigger = 'SCHEDULE' and e.batch_outcome is not null) as counted_member
  from executions e
  where e.workspace_id = $1 and e.created_at < now() - make_interval(secs => $6::double precision / 1000)
    -- The position as an index condition (no OR around it): each batch starts where the last ended.
    and (e.created_at, e.id) > ($7::timestamptz, $8::uuid)
  order by e.created_at, e.id
  limit $5
), due as (
  select s.* from scanned s
  -- A batch member's counted execution (migration 000051) goes with its job, not before: it is
  -- what says the member ended.
  where not s.counted_member and ((s.status in ('SUCCEEDED', 'CANCELLED') and s.finished_at < now() - make_interval(secs => $2::double precision / 1000))
     or (s.status = 'FAILED' and s.finished_at < now() - make_interval(secs => $3::double precision / 1000)))
), floors as (
  -- A recurring job (cron, not retired) keeps its newest; its floor is null while it has fewer.
  select j.job_id, (jj.kind = 'CRON' and jj.status <> 'RETIRED') as recurring, f.created_at, f.id
  from (select distinct job_id from due) j
  join jobs jj on jj.id = j.job_id
  left join lateral (
    -- The job's test inside: as the join's condition it was checked after the subquery ran, an
    -- index walk of a hundred entries for every one-off job of the batch (half its time).
    select n.created_at, n.id from executions n
    where jj.kind = 'CRON' and jj.status <> 'RETIRED' and n.job_id = j.job_id
    order by n.created_at desc, n.id desc offset $4::int - 1 limit 1
  ) f on true
), doomed as (
  select e.id from executions e
  where e.id in (
      select d.id from due d join floors f on f.job_id = d.job_id
      where not f.recurring or (f.id is not null and (d.created_at, d.id) < (f.created_at, f.id)))
    and ((e.status in ('SUCCEEDED', 'CANCELLED') and e.finished_at < now() - make_interval(secs => $2::double precision / 1000))
      or (e.status = 'FAILED' and e.finished_at < now() - make_interval(secs => $3::double precision / 1000)))
  for update skip locked
), gone_attempts as (
  delete from attempts a using doomed d where a.execution_id = d.id returning 1
), gone as (
  delete from executions e using doomed d where e.id = d.id returning 1
), ${UNLINK_EXECUTIONS('doomed', 'array[]::uuid[]')}, last as (
  select created_at, id from scanned order by created_at desc, id desc limit 1
)
select (select count(*) from gone)::int as executions, (select count(*) from gone_attempts)::int as attempts,
  (select count(*) from scanned)::int as scanned, (select created_at::text from last) as last_created_at, (select id from last) as last_id`;

/**
 * Finished runs (COMPLETED, FAILED) past their window, with their findings. A run goes only once
 * all its findings are gone (their foreign key), so a run with many findings takes several
 * batches; at most `batch` findings and `batch` runs a batch. Runs still RUNNING, PAUSED or
 * CANCEL_REQUESTED are never read, and a run locked by its runner is skipped.
 */
const DOOMED_RUNS = `
select r.id from runs r
where r.workspace_id = $1 and r.created_at < now() - make_interval(secs => $2::double precision / 1000)
  and r.status in ('COMPLETED', 'FAILED') and r.finished_at < now() - make_interval(secs => $2::double precision / 1000)
order by r.created_at, r.id
limit $3
for update skip locked`;

const PRUNE_FINDINGS = `
delete from findings where id in (select id from findings where run_id = any($1::uuid[]) limit $2)`;

const PRUNE_RUNS = `
delete from runs r where r.id = any($1::uuid[]) and not exists (select 1 from findings f where f.run_id = r.id)`;

/**
 * Whole jobs: one-off jobs (IMMEDIATE, DELAYED) and retired ones, each with all its executions
 * (and their attempts) once every one of them is finished and past its window, oldest first. A
 * recurring job that is not retired is never read (the walk's partial index, migration 000032):
 * its history goes execution by execution, its newest `keepPerJob` kept.
 *
 * A batch deletes at most `batch` executions (and their attempts) with its jobs: the jobs are
 * taken oldest first while their executions fit.
 *
 * Two statements in the batch's transaction, so that no live execution is ever deleted:
 *  1. LOCK_DOOMED_JOBS walks the workspace's prunable jobs from the position and locks the due
 *     ones (FOR UPDATE, skipping any another transaction holds). From here no execution can be
 *     added to them: an insert takes a KEY SHARE lock on its job, which waits for this
 *     transaction and then finds the job gone (a foreign key error for that late caller).
 *  2. DELETE_JOBS, with a new snapshot, locks their executions and deletes a job only if every
 *     one of its executions is locked and, as it is now, finished and past its window: an
 *     execution re-driven to PENDING between the two statements, or one a worker holds, keeps its
 *     job. The executions and attempts go in the same statement; the jobs' foreign key is checked
 *     at its end, when they are gone. So does what referred to them: their dependencies, a
 *     batch's reference to its onComplete job, their executions' children's links (migration
 *     000059; UNLINK_EXECUTIONS).
 * A job's live events are the subscriptions' replay log and keep their own window (the EVENTS slice).
 */
const PAST_WINDOW = `((x.status in ('SUCCEEDED', 'CANCELLED') and x.finished_at < now() - make_interval(secs => $2::double precision / 1000))
  or (x.status = 'FAILED' and x.finished_at < now() - make_interval(secs => $3::double precision / 1000)))`;

// A prunable job of workspace $1 after position (created_at, id) `after`, past the shorter window.
const PRUNABLE_JOB_AFTER = (after: string) => `
  j.workspace_id = $1 and (j.kind <> 'CRON' or j.status = 'RETIRED')
    and j.created_at < now() - make_interval(secs => least($2::double precision, $3::double precision) / 1000)
    and (j.created_at, j.id) > ${after}`;

const LOCK_DOOMED_JOBS = `
with recursive walk as (
  -- Oldest first from the position, one job at a time with its executions counted (to at most one
  -- past the batch), as long as they fit in the batch, at most a batch of jobs. A job with more
  -- than a batch of them is walked past, not taken: the EXECUTIONS slice thins it (in bounded
  -- batches; a one-off or retired job keeps none past their window), and a later pass takes it.
  -- One job at a time, so a batch counts the executions of the jobs it takes, of those it walks
  -- past and of one more, not of a batch of jobs: when each of those held most of a batch, every
  -- batch counted nearly a batch of executions per job and took one job (half a second a batch).
  select 0 as step, $5::timestamptz as created_at, $6::uuid as id, 0::bigint as n, 0::bigint as upto
  union all
  select w.step + 1, nx.created_at, nx.id, nx.n, w.upto + case when nx.n > $4 then 0 else nx.n end
  from walk w
  cross join lateral (
    select j.id, j.created_at, (select count(*) from (select 1 from executions x where x.job_id = j.id limit $4 + 1) c) as n
    from jobs j
    where ${PRUNABLE_JOB_AFTER('(w.created_at, w.id)')}
    order by j.created_at, j.id
    limit 1
  ) nx
  where w.step < $4 and w.upto + case when nx.n > $4 then 0 else nx.n end <= $4
), walked as (
  select id, created_at, n from walk where step > 0
), taken as (
  select id from walked where n <= $4
), locked as (
  select j.id from jobs j
  where j.id in (select id from taken)
    and (j.kind <> 'CRON' or j.status = 'RETIRED')
    and coalesce(j.retired_at, j.created_at) < now() - make_interval(secs => least($2::double precision, $3::double precision) / 1000)
    and not exists (select 1 from executions x where x.job_id = j.id and not ${PAST_WINDOW})
    -- The onComplete job of a batch not completed yet is its batch's to release (and lock).
    and not exists (select 1 from batches b where b.on_complete_job_id = j.id and b.completed_at is null)
  for update skip locked
), last as (
  select created_at, id from walked order by created_at desc, id desc limit 1
)
select array(select id from locked)::text[] as ids,
  -- The pass is done once no prunable job is left past what this walk read.
  exists (select 1 from jobs j where ${PRUNABLE_JOB_AFTER('(coalesce((select created_at from last), $5::timestamptz), coalesce((select id from last), $6::uuid))')}) as more,
  (select created_at::text from last) as last_created_at, (select id from last) as last_id`;

const DELETE_JOBS = `
with locked as (
  select x.id, x.job_id, ${PAST_WINDOW} as past from executions x where x.job_id = any($1::uuid[])
  for update skip locked
), doomed as (
  select j.id from unnest($1::uuid[]) j(id)
  where (select count(*) from executions x where x.job_id = j.id) = (select count(*) from locked l where l.job_id = j.id and l.past)
), gone_attempts as (
  delete from attempts a using locked l where a.execution_id = l.id and l.job_id in (select id from doomed) returning 1
), gone_executions as (
  delete from executions e using locked l where e.id = l.id and l.job_id in (select id from doomed) returning e.id
), gone_jobs as (
  delete from jobs j where j.id in (select id from doomed) returning 1
), ${UNLINK_EXECUTIONS('gone_executions', 'array(select id from doomed)')}, gone_dependencies as (
  -- A job's dependencies go with it, as the dependent and as the prerequisite (were ON DELETE CASCADE).
  delete from job_dependencies d
  where d.job_id = any(array(select id from doomed)) or d.prerequisite_id = any(array(select id from doomed))
), batch_unreferenced as (
  -- A completed batch keeps no reference to its pruned onComplete job (was ON DELETE SET NULL).
  update batches b set on_complete_job_id = null where b.on_complete_job_id = any(array(select id from doomed))
)
select (select count(*) from gone_jobs)::int as jobs, (select count(*) from gone_executions)::int as executions,
  (select count(*) from gone_attempts)::int as attempts`;

export interface BatchInput {
  slice: TakenSlice;
  owner: string;
  leaseMs: number;
  batch: number;
}

export interface ExecutionWindows {
  /** SUCCEEDED and CANCELLED executions; null keeps them. */
  okMs: number | null;
  failedMs: number | null;
  keepPerJob: number;
}

/**
 * Where a pass has got to in the workspace's creation-time index (executions, or jobs). The time
 * is the database's text, to the microsecond: a JavaScript Date keeps milliseconds, and rows
 * created in the same millisecond (one statement's `now()` for a whole bulk create) would be
 * read again by every batch, so a pass over more of them than a batch never ended.
 */
export interface ExecutionsPosition {
  createdAt: string;
  id: string;
}

export interface BatchResult {
  /** False when the slice is no longer this worker's: nothing was deleted. */
  held: boolean;
  pruned: PrunedRows;
  /** Whether the pass is complete (nothing left to look at). */
  done: boolean;
  position?: ExecutionsPosition | undefined;
}

export const NO_ROWS: Readonly<PrunedRows> = Object.freeze({
  executions: 0,
  attempts: 0,
  audit_log: 0,
  runs: 0,
  findings: 0,
  events: 0,
  jobs: 0,
  alert_notifications: 0,
  batches: 0,
});
const NEVER = 1e13; // ms (about 317 years): past any row's age and any window, for a kind kept forever

type Work = { executions?: ExecutionWindows; position?: ExecutionsPosition | undefined; windowMs?: number };
type Deleted = { pruned: PrunedRows; done: boolean; position?: ExecutionsPosition | undefined };
const START = '00000000-0000-0000-0000-000000000000';

/** Where the walk got to: the last row it read, else where it started. */
function positionOf(r: { last_created_at: string | null; last_id: string | null }, from: ExecutionsPosition | undefined) {
  return r.last_created_at && r.last_id ? { createdAt: r.last_created_at, id: r.last_id } : from;
}

async function deleteExecutions(client: pg.PoolClient, workspaceId: string, batch: number, work: Work): Promise<Deleted> {
  const w = work.executions!;
  const okMs = w.okMs ?? NEVER;
  const failedMs = w.failedMs ?? NEVER;
  const { rows } = await client.query<{
    executions: number;
    attempts: number;
    scanned: number;
    last_created_at: string | null;
    last_id: string | null;
  }>(PRUNE_EXECUTIONS, [
    workspaceId,
    okMs,
    failedMs,
    w.keepPerJob,
    batch,
    Math.min(okMs, failedMs),
    work.position?.createdAt ?? '-infinity',
    work.position?.id ?? START,
  ]);
  const r = rows[0]!;
  return {
    pruned: { ...NO_ROWS, executions: r.executions, attempts: r.attempts },
    done: r.scanned < batch,
    position: positionOf(r, work.position),
  };
}

/**
 * Batches (migration 000048), at the end of a JOBS pass: completed ones past the shorter window
 * that have nothing left, their members and their onComplete job gone with their history (the
 * jobs' rule above), oldest first, at most `batch`. A batch that is open, or not completed, or
 * has a job left is kept: it is what groups that job. A batch another transaction holds (a member
 * being counted, a close) is skipped until the next pass.
 */
const PRUNE_BATCHES = `
with doomed as (
  select b.id from batches b
  where b.workspace_id = $1
    and b.completed_at < now() - make_interval(secs => least($2::double precision, $3::double precision) / 1000)
    and b.on_complete_job_id is null
    and not exists (select 1 from jobs j where j.batch_id = b.id)
  order by b.created_at, b.id
  limit $4
  for update skip locked
)
delete from batches b using doomed d where b.id = d.id`;

async function deleteJobs(client: pg.PoolClient, workspaceId: string, batch: number, work: Work): Promise<Deleted> {
  const w = work.executions!;
  const windows = [w.okMs ?? NEVER, w.failedMs ?? NEVER];
  const { rows } = await client.query<{ ids: string[]; more: boolean; last_created_at: string | null; last_id: string | null }>(
    LOCK_DOOMED_JOBS,
    [workspaceId, ...windows, batch, work.position?.createdAt ?? '-infinity', work.position?.id ?? START],
  );
  const r = rows[0]!;
  let pruned: PrunedRows = NO_ROWS;
  if (r.ids.length > 0) {
    const gone = (await client.query<{ jobs: number; executions: number; attempts: number }>(DELETE_JOBS, [r.ids, ...windows])).rows[0]!;
    pruned = { ...NO_ROWS, jobs: gone.jobs, executions: gone.executions, attempts: gone.attempts };
  }
  if (r.more) return { pruned, done: false, position: positionOf(r, work.position) };
  // The walk is done: the batches it emptied go too, a batch of them per round until none is left.
  const batches = (await client.query(PRUNE_BATCHES, [workspaceId, ...windows, batch])).rowCount ?? 0;
  return { pruned: { ...pruned, batches }, done: batches < batch, position: positionOf(r, work.position) };
}

async function deleteRuns(client: pg.PoolClient, workspaceId: string, batch: number, work: Work): Promise<Deleted> {
  const { rows: runs } = await client.query<{ id: string }>(DOOMED_RUNS, [workspaceId, work.windowMs!, batch]);
  const ids = runs.map((r) => r.id);
  const findings = ids.length ? ((await client.query(PRUNE_FINDINGS, [ids, batch])).rowCount ?? 0) : 0;
  const gone = ids.length ? ((await client.query(PRUNE_RUNS, [ids])).rowCount ?? 0) : 0;
  return { pruned: { ...NO_ROWS, runs: gone, findings }, done: gone + findings === 0 };
}

/** The oldest-first kinds (audit log, alert notifications, live events): ./pruning-oldest.ts. */
async function deleteOldest(client: pg.PoolClient, kind: OldestKind, workspaceId: string, batch: number, work: Work): Promise<Deleted> {
  const { table, n, last } = await deleteOldestRows(client, kind, workspaceId, work.windowMs!, batch);
  return { pruned: { ...NO_ROWS, [table]: n }, done: last };
}

function deleteBatch(client: pg.PoolClient, kind: RetentionKind, workspaceId: string, batch: number, work: Work): Promise<Deleted> {
  switch (kind) {
    case 'EXECUTIONS':
      return deleteExecutions(client, workspaceId, batch, work);
    case 'JOBS':
      return deleteJobs(client, workspaceId, batch, work);
    case 'RUNS':
      return deleteRuns(client, workspaceId, batch, work);
    default:
      return deleteOldest(client, kind, workspaceId, batch, work);
  }
}

/** One batch of a slice, in one transaction: fence, delete, record. */
export async function pruneBatch(pool: pg.Pool, input: BatchInput, work: Work): Promise<BatchResult> {
  const { slice, owner, leaseMs, batch } = input;
  const client = await pool.connect();
  let released = false;
  try {
    await client.query('begin');
    const fenced = await client.query(FENCE, [slice.workspaceId, slice.kind, owner, leaseMs, slice.epoch]);
    if (fenced.rowCount === 0) {
      await client.query('rollback');
      return { held: false, pruned: NO_ROWS, done: true };
    }
    const { pruned, done, position } = await deleteBatch(client, slice.kind, slice.workspaceId, batch, work);
    const total = Object.values(pruned).reduce((a, b) => a + b, 0);
    if (total > 0) {
      const counts = Object.fromEntries(Object.entries(pruned).filter(([, n]) => n > 0));
      await client.query(RECORD_BATCH, [slice.workspaceId, slice.kind, total, JSON.stringify({ kind: slice.kind, ...counts })]);
    }
    await client.query('commit');
    return { held: true, pruned, done, position };
  } catch (error) {
    await client.query('rollback').catch(() => {});
    client.release(error as Error);
    released = true;
    throw error;
  } finally {
    if (!released) client.release();
  }
}
