/**
 * Alert triage: what is firing now per rule and subject (AlertState), its acknowledgement, and
 * silences that hold back deliveries for a while.
 */
import { DomainError } from '../service/kernel/errors.js';
import type { AlertSilence, AlertState } from '../service/alerts/triage.js';
import { MAX_SILENCE_MS, MIN_SILENCE_MS, silenceAlertsSchema } from '../service/alerts/triage.js';
import { AlertConditionEnum, AlertRef, AlertSubjectTypeEnum } from './alert.js';
import { builder, type GraphQLContext } from './builder.js';
import { connectionOf, DateTimeScalar, zodInput } from './common.js';
import { JobRef } from './job.js';

export const AlertStateStatusEnum = builder.enumType('AlertStateStatus', {
  description: 'Where a rule stands for one subject, for whoever is on call.',
  values: {
    OPEN: { description: 'Firing, and nobody has acknowledged it.' },
    ACKNOWLEDGED: {
      description:
        'Firing, and acknowledged (acknowledgedBy, acknowledgedAt). An acknowledgement lasts for the episode: repeated occurrences and digests keep it; it ends when the condition resolves, and the next firing is OPEN again.',
    },
    RESOLVED: { description: 'Not firing: the condition cleared.' },
  } as const,
});

export const AlertSilenceRef = builder.objectRef<AlertSilence>('AlertSilence').implement({
  description:
    'A silence: while in force, the notifications of its rule (of one subject of it, when a subject is set) are still recorded, marked with the silence, and not delivered. It expires on its own at endsAt; unsilenceAlerts ends it early. Readable by every role.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Stable identifier.' }),
    ruleId: t.exposeID('ruleId', { description: 'The rule it silences.' }),
    ruleName: t.exposeString('ruleName', { description: 'The name of that rule.' }),
    subjectType: t.field({
      type: AlertSubjectTypeEnum,
      nullable: true,
      description: 'The one subject it silences; null: every subject of the rule.',
      resolve: (s) => s.subjectType,
    }),
    subjectId: t.exposeID('subjectId', { nullable: true, description: 'The job, for a JOB subject.' }),
    subjectName: t.exposeString('subjectName', { nullable: true, description: 'The handler name, for a RECOVERABLE or INTERVAL subject.' }),
    startsAt: t.field({ type: DateTimeScalar, description: 'When it took effect.', resolve: (s) => s.startsAt }),
    endsAt: t.field({ type: DateTimeScalar, description: 'When it expires on its own.', resolve: (s) => s.endsAt }),
    endedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When it was lifted by hand before endsAt; null otherwise.',
      resolve: (s) => s.endedAt,
    }),
    active: t.exposeBoolean('active', { description: 'Whether it is in force now: started, not past endsAt, not lifted.' }),
    comment: t.exposeString('comment', { nullable: true, description: 'Why, as its author wrote it.' }),
    createdBy: t.exposeString('createdBy', {
      nullable: true,
      description: 'The name of the API key that created it; null when the embedding application did (no key).',
    }),
    endedBy: t.exposeString('endedBy', { nullable: true, description: 'The name of the API key that lifted it, if one did.' }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When it was created.', resolve: (s) => s.createdAt }),
  }),
});
export const AlertSilenceConnectionRef = connectionOf('AlertSilence', AlertSilenceRef, 'alert silence');

/** A silence by id, or null when there is none. */
const silenceById = (id: string | null, ctx: GraphQLContext): Promise<AlertSilence | null> | null =>
  id
    ? ctx.service
        .alertSilence(ctx.actor, id)
        .catch((e: unknown) => (e instanceof DomainError && e.code === 'NOT_FOUND' ? null : Promise.reject(e)))
    : null;

