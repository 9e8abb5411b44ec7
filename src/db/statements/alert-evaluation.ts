/**
 * The alert evaluator's statements (src/service/engine/alerts/evaluator.ts), run on one client
 * inside its transaction. The guarantee is in LOCK_CURSOR: one evaluation of a workspace at a
 * time, and the cursor it moves is committed with everything the pass wrote.
 */
import type pg from 'pg';
import type { AlertRuleRow } from '../repositories/alerts.js';
import type { IntervalHandlerRow, JobRow } from '../types.js';

/** The cursor's positions as exact decimal text (cast in the statement, for BigInt), so declared here. */
export interface AlertCursorRow {
  workspace_id: string;
  events_after: string;
  findings_after: string;
  pending_events: string | null;
  pending_findings: string | null;
  pending_writers: string[] | null;
}

/**
 * SKIP LOCKED: a worker that finds another evaluating this workspace skips the pass rather than
 * waiting to evaluate the same range again (that one will have moved the cursor past it).
 */
export async function lockCursor(client: pg.PoolClient, workspaceId: string): Promise<AlertCursorRow | undefined> {
  const { rows } = await client.query<AlertCursorRow>(
    `select workspace_id, events_after::text, findings_after::text, pending_events::text, pending_findings::text, pending_writers
     from alert_cursors where workspace_id = $1 for update skip locked`,
    [workspaceId],
  );
  return rows[0];
}

export async function saveCursor(
  client: pg.PoolClient,
  workspaceId: string,
  c: { events: bigint; findings: bigint; pending: { events: bigint; findings: bigint; writers: string[] } | null },
): Promise<void> {
  await client.query(
    `update alert_cursors set events_after = $2, findings_after = $3, pending_events = $4, pending_findings = $5,
       pending_writers = $6, evaluated_at = now() where workspace_id = $1`,
    [
      workspaceId,
      c.events.toString(),
      c.findings.toString(),
      c.pending?.events.toString() ?? null,
      c.pending?.findings.toString() ?? null,
      c.pending?.writers ?? null,
    ],
  );
}

/** The last ids handed out (read before the writers, as src/db/statements/events.ts does). */
export async function readSequencePositions(client: pg.PoolClient): Promise<{ events: bigint; findings: bigint }> {
  const { rows } = await client.query<{ events: string; findings: string }>(
    `select (select case when is_called then last_value else 0 end from events_id_seq)::text as events,
            (select case when is_called then last_value else 0 end from findings_id_seq)::text as findings`,
  );
  return { events: BigInt(rows[0]!.events), findings: BigInt(rows[0]!.findings) };
}

/** Open transactions holding the event-writer mark (migration 000009), by virtual transaction id. */
export async function readOpenWriters(client: pg.PoolClient): Promise<string[]> {
  const { rows } = await client.query<{ vxid: string }>(
    `select virtualtransaction as vxid from pg_locks
     where locktype = 'advisory' and classid = 27239 and objid = 1 and objsubid = 2
       and database = (select oid from pg_database where datname = current_database())`,
  );
  return rows.map((r) => r.vxid);
}

/** The workspace's live, enabled rules; FOR SHARE so that a rule's delete waits for the pass. */
export async function lockActiveRules(client: pg.PoolClient, workspaceId: string): Promise<AlertRuleRow[]> {
  const { rows } = await client.query<AlertRuleRow>(
    `select * from alert_rules where workspace_id = $1 and deleted_at is null and enabled order by created_at, id for share`,
    [workspaceId],
  );
  return rows.map((r) => ({
    ...r,
    no_success_ms: r.no_success_ms === null ? null : Number(r.no_success_ms),
    rate_limit_ms: Number(r.rate_limit_ms),
  }));
}

/** An event with what the statement joins from its job, endpoint, execution and run, its id as text: declared here. */
export interface EvaluatedEvent {
  id: string;
  topic: 'EXECUTION' | 'RUN';
  subject_id: string;
  job_id: string | null;
  endpoint_id: string | null;
  name: string | null;
  status: string;
  attempt_count: number | null;
  created_at: Date;
  job_name: string | null;
  opt_out: boolean;
  endpoint_name: string | null;
  endpoint_type: string | null;
  last_error: string | null;
  pause_kind: string | null;
  run_error: string | null;
}

