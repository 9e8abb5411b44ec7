/**
 * Alerts: rules that say which failures notify whom, and the notifications (alerts) they produced.
 */
import type { Alert, AlertRule } from '../service/alerts/alerts.js';
import { createAlertRuleSchema, setJobAlertsOptOutSchema, updateAlertRuleSchema } from '../service/alerts/alerts.js';
import type { LiveEvent } from '../subscriptions/live-feeds.js';
import { DomainError } from '../service/kernel/errors.js';
import { builder } from './builder.js';
import { connectionOf, DateTimeScalar, JSONScalar, zodInput } from './common.js';
import { JobRef } from './job.js';
import { SeverityEnum } from './run.js';

export const AlertConditionEnum = builder.enumType('AlertCondition', {
  description: 'What an alert rule watches for.',
  values: {
    EXECUTION_FAILED: {
      description:
        'An execution of a job ended FAILED (its attempts exhausted, or an unrecoverable error). Resolved by the next success of that job.',
    },
    RUN_FAILED: { description: 'A recoverable run ended FAILED, or was paused as CRASHED. Resolved when a run of that handler completes.' },
    INTERVAL_ERROR: { description: 'An interval handler recorded ERROR, `minConsecutive` times in a row. Resolved by its next OK tick.' },
    SCHEDULE_ERROR: {
      description: "A cron job's schedule could not be computed (the job's scheduleError). Resolved when it computes again.",
    },
    NO_SUCCESS: {
      description:
        "A dead man's switch: a job or handler had no success for `noSuccessMs`. With no subject chosen it watches every active CRON job. Resolved by a success.",
    },
    FINDING: {
      description:
        'A recoverable run recorded a finding at or above `minSeverity`. Findings are facts and stay; the condition clears when a later run of the same handler COMPLETES with no finding at or above `minSeverity` (a failed or paused run clears nothing), and that sends one RESOLVED notification.',
    },
  } as const,
});

export const AlertKindEnum = builder.enumType('AlertKind', {
  description: 'Whether a notification says a condition started (or still holds) or cleared.',
  values: {
    FIRING: {
      description:
        'The condition holds: the first occurrence in a rate-limit window, or a digest of the ones held back when the window ended.',
    },
    RESOLVED: { description: 'The condition cleared after a FIRING notification; sent once per episode.' },
  } as const,
});

export const AlertSubjectTypeEnum = builder.enumType('AlertSubjectType', {
  description: 'What an alert is about.',
  values: {
    JOB: { description: 'A job (subjectId is its id).' },
    RECOVERABLE: { description: 'A recoverable handler, by name (subjectName).' },
    INTERVAL: { description: 'An interval handler, by name (subjectName).' },
  } as const,
});

export const AlertWebhookFormatEnum = builder.enumType('AlertWebhookFormat', {
  description: 'The body a webhook destination receives.',
  values: {
    JSON: {
      description:
        'jobgate\'s alert document: {type: "jobgate.alert", id, kind, condition, rule, subject, summary, occurrences, suppressedCount, ...}.',
    },
    SLACK: { description: 'A Slack-compatible incoming-webhook body: {text}.' },
  } as const,
});

export const AlertDeliveryStateEnum = builder.enumType('AlertDeliveryState', {
  description: "Where one destination's delivery of a notification is, from its delivery job's execution.",
  values: {
    NONE: { description: 'Not sent to this destination (not configured, or its endpoint was gone when the alert was raised).' },
    PENDING: { description: 'Waiting for its first attempt or for a retry (the destination may be down).' },
    RUNNING: { description: 'Being delivered now.' },
    SUCCEEDED: { description: 'Delivered.' },
    FAILED: { description: 'Every attempt failed; see the delivery job. An operator can re-drive it.' },
    CANCELLED: { description: 'Its delivery job was cancelled.' },
  } as const,
});

