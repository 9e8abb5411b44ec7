/**
 * What the live hub reads: sequence positions for the watermark, event and finding ranges,
 * and runs by id. Ranges are (after, upTo] on the primary key, so they read only new rows.
 */
import { sql } from 'kysely';
import type pg from 'pg';
import type { Executor } from '../repositories/scope.js';
import type { EventRecord, FindingRecord } from '../types.js';

export interface Positions {
  events: bigint;
  findings: bigint;
}

/**
 * The last ids handed out, then (a separate statement, so it is read after them) the open
 * transactions that hold the writer mark (migration 000009; src/subscriptions/hub/watermark.ts).
 * Sent as one simple-protocol message: one round trip.
 */
const POSITIONS = `
select (select case when is_called then last_value else 0 end from events_id_seq) as events,
       (select case when is_called then last_value else 0 end from findings_id_seq) as findings;
select array(select virtualtransaction from pg_locks
             where locktype = 'advisory' and classid = 27239 and objid = 1 and objsubid = 2
               and database = (select oid from pg_database where datname = current_database())) as writers`;

export async function readPositions(pool: pg.Pool): Promise<{ positions: Positions; writers: string[] }> {
  const results = (await pool.query(POSITIONS)) as unknown as pg.QueryResult[];
  const seq = results[0]!.rows[0] as { events: string; findings: string };
  return { positions: { events: BigInt(seq.events), findings: BigInt(seq.findings) }, writers: results[1]!.rows[0].writers as string[] };
}

/** An events row, as `select *` reads it (ids are int8, read as numbers). */
export type EventRow = EventRecord;

export interface EventMatch {
  workspaceId: string;
  topic: EventRow['topic'];
  jobId?: string | undefined;
  endpointId?: string | undefined;
  /** Only events on INTERNAL endpoints (`internal`) or only those on the others; `ids` are the INTERNAL ones. */
  endpointType?: { internal: boolean; ids: ReadonlySet<string> } | undefined;
  name?: string | undefined;
}

const EVENTS_IN_RANGE = `
select * from events
where id > $1 and id <= $2 and workspace_id = any($3::uuid[])
order by id limit $4`;

/** Events of these workspaces in (after, upTo], oldest first, at most `limit`. */
export async function eventsInRange(
  pool: pg.Pool,
  after: bigint,
  upTo: bigint,
  workspaceIds: string[],
  limit: number,
): Promise<EventRow[]> {
  return (await pool.query<EventRow>(EVENTS_IN_RANGE, [after.toString(), upTo.toString(), workspaceIds, limit])).rows;
}

// With the workspace's replay horizon (migration 000014) read in the same snapshot: a prune that
// committed before this read shows in both, so a replay can tell that rows it is about to skip
// over were deleted. The workspace row is always there, so the horizon comes back with no events.
const MATCHING_EVENTS = `
select w.events_pruned_through as pruned_through, e.*
from workspaces w
left join lateral (
  select * from events
  where id > $1 and id <= $2 and workspace_id = $3 and topic = $4
    and ($5::uuid is null or job_id = $5) and ($6::uuid is null or endpoint_id = $6) and ($7::text is null or name = $7)
    and ($9::boolean is null or coalesce(endpoint_id = any($10::uuid[]), false) = $9)
  order by id limit $8
) e on true
where w.id = $3`;

/**
 * One subscriber's replay: its events in (after, upTo], oldest first, at most `limit`, and the
 * highest event id pruned from its workspace so far (events above it are all still kept).
 */
export async function matchingEvents(
  pool: pg.Pool,
  match: EventMatch,
  after: bigint,
  upTo: bigint,
  limit: number,
): Promise<{ rows: EventRow[]; prunedThrough: bigint }> {
  const { rows } = await pool.query<EventRow & { pruned_through: number }>({
    name: 'jobgate.matching-events',
    text: MATCHING_EVENTS,
    values: [
      after.toString(),
      upTo.toString(),
      match.workspaceId,
      match.topic,
      match.jobId ?? null,
      match.endpointId ?? null,
      match.name ?? null,
      limit,
      match.endpointType?.internal ?? null,
      match.endpointType ? [...match.endpointType.ids] : null,
    ],
  });
  const prunedThrough = BigInt(rows[0]?.pruned_through ?? 0);
  return {
    prunedThrough,
    rows: rows.filter((r) => r.id !== null).map(({ pruned_through: _, ...row }) => row as EventRow),
  };
}

/** A findings row, as `select *` reads it. */
export type FindingRow = FindingRecord;

const FINDINGS_IN_RANGE = `
select * from findings where id > $1 and id <= $2 and run_id = any($3::uuid[]) order by id limit $4`;

/** Findings of these runs in (after, upTo], in the order recorded, at most `limit`. */
export async function findingsInRange(pool: pg.Pool, after: bigint, upTo: bigint, runIds: string[], limit: number): Promise<FindingRow[]> {
  return (await pool.query<FindingRow>(FINDINGS_IN_RANGE, [after.toString(), upTo.toString(), runIds, limit])).rows;
}

/** Runs by id (the hub re-reads the ones it was told moved). */
export async function runsById(pool: pg.Pool, ids: string[]) {
  return (await pool.query(`select * from runs where id = any($1::uuid[])`, [ids])).rows;
}

/**
 * The position just before each job's first event (its creation), or the latest position for a
 * job whose events were pruned, by job id. One read for all the jobs: a job's events carry its
 * creating transaction's now() as created_at, so the BRIN index on created_at confines the read to
 * the block ranges since the earliest of the jobs' creations. Grouped, not `min(id)` of one job:
 * for that, Postgres walked the primary key up from the table's oldest event until it met the
 * job's, a read that grew with the whole table (10 ms a job at 46,000 events; a createJobs asking
 * each result's cursor took 0.9-1.4 s per 1,000 jobs).
 */
export async function positionsBeforeJobs(
  db: Executor,
  workspaceId: string,
  jobs: readonly { id: string; createdAt: Date }[],
): Promise<Map<string, bigint>> {
  const { rows } = await sql<{ job_id: string; position: string }>`
    with asked as (
      select * from unnest(${jobs.map((j) => j.id)}::uuid[], ${jobs.map((j) => j.createdAt)}::timestamptz[]) a(job_id, created_at)
    ), first_events as (
      select e.job_id, min(e.id) - 1 as position
      from events e
      join asked a on a.job_id = e.job_id and e.created_at >= a.created_at
      where e.workspace_id = ${workspaceId} and e.created_at >= (select min(created_at) from asked)
      group by e.job_id
    )
    select a.job_id::text as job_id,
           coalesce(f.position, (select case when is_called then last_value else 0 end from events_id_seq)) as position
    from asked a left join first_events f on f.job_id = a.job_id`.execute(db);
  return new Map(rows.map((r) => [r.job_id, BigInt(r.position)]));
}

/**
 * The last event id handed out so far (0 before the first). Every event of a transaction that
 * begins after this read takes a higher id: the sequence only goes up.
 */
export async function latestEventPosition(db: Executor): Promise<bigint> {
  const { rows } = await sql<{ position: string }>`
    select case when is_called then last_value else 0 end as position from events_id_seq`.execute(db);
  return BigInt(rows[0]!.position);
}
