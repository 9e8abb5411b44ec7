/**
 * What a notification says: its one-line summary, the webhook body (jobgate's JSON, or a
 * Slack-compatible `{text}`) and the email. Only what the evaluator read from jobgate's own rows
 * goes in: names, ids, counts, and error texts the engine already stored redacted (an execution's
 * `last_error` is redacted of its endpoint's secrets when recorded). No config value, header or
 * input is ever read into a notification.
 *
 * Names and error texts are chosen by others (any OPERATOR names a job; a target writes its error
 * or redirect). So every value is made one line when it is interpolated (`inline`: a summary is
 * one line, and a line break in a name could forge a line of the email), and each format then
 * writes the text in its own syntax: Slack's `&`, `<` and `>` escaped, so a value cannot ping a
 * channel or hide a link; every string of a webhook body inert to the engine's templating; the
 * email is plain text with a one-line subject. The JSON format needs no more: its values are JSON
 * strings, data for the receiver, never markup.
 */
import type { AlertCondition, AlertKind, AlertSubjectType } from '../../db/repositories/alerts.js';
import { inert } from '../endpoints/template.js';
import { storableText } from '../kernel/inputs.js';

export interface AlertSubject {
  type: AlertSubjectType;
  key: string;
  id: string | null;
  name: string | null;
}

/** The subject keys of alert states and silences: `job:<id>`, `recoverable:<name>`, `interval:<name>`. */
export const jobSubject = (id: string, name: string | null): AlertSubject => ({ type: 'JOB', key: `job:${id}`, id, name });
export const handlerSubject = (type: 'RECOVERABLE' | 'INTERVAL', name: string): AlertSubject => ({
  type,
  key: `${type.toLowerCase()}:${name}`,
  id: null,
  name,
});

export interface AlertMessage {
  id: string;
  kind: AlertKind;
  condition: AlertCondition;
  rule: { id: string; name: string };
  workspaceId: string;
  subject: AlertSubject;
  summary: string;
  windowStart: Date;
  firstSeenAt: Date;
  lastSeenAt: Date;
  occurrences: number;
  suppressedCount: number;
  detail: Record<string, unknown>;
  createdAt: Date;
  /** The alert's page in the console, from the gateway's public address; null when none is set. */
  consoleUrl?: string | null;
}

/** The console page of an alert under the gateway's public address (JOBGATE_PUBLIC_URL); null without one. */
export function consoleUrl(publicUrl: string | undefined, alertId: string): string | null {
  if (!publicUrl) return null;
  return `${publicUrl.replace(/\/+$/, '')}/console/alerts/${encodeURIComponent(alertId)}`;
}

/**
 * How long a notification's condition has held, from its first occurrence to the notification,
 * as a person reads it: `45 s`, `12 min 5 s`, `3 h 20 min`, `2 d 4 h`.
 */
export function elapsed(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 48) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

/** Error texts in a notification are cut short: a notification is a pointer, not a log. */
export function excerpt(text: string | null | undefined, max = 500): string | null {
  if (text == null) return null;
  const clean = storableText(text);
  return clean.length > max ? `${clean.slice(0, max)}…` : clean;
}

/**
 * Line breaks, other control characters and bidirectional overrides (which make text show in an
 * order other than its own) become spaces: what a value shows inside a line is what it says.
 */
