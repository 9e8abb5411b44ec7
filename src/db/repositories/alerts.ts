/**
 * Alert rules and notifications (migration 000020): the rows the alerts service reads and
 * writes inside its transactions. The evaluator's hot statements are in ../statements/alert-evaluation.ts.
 */
import { sql } from 'kysely';
import { isUuid, scoped, type Executor } from './scope.js';

import type { AlertCondition, AlertKind, AlertNotificationRecord, AlertRuleRecord, AlertSubjectType, Severity } from '../types.js';

export type { AlertCondition, AlertKind, AlertSubjectType } from '../types.js';
export type AlertSeverity = Severity;

/**
 * What one notification says, in the one shape both sides use: the evaluator writes it
 * (../statements/alert-notify.ts, NewNotification) and the service reads it back (Alert).
 */
export interface AlertNotificationFields {
  ruleId: string;
  condition: AlertCondition;
  kind: AlertKind;
  subjectType: AlertSubjectType;
  subjectId: string | null;
  subjectName: string | null;
  windowStart: Date;
  firstSeenAt: Date;
  lastSeenAt: Date;
  occurrences: number;
  suppressedCount: number;
  summary: string;
  detail: Record<string, unknown>;
  /** The silence it was written under: recorded, not delivered. Null: not silenced. */
  silenceId: string | null;
}

/** An alert_rules row, as `select *` reads it. */
export type AlertRuleRow = AlertRuleRecord;

export type AlertRuleFields = Pick<
  AlertRuleRow,
  | 'name'
  | 'condition'
  | 'job_ids'
  | 'endpoint_ids'
  | 'handler_names'
  | 'min_consecutive'
  | 'no_success_ms'
  | 'min_severity'
  | 'webhook_endpoint_id'
  | 'webhook_format'
  | 'email'
  | 'email_to'
  | 'rate_limit_ms'
  | 'enabled'
>;

/** An alert_notifications row with what the listing joins (declared here). */
export interface AlertNotificationRow extends AlertNotificationRecord {
  /** The rule's name (joined; a deleted rule keeps its row, and so its name). */
  rule_name: string;
  /** The status of each delivery job's execution (joined), null when there is none. */
  webhook_status: string | null;
  email_status: string | null;
}

export async function insertAlertRule(
  db: Executor,
  workspaceId: string,
  f: AlertRuleFields,
  createdByKeyId: string | null,
): Promise<AlertRuleRow | undefined> {
  const { rows } = await sql<AlertRuleRow>`
    insert into alert_rules (workspace_id, name, condition, job_ids, endpoint_ids, handler_names, min_consecutive, no_success_ms,
                             min_severity, webhook_endpoint_id, webhook_format, email, email_to, rate_limit_ms, enabled, created_by_key_id)
    values (${scoped(workspaceId)}, ${f.name}, ${f.condition}, ${f.job_ids}::uuid[], ${f.endpoint_ids}::uuid[], ${f.handler_names}::text[],
            ${f.min_consecutive}, ${f.no_success_ms}, ${f.min_severity}, ${f.webhook_endpoint_id}, ${f.webhook_format}, ${f.email},
            ${f.email_to}::text[], ${f.rate_limit_ms}, ${f.enabled}, ${createdByKeyId})
    on conflict (workspace_id, name) where deleted_at is null do nothing
    returning *`.execute(db);
  return rows[0];
}

/** The live rule, optionally locked for update. */
export async function findAlertRule(
  db: Executor,
  workspaceId: string,
  id: string,
  opts: { forUpdate?: boolean } = {},
): Promise<AlertRuleRow | undefined> {
  if (!isUuid(id)) return undefined;
  const lock = opts.forUpdate ? sql`for update` : sql``;
  const { rows } = await sql<AlertRuleRow>`
    select * from alert_rules where workspace_id = ${scoped(workspaceId)} and id = ${id} and deleted_at is null ${lock}`.execute(db);
  return rows[0];
}

/** Replaces every field; undefined when another live rule has the name. */
export async function updateAlertRule(
  db: Executor,
  workspaceId: string,
  id: string,
  f: AlertRuleFields,
): Promise<AlertRuleRow | undefined> {
  const taken = await sql<{ id: string }>`
    select id from alert_rules where workspace_id = ${scoped(workspaceId)} and name = ${f.name} and deleted_at is null and id <> ${id}`.execute(
    db,
  );
  if (taken.rows.length) return undefined;
  const { rows } = await sql<AlertRuleRow>`
    update alert_rules set name = ${f.name}, condition = ${f.condition}, job_ids = ${f.job_ids}::uuid[], endpoint_ids = ${f.endpoint_ids}::uuid[],
      handler_names = ${f.handler_names}::text[], min_consecutive = ${f.min_consecutive}, no_success_ms = ${f.no_success_ms},
      min_severity = ${f.min_severity}, webhook_endpoint_id = ${f.webhook_endpoint_id}, webhook_format = ${f.webhook_format},
      email = ${f.email}, email_to = ${f.email_to}::text[], rate_limit_ms = ${f.rate_limit_ms}, enabled = ${f.enabled}, updated_at = now()
    where workspace_id = ${workspaceId} and id = ${id} and deleted_at is null
    returning *`.execute(db);
  return rows[0];
}

