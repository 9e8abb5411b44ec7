/**
 * What the alert evaluator (./evaluator.ts) turns into occurrences and clearances besides
 * events: the state checks (interval handlers' errors in a row, cron schedule errors, dead man's
 * switches, findings cleared by a later clean run), and the subject helpers both share. A state
 * check counts an occurrence only when its counter moved since the state row last saw it
 * (`observed`), so a condition that holds across passes is one occurrence, not one per pass.
 */
import type pg from 'pg';
import {
  cleanRunAfter,
  intervalHealth,
  jobsLastSuccess,
  recoverablesLastSuccess,
  scheduleErrors,
  type IntervalHealth,
} from '../../../db/statements/alert-evaluation.js';
import type { AlertStateRow } from '../../../db/statements/alert-notify.js';
import type { AlertRuleRow } from '../../../db/repositories/alerts.js';
import { excerpt, handlerSubject, jobSubject, type AlertSubject } from '../../alerts/format.js';

export { handlerSubject, jobSubject };

/** One occurrence or clearance of a rule's condition for one subject, in the order applied. */
export interface Signal {
  rule: AlertRuleRow;
  subject: AlertSubject;
  at: Date;
  kind: 'occur' | 'clear';
  detail?: Record<string, unknown>;
  /** State checks: the counter seen now, and how many occurrences it is past the one last seen. */
  observed?: string;
  countFrom?: (previous: string | null) => number;
  /** Its notification describes every occurrence it counts (grouped findings): none is left over as suppressed. */
  grouped?: boolean;
}

/** Whether the rule's subject selection takes this subject (no selection takes every one). */
export function selects(rule: AlertRuleRow, s: { jobId?: string | null; endpointId?: string | null; name?: string | null }): boolean {
  if (rule.job_ids.length + rule.endpoint_ids.length + rule.handler_names.length === 0) return true;
  return (
    (!!s.jobId && rule.job_ids.includes(s.jobId)) ||
    (!!s.endpointId && rule.endpoint_ids.includes(s.endpointId)) ||
    (!!s.name && rule.handler_names.includes(s.name))
  );
}

export const stateKey = (ruleId: string, subjectKey: string) => `${ruleId}|${subjectKey}`;

/** Interval handlers' errors, cron schedule errors and dead man's switches, as they are now. */
export async function stateSignals(
  client: pg.PoolClient,
  workspaceId: string,
  rules: AlertRuleRow[],
  now: Date,
  firing: Set<string>,
  optedOut: Set<string> = new Set(),
): Promise<Signal[]> {
  const signals: Signal[] = [];
  let intervals: IntervalHealth[] | undefined;
  const loadIntervals = async () => (intervals ??= await intervalHealth(client));
  const schedules = rules.some((r) => r.condition === 'SCHEDULE_ERROR') ? await scheduleErrors(client, workspaceId) : [];
  for (const rule of rules) {
    if (rule.condition === 'INTERVAL_ERROR') {
      for (const h of await loadIntervals()) {
        if (h.opt_out || !selects(rule, { name: h.name })) continue;
        const subject = handlerSubject('INTERVAL', h.name);
        if (h.last_status === 'ERROR' && h.error_streak >= rule.min_consecutive) {
          // Error text of interval handlers is the installation's, not shown to a workspace (as in the catalogue): the cause only.
          const detail = { name: h.name, errorsInARow: h.error_streak, cause: h.last_cause };
          signals.push({
            rule,
            subject,
            at: now,
            kind: 'occur',
            detail,
            observed: String(h.error_runs),
            countFrom: (prev) => (prev === null ? 1 : Math.max(0, h.error_runs - Number(prev))),
          });
        } else if (firing.has(stateKey(rule.id, subject.key)))
          signals.push({ rule, subject, at: now, kind: 'clear', observed: String(h.error_runs) });
      }
    } else if (rule.condition === 'SCHEDULE_ERROR') {
      const bad = new Set<string>();
      for (const j of schedules) {
        if (!selects(rule, { jobId: j.id, endpointId: j.endpoint_id })) continue;
        const subject = jobSubject(j.id, j.name);
        bad.add(subject.key);
        const observed = j.schedule_error_at.toISOString();
        signals.push({
          rule,
          subject,
          at: j.schedule_error_at,
          kind: 'occur',
          detail: { jobId: j.id, jobName: j.name, error: excerpt(j.schedule_error) },
          observed,
          countFrom: (prev) => (prev === observed ? 0 : 1),
        });
      }
      for (const key of firing) {
        const [ruleId, subjectKey] = key.split('|') as [string, string];
        if (ruleId === rule.id && !bad.has(subjectKey))
          signals.push({ rule, subject: jobSubject(subjectKey.slice(4), null), at: now, kind: 'clear' });
      }
    } else if (rule.condition === 'NO_SUCCESS') {
      signals.push(...(await noSuccessSignals(client, workspaceId, rule, now, firing, loadIntervals, optedOut)));
    }
  }
  return signals;
}

