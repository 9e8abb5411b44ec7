/**
 * Alert triage (migration 000039): the (rule, subject) states an operator sees as firing,
 * acknowledges, and the silences that hold back their deliveries. The evaluator writes the states
 * (../statements/alert-notify.ts); here they are read, and only their acknowledgement is written.
 */
import { sql } from 'kysely';
import type { AlertSilenceRecord } from '../types.js';
import type { AlertCondition, AlertSubjectType } from './alerts.js';
import { isUuid, scoped, type Executor } from './scope.js';

/** What triage shows of one (rule, subject) state. */
export interface AlertStateView {
  id: string;
  rule_id: string;
  rule_name: string;
  condition: AlertCondition;
  subject_key: string;
  /** The job's name, for job subjects (null when it has none, or the job is gone). */
  job_name: string | null;
  firing: boolean;
  first_seen_at: Date | null;
  last_seen_at: Date | null;
  occurrences: number;
  acknowledged_at: Date | null;
  acknowledged_by_key_id: string | null;
  acknowledged_by_name: string | null;
  /** The newest notification about this rule and subject. */
  last_alert_id: string | null;
  /** The silence in force over it that ends last, and when. */
  silence_id: string | null;
  silenced_until: Date | null;
}

export type AlertStateStatus = 'OPEN' | 'ACKNOWLEDGED' | 'RESOLVED';

const STATE_COLUMNS = sql`s.id, s.rule_id, r.name as rule_name, r.condition, s.subject_key, s.firing, s.first_seen_at, s.last_seen_at,
  s.occurrences, s.acknowledged_at, s.acknowledged_by_key_id,
  (select k.name from api_keys k where k.id = s.acknowledged_by_key_id) as acknowledged_by_name,
  (select j.name from jobs j where s.subject_key like 'job:%' and j.workspace_id = s.workspace_id
     and j.id = substr(s.subject_key, 5)::uuid) as job_name,
  (select n.id from alert_notifications n where n.rule_id = s.rule_id and n.subject_key = s.subject_key
     order by n.created_at desc, n.id desc limit 1) as last_alert_id,
  x.id as silence_id, x.ends_at as silenced_until`;

// The silence in force over a state: of its rule, for its subject or for all, started, not past its end, not lifted.
const SILENCE_JOIN = sql`left join lateral (
    select x.id, x.ends_at from alert_silences x
    where x.rule_id = s.rule_id and (x.subject_key is null or x.subject_key = s.subject_key)
      and x.ended_at is null and x.starts_at <= now() and x.ends_at > now()
    order by x.ends_at desc limit 1) x on true`;

function statusPredicate(statuses: AlertStateStatus[]) {
  const parts = statuses.map((st) =>
    st === 'OPEN'
      ? sql`(s.firing and s.acknowledged_at is null)`
      : st === 'ACKNOWLEDGED'
        ? sql`(s.firing and s.acknowledged_at is not null)`
        : sql`(not s.firing)`,
  );
  return parts.length ? sql`and (${sql.join(parts, sql` or `)})` : sql``;
}

/** States of live rules, by rule name, then subject (keyset on both), of the given statuses. */
export async function listAlertStates(
  db: Executor,
  workspaceId: string,
  opts: { limit: number; afterId?: string | undefined; ruleId?: string | null | undefined; statuses: AlertStateStatus[] },
): Promise<AlertStateView[]> {
  const ws = scoped(workspaceId);
  if (opts.ruleId && !isUuid(opts.ruleId)) return [];
  const after = opts.afterId
    ? sql`and (r.name, s.subject_key) > (select cr.name, c.subject_key from alert_states c join alert_rules cr on cr.id = c.rule_id
                                         where c.id = ${opts.afterId} and c.workspace_id = ${ws})`
    : sql``;
  const rule = opts.ruleId ? sql`and s.rule_id = ${opts.ruleId}` : sql``;
  const { rows } = await sql<AlertStateView>`
    select ${STATE_COLUMNS} from alert_states s join alert_rules r on r.id = s.rule_id ${SILENCE_JOIN}
    where s.workspace_id = ${ws} and r.deleted_at is null ${statusPredicate(opts.statuses)} ${rule} ${after}
    order by r.name, s.subject_key limit ${opts.limit}`.execute(db);
  return rows;
}

