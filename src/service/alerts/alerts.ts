/**
 * Alerts: rules (ADMIN manages them), the notifications the evaluator wrote
 * (src/service/engine/alerts/evaluator.ts), and a job's opt-out. Every guard is here; the GraphQL
 * resolvers and the library call these functions and nothing else.
 */
import { z } from 'zod';
import { HANDLER_NAME } from '../../db/handler-name.js';
import * as alertsRepo from '../../db/repositories/alerts.js';
import type { AlertNotificationFields, AlertNotificationRow, AlertRuleFields, AlertRuleRow } from '../../db/repositories/alerts.js';
import { findEndpointById } from '../../db/repositories/endpoints.js';
import { existingIds } from '../../db/repositories/references.js';
import { isUuid, type Executor } from '../../db/repositories/scope.js';
import type { Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { requireRole } from '../kernel/authorisation.js';
import { batchedRead } from '../kernel/batched-reads.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { isPlainEmailAddress, PLAIN_EMAIL_ADDRESS_MESSAGE } from './email-address.js';
import { ConflictError, NotFoundError, ValidationError } from '../kernel/errors.js';
import { displayName, idSchema, pageSchema, type PageInput } from '../kernel/inputs.js';
import { assertJobMutable, lockJob } from '../jobs/jobs.js';
import { decodeCursor, pageSize, toConnection, type Connection } from '../kernel/pagination.js';

export type AlertCondition = alertsRepo.AlertCondition;
export type AlertSeverity = alertsRepo.AlertSeverity;

export const DEFAULT_ALERT_RATE_LIMIT_MS = 6 * 3_600_000;

export interface AlertRule {
  id: string;
  workspaceId: string;
  name: string;
  condition: AlertCondition;
  jobIds: string[];
  endpointIds: string[];
  handlerNames: string[];
  minConsecutive: number;
  noSuccessMs: number | null;
  minSeverity: AlertSeverity | null;
  webhookEndpointId: string | null;
  webhookFormat: 'JSON' | 'SLACK';
  email: boolean;
  emailTo: string[];
  rateLimitMs: number;
  enabled: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export type AlertDeliveryState = 'NONE' | 'PENDING' | 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED';

/** One notification as the API shows it: what it says (the fields the evaluator wrote), its rule's name, where its deliveries are. */
export interface Alert extends AlertNotificationFields {
  id: string;
  /** Readable by every role, unlike the rule itself (ADMIN only: it holds the destinations). */
  ruleName: string;
  /** The key of its (rule, subject) state (./triage.ts); not shown, it finds the state. */
  subjectKey: string;
  webhookJobId: string | null;
  emailJobId: string | null;
  /** Derived from each delivery job's execution: NONE when the destination is not used (or was gone). */
  webhookDelivery: AlertDeliveryState;
  emailDelivery: AlertDeliveryState;
  createdAt: Date;
}

export const toAlertRule = (r: AlertRuleRow): AlertRule => ({
  id: r.id,
  workspaceId: r.workspace_id,
  name: r.name,
  condition: r.condition,
  jobIds: r.job_ids,
  endpointIds: r.endpoint_ids,
  handlerNames: r.handler_names,
  minConsecutive: r.min_consecutive,
  noSuccessMs: r.no_success_ms === null ? null : Number(r.no_success_ms),
  minSeverity: r.min_severity,
  webhookEndpointId: r.webhook_endpoint_id,
  webhookFormat: r.webhook_format,
  email: r.email,
  emailTo: r.email_to,
  rateLimitMs: Number(r.rate_limit_ms),
  enabled: r.enabled,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export const toAlert = (r: AlertNotificationRow): Alert => ({
  id: r.id,
  ruleId: r.rule_id,
  ruleName: r.rule_name,
  condition: r.condition,
  kind: r.kind,
  subjectType: r.subject_type,
  subjectId: r.subject_id,
  subjectName: r.subject_name,
  subjectKey: r.subject_key,
  windowStart: r.window_start,
  firstSeenAt: r.first_seen_at,
  lastSeenAt: r.last_seen_at,
  occurrences: r.occurrences,
  suppressedCount: r.suppressed_count,
  summary: r.summary,
  detail: r.detail,
  silenceId: r.silence_id,
  webhookJobId: r.webhook_job_id,
  emailJobId: r.email_job_id,
  webhookDelivery: (r.webhook_status as AlertDeliveryState | null) ?? 'NONE',
  emailDelivery: (r.email_status as AlertDeliveryState | null) ?? 'NONE',
  createdAt: r.created_at,
});

export const alertConditionSchema = z.enum(['EXECUTION_FAILED', 'RUN_FAILED', 'INTERVAL_ERROR', 'SCHEDULE_ERROR', 'NO_SUCCESS', 'FINDING']);
export const alertSeveritySchema = z.enum(['INFO', 'WARNING', 'ERROR', 'DATA_LOSS']);

const ruleFields = {
  name: displayName(),
  jobIds: z.array(idSchema).max(100).nullish(),
  endpointIds: z.array(idSchema).max(100).nullish(),
  handlerNames: z.array(z.string().regex(HANDLER_NAME, 'is not a handler name')).max(100).nullish(),
  minConsecutive: z.number().int().min(1).max(1000).nullish(),
  noSuccessMs: z
    .number()
    .int()
    .min(1000)
    .max(366 * 86_400_000)
    .nullish(),
  minSeverity: alertSeveritySchema.nullish(),
  webhookEndpointId: idSchema.nullish(),
  webhookFormat: z.enum(['JSON', 'SLACK']).nullish(),
  email: z.boolean().nullish(),
  // Plain addresses only (./email-address.ts): the mailer would read anything more as syntax.
  emailTo: z.array(z.string().refine(isPlainEmailAddress, PLAIN_EMAIL_ADDRESS_MESSAGE)).max(50).nullish(),
  // At least a second: one pass writes at most one notification per (rule, subject, kind).
  rateLimitMs: z
    .number()
    .int()
    .min(1000)
    .max(30 * 86_400_000)
    .nullish(),
  enabled: z.boolean().nullish(),
};

export const createAlertRuleSchema = z.object({ ...ruleFields, condition: alertConditionSchema });
export type CreateAlertRuleInput = z.input<typeof createAlertRuleSchema>;
export const updateAlertRuleSchema = z.object({
  id: idSchema,
  ...ruleFields,
  name: ruleFields.name.nullish(),
  condition: alertConditionSchema.nullish(),
});
export type UpdateAlertRuleInput = z.input<typeof updateAlertRuleSchema>;
export const alertFilterSchema = z.object({ ruleId: idSchema.nullish() });
export type AlertFilter = z.input<typeof alertFilterSchema>;
export const setJobAlertsOptOutSchema = z.object({ jobId: idSchema, optOut: z.boolean() });
export type SetJobAlertsOptOutInput = z.input<typeof setJobAlertsOptOutSchema>;

type Parsed = z.output<typeof updateAlertRuleSchema>;

/** Merges the input over the current rule (or the defaults) into the stored fields. */
function fieldsOf(input: Partial<Parsed>, current: AlertRuleRow | undefined): AlertRuleFields {
  const pick = <T>(v: T | null | undefined, fallback: T): T => (v === undefined ? fallback : (v ?? fallback));
  return {
    name: pick(input.name, current?.name ?? ''),
    condition: pick(input.condition, current?.condition ?? 'EXECUTION_FAILED'),
    job_ids: pick(input.jobIds, current?.job_ids ?? []),
    endpoint_ids: pick(input.endpointIds, current?.endpoint_ids ?? []),
    handler_names: pick(input.handlerNames, current?.handler_names ?? []),
    min_consecutive: pick(input.minConsecutive, current?.min_consecutive ?? 1),
    no_success_ms: input.noSuccessMs !== undefined ? (input.noSuccessMs ?? null) : (current?.no_success_ms ?? null),
    min_severity: input.minSeverity !== undefined ? (input.minSeverity ?? null) : (current?.min_severity ?? null),
    webhook_endpoint_id: input.webhookEndpointId !== undefined ? (input.webhookEndpointId ?? null) : (current?.webhook_endpoint_id ?? null),
    webhook_format: pick(input.webhookFormat, current?.webhook_format ?? 'JSON'),
    email: pick(input.email, current?.email ?? false),
    email_to: pick(input.emailTo, current?.email_to ?? []),
    rate_limit_ms: pick(input.rateLimitMs, current ? Number(current.rate_limit_ms) : DEFAULT_ALERT_RATE_LIMIT_MS),
    enabled: pick(input.enabled, current?.enabled ?? true),
  };
}

/**
 * The rule's cross-field rules and references: NO_SUCCESS needs noSuccessMs, FINDING
 * minSeverity, every rule a destination; the webhook endpoint is a live HTTP endpoint of the
 * workspace; chosen jobs and endpoints are the workspace's. Throws VALIDATION_FAILED, NOT_FOUND.
 */
async function assertRuleValid(trx: Executor, actor: Actor, f: AlertRuleFields): Promise<void> {
  if (f.condition === 'NO_SUCCESS' && f.no_success_ms === null) throw ValidationError.at(['noSuccessMs'], 'is required for NO_SUCCESS');
  if (f.condition === 'FINDING' && f.min_severity === null) throw ValidationError.at(['minSeverity'], 'is required for FINDING');
  if (!f.webhook_endpoint_id && !f.email)
    throw ValidationError.at(['webhookEndpointId'], 'a rule needs a destination: a webhook endpoint, or email: true');
  if (f.webhook_endpoint_id) {
    const endpoint = await findEndpointById(trx, actor.workspaceId, f.webhook_endpoint_id);
    if (!endpoint) throw new NotFoundError('Endpoint', f.webhook_endpoint_id);
    if (endpoint.kind !== 'HTTP' || endpoint.type !== 'USER' || endpoint.archived_at) {
      throw ValidationError.at(['webhookEndpointId'], 'must be a live HTTP endpoint of the workspace');
    }
  }
  for (const [table, ids] of [
    ['jobs', f.job_ids],
    ['endpoints', f.endpoint_ids],
  ] as const) {
    const bad = ids.find((id) => !isUuid(id));
    if (bad) throw new NotFoundError(table === 'jobs' ? 'Job' : 'Endpoint', bad);
    const found = await existingIds(trx, table, actor.workspaceId, ids);
    const missing = ids.find((id) => !found.has(id));
    if (missing) throw new NotFoundError(table === 'jobs' ? 'Job' : 'Endpoint', missing);
  }
}

// eslint-disable-next-line max-lines-per-function -- an area factory: short methods sharing one context, its length theirs added up
export function createAlertsService(ctx: ServiceContext) {
  const { db } = ctx;
  // A list's jobs read theirs together (../kernel/batched-reads.ts): one query for a page, not one per row.
  const optOutOf = batchedRead((ws, ids) => alertsRepo.jobsAlertsOptOut(db, ws, ids), !ctx.outer);

  return {
    /**
     * Creates an alert rule (ADMIN). Defaults: every subject, one notification per subject per
     * 6 hours, enabled. Throws FORBIDDEN, VALIDATION_FAILED, NOT_FOUND (a chosen job or endpoint,
     * or the webhook endpoint, not in the workspace), CONFLICT (name taken).
     */
    async createAlertRule(actor: Actor, raw: CreateAlertRuleInput): Promise<AlertRule> {
      return mutate(
        ctx,
        actor,
        { action: 'alertRule.create', role: 'ADMIN', input: raw, target: (r: AlertRule) => ({ type: 'AlertRule', id: r.id }) },
        async (trx) => {
          const fields = fieldsOf(parseInput(createAlertRuleSchema, raw), undefined);
          await assertRuleValid(trx, actor, fields);
          const row = await alertsRepo.insertAlertRule(trx, actor.workspaceId, fields, actor.keyId ?? null);
          if (!row) throw new ConflictError(`an alert rule named "${fields.name}" already exists`, { name: fields.name });
          return toAlertRule(row);
        },
      );
    },

    /**
     * Changes the given fields of a rule (ADMIN); null clears an optional field. Its state
     * (what is firing, the rate-limit window) is kept. Throws FORBIDDEN, NOT_FOUND,
     * VALIDATION_FAILED, CONFLICT.
     */
    async updateAlertRule(actor: Actor, raw: UpdateAlertRuleInput): Promise<AlertRule> {
      return mutate(
        ctx,
        actor,
        { action: 'alertRule.update', role: 'ADMIN', input: raw, target: { type: 'AlertRule', id: raw?.id } },
        async (trx) => {
          const input = parseInput(updateAlertRuleSchema, raw);
          const current = await alertsRepo.findAlertRule(trx, actor.workspaceId, input.id, { forUpdate: true });
          if (!current) throw new NotFoundError('AlertRule', input.id);
          const fields = fieldsOf(input, current);
          await assertRuleValid(trx, actor, fields);
          const row = await alertsRepo.updateAlertRule(trx, actor.workspaceId, input.id, fields);
          if (!row) throw new ConflictError(`an alert rule named "${fields.name}" already exists`, { name: fields.name });
          return toAlertRule(row);
        },
      );
    },

    /** Deletes a rule (ADMIN): it stops at once; its notifications stay. Throws FORBIDDEN, NOT_FOUND. */
    async deleteAlertRule(actor: Actor, id: string): Promise<AlertRule> {
      return mutate(
        ctx,
        actor,
        { action: 'alertRule.delete', role: 'ADMIN', input: { id }, target: { type: 'AlertRule', id } },
        async (trx) => {
          const row = await alertsRepo.deleteAlertRule(trx, actor.workspaceId, id);
          if (!row) throw new NotFoundError('AlertRule', id);
          return toAlertRule(row);
        },
      );
    },

    /**
     * One live rule (ADMIN: a rule holds email addresses and webhook destinations, so it is read
     * as API keys are, by ADMIN only; alerts themselves are every role's). Throws FORBIDDEN, NOT_FOUND.
     */
    async alertRule(actor: Actor, id: string): Promise<AlertRule> {
      requireRole(actor, 'ADMIN', 'reading alert rules');
      const row = await alertsRepo.findAlertRule(db, actor.workspaceId, id);
      if (!row) throw new NotFoundError('AlertRule', id);
      return toAlertRule(row);
    },

    /** The workspace's rules, newest first (ADMIN, as alertRule). Throws FORBIDDEN. */
    async alertRules(actor: Actor, rawPage: PageInput = {}): Promise<Connection<AlertRule>> {
      requireRole(actor, 'ADMIN', 'reading alert rules');
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const rows = await alertsRepo.listAlertRules(db, actor.workspaceId, {
        limit: size + 1,
        afterId: page.after ? decodeCursor(page.after) : undefined,
      });
      return toConnection(rows, size, toAlertRule);
    },

    /**
     * Notifications, newest first, optionally of one rule. Every role: a notification carries
     * names, ids, counts and redacted error excerpts, never a destination.
     */
    async alerts(actor: Actor, rawFilter: AlertFilter = {}, rawPage: PageInput = {}): Promise<Connection<Alert>> {
      const filter = parseInput(alertFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const rows = await alertsRepo.listAlertNotifications(db, actor.workspaceId, {
        limit: size + 1,
        afterId: page.after ? decodeCursor(page.after) : undefined,
        ruleId: filter.ruleId,
      });
      return toConnection(rows, size, toAlert);
    },

    async alert(actor: Actor, id: string): Promise<Alert> {
      const row = await alertsRepo.findAlertNotification(db, actor.workspaceId, id);
      if (!row) throw new NotFoundError('Alert', id);
      return toAlert(row);
    },

    /**
     * Opts a job out of alerts (or back in). The same guards as updateJob: an OPERATOR changes
     * only its own jobs, internal jobs are jobgate's. A separate call (not a createJob field)
     * so createJob's one-statement path stays as it is. Throws NOT_FOUND, FORBIDDEN, RETIRED.
     */
    async setJobAlertsOptOut(actor: Actor, raw: SetJobAlertsOptOutInput): Promise<{ jobId: string; alertsOptOut: boolean }> {
      return mutate(
        ctx,
        actor,
        { action: 'job.alertsOptOut', role: 'OPERATOR', input: raw, target: { type: 'Job', id: raw?.jobId } },
        async (trx) => {
          const input = parseInput(setJobAlertsOptOutSchema, raw);
          const { job, endpoint } = await lockJob(trx, actor, input.jobId);
          assertJobMutable(actor, job, endpoint);
          await alertsRepo.setJobAlertsOptOut(trx, actor.workspaceId, job.id, input.optOut);
          return { jobId: job.id, alertsOptOut: input.optOut };
        },
      );
    },

    /** Whether a job of the workspace is opted out of alerts. Throws NOT_FOUND. */
    async jobAlertsOptOut(actor: Actor, jobId: string): Promise<boolean> {
      if (!isUuid(jobId)) throw new NotFoundError('Job', jobId);
      return (await optOutOf(actor.workspaceId, jobId.toLowerCase())) ?? false;
    },
  };
}