/** NO_SUCCESS (dead man's switch) of one rule: its jobs and handlers silent for too long. */
async function noSuccessSignals(
  client: pg.PoolClient,
  workspaceId: string,
  rule: AlertRuleRow,
  now: Date,
  firing: Set<string>,
  loadIntervals: () => Promise<IntervalHealth[]>,
  optedOut: Set<string>,
): Promise<Signal[]> {
  const signals: Signal[] = [];
  const clearIfFiring = (subject: AlertSubject) => {
    if (firing.has(stateKey(rule.id, subject.key))) signals.push({ rule, subject, at: now, kind: 'clear' });
  };
  const limit = rule.no_success_ms!;
  const check = (subject: AlertSubject, lastSuccess: Date | null, extra: Record<string, unknown>) => {
    // Silent since its last success, or since the rule exists when that is later (a new rule does not fire at once).
    const since = new Date(Math.max(lastSuccess?.getTime() ?? 0, rule.created_at.getTime()));
    if (now.getTime() - since.getTime() >= limit) {
      const observed = since.toISOString();
      signals.push({
        rule,
        subject,
        at: now,
        kind: 'occur',
        detail: { ...extra, noSuccessMs: limit, lastSuccessAt: lastSuccess?.toISOString() ?? null },
        observed,
        countFrom: (prev) => (prev === observed ? 0 : 1),
      });
    } else clearIfFiring(subject);
  };
  if (rule.job_ids.length + rule.endpoint_ids.length > 0 || rule.handler_names.length === 0) {
    for (const j of await jobsLastSuccess(client, workspaceId, rule))
      check(jobSubject(j.id, j.name), j.since, { jobId: j.id, jobName: j.name });
  }
  if (rule.handler_names.length > 0) {
    const byName = new Map((await loadIntervals()).map((h) => [h.name, h]));
    const recoverable = rule.handler_names.filter((n) => !byName.has(n) && !optedOut.has(n));
    const runs = recoverable.length ? await recoverablesLastSuccess(client, workspaceId, recoverable) : new Map<string, Date | null>();
    for (const name of rule.handler_names) {
      const h = byName.get(name);
      if (h?.opt_out || (!h && optedOut.has(name))) continue;
      if (h) check(handlerSubject('INTERVAL', name), h.last_ok_at ?? h.created_at, { name });
      else check(handlerSubject('RECOVERABLE', name), runs.get(name) ?? null, { name });
    }
  }
  return signals;
}

/**
 * FINDING conditions that cleared: for each firing (rule, handler), the next run of that handler
 * that completed with no finding at or above the rule's severity (cleanRunAfter says when that
 * run counts). Findings are facts, so what clears the condition is the handler scanning again
 * and finding nothing as bad. `firing` holds the states as the pass left them, after this pass's
 * findings were applied.
 */
export async function findingClears(
  client: pg.PoolClient,
  workspaceId: string,
  firing: { rule: AlertRuleRow; state: AlertStateRow }[],
  findingsUpTo: bigint,
): Promise<Signal[]> {
  const signals: Signal[] = [];
  for (const { rule, state } of firing) {
    if (rule.condition !== 'FINDING' || !state.subject_key.startsWith('recoverable:') || !state.last_seen_at) continue;
    const name = state.subject_key.slice('recoverable:'.length);
    const run = await cleanRunAfter(client, workspaceId, name, state.last_seen_at, rule.min_severity, findingsUpTo);
    if (run)
      signals.push({
        rule,
        subject: handlerSubject('RECOVERABLE', name),
        at: run.finished_at,
        kind: 'clear',
        detail: { runId: run.id, name },
      });
  }
  return signals;
}