export const AlertRuleRef = builder.objectRef<AlertRule>('AlertRule').implement({
  description:
    "Which condition notifies which destinations, for which subjects, how often at most. Readable by ADMIN keys only (FORBIDDEN for OPERATOR and VIEWER): a rule holds people's email addresses and where webhooks go, which is who-hears-what configuration, like API keys. What a rule raised (Alert, with its ruleName) is readable by every role.",
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Stable identifier.' }),
    name: t.exposeString('name', { description: 'Unique among the live rules of the workspace.' }),
    condition: t.field({ type: AlertConditionEnum, description: 'What it watches for.', resolve: (r) => r.condition }),
    jobIds: t.exposeIDList('jobIds', {
      description: 'Only these jobs (with endpointIds and handlerNames: any of them). All three empty: every subject.',
    }),
    endpointIds: t.exposeIDList('endpointIds', { description: 'Only jobs on these endpoints.' }),
    handlerNames: t.exposeStringList('handlerNames', { description: 'Only these recoverable or interval handlers.' }),
    minConsecutive: t.exposeInt('minConsecutive', { description: 'INTERVAL_ERROR: errors in a row before it fires.' }),
    noSuccessMs: t.exposeFloat('noSuccessMs', { nullable: true, description: 'NO_SUCCESS: how long without a success, in ms.' }),
    minSeverity: t.field({
      type: SeverityEnum,
      nullable: true,
      description: 'FINDING: the least severity that fires.',
      resolve: (r) => r.minSeverity,
    }),
    webhookEndpointId: t.exposeID('webhookEndpointId', {
      nullable: true,
      description:
        'The HTTP endpoint that receives notifications (signed, retried and recorded like any job on it). ADMIN only, as the whole rule.',
    }),
    webhookFormat: t.field({
      type: AlertWebhookFormatEnum,
      description: 'The body the webhook receives.',
      resolve: (r) => r.webhookFormat,
    }),
    email: t.exposeBoolean('email', { description: 'Whether notifications are also emailed.' }),
    emailTo: t.exposeStringList('emailTo', {
      description:
        "Email recipients; empty means the installation's default list (JOBGATE_ALERT_EMAIL_TO). ADMIN only, as the whole rule: no other read shows them (email delivery jobs carry the rule's id, not the addresses, and a failed send's recorded error has them masked).",
    }),
    rateLimitMs: t.exposeFloat('rateLimitMs', {
      description:
        'At most one FIRING notification per subject in this long (default 6 h); the others are counted and reported by the next one.',
    }),
    enabled: t.exposeBoolean('enabled', { description: 'A disabled rule evaluates nothing.' }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When it was created.', resolve: (r) => r.createdAt }),
    updatedAt: t.field({ type: DateTimeScalar, description: 'When it last changed.', resolve: (r) => r.updatedAt }),
  }),
});
export const AlertRuleConnectionRef = connectionOf('AlertRule', AlertRuleRef, 'alert rule');

export const AlertRef = builder.objectRef<Alert>('Alert').implement({
  description: 'One notification: a condition of a rule for one subject, FIRING or RESOLVED, and where its deliveries are.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Stable identifier; also in the webhook body and the email.' }),
    ruleId: t.exposeID('ruleId', { description: 'The rule that raised it.' }),
    ruleName: t.exposeString('ruleName', {
      description: 'The name of the rule that raised it (as it is now; a deleted rule keeps its name). Readable by every role.',
    }),
    rule: t.field({
      type: AlertRuleRef,
      nullable: true,
      description:
        'The rule, or null when it has been deleted since. ADMIN only (FORBIDDEN for other keys, as alertRule): it holds the destinations; ruleName is for everyone.',
      resolve: (a, _args, ctx) =>
        ctx.service
          .alertRule(ctx.actor, a.ruleId)
          .catch((e: unknown) => (e instanceof DomainError && e.code === 'NOT_FOUND' ? null : Promise.reject(e))),
    }),
    condition: t.field({ type: AlertConditionEnum, description: 'What happened.', resolve: (a) => a.condition }),
    kind: t.field({ type: AlertKindEnum, description: 'Started (or still holds), or cleared.', resolve: (a) => a.kind }),
    subjectType: t.field({ type: AlertSubjectTypeEnum, description: 'What it is about.', resolve: (a) => a.subjectType }),
    subjectId: t.exposeID('subjectId', { nullable: true, description: 'The job, for JOB subjects.' }),
    subjectName: t.exposeString('subjectName', { nullable: true, description: 'The job or handler name.' }),
    summary: t.exposeString('summary', { description: 'One line for a human; error texts in it are redacted as stored by the engine.' }),
    detail: t.field({
      type: JSONScalar,
      description: 'The facts behind it (execution, attempts, error excerpt, severity...), by condition.',
      resolve: (a) => a.detail,
    }),
    windowStart: t.field({
      type: DateTimeScalar,
      description: 'Start of the rate-limit window it opened (RESOLVED: of the FIRING one it resolves).',
      resolve: (a) => a.windowStart,
    }),
    firstSeenAt: t.field({
      type: DateTimeScalar,
      description: 'When this episode of the condition was first seen.',
      resolve: (a) => a.firstSeenAt,
    }),
    lastSeenAt: t.field({ type: DateTimeScalar, description: 'When it was last seen.', resolve: (a) => a.lastSeenAt }),
    occurrences: t.exposeInt('occurrences', { description: 'Occurrences in this episode so far.' }),
    suppressedCount: t.exposeInt('suppressedCount', {
      description: 'Occurrences held back by the rate limit since the previous notification.',
    }),
    webhookDelivery: t.field({ type: AlertDeliveryStateEnum, description: 'Delivery to the webhook.', resolve: (a) => a.webhookDelivery }),
    emailDelivery: t.field({ type: AlertDeliveryStateEnum, description: 'Delivery by email.', resolve: (a) => a.emailDelivery }),
    webhookJob: t.field({
      type: JobRef,
      nullable: true,
      description:
        'The job delivering it to the webhook (its executions and attempts are the delivery history); a job of the workspace like any other, readable by every role. Its input is the webhook body, which names no email address.',
      resolve: (a, _args, ctx) => (a.webhookJobId ? ctx.service.job(ctx.actor, a.webhookJobId) : null),
    }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When it was raised.', resolve: (a) => a.createdAt }),
  }),
});
export const AlertConnectionRef = connectionOf('Alert', AlertRef, 'alert');