/**
 * The events a pass evaluates, in id order: executions ending (FAILED, SUCCEEDED) and runs ending
 * or pausing, with what a notification says about them. The execution's error is the text the
 * engine stored, already redacted of the endpoint's secrets (src/service/engine/delivery/deliver.ts).
 * A run's pause kind is the one its PAUSED event recorded (migration 000022), not the run's as
 * it is now: a run paused as CRASHED and resumed before the pass (which runs every minute) is
 * still seen as crashed. Only events written before that migration carry none; for those the
 * run's current kind is the best there is.
 */
export async function eventsToEvaluate(
  client: pg.PoolClient,
  workspaceId: string,
  after: bigint,
  upTo: bigint,
  limit: number,
): Promise<EvaluatedEvent[]> {
  const { rows } = await client.query<EvaluatedEvent>(
    `select e.id::text, e.topic, e.subject_id, e.job_id, e.endpoint_id, e.name, e.status, e.attempt_count, e.created_at,
            j.name as job_name, coalesce(j.alerts_opt_out, false) as opt_out, en.name as endpoint_name, en.type as endpoint_type,
            x.last_error, case when e.status = 'PAUSED' then coalesce(e.pause_kind, r.pause_kind) end as pause_kind, r.error as run_error
     from events e
     left join jobs j on e.topic = 'EXECUTION' and j.id = e.job_id
     left join endpoints en on e.topic = 'EXECUTION' and en.id = e.endpoint_id
     left join executions x on e.topic = 'EXECUTION' and x.id = e.subject_id
     left join runs r on e.topic = 'RUN' and r.id = e.subject_id
     where e.workspace_id = $1 and e.id > $2 and e.id <= $3
       and ((e.topic = 'EXECUTION' and e.status in ('FAILED', 'SUCCEEDED')) or (e.topic = 'RUN' and e.status in ('FAILED', 'PAUSED', 'COMPLETED')))
     order by e.id limit $4`,
    [workspaceId, after.toString(), upTo.toString(), limit],
  );
  return rows;
}

/** A finding with its run's name (a join), its id as text: declared here. */
export interface EvaluatedFinding {
  id: string;
  run_id: string;
  run_name: string;
  kind: string;
  severity: 'INFO' | 'WARNING' | 'ERROR' | 'DATA_LOSS';
  resource_id: string;
  created_at: Date;
}

export async function findingsToEvaluate(
  client: pg.PoolClient,
  workspaceId: string,
  after: bigint,
  upTo: bigint,
  limit: number,
): Promise<EvaluatedFinding[]> {
  const { rows } = await client.query<EvaluatedFinding>(
    `select f.id::text, f.run_id, r.name as run_name, f.kind, f.severity, f.resource_id, f.created_at
     from findings f join runs r on r.id = f.run_id
     where f.workspace_id = $1 and f.id > $2 and f.id <= $3 order by f.id limit $4`,
    [workspaceId, after.toString(), upTo.toString(), limit],
  );
  return rows;
}

/** An interval handler's columns the evaluator reads, and its opt-out (computed from workers.handlers). */
export interface IntervalHealth extends Pick<
  IntervalHandlerRow,
  'name' | 'last_status' | 'last_cause' | 'error_runs' | 'error_streak' | 'last_ok_at' | 'created_at'
> {
  opt_out: boolean;
}

/**
 * Interval handlers (installation-wide) with their opt-out: a handler opts out at registration,
 * which its worker publishes in the catalogue (workers.handlers).
 */
export async function intervalHealth(client: pg.PoolClient): Promise<IntervalHealth[]> {
  const { rows } = await client.query<IntervalHealth>(
    `select ih.name, ih.last_status, ih.last_cause, ih.error_runs, ih.error_streak, ih.last_ok_at, ih.created_at,
            exists (select 1 from workers w, jsonb_array_elements(w.handlers) h
                    where h->>'kind' = 'INTERVAL' and h->>'name' = ih.name and (h->>'alertsOptOut')::boolean) as opt_out
     from interval_handlers ih`,
  );
  return rows;
}

/**
 * Recoverable handlers registered opted out of alerts, by name (installation-wide, as interval
 * handlers' opt-outs: a handler opts out at registration, which its worker publishes in workers.handlers).
 */
export async function recoverablesOptedOut(client: pg.PoolClient): Promise<Set<string>> {
  const { rows } = await client.query<{ name: string }>(
    `select distinct h->>'name' as name from workers w, jsonb_array_elements(w.handlers) h
     where h->>'kind' = 'RECOVERABLE' and (h->>'alertsOptOut')::boolean`,
  );
  return new Set(rows.map((r) => r.name));
}