const NOT_INLINE = /[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** A value as it is interpolated into a notification's text: one line. */
export function inline(value: unknown): string {
  return String(value).replace(NOT_INLINE, ' ');
}

export function subjectLabel(s: AlertSubject): string {
  const name = inline(s.name ?? s.id ?? s.key);
  switch (s.type) {
    case 'JOB':
      return `job "${name}"`;
    case 'RECOVERABLE':
      return `recoverable handler "${name}"`;
    case 'INTERVAL':
      return `interval handler "${name}"`;
  }
}

function duration(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${Math.round(ms / 1000)} s`;
}

/** The summary of a FIRING notification of `condition` about `subject`, from its detail. */
export function firingSummary(condition: AlertCondition, subject: AlertSubject, d: Record<string, unknown>): string {
  const who = subjectLabel(subject);
  switch (condition) {
    case 'EXECUTION_FAILED':
      return `An execution of ${who}${d.endpointName ? ` (endpoint ${inline(d.endpointName)})` : ''} failed after ${inline(d.attempts ?? '?')} attempt(s)${d.error ? `: ${inline(d.error)}` : ''}`;
    case 'RUN_FAILED':
      return d.crashed
        ? `A run of ${who} was paused: its worker stopped heartbeating (crashed)`
        : `A run of ${who} failed${d.error ? `: ${inline(d.error)}` : ''}`;
    case 'INTERVAL_ERROR':
      return `${who[0]!.toUpperCase()}${who.slice(1)} recorded ${inline(d.errorsInARow)} error(s) in a row (last cause ${inline(d.cause ?? 'unknown')})`;
    case 'SCHEDULE_ERROR':
      return `The schedule of ${who} failed to compute${d.error ? `: ${inline(d.error)}` : ''}`;
    case 'NO_SUCCESS':
      return `No success of ${who} for ${duration(Number(d.noSuccessMs))}`;
    case 'FINDING':
      return findingSummary(who, d);
  }
}

interface FindingGroup {
  kind: string;
  severity: string;
  count: number;
}

/**
 * FINDING: the findings grouped by (kind, severity) with their counts, then the worst example. A
 * detail written before findings were grouped (one finding, no `groups`) reads as it always did.
 */
function findingSummary(who: string, d: Record<string, unknown>): string {
  const groups = Array.isArray(d.groups) ? (d.groups as FindingGroup[]) : [];
  if (groups.length === 0 || typeof d.findings !== 'number')
    return `A run of ${who} recorded a ${inline(d.severity)} finding "${inline(d.kind)}" on ${inline(d.resourceId)}`;
  const shown = groups.slice(0, 5).map((g) => `${inline(g.count)} ${inline(g.severity)} "${inline(g.kind)}"`);
  const more = groups.length - shown.length + Number(d.moreGroups ?? 0);
  const listed = `${shown.join(', ')}${more > 0 ? ` and ${more} more kind(s)` : ''}`;
  const runs = Array.isArray(d.runIds) && d.runIds.length > 1 ? `${d.runIds.length} runs` : 'A run';
  return `${runs} of ${who} recorded ${inline(d.findings)} finding(s): ${listed}; worst: ${inline(d.severity)} "${inline(d.kind)}" on ${inline(d.resourceId)}`;
}

export function resolvedSummary(condition: AlertCondition, subject: AlertSubject): string {
  const who = subjectLabel(subject);
  switch (condition) {
    case 'EXECUTION_FAILED':
      return `Resolved: an execution of ${who} succeeded`;
    case 'RUN_FAILED':
      return `Resolved: a run of ${who} completed`;
    case 'INTERVAL_ERROR':
      return `Resolved: ${who} recorded a successful tick`;
    case 'SCHEDULE_ERROR':
      return `Resolved: the schedule of ${who} computes again`;
    case 'NO_SUCCESS':
      return `Resolved: ${who} succeeded again`;
    case 'FINDING':
      return `Resolved: a later run of ${who} completed with no finding at or above the rule's severity`;
  }
}

/** A digest: the window ended with the condition still holding and occurrences held back. */
export function digestSummary(condition: AlertCondition, subject: AlertSubject, occurrences: number): string {
  return `Still firing: ${condition} for ${subjectLabel(subject)}, ${occurrences} occurrence(s) since it started`;
}

export function withSuppressed(summary: string, suppressed: number): string {
  return suppressed > 0 ? `${summary} (${suppressed} more since the last notification)` : summary;
}