export const AlertStateRef = builder.objectRef<AlertState>('AlertState').implement({
  description:
    'What jobgate knows now of one rule on one subject: firing or not, acknowledged by whom, silenced until when, and its newest notification. One per (rule, subject), kept across episodes. Readable by every role.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Stable identifier of this rule and subject.' }),
    ruleId: t.exposeID('ruleId', { description: 'The rule.' }),
    ruleName: t.exposeString('ruleName', { description: 'The name of the rule.' }),
    condition: t.field({ type: AlertConditionEnum, description: "The rule's condition.", resolve: (s) => s.condition }),
    subjectType: t.field({ type: AlertSubjectTypeEnum, description: 'What it is about.', resolve: (s) => s.subjectType }),
    subjectId: t.exposeID('subjectId', { nullable: true, description: 'The job, for JOB subjects.' }),
    subjectName: t.exposeString('subjectName', {
      nullable: true,
      description: 'The job name (null when the job has none) or the handler name.',
    }),
    status: t.field({ type: AlertStateStatusEnum, description: 'OPEN, ACKNOWLEDGED or RESOLVED.', resolve: (s) => s.status }),
    firstSeenAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When the current (or last) episode was first seen.',
      resolve: (s) => s.firstSeenAt,
    }),
    lastSeenAt: t.field({ type: DateTimeScalar, nullable: true, description: 'When it was last seen.', resolve: (s) => s.lastSeenAt }),
    occurrences: t.exposeInt('occurrences', { description: 'Occurrences in the current (or last) episode.' }),
    acknowledgedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When this episode was acknowledged; null when it was not (or it resolved).',
      resolve: (s) => s.acknowledgedAt,
    }),
    acknowledgedBy: t.exposeString('acknowledgedBy', {
      nullable: true,
      description:
        'The name of the API key that acknowledged it; null when not acknowledged, or acknowledged by the embedding application.',
    }),
    silencedUntil: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'While a silence covers it (of its rule, or of this subject): when the last of them ends. Null: not silenced.',
      resolve: (s) => s.silencedUntil,
    }),
    silence: t.field({
      type: AlertSilenceRef,
      nullable: true,
      description: 'The silence in force over it that ends last; null when none is.',
      resolve: (s, _args, ctx) => silenceById(s.silenceId, ctx),
    }),
    lastAlert: t.field({
      type: AlertRef,
      nullable: true,
      description: 'The newest notification about this rule and subject (null when none was written, or all were pruned).',
      resolve: (s, _args, ctx) =>
        s.lastAlertId
          ? ctx.service
              .alert(ctx.actor, s.lastAlertId)
              .catch((e: unknown) => (e instanceof DomainError && e.code === 'NOT_FOUND' ? null : Promise.reject(e)))
          : null,
    }),
  }),
});
export const AlertStateConnectionRef = connectionOf('AlertState', AlertStateRef, 'alert state');

builder.objectFields(AlertRef, (t) => ({
  silenced: t.boolean({
    description: 'Whether a silence was in force when it was written: then it was recorded and not delivered (both deliveries are NONE).',
    resolve: (a) => a.silenceId !== null,
  }),
  silence: t.field({
    type: AlertSilenceRef,
    nullable: true,
    description: 'The silence it was written under; null when it was delivered as usual.',
    resolve: (a, _args, ctx) => silenceById(a.silenceId, ctx),
  }),
  state: t.field({
    type: AlertStateRef,
    nullable: true,
    description:
      'Its rule and subject as they stand now (firing or not, acknowledged, silenced): where to acknowledge or silence from a notification. Null when the rule was deleted since.',
    resolve: (a, _args, ctx) => ctx.service.alertStateOf(ctx.actor, a),
  }),
  emailJob: t.field({
    type: JobRef,
    nullable: true,
    description:
      'The job delivering it by email (its executions and attempts are the delivery history); its input names the rule, never the recipients. Null when not emailed.',
    resolve: (a, _args, ctx) => (a.emailJobId ? ctx.service.job(ctx.actor, a.emailJobId) : null),
  }),
}));

export const SilenceAlertsInputRef = builder.inputType('SilenceAlertsInput', {
  description: 'A silence of a rule, or of one subject of it, from now for a while.',
  fields: (t) => ({
    ruleId: t.id({ required: true, description: 'The rule to silence.' }),
    subjectType: t.field({
      type: AlertSubjectTypeEnum,
      description: 'Only this subject of the rule (with subjectId for JOB, subjectName for handlers). Omit to silence every subject.',
    }),
    subjectId: t.id({ description: 'JOB: the job (of your workspace).' }),
    subjectName: t.string({ description: 'RECOVERABLE or INTERVAL: the handler name.' }),
    durationMs: t.float({
      required: true,
      description: `How long, in whole milliseconds, from ${MIN_SILENCE_MS} (1 minute) to ${MAX_SILENCE_MS} (30 days). Out of bounds: VALIDATION_FAILED with extensions.reason SILENCE_DURATION.`,
    }),
    comment: t.string({ description: 'Why (at most 500 characters), shown beside it.' }),
  }),
});
export const silenceAlertsValidation = zodInput(silenceAlertsSchema);