export const AlertEventRef = builder.objectRef<LiveEvent>('AlertEvent').implement({
  description: 'A new alert was raised.',
  fields: (t) => ({
    cursor: t.exposeString('cursor', { description: 'Pass as `after` to resume the stream right after this event.' }),
    alertId: t.exposeID('subjectId', { description: 'The alert.' }),
    kind: t.field({ type: AlertKindEnum, description: 'FIRING or RESOLVED.', resolve: (e) => e.status as Alert['kind'] }),
    occurredAt: t.field({ type: DateTimeScalar, description: 'When it was raised.', resolve: (e) => e.occurredAt }),
    alert: t.field({
      type: AlertRef,
      description: 'The alert, with its delivery state as it is now.',
      resolve: (e, _a, ctx) => ctx.service.alert(ctx.actor, e.subjectId),
    }),
  }),
});

const ruleInputFields = (t: Parameters<Parameters<typeof builder.inputType>[1]['fields']>[0]) => ({
  jobIds: t.idList({ description: 'Only these jobs. Leave jobIds, endpointIds and handlerNames empty for every subject.' }),
  endpointIds: t.idList({ description: 'Only jobs on these endpoints.' }),
  handlerNames: t.stringList({ description: 'Only these recoverable or interval handlers.' }),
  minConsecutive: t.int({ description: 'INTERVAL_ERROR: errors in a row before it fires, 1 to 1000. Default 1.' }),
  noSuccessMs: t.float({ description: 'NO_SUCCESS (required): how long without a success, in ms, at least 1000.' }),
  minSeverity: t.field({ type: SeverityEnum, description: 'FINDING (required): the least severity that fires.' }),
  webhookEndpointId: t.id({ description: 'A live HTTP endpoint of the workspace that receives notifications.' }),
  webhookFormat: t.field({ type: AlertWebhookFormatEnum, description: 'The webhook body. Default JSON.' }),
  email: t.boolean({ description: 'Also email notifications. A rule needs a webhook, email, or both.' }),
  emailTo: t.stringList({
    description:
      "Recipients, at most 50, each a plain address (local@host.name: no display name, comment, group, quotes or IP literal); empty means the installation's default list.",
  }),
  rateLimitMs: t.float({
    description: 'At most one FIRING notification per subject in this long, in ms, 1000 to 30 days. Default 6 hours.',
  }),
  enabled: t.boolean({ description: 'Default true.' }),
});

export const CreateAlertRuleInputRef = builder.inputType('CreateAlertRuleInput', {
  description: 'A new alert rule.',
  fields: (t) => ({
    name: t.string({ required: true, description: 'Unique among the live rules of the workspace.' }),
    condition: t.field({ type: AlertConditionEnum, required: true, description: 'What it watches for.' }),
    ...ruleInputFields(t),
  }),
});
export const createAlertRuleValidation = zodInput(createAlertRuleSchema);

export const UpdateAlertRuleInputRef = builder.inputType('UpdateAlertRuleInput', {
  description: 'Changes to an alert rule: omitted fields stay as they are; null clears an optional one.',
  fields: (t) => ({
    id: t.id({ required: true, description: 'The rule.' }),
    name: t.string({ description: 'A new name.' }),
    condition: t.field({ type: AlertConditionEnum, description: 'A new condition (its own required fields apply).' }),
    ...ruleInputFields(t),
  }),
});
export const updateAlertRuleValidation = zodInput(updateAlertRuleSchema);

export const SetJobAlertsOptOutInputRef = builder.inputType('SetJobAlertsOptOutInput', {
  description: 'Opt a job out of alerts, or back in.',
  fields: (t) => ({
    jobId: t.id({ required: true, description: 'The job.' }),
    optOut: t.boolean({ required: true, description: 'true: no rule ever alerts about this job.' }),
  }),
});
export const setJobAlertsOptOutValidation = zodInput(setJobAlertsOptOutSchema);

export const SetJobAlertsOptOutPayloadRef = builder
  .objectRef<{ jobId: string; alertsOptOut: boolean }>('SetJobAlertsOptOutPayload')
  .implement({
    description: 'The result of setJobAlertsOptOut.',
    fields: (t) => ({
      jobId: t.exposeID('jobId', { description: 'The job.' }),
      alertsOptOut: t.exposeBoolean('alertsOptOut', { description: 'Whether it is now opted out.' }),
    }),
  });

builder.objectField(JobRef, 'alertsOptOut', (t) =>
  t.boolean({
    description: 'Whether this job is opted out of alerts (setJobAlertsOptOut).',
    resolve: (job, _args, ctx) => ctx.service.jobAlertsOptOut(ctx.actor, job.id),
  }),
);