/** A job's columns; the error's, not null here (the statement selects only jobs that have one). */
export interface ScheduleErrorRow extends Pick<JobRow, 'id' | 'name' | 'endpoint_id'> {
  schedule_error: string;
  schedule_error_at: Date;
}

export async function scheduleErrors(client: pg.PoolClient, workspaceId: string): Promise<ScheduleErrorRow[]> {
  const { rows } = await client.query<ScheduleErrorRow>(
    `select j.id, j.name, j.endpoint_id, j.schedule_error, j.schedule_error_at
     from jobs j join endpoints en on en.id = j.endpoint_id
     where j.workspace_id = $1 and j.schedule_error is not null and j.status <> 'RETIRED' and not j.alerts_opt_out and en.type = 'USER'`,
    [workspaceId],
  );
  return rows;
}

/** A job's columns, and when it last succeeded (computed). */
export interface LastSuccessRow extends Pick<JobRow, 'id' | 'name' | 'endpoint_id'> {
  /** The last success, or the job's creation when it never succeeded. */
  since: Date;
}

/**
 * Jobs a dead man's switch watches: those chosen (by id or endpoint), or with no selection every
 * active CRON job (an immediate job that ran once long ago is not "silent").
 */
export async function jobsLastSuccess(client: pg.PoolClient, workspaceId: string, rule: AlertRuleRow): Promise<LastSuccessRow[]> {
  const all = rule.job_ids.length + rule.endpoint_ids.length + rule.handler_names.length === 0;
  const { rows } = await client.query<LastSuccessRow>(
    `select j.id, j.name, j.endpoint_id,
            greatest(j.created_at, coalesce((select max(x.finished_at) from executions x where x.job_id = j.id and x.status = 'SUCCEEDED'), j.created_at)) as since
     from jobs j join endpoints en on en.id = j.endpoint_id
     where j.workspace_id = $1 and j.status = 'ACTIVE' and not j.alerts_opt_out and en.type = 'USER'
       and (j.id = any($2::uuid[]) or j.endpoint_id = any($3::uuid[]) or ($4 and j.kind = 'CRON'))`,
    [workspaceId, rule.job_ids, rule.endpoint_ids, all],
  );
  return rows;
}

/** Recoverable handlers by name: their last COMPLETED run in the workspace (null: none yet). */
export async function recoverablesLastSuccess(
  client: pg.PoolClient,
  workspaceId: string,
  names: string[],
): Promise<Map<string, Date | null>> {
  const { rows } = await client.query<{ name: string; since: Date | null }>(
    `select n.name, (select max(r.finished_at) from runs r where r.workspace_id = $1 and r.name = n.name and r.status = 'COMPLETED') as since
     from unnest($2::text[]) as n(name)`,
    [workspaceId, names],
  );
  return new Map(rows.map((r) => [r.name, r.since]));
}

/** Severities from least to most severe: `array_position` over this ranks them in SQL. */
const SEVERITIES = ['INFO', 'WARNING', 'ERROR', 'DATA_LOSS'];

/**
 * What clears a FINDING condition for the recoverable handler `name`: its first run that started
 * after `since` (when the last finding that fired was recorded: a run started later is a later
 * run, since a handler has one live run at a time) and COMPLETED with no finding at or above
 * `minSeverity`. Only once the evaluator has read every such finding of that run and of the runs
 * before it (ids up to `findingsUpTo`, where its cursor stops this pass): a finding it has yet
 * to read, of an earlier run, must fire before a later clean run resolves it, never after.
 * Undefined while no such run exists.
 */
export async function cleanRunAfter(
  client: pg.PoolClient,
  workspaceId: string,
  name: string,
  since: Date,
  minSeverity: AlertRuleRow['min_severity'],
  findingsUpTo: bigint,
): Promise<{ id: string; finished_at: Date } | undefined> {
  const { rows } = await client.query<{ id: string; finished_at: Date }>(
    `select b.id, b.finished_at from runs b
     where b.workspace_id = $1 and b.name = $2 and b.status = 'COMPLETED' and b.started_at > $3
       and not exists (select 1 from findings f where f.run_id = b.id and array_position($4::text[], f.severity) >= array_position($4::text[], $5))
       and not exists (select 1 from findings f join runs a on a.id = f.run_id
                       where f.id > $6 and f.workspace_id = $1 and a.name = $2 and a.started_at <= b.started_at
                         and array_position($4::text[], f.severity) >= array_position($4::text[], $5))
     order by b.started_at limit 1`,
    [workspaceId, name, since, SEVERITIES, minSeverity ?? 'INFO', findingsUpTo.toString()],
  );
  return rows[0];
}
