/**
 * Alert state rows, notification rows and their delivery jobs, written by the evaluator inside
 * its pass's transaction: a notification and the jobs that deliver it commit together or not at
 * all, and the engine (not the evaluator) then delivers them, with its retries and attempt history.
 */
import type pg from 'pg';
import type { AlertNotificationFields } from '../repositories/alerts.js';
import type { AlertStateRecord } from '../types.js';

/**
 * An alert_states row as the evaluator tracks it (a new state is built before it is written):
 * its columns less the workspace and the update time, which `select s.*` also reads.
 */
export type AlertStateRow = Omit<AlertStateRecord, 'workspace_id' | 'updated_at' | 'id'>;

/** The states of these (rule, subject) pairs, plus every firing state of `firingOf` rules. */
export async function loadStates(
  client: pg.PoolClient,
  pairs: { ruleId: string; key: string }[],
  firingOf: string[],
): Promise<AlertStateRow[]> {
  const { rows } = await client.query<AlertStateRow>(
    `select s.* from alert_states s
     where (s.rule_id, s.subject_key) in (select * from unnest($1::uuid[], $2::text[]))
        or (s.rule_id = any($3::uuid[]) and s.firing)
     for update`,
    [pairs.map((p) => p.ruleId), pairs.map((p) => p.key), firingOf],
  );
  return rows;
}

/** States whose window ended with occurrences still uncounted in a notification. */
export async function statesDueForDigest(client: pg.PoolClient, workspaceId: string): Promise<AlertStateRow[]> {
  const { rows } = await client.query<AlertStateRow>(
    `select s.* from alert_states s join alert_rules r on r.id = s.rule_id
     where s.workspace_id = $1 and s.firing and s.suppressed > 0 and r.enabled and r.deleted_at is null
       and s.last_notified_at <= now() - make_interval(secs => r.rate_limit_ms / 1000.0)
     for update of s`,
    [workspaceId],
  );
  return rows;
}

export async function saveState(client: pg.PoolClient, workspaceId: string, s: AlertStateRow): Promise<void> {
  await client.query(
    `insert into alert_states (rule_id, subject_key, workspace_id, firing, notified, first_seen_at, last_seen_at, occurrences,
                               last_notified_at, window_start, suppressed, observed, acknowledged_at, acknowledged_by_key_id, updated_at)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, now())
     on conflict (rule_id, subject_key) do update set firing = excluded.firing, notified = excluded.notified,
       first_seen_at = excluded.first_seen_at, last_seen_at = excluded.last_seen_at, occurrences = excluded.occurrences,
       last_notified_at = excluded.last_notified_at, window_start = excluded.window_start, suppressed = excluded.suppressed,
       observed = excluded.observed, acknowledged_at = excluded.acknowledged_at,
       acknowledged_by_key_id = excluded.acknowledged_by_key_id, updated_at = now()`,
    [
      s.rule_id,
      s.subject_key,
      workspaceId,
      s.firing,
      s.notified,
      s.first_seen_at,
      s.last_seen_at,
      s.occurrences,
      s.last_notified_at,
      s.window_start,
      s.suppressed,
      s.observed,
      s.acknowledged_at,
      s.acknowledged_by_key_id,
    ],
  );
}

/** A notification to write: what it says, with its workspace and the subject's state key. */
export interface NewNotification extends AlertNotificationFields {
  workspaceId: string;
  subjectKey: string;
}

/**
 * The notification, unless one with the same (rule, subject, kind, window start) exists: then
 * undefined, and nothing is delivered twice.
 */
export async function insertNotification(client: pg.PoolClient, n: NewNotification): Promise<{ id: string; created_at: Date } | undefined> {
  const { rows } = await client.query<{ id: string; created_at: Date }>(
    `insert into alert_notifications (workspace_id, rule_id, condition, kind, subject_type, subject_key, subject_id, subject_name,
                                      window_start, first_seen_at, last_seen_at, occurrences, suppressed_count, summary, detail, silence_id)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::jsonb, $16)
     on conflict (rule_id, subject_key, kind, window_start) do nothing
     returning id, created_at`,
    [
      n.workspaceId,
      n.ruleId,
      n.condition,
      n.kind,
      n.subjectType,
      n.subjectKey,
      n.subjectId,
      n.subjectName,
      n.windowStart,
      n.firstSeenAt,
      n.lastSeenAt,
      n.occurrences,
      n.suppressedCount,
      n.summary,
      JSON.stringify(n.detail),
      n.silenceId,
    ],
  );
  return rows[0];
}