export async function countAlertStates(
  db: Executor,
  workspaceId: string,
  opts: { ruleId?: string | null | undefined; statuses: AlertStateStatus[]; limit: number },
): Promise<number> {
  const ws = scoped(workspaceId);
  if (opts.ruleId && !isUuid(opts.ruleId)) return 0;
  const rule = opts.ruleId ? sql`and s.rule_id = ${opts.ruleId}` : sql``;
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from (select 1 from alert_states s join alert_rules r on r.id = s.rule_id
      where s.workspace_id = ${ws} and r.deleted_at is null ${statusPredicate(opts.statuses)} ${rule} limit ${opts.limit}) c`.execute(db);
  return rows[0]?.n ?? 0;
}

export async function findAlertState(db: Executor, workspaceId: string, id: string): Promise<AlertStateView | undefined> {
  if (!isUuid(id)) return undefined;
  const { rows } = await sql<AlertStateView>`
    select ${STATE_COLUMNS} from alert_states s join alert_rules r on r.id = s.rule_id ${SILENCE_JOIN}
    where s.workspace_id = ${scoped(workspaceId)} and s.id = ${id} and r.deleted_at is null`.execute(db);
  return rows[0];
}

/** The states of (rule, subject) pairs, as notifications name them (a pair with no state, or whose rule was deleted, is left out). */
export async function findAlertStatesOf(
  db: Executor,
  workspaceId: string,
  pairs: readonly { ruleId: string; subjectKey: string }[],
): Promise<AlertStateView[]> {
  const asked = pairs.filter((p) => isUuid(p.ruleId));
  if (asked.length === 0) return [];
  const { rows } = await sql<AlertStateView>`
    select ${STATE_COLUMNS} from alert_states s join alert_rules r on r.id = s.rule_id ${SILENCE_JOIN}
    where s.workspace_id = ${scoped(workspaceId)} and r.deleted_at is null
      and (s.rule_id, s.subject_key) in (select * from unnest(${asked.map((p) => p.ruleId)}::uuid[], ${asked.map((p) => p.subjectKey)}::text[]))`.execute(
    db,
  );
  return rows;
}

/**
 * Locks the state for the acknowledgement: an evaluator pass holding it (FOR UPDATE, for the
 * length of its transaction) is waited for, so what the pass saves and this acknowledgement
 * never overwrite each other.
 */
export async function lockAlertState(
  db: Executor,
  workspaceId: string,
  id: string,
): Promise<{ firing: boolean; acknowledged_at: Date | null } | undefined> {
  if (!isUuid(id)) return undefined;
  const { rows } = await sql<{ firing: boolean; acknowledged_at: Date | null }>`
    select s.firing, s.acknowledged_at from alert_states s join alert_rules r on r.id = s.rule_id
    where s.workspace_id = ${scoped(workspaceId)} and s.id = ${id} and r.deleted_at is null
    for update of s`.execute(db);
  return rows[0];
}

/** Acknowledges the episode a firing state is in; the first acknowledgement stands. */
export async function acknowledgeAlertState(db: Executor, workspaceId: string, id: string, keyId: string | null): Promise<void> {
  await sql`
    update alert_states set acknowledged_at = now(), acknowledged_by_key_id = ${keyId}, updated_at = now()
    where workspace_id = ${scoped(workspaceId)} and id = ${id} and firing and acknowledged_at is null`.execute(db);
}

/** An alert_silences row with what the API shows beside it (joined). */
export interface AlertSilenceView extends AlertSilenceRecord {
  rule_name: string;
  created_by_name: string | null;
  ended_by_name: string | null;
  /** In force now: started, not past its end, not lifted. */
  active: boolean;
}

const SILENCE_COLUMNS = sql`x.*, r.name as rule_name,
  (select k.name from api_keys k where k.id = x.created_by_key_id) as created_by_name,
  (select k.name from api_keys k where k.id = x.ended_by_key_id) as ended_by_name,
  (x.ended_at is null and x.starts_at <= now() and x.ends_at > now()) as active`;

export interface NewSilence {
  ruleId: string;
  subject: { key: string; type: AlertSubjectType; id: string | null; name: string | null } | null;
  durationMs: number;
  comment: string | null;
  createdByKeyId: string | null;
}

/** A silence from now for `durationMs` (the duration crosses into SQL: the end is the database's time). */
export async function insertSilence(db: Executor, workspaceId: string, s: NewSilence): Promise<AlertSilenceView> {
  const { rows } = await sql<{ id: string }>`
    insert into alert_silences (workspace_id, rule_id, subject_key, subject_type, subject_id, subject_name, ends_at, comment, created_by_key_id)
    values (${scoped(workspaceId)}, ${s.ruleId}, ${s.subject?.key ?? null}, ${s.subject?.type ?? null}, ${s.subject?.id ?? null},
            ${s.subject?.name ?? null}, now() + make_interval(secs => ${s.durationMs}::float8 / 1000), ${s.comment}, ${s.createdByKeyId})
    returning id`.execute(db);
  return (await findSilence(db, workspaceId, rows[0]!.id))!;
}

export async function findSilence(
  db: Executor,
  workspaceId: string,
  id: string,
  opts: { forUpdate?: boolean } = {},
): Promise<AlertSilenceView | undefined> {
  if (!isUuid(id)) return undefined;
  const lock = opts.forUpdate ? sql`for update of x` : sql``;
  const { rows } = await sql<AlertSilenceView>`
    select ${SILENCE_COLUMNS} from alert_silences x join alert_rules r on r.id = x.rule_id
    where x.workspace_id = ${scoped(workspaceId)} and x.id = ${id} ${lock}`.execute(db);
  return rows[0];
}

/** Silences, newest first (keyset on created_at, id); `activeOnly`: those in force now. */
export async function listSilences(
  db: Executor,
  workspaceId: string,
  opts: { limit: number; afterId?: string | undefined; activeOnly: boolean; ruleId?: string | null | undefined },
): Promise<AlertSilenceView[]> {
  const ws = scoped(workspaceId);
  if (opts.ruleId && !isUuid(opts.ruleId)) return [];
  const after = opts.afterId
    ? sql`and (x.created_at, x.id) < (select c.created_at, c.id from alert_silences c where c.id = ${opts.afterId} and c.workspace_id = ${ws})`
    : sql``;
  const active = opts.activeOnly ? sql`and x.ended_at is null and x.starts_at <= now() and x.ends_at > now()` : sql``;
  const rule = opts.ruleId ? sql`and x.rule_id = ${opts.ruleId}` : sql``;
  const { rows } = await sql<AlertSilenceView>`
    select ${SILENCE_COLUMNS} from alert_silences x join alert_rules r on r.id = x.rule_id
    where x.workspace_id = ${ws} ${active} ${rule} ${after}
    order by x.created_at desc, x.id desc limit ${opts.limit}`.execute(db);
  return rows;
}

/** Lifts a silence in force now; a silence that already ended (by hand or by time) is left as it is. */
export async function endSilence(db: Executor, workspaceId: string, id: string, keyId: string | null): Promise<void> {
  await sql`
    update alert_silences set ended_at = now(), ended_by_key_id = ${keyId}
    where workspace_id = ${scoped(workspaceId)} and id = ${id} and ended_at is null and ends_at > now()`.execute(db);
}

/** A job of the workspace, by id, with its name (a silence of a job subject shows it). */
export async function findJobName(db: Executor, workspaceId: string, jobId: string): Promise<{ name: string | null } | undefined> {
  if (!isUuid(jobId)) return undefined;
  const { rows } = await sql<{ name: string | null }>`
    select name from jobs where workspace_id = ${scoped(workspaceId)} and id = ${jobId}`.execute(db);
  return rows[0];
}
