/**
 * The alert evaluator: the handler of every workspace's INTERNAL `jobgate.alerts` cron job
 * (migration 000020), run by whichever worker claims it, like the reaper.
 *
 * Why INTERNAL work and not an engine-host loop: the engine already gives a cron job exactly one
 * execution per occurrence, retries, attempt history and a place in the catalogue and in
 * `executions`; a loop would need its own timer, its own visibility and its own failure story.
 * The engine's guarantee alone is not enough, though: an operator's manual trigger, a re-driven
 * execution or a slow attempt overlapping the next minute's can run two passes at once. So a
 * pass takes the workspace's cursor row FOR UPDATE SKIP LOCKED: one pass per workspace at a
 * time, and the others skip (their range is the holder's).
 *
 * A pass, in one transaction:
 *  1. reads events and findings above the cursor and at or below a stable watermark (ids are not
 *     in commit order: see src/subscriptions/hub/watermark.ts; the candidate waiting to settle is
 *     kept in the cursor row, so any worker's next pass can settle it);
 *  2. turns them, and the state checks (interval handlers' errors, cron schedule errors, dead
 *     man's switches, a clean run after findings), into occurrences and clearances per (rule, subject);
 *  3. updates the (rule, subject) state rows: the first occurrence in a rate-limit window
 *     notifies, later ones are counted as suppressed and reported by the next notification (or
 *     by a digest when the window ends and the condition still holds); a clearance of a notified
 *     episode notifies RESOLVED once;
 *  4. writes each notification with a unique key on (rule, subject, kind, window start) and, in
 *     the same transaction, the jobs that deliver it (webhook: an IMMEDIATE job on the rule's
 *     HTTP endpoint; email: a job on the INTERNAL `jobgate.alert-email` endpoint); the engine
 *     delivers them, so a destination that is down delays delivery and never blocks this pass;
 *  5. moves the cursor. Everything commits together, or the pass rolls back and runs again.
 */
import { inTransaction } from '../../../db/transaction.js';
import { databaseNow } from '../../../db/statements/clock.js';
import type pg from 'pg';
import {
  eventsToEvaluate,
  findingsToEvaluate,
  lockActiveRules,
  lockCursor,
  readOpenWriters,
  readSequencePositions,
  recoverablesOptedOut,
  saveCursor,
  type AlertCursorRow,
} from '../../../db/statements/alert-evaluation.js';
import type { AlertRuleRow } from '../../../db/repositories/alerts.js';
import { excerpt } from '../../alerts/format.js';
import { Evaluation } from './states.js';
import { findingClears, handlerSubject, jobSubject, selects, stateSignals, type Signal } from './state-checks.js';

export const ALERTS_HANDLER = 'jobgate.alerts';
export { ALERT_EMAIL_HANDLER } from './states.js';

const SEVERITY_RANK = { INFO: 1, WARNING: 2, ERROR: 3, DATA_LOSS: 4 } as const;

export interface EvaluateResult {
  /** False when another pass held the workspace's cursor (this one skipped). */
  evaluated: boolean;
  notifications: number;
}

/**
 * Evaluates the workspace's alert rules over what happened since the last pass, in passes of at
 * most `batch` events (and findings) each, until caught up. Safe to call from any number of
 * workers at once: see the file comment. Throws only database errors (the engine retries the job).
 */
export async function evaluateAlerts(
  pool: pg.Pool,
  workspaceId: string,
  options: { batch?: number; settleWaitMs?: number; publicUrl?: string | undefined } = {},
): Promise<EvaluateResult> {
  const result: EvaluateResult = { evaluated: false, notifications: 0 };
  for (let i = 0; i < 20; i++) {
    const p = await pass(pool, workspaceId, options.batch ?? 1000, options.settleWaitMs ?? 500, options.publicUrl);
    if (!p.evaluated) return result;
    result.evaluated = true;
    result.notifications += p.notifications;
    if (!p.more) break;
  }
  return result;
}

/**
 * Where this pass may read up to. With no writer of events open, the positions just read are
 * settled. Otherwise it waits a little for those writers (usually one engine statement) and,
 * failing that, takes the candidate the last pass left if its writers have all ended.
 */
