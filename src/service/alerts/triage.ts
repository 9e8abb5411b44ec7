/**
 * Alert triage: what is firing now per (rule, subject), its acknowledgement, and silences.
 *
 * - A state is OPEN while its condition holds and nobody acknowledged it, ACKNOWLEDGED once
 *   someone did, RESOLVED when the condition cleared. An acknowledgement is of one episode: it
 *   stays through the episode's repeated occurrences and digests, ends when the condition
 *   resolves, and the next firing is OPEN again. It changes no delivery (it says someone is on it);
 *   a silence is what holds deliveries back.
 * - A silence covers a rule, or one subject of it, from now for a bounded duration. While it is in
 *   force, the evaluator writes that rule's notifications as usual but delivers none, and each
 *   names the silence. It expires on its own (in force is read against the clock); lifting it
 *   ends it early.
 *
 * Who may: reading is every role's (a state or a silence names no destination); acknowledging,
 * silencing and lifting a silence are ADMIN's, as editing the rules is.
 */
import { z } from 'zod';
import { HANDLER_NAME, HANDLER_NAME_RULE } from '../../db/handler-name.js';
import * as triageRepo from '../../db/repositories/alert-triage.js';
import type { AlertStateStatus, AlertStateView, AlertSilenceView } from '../../db/repositories/alert-triage.js';
import { findAlertRule, type AlertCondition, type AlertSubjectType } from '../../db/repositories/alerts.js';
import type { Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { batchedRead, pairKey, splitPairKey } from '../kernel/batched-reads.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { ConflictError, NotFoundError, ValidationError } from '../kernel/errors.js';
import { idSchema, pageSchema, text, type PageInput } from '../kernel/inputs.js';
import { COUNT_LIMIT, decodeCursor, pageSize, toConnection, type Connection } from '../kernel/pagination.js';
import { handlerSubject, jobSubject, type AlertSubject } from './format.js';

export type { AlertStateStatus } from '../../db/repositories/alert-triage.js';

/** A silence lasts at least a minute and at most 30 days: long enough to matter, short enough to be forgotten safely. */
export const MIN_SILENCE_MS = 60_000;
export const MAX_SILENCE_MS = 30 * 86_400_000;
/** `extensions.reason` of a duration out of those bounds (VALIDATION_FAILED). */
export const SILENCE_DURATION_REASON = 'SILENCE_DURATION';
/** `extensions.reason` of acknowledging a state that is not firing (CONFLICT). */
export const NOT_FIRING_REASON = 'NOT_FIRING';

export interface AlertState {
  id: string;
  ruleId: string;
  ruleName: string;
  condition: AlertCondition;
  subjectType: AlertSubjectType;
  subjectId: string | null;
  subjectName: string | null;
  status: AlertStateStatus;
  firstSeenAt: Date | null;
  lastSeenAt: Date | null;
  occurrences: number;
  acknowledgedAt: Date | null;
  /** The name of the API key that acknowledged; null without a key (the embedding application). */
  acknowledgedBy: string | null;
  lastAlertId: string | null;
  silenceId: string | null;
  silencedUntil: Date | null;
}

export interface AlertSilence {
  id: string;
  ruleId: string;
  ruleName: string;
  subjectType: AlertSubjectType | null;
  subjectId: string | null;
  subjectName: string | null;
  startsAt: Date;
  endsAt: Date;
  endedAt: Date | null;
  active: boolean;
  comment: string | null;
  createdBy: string | null;
  endedBy: string | null;
  createdAt: Date;
}

/** The subject a state key names (the inverse of jobSubject / handlerSubject). */
function subjectOf(key: string, jobName: string | null): AlertSubject {
  const [type, ...rest] = key.split(':');
  const ref = rest.join(':');
  if (type === 'job') return jobSubject(ref, jobName);
  return handlerSubject(type === 'interval' ? 'INTERVAL' : 'RECOVERABLE', ref);
}

export const toAlertState = (r: AlertStateView): AlertState => {
  const subject = subjectOf(r.subject_key, r.job_name);
  return {
    id: r.id,
    ruleId: r.rule_id,
    ruleName: r.rule_name,
    condition: r.condition,
    subjectType: subject.type,
    subjectId: subject.id,
    subjectName: subject.name,
    status: !r.firing ? 'RESOLVED' : r.acknowledged_at ? 'ACKNOWLEDGED' : 'OPEN',
    firstSeenAt: r.first_seen_at,
    lastSeenAt: r.last_seen_at,
    occurrences: r.occurrences,
    acknowledgedAt: r.acknowledged_at,
    acknowledgedBy: r.acknowledged_by_name,
    lastAlertId: r.last_alert_id,
    silenceId: r.silence_id,
    silencedUntil: r.silenced_until,
  };
};

export const toAlertSilence = (r: AlertSilenceView): AlertSilence => ({
  id: r.id,
  ruleId: r.rule_id,
  ruleName: r.rule_name,
  subjectType: r.subject_type,
  subjectId: r.subject_id,
  subjectName: r.subject_name,
  startsAt: r.starts_at,
  endsAt: r.ends_at,
  endedAt: r.ended_at,
  active: r.active,
  comment: r.comment,
  createdBy: r.created_by_name,
  endedBy: r.ended_by_name,
  createdAt: r.created_at,
});

const statusSchema = z.enum(['OPEN', 'ACKNOWLEDGED', 'RESOLVED']);
export const alertStateFilterSchema = z.object({
  ruleId: idSchema.nullish(),
  /** Default: what is firing now (OPEN and ACKNOWLEDGED). */
  status: z.array(statusSchema).max(3).nullish(),
});
export type AlertStateFilter = z.input<typeof alertStateFilterSchema>;

export const alertSilenceFilterSchema = z.object({ ruleId: idSchema.nullish(), activeOnly: z.boolean().nullish() });
export type AlertSilenceFilter = z.input<typeof alertSilenceFilterSchema>;

export const silenceAlertsSchema = z.object({
  ruleId: idSchema,
  subjectType: z.enum(['JOB', 'RECOVERABLE', 'INTERVAL']).nullish(),
  subjectId: idSchema.nullish(),
  subjectName: z.string().regex(HANDLER_NAME, HANDLER_NAME_RULE).nullish(),
  // Any number passes here (NaN too): its bounds are checked by the service, which names them with a reason (SILENCE_DURATION).
  durationMs: z.custom<number>((v) => typeof v === 'number', 'must be a number of milliseconds'),
  comment: text().max(500).nullish(),
});
export type SilenceAlertsInput = z.input<typeof silenceAlertsSchema>;

/** The duration's bounds: VALIDATION_FAILED at durationMs, reason SILENCE_DURATION. */
function assertSilenceDuration(ms: number): void {
  if (!Number.isInteger(ms) || ms < MIN_SILENCE_MS || ms > MAX_SILENCE_MS) {
    throw ValidationError.at(
      ['durationMs'],
      `must be a whole number of milliseconds from ${MIN_SILENCE_MS} (1 minute) to ${MAX_SILENCE_MS} (30 days)`,
      SILENCE_DURATION_REASON,
    );
  }
}

/** The subject a silence input names, or null for the whole rule. Throws VALIDATION_FAILED. */
function silencedSubject(input: z.output<typeof silenceAlertsSchema>): AlertSubject | null {
  const { subjectType: type, subjectId: id, subjectName: name } = input;
  if (!type) {
    if (id || name) throw ValidationError.at(['subjectType'], 'is required with subjectId or subjectName');
    return null;
  }
  if (type === 'JOB') {
    if (!id) throw ValidationError.at(['subjectId'], 'is required for a JOB subject');
    if (name) throw ValidationError.at(['subjectName'], 'is for handler subjects; a JOB subject is named by subjectId');
    return jobSubject(id, null);
  }
  if (!name) throw ValidationError.at(['subjectName'], `is required for a ${type} subject`);
  if (id) throw ValidationError.at(['subjectId'], 'is for JOB subjects; a handler subject is named by subjectName');
  return handlerSubject(type, name);
}

// eslint-disable-next-line max-lines-per-function -- an area factory: short methods sharing one context, its length theirs added up
export function createAlertTriageService(ctx: ServiceContext) {
  const { db } = ctx;
  // A page of alerts reads their states together (../kernel/batched-reads.ts), keyed by the rule's
  // id and the subject's key.
  const stateOf = batchedRead(
    (ws, keys) =>
      triageRepo
        .findAlertStatesOf(
          db,
          ws,
          keys.map((key) => {
            const [ruleId, subjectKey] = splitPairKey(key);
            return { ruleId, subjectKey };
          }),
        )
        .then((rows) => new Map(rows.map((r) => [pairKey(r.rule_id, r.subject_key), r]))),
    !ctx.outer,
  );

  return {
    /**
     * The (rule, subject) states of live rules, by rule name, then subject: by default those
     * firing now (OPEN and ACKNOWLEDGED). Every role.
     */
    async alertStates(actor: Actor, rawFilter: AlertStateFilter = {}, rawPage: PageInput = {}): Promise<Connection<AlertState>> {
      const filter = parseInput(alertStateFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const statuses: AlertStateStatus[] = filter.status?.length ? filter.status : ['OPEN', 'ACKNOWLEDGED'];
      const rows = await triageRepo.listAlertStates(db, actor.workspaceId, {
        limit: size + 1,
        afterId: page.after ? decodeCursor(page.after) : undefined,
        ruleId: filter.ruleId,
        statuses,
      });
      return toConnection(rows, size, toAlertState, () =>
        triageRepo.countAlertStates(db, actor.workspaceId, { ruleId: filter.ruleId, statuses, limit: COUNT_LIMIT }),
      );
    },

    /** One state. Throws NOT_FOUND. */
    async alertState(actor: Actor, id: string): Promise<AlertState> {
      const row = await triageRepo.findAlertState(db, actor.workspaceId, id);
      if (!row) throw new NotFoundError('AlertState', id);
      return toAlertState(row);
    },

    /**
     * The state of the rule and subject a notification is about, or null when there is none
     * (the rule was deleted since, taking its states with it).
     */
    async alertStateOf(actor: Actor, alert: { ruleId: string; subjectKey: string }): Promise<AlertState | null> {
      const row = await stateOf(actor.workspaceId, pairKey(alert.ruleId.toLowerCase(), alert.subjectKey));
      return row ? toAlertState(row) : null;
    },

    /**
     * Acknowledges the episode a firing state is in (ADMIN): who and when are kept until the
     * condition resolves. Acknowledging it again changes nothing (the first acknowledgement
     * stands). Throws FORBIDDEN, NOT_FOUND, CONFLICT (reason NOT_FIRING: it has resolved).
     */
    async acknowledgeAlertState(actor: Actor, id: string): Promise<AlertState> {
      return mutate(
        ctx,
        actor,
        { action: 'alertState.acknowledge', role: 'OPERATOR', input: { id }, target: { type: 'AlertState', id } },
        async (trx) => {
          const current = await triageRepo.lockAlertState(trx, actor.workspaceId, id);
          if (!current) throw new NotFoundError('AlertState', id);
          if (!current.firing)
            throw new ConflictError('the alert is not firing: it resolved, so there is nothing to acknowledge', {
              reason: NOT_FIRING_REASON,
            });
          await triageRepo.acknowledgeAlertState(trx, actor.workspaceId, id, actor.keyId ?? null);
          return toAlertState((await triageRepo.findAlertState(trx, actor.workspaceId, id))!);
        },
      );
    },

    /**
     * Silences a rule, or one subject of it, from now for `durationMs` (ADMIN): its notifications
     * are still written, marked with the silence, and not delivered. Throws FORBIDDEN,
     * VALIDATION_FAILED (a duration out of bounds has reason SILENCE_DURATION), NOT_FOUND (the
     * rule, or the job named as subject, is not in the workspace).
     */
    async silenceAlerts(actor: Actor, raw: SilenceAlertsInput): Promise<AlertSilence> {
      return mutate(
        ctx,
        actor,
        { action: 'alertSilence.create', role: 'OPERATOR', input: raw, target: (s: AlertSilence) => ({ type: 'AlertSilence', id: s.id }) },
        async (trx) => {
          const input = parseInput(silenceAlertsSchema, raw);
          assertSilenceDuration(input.durationMs);
          const subject = silencedSubject(input);
          const rule = await findAlertRule(trx, actor.workspaceId, input.ruleId, { forUpdate: true });
          if (!rule) throw new NotFoundError('AlertRule', input.ruleId);
          let named = subject;
          if (subject?.type === 'JOB') {
            const job = await triageRepo.findJobName(trx, actor.workspaceId, subject.id!);
            if (!job) throw new NotFoundError('Job', subject.id!);
            named = { ...subject, name: job.name };
          }
          const row = await triageRepo.insertSilence(trx, actor.workspaceId, {
            ruleId: rule.id,
            subject: named,
            durationMs: input.durationMs,
            comment: input.comment ?? null,
            createdByKeyId: actor.keyId ?? null,
          });
          return toAlertSilence(row);
        },
      );
    },

    /**
     * Lifts a silence now (ADMIN): notifications from now on are delivered. A silence that has
     * already ended (lifted, or past its end) is answered as it is. Throws FORBIDDEN, NOT_FOUND.
     */
    async unsilenceAlerts(actor: Actor, id: string): Promise<AlertSilence> {
      return mutate(
        ctx,
        actor,
        { action: 'alertSilence.end', role: 'OPERATOR', input: { id }, target: { type: 'AlertSilence', id } },
        async (trx) => {
          const current = await triageRepo.findSilence(trx, actor.workspaceId, id, { forUpdate: true });
          if (!current) throw new NotFoundError('AlertSilence', id);
          await triageRepo.endSilence(trx, actor.workspaceId, id, actor.keyId ?? null);
          return toAlertSilence((await triageRepo.findSilence(trx, actor.workspaceId, id))!);
        },
      );
    },

    /** Silences, newest first; `activeOnly`: those in force now. Every role. */
    async alertSilences(actor: Actor, rawFilter: AlertSilenceFilter = {}, rawPage: PageInput = {}): Promise<Connection<AlertSilence>> {
      const filter = parseInput(alertSilenceFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const rows = await triageRepo.listSilences(db, actor.workspaceId, {
        limit: size + 1,
        afterId: page.after ? decodeCursor(page.after) : undefined,
        activeOnly: filter.activeOnly ?? false,
        ruleId: filter.ruleId,
      });
      return toConnection(rows, size, toAlertSilence);
    },

    /** One silence. Throws NOT_FOUND. */
    async alertSilence(actor: Actor, id: string): Promise<AlertSilence> {
      const row = await triageRepo.findSilence(db, actor.workspaceId, id);
      if (!row) throw new NotFoundError('AlertSilence', id);
      return toAlertSilence(row);
    },
  };
}