/**
 * Deletes a rule: it stops evaluating at once; its notifications stay (they are history) and
 * so does the row, marked deleted, which they refer to. Its state goes.
 */
export async function deleteAlertRule(db: Executor, workspaceId: string, id: string): Promise<AlertRuleRow | undefined> {
  const { rows } = await sql<AlertRuleRow>`
    update alert_rules set deleted_at = now(), enabled = false, updated_at = now()
    where workspace_id = ${scoped(workspaceId)} and id = ${id} and deleted_at is null returning *`.execute(db);
  if (rows[0]) await sql`delete from alert_states where rule_id = ${id}`.execute(db);
  return rows[0];
}

/** Live rules, newest first (keyset on created_at, id). */
export async function listAlertRules(
  db: Executor,
  workspaceId: string,
  opts: { limit: number; afterId?: string | undefined },
): Promise<AlertRuleRow[]> {
  const ws = scoped(workspaceId);
  const after = opts.afterId
    ? sql`and (created_at, id) < (select c.created_at, c.id from alert_rules c where c.id = ${opts.afterId} and c.workspace_id = ${ws})`
    : sql``;
  const { rows } = await sql<AlertRuleRow>`
    select * from alert_rules where workspace_id = ${ws} and deleted_at is null ${after}
    order by created_at desc, id desc limit ${opts.limit}`.execute(db);
  return rows;
}

const NOTIFICATION_COLUMNS = sql`n.*,
  (select r.name from alert_rules r where r.id = n.rule_id) as rule_name,
  (select x.status from executions x where x.job_id = n.webhook_job_id order by x.created_at desc limit 1) as webhook_status,
  (select x.status from executions x where x.job_id = n.email_job_id order by x.created_at desc limit 1) as email_status`;

/** Notifications, newest first, optionally of one rule. */
export async function listAlertNotifications(
  db: Executor,
  workspaceId: string,
  opts: { limit: number; afterId?: string | undefined; ruleId?: string | null | undefined },
): Promise<AlertNotificationRow[]> {
  const ws = scoped(workspaceId);
  if (opts.ruleId && !isUuid(opts.ruleId)) return [];
  const after = opts.afterId
    ? sql`and (n.created_at, n.id) < (select c.created_at, c.id from alert_notifications c where c.id = ${opts.afterId} and c.workspace_id = ${ws})`
    : sql``;
  const rule = opts.ruleId ? sql`and n.rule_id = ${opts.ruleId}` : sql``;
  const { rows } = await sql<AlertNotificationRow>`
    select ${NOTIFICATION_COLUMNS} from alert_notifications n
    where n.workspace_id = ${ws} ${rule} ${after}
    order by n.created_at desc, n.id desc limit ${opts.limit}`.execute(db);
  return rows;
}

export async function findAlertNotification(db: Executor, workspaceId: string, id: string): Promise<AlertNotificationRow | undefined> {
  if (!isUuid(id)) return undefined;
  const { rows } = await sql<AlertNotificationRow>`
    select ${NOTIFICATION_COLUMNS} from alert_notifications n where n.workspace_id = ${scoped(workspaceId)} and n.id = ${id}`.execute(db);
  return rows[0];
}

/** Sets a job's alert opt-out; the job row, or undefined when the job is not in the workspace. */
export async function setJobAlertsOptOut(
  db: Executor,
  workspaceId: string,
  jobId: string,
  optOut: boolean,
): Promise<{ id: string } | undefined> {
  if (!isUuid(jobId)) return undefined;
  const { rows } = await sql<{ id: string }>`
    update jobs set alerts_opt_out = ${optOut}, updated_at = now()
    where workspace_id = ${scoped(workspaceId)} and id = ${jobId} returning id`.execute(db);
  return rows[0];
}

/** Whether each of the workspace's jobs among `jobIds` is opted out of alerts, by job id (a job not found is left out). */
export async function jobsAlertsOptOut(db: Executor, workspaceId: string, jobIds: readonly string[]): Promise<Map<string, boolean>> {
  const { rows } = await sql<{ id: string; alerts_opt_out: boolean }>`
    select id, alerts_opt_out from jobs where workspace_id = ${scoped(workspaceId)} and id = any(${jobIds.filter(isUuid)}::uuid[])`.execute(
    db,
  );
  return new Map(rows.map((r) => [r.id, r.alerts_opt_out]));
}