async function settle(client: pg.PoolClient, cur: AlertCursorRow, waitMs: number) {
  const positions = await readSequencePositions(client);
  let writers = await readOpenWriters(client);
  for (const until = Date.now() + waitMs; writers.length > 0 && Date.now() < until;) {
    await new Promise((r) => setTimeout(r, 25));
    const open = new Set(await readOpenWriters(client));
    writers = writers.filter((w) => open.has(w));
  }
  if (writers.length === 0) return { upTo: positions, pending: null };
  const open = new Set(await readOpenWriters(client));
  const previous =
    cur.pending_events !== null
      ? { events: BigInt(cur.pending_events), findings: BigInt(cur.pending_findings!), writers: cur.pending_writers ?? [] }
      : null;
  if (previous && previous.writers.every((w) => !open.has(w))) return { upTo: previous, pending: { ...positions, writers } };
  // The older candidate settles first: keep it rather than replace it with a newer one.
  return {
    upTo: { events: BigInt(cur.events_after), findings: BigInt(cur.findings_after) },
    pending: previous ?? { ...positions, writers },
  };
}

async function pass(
  pool: pg.Pool,
  workspaceId: string,
  batch: number,
  settleWaitMs: number,
  publicUrl: string | undefined,
): Promise<{ evaluated: boolean; more: boolean; notifications: number }> {
  return inTransaction(pool, async (client) => {
    const cur = await lockCursor(client, workspaceId);
    // No cursor row: nothing was written, so the (empty) commit is as good as a rollback.
    if (!cur) return { evaluated: false, more: false, notifications: 0 };
    const now = await databaseNow(client);
    const { upTo, pending } = await settle(client, cur, settleWaitMs);
    const rules = await lockActiveRules(client, workspaceId);
    let eventsTo = upTo.events;
    let findingsTo = upTo.findings;
    let more = false;
    const evaluator = new Evaluation(client, workspaceId, now, publicUrl);
    if (rules.length > 0) {
      const signals: Signal[] = [];
      const optedOut = await recoverablesOptedOut(client);
      const events = await eventsToEvaluate(client, workspaceId, BigInt(cur.events_after), upTo.events, batch);
      if (events.length === batch) {
        eventsTo = BigInt(events.at(-1)!.id);
        more = true;
      }
      signals.push(...eventSignals(events, rules, optedOut));
      const findingRules = rules.filter((r) => r.condition === 'FINDING');
      if (findingRules.length > 0) {
        const findings = await findingsToEvaluate(client, workspaceId, BigInt(cur.findings_after), upTo.findings, batch);
        if (findings.length === batch) {
          findingsTo = BigInt(findings.at(-1)!.id);
          more = true;
        }
        signals.push(...findingSignals(findings, findingRules, optedOut));
      }
      const levelRules = rules.filter((r) => ['INTERVAL_ERROR', 'SCHEDULE_ERROR', 'NO_SUCCESS'].includes(r.condition));
      await evaluator.preload(
        signals,
        [...levelRules, ...findingRules].map((r) => r.id),
      );
      signals.push(...(await stateSignals(client, workspaceId, levelRules, now, evaluator.firingKeys(), optedOut)));
      for (const s of signals) await evaluator.apply(s);
      // After this pass's findings: a clean run resolves what they fired only once they are applied.
      if (findingRules.length > 0) {
        for (const s of await findingClears(client, workspaceId, evaluator.firing(findingRules), findingsTo)) await evaluator.apply(s);
      }
      await evaluator.flush();
      await evaluator.digests(new Map(rules.map((r) => [r.id, r])));
    }
    await saveCursor(client, workspaceId, { events: eventsTo, findings: findingsTo, pending: more ? null : pending });
    return { evaluated: true, more, notifications: evaluator.notified };
  });
}

type EvaluatedEvent = Awaited<ReturnType<typeof eventsToEvaluate>>[number];
type EvaluatedFinding = Awaited<ReturnType<typeof findingsToEvaluate>>[number];