/**
 * Text as Slack reads it literally: `&`, `<` and `>` are its only control characters (`<!channel>`
 * pings a channel, `<https://x|text>` shows `text` for a link), escaped as its docs say.
 */
export function slackEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Every string of a JSON value, inert to the engine's templating (see `inert`). */
function inertDeep(value: unknown): unknown {
  if (typeof value === 'string') return inert(value);
  if (Array.isArray(value)) return value.map(inertDeep);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, inertDeep(v)]));
  return value;
}

/**
 * The body of a webhook, as the job input that delivers it: format JSON has stable field names a
 * receiver can switch on; format SLACK is `{text}` for Slack incoming webhooks (and Mattermost,
 * Rocket.Chat...).
 */
export function webhookBody(m: AlertMessage, format: 'JSON' | 'SLACK'): unknown {
  return inertDeep(format === 'SLACK' ? slackBody(m) : jsonBody(m));
}

function slackBody(m: AlertMessage): { text: string } {
  // The icon and the brackets are jobgate's own markup; every value in between is escaped.
  const icon = m.kind === 'FIRING' ? ':rotating_light:' : ':white_check_mark:';
  return { text: `${icon} [jobgate] ${slackEscape(m.summary)} (rule "${slackEscape(inline(m.rule.name))}", alert ${m.id})` };
}

function jsonBody(m: AlertMessage): Record<string, unknown> {
  return {
    type: 'jobgate.alert',
    id: m.id,
    kind: m.kind,
    condition: m.condition,
    rule: m.rule,
    workspaceId: m.workspaceId,
    subject: { type: m.subject.type, id: m.subject.id, name: m.subject.name },
    summary: m.summary,
    windowStart: m.windowStart.toISOString(),
    firstSeenAt: m.firstSeenAt.toISOString(),
    lastSeenAt: m.lastSeenAt.toISOString(),
    occurrences: m.occurrences,
    suppressedCount: m.suppressedCount,
    detail: m.detail,
    createdAt: m.createdAt.toISOString(),
    elapsedMs: Math.max(0, m.createdAt.getTime() - m.firstSeenAt.getTime()),
    ...(m.consoleUrl ? { consoleUrl: m.consoleUrl } : {}),
  };
}

/**
 * The input of an email delivery job. It names the rule, not the recipients: a job's input is
 * readable by every key of the workspace (jobs, executions), a rule's addresses only by ADMIN,
 * so the sender reads them from the rule when it sends (../engine/alerts/alert-handlers.ts).
 */
export function emailInput(m: AlertMessage): { ruleId: string; subject: string; text: string; alertId: string } {
  const lines = [
    inline(m.summary),
    '',
    `Rule: ${inline(m.rule.name)}`,
    `Condition: ${m.condition} (${m.kind})`,
    `Subject: ${subjectLabel(m.subject)}`,
    `First seen: ${m.firstSeenAt.toISOString()}`,
    `Last seen: ${m.lastSeenAt.toISOString()}`,
    `${m.kind === 'RESOLVED' ? 'Lasted' : 'Elapsed since first seen'}: ${elapsed(m.createdAt.getTime() - m.firstSeenAt.getTime())}`,
    `Occurrences: ${m.occurrences}`,
    `Suppressed since the last notification: ${m.suppressedCount}`,
    `Alert id: ${m.id}`,
    ...(m.consoleUrl ? ['', `Open it in the console: ${m.consoleUrl}`] : []),
  ];
  // One line whatever the summary holds (nodemailer also folds line breaks in a header to spaces).
  const subject = `[jobgate] ${m.kind === 'FIRING' ? 'ALERT' : 'RESOLVED'}: ${inline(m.summary)}`;
  return {
    ruleId: m.rule.id,
    subject: subject.length > 200 ? `${subject.slice(0, 199)}…` : subject,
    text: lines.join('\n'),
    alertId: m.id,
  };
}