/** A silence in force now: of its rule, and of one subject of it or (subject_key null) of all. */
export interface SilenceInForce {
  id: string;
  rule_id: string;
  subject_key: string | null;
  ends_at: Date;
}

/**
 * The workspace's silences in force at the transaction's time: started, not past their end, not
 * lifted. A silence expires by this predicate alone; nothing runs when it ends.
 */
export async function silencesInForce(client: pg.PoolClient, workspaceId: string): Promise<SilenceInForce[]> {
  const { rows } = await client.query<SilenceInForce>(
    `select id, rule_id, subject_key, ends_at from alert_silences
     where workspace_id = $1 and ended_at is null and starts_at <= now() and ends_at > now()`,
    [workspaceId],
  );
  return rows;
}

/**
 * An IMMEDIATE job on `endpointId` (a live USER endpoint of the workspace: HTTP for webhooks, the
 * INTERNAL email endpoint when `internalName` is given) with its first execution, as createJob
 * writes them. Its idempotency key is the notification's, so it exists once per notification;
 * it opts out of alerts (a failing delivery must not alert, which would deliver again).
 * Undefined when the endpoint is gone (archived, or no longer HTTP): the notification stays,
 * undelivered, and says so.
 */
export async function enqueueDelivery(
  client: pg.PoolClient,
  workspaceId: string,
  target: { endpointId: string } | { internalName: string },
  notificationId: string,
  input: unknown,
): Promise<string | undefined> {
  const [where, ref] =
    'endpointId' in target
      ? [`id = $2::uuid and kind = 'HTTP' and type = 'USER'`, target.endpointId]
      : [`name = $2 and type = 'INTERNAL'`, target.internalName];
  const { rows } = await client.query<{ id: string }>(
    `with en as (
       select id, max_attempts from endpoints where workspace_id = $1 and ${where} and archived_at is null
     ), job as (
       insert into jobs (workspace_id, endpoint_id, name, kind, input, max_attempts, idempotency_key, alerts_opt_out)
       select $1, en.id, $3, 'IMMEDIATE', $4::jsonb, coalesce(en.max_attempts, 10), $3, true from en
       on conflict do nothing
       returning id, endpoint_id, max_attempts
     ), ex as (
       insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
       select $1, job.id, job.endpoint_id, now(), now(), job.max_attempts from job
       returning id
     )
     select job.id from job`,
    [workspaceId, ref, `alert:${notificationId}`, JSON.stringify(input)],
  );
  return rows[0]?.id;
}

export async function setDeliveryJobs(
  client: pg.PoolClient,
  id: string,
  jobs: { webhook: string | null; email: string | null },
): Promise<void> {
  await client.query(`update alert_notifications set webhook_job_id = $2, email_job_id = $3 where id = $1`, [id, jobs.webhook, jobs.email]);
}

/** Job names and endpoint names for digests (their subject keys carry only the id). */
export async function jobLabels(
  client: pg.PoolClient,
  workspaceId: string,
  jobIds: string[],
): Promise<Map<string, { name: string | null; endpointId: string }>> {
  if (jobIds.length === 0) return new Map();
  const { rows } = await client.query<{ id: string; name: string | null; endpoint_id: string }>(
    `select id, name, endpoint_id from jobs where workspace_id = $1 and id = any($2::uuid[])`,
    [workspaceId, jobIds],
  );
  return new Map(rows.map((r) => [r.id, { name: r.name, endpointId: r.endpoint_id }]));
}

/**
 * The recipients of a rule's email, read by the sender when it sends (its job's input names the
 * rule, never the addresses). A rule deleted since the alert was raised still has them: the
 * alert is delivered as raised. Empty: the installation's default list; undefined: no such rule.
 */
export async function alertEmailRecipients(pool: pg.Pool, workspaceId: string, ruleId: string): Promise<string[] | undefined> {
  const { rows } = await pool.query<{ email_to: string[] }>(`select email_to from alert_rules where workspace_id = $1 and id = $2`, [
    workspaceId,
    ruleId,
  ]);
  return rows[0]?.email_to;
}