/** Occurrences and clearances of EXECUTION_FAILED and RUN_FAILED rules in a pass's events. */
function eventSignals(events: EvaluatedEvent[], rules: AlertRuleRow[], optedOut: Set<string>): Signal[] {
  const signals: Signal[] = [];
  for (const e of events) {
    if (e.topic === 'EXECUTION') {
      if (e.opt_out || e.endpoint_type !== 'USER' || !e.job_id) continue;
      const subject = jobSubject(e.job_id, e.job_name);
      for (const rule of rules) {
        if (rule.condition !== 'EXECUTION_FAILED' || !selects(rule, { jobId: e.job_id, endpointId: e.endpoint_id })) continue;
        if (e.status === 'FAILED') {
          const detail = {
            executionId: e.subject_id,
            jobId: e.job_id,
            jobName: e.job_name,
            endpointId: e.endpoint_id,
            endpointName: e.endpoint_name,
            attempts: e.attempt_count,
            error: excerpt(e.last_error),
          };
          signals.push({ rule, subject, at: e.created_at, kind: 'occur', detail });
        } else signals.push({ rule, subject, at: e.created_at, kind: 'clear' });
      }
    } else if (e.name && !optedOut.has(e.name)) {
      const subject = handlerSubject('RECOVERABLE', e.name);
      for (const rule of rules) {
        if (rule.condition !== 'RUN_FAILED' || !selects(rule, { name: e.name })) continue;
        if (e.status === 'COMPLETED') signals.push({ rule, subject, at: e.created_at, kind: 'clear' });
        else if (e.status === 'FAILED' || e.pause_kind === 'CRASHED') {
          const detail = { runId: e.subject_id, name: e.name, crashed: e.status === 'PAUSED', error: excerpt(e.run_error) };
          signals.push({ rule, subject, at: e.created_at, kind: 'occur', detail });
        }
      }
    }
  }
  return signals;
}

/** At most this many (kind, severity) groups are listed in one notification; the rest are counted. */
const MAX_FINDING_GROUPS = 20;

/**
 * Occurrences of FINDING rules in a pass's findings: one per (rule, handler), grouping its
 * findings by (kind, severity) with their counts and the worst example (the highest severity,
 * first seen), so one notification says what was found instead of naming one finding and counting
 * the rest as suppressed. The worst example's fields stay at the top of the detail (runId,
 * findingId, kind, severity, resourceId), as a single finding's were.
 */
function findingSignals(findings: EvaluatedFinding[], findingRules: AlertRuleRow[], optedOut: Set<string>): Signal[] {
  const byRuleHandler = new Map<string, { rule: AlertRuleRow; name: string; found: EvaluatedFinding[] }>();
  for (const f of findings) {
    if (optedOut.has(f.run_name)) continue;
    for (const rule of findingRules) {
      if (SEVERITY_RANK[f.severity] < SEVERITY_RANK[rule.min_severity ?? 'INFO'] || !selects(rule, { name: f.run_name })) continue;
      const key = `${rule.id}\u0000${f.run_name}`;
      let g = byRuleHandler.get(key);
      if (!g) byRuleHandler.set(key, (g = { rule, name: f.run_name, found: [] }));
      g.found.push(f);
    }
  }
  return [...byRuleHandler.values()].map(({ rule, name, found }) => {
    const detail = groupedFindings(found);
    const total = found.length;
    return {
      rule,
      subject: handlerSubject('RECOVERABLE', name),
      at: found.at(-1)!.created_at,
      kind: 'occur' as const,
      detail,
      countFrom: () => total,
      grouped: true,
    };
  });
}

/** A handler's findings of one pass as a notification's detail: the worst first, then groups by (kind, severity). */
export function groupedFindings(found: EvaluatedFinding[]): Record<string, unknown> {
  const rank = (f: EvaluatedFinding) => SEVERITY_RANK[f.severity];
  // Findings come in id order: the first of the highest severity is the worst example.
  const worst = found.reduce((w, f) => (rank(f) > rank(w) ? f : w));
  const groups = new Map<string, { kind: string; severity: EvaluatedFinding['severity']; count: number; example: EvaluatedFinding }>();
  for (const f of found) {
    const key = `${f.severity}\u0000${f.kind}`;
    const g = groups.get(key);
    if (g) g.count++;
    else groups.set(key, { kind: f.kind, severity: f.severity, count: 1, example: f });
  }
  const sorted = [...groups.values()].sort(
    (a, b) => SEVERITY_RANK[b.severity] - SEVERITY_RANK[a.severity] || b.count - a.count || (a.kind < b.kind ? -1 : 1),
  );
  return {
    runId: worst.run_id,
    findingId: worst.id,
    kind: excerpt(worst.kind, 200),
    severity: worst.severity,
    resourceId: excerpt(worst.resource_id, 200),
    findings: found.length,
    runIds: [...new Set(found.map((f) => f.run_id))],
    groups: sorted.slice(0, MAX_FINDING_GROUPS).map((g) => ({
      kind: excerpt(g.kind, 200),
      severity: g.severity,
      count: g.count,
      example: { findingId: g.example.id, runId: g.example.run_id, resourceId: excerpt(g.example.resource_id, 200) },
    })),
    moreGroups: Math.max(0, sorted.length - MAX_FINDING_GROUPS),
  };
}
