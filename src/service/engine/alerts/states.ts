/**
 * The alert states of one pass of the alert evaluator (evaluator.ts): the (rule, subject)
 * state rows it reads, what its signals change in them, and the notifications (with the jobs that
 * deliver them) and digests it writes, all in the pass's transaction.
 */
import type pg from 'pg';
import {
  enqueueDelivery,
  insertNotification,
  jobLabels,
  loadStates,
  saveState,
  setDeliveryJobs,
  silencesInForce,
  statesDueForDigest,
  type AlertStateRow,
  type SilenceInForce,
} from '../../../db/statements/alert-notify.js';
import type { AlertKind, AlertRuleRow } from '../../../db/repositories/alerts.js';
import {
  digestSummary,
  emailInput,
  firingSummary,
  resolvedSummary,
  webhookBody,
  withSuppressed,
  consoleUrl,
  type AlertMessage,
  type AlertSubject,
} from '../../alerts/format.js';
import { handlerSubject, jobSubject, stateKey, type Signal } from './state-checks.js';

export const ALERT_EMAIL_HANDLER = 'jobgate.alert-email';

/** The states of one pass, what it changes in them, and the notifications it writes. */
export class Evaluation {
  private readonly states = new Map<string, AlertStateRow>();
  private readonly loaded = new Set<string>();
  private readonly dirty = new Set<string>();
  private silences: SilenceInForce[] | undefined;
  notified = 0;

  constructor(
    private readonly client: pg.PoolClient,
    private readonly workspaceId: string,
    private readonly now: Date,
    /** The gateway's public address: its notifications link into its console (none without it). */
    private readonly publicUrl?: string,
  ) {}

  async preload(signals: Signal[], levelRuleIds: string[]): Promise<void> {
    const pairs = signals.map((s) => ({ ruleId: s.rule.id, key: s.subject.key }));
    for (const p of pairs) this.loaded.add(stateKey(p.ruleId, p.key));
    for (const row of await loadStates(this.client, pairs, levelRuleIds)) {
      this.states.set(stateKey(row.rule_id, row.subject_key), row);
      this.loaded.add(stateKey(row.rule_id, row.subject_key));
    }
  }

  /** The firing states of these rules, as this pass has left them so far. */
  firing(rules: AlertRuleRow[]): { rule: AlertRuleRow; state: AlertStateRow }[] {
    const byId = new Map(rules.map((r) => [r.id, r]));
    return [...this.states.values()]
      .filter((s) => s.firing && byId.has(s.rule_id))
      .map((state) => ({ rule: byId.get(state.rule_id)!, state }));
  }

  firingKeys(): Set<string> {
    return new Set([...this.states.entries()].filter(([, s]) => s.firing).map(([k]) => k));
  }

  private async state(rule: AlertRuleRow, subject: AlertSubject): Promise<AlertStateRow | undefined> {
    const k = stateKey(rule.id, subject.key);
    if (!this.loaded.has(k)) {
      this.loaded.add(k);
      const [row] = await loadStates(this.client, [{ ruleId: rule.id, key: subject.key }], []);
      if (row) this.states.set(k, row);
    }
    return this.states.get(k);
  }

  async apply(s: Signal): Promise<void> {
    const k = stateKey(s.rule.id, s.subject.key);
    let st = await this.state(s.rule, s.subject);
    if (s.kind === 'clear') {
      if (!st?.firing) return;
      this.dirty.add(k);
      if (s.observed !== undefined) st.observed = s.observed;
      st.firing = false;
      // An acknowledgement is of one episode: it ends with it, and the next firing is open again.
      st.acknowledged_at = null;
      st.acknowledged_by_key_id = null;
      if (st.notified) {
        await this.notify(s.rule, s.subject, st, 'RESOLVED', s.detail ?? {});
        st.suppressed = 0;
      }
      st.notified = false;
      return;
    }
    const count = s.countFrom ? s.countFrom(st?.observed ?? null) : 1;
    if (!st) {
      st = {
        rule_id: s.rule.id,
        subject_key: s.subject.key,
        firing: false,
        notified: false,
        first_seen_at: null,
        last_seen_at: null,
        occurrences: 0,
        last_notified_at: null,
        window_start: null,
        suppressed: 0,
        observed: null,
        acknowledged_at: null,
        acknowledged_by_key_id: null,
      };
      this.states.set(k, st);
    }
    this.dirty.add(k);
    if (s.observed !== undefined) st.observed = s.observed;
    if (count <= 0) return;
    if (!st.firing) {
      st.firing = true;
      st.notified = false;
      st.first_seen_at = s.at;
      st.occurrences = 0;
      st.acknowledged_at = null;
      st.acknowledged_by_key_id = null;
    }
    st.occurrences += count;
    st.last_seen_at = s.at;
    if (st.last_notified_at && this.now.getTime() - st.last_notified_at.getTime() < s.rule.rate_limit_ms) {
      st.suppressed += count;
      return;
    }
    await this.notify(s.rule, s.subject, st, 'FIRING', s.detail ?? {});
    st.last_notified_at = this.now;
    st.window_start = this.now;
    st.notified = true;
    st.suppressed = s.grouped ? 0 : count - 1;
  }

  async flush(): Promise<void> {
    for (const k of this.dirty) await saveState(this.client, this.workspaceId, this.states.get(k)!);
    this.dirty.clear();
  }

  /** Firing states whose window ended with suppressed occurrences: one notification says how many. */
  async digests(rules: Map<string, AlertRuleRow>): Promise<void> {
    const due = await statesDueForDigest(this.client, this.workspaceId);
    const labels = await jobLabels(
      this.client,
      this.workspaceId,
      due.filter((s) => s.subject_key.startsWith('job:')).map((s) => s.subject_key.slice(4)),
    );
    for (const st of due) {
      const rule = rules.get(st.rule_id);
      if (!rule) continue;
      const [type, ...rest] = st.subject_key.split(':');
      const ref = rest.join(':');
      const subject: AlertSubject =
        type === 'job'
          ? jobSubject(ref, labels.get(ref)?.name ?? null)
          : handlerSubject(type === 'interval' ? 'INTERVAL' : 'RECOVERABLE', ref);
      await this.notify(rule, subject, st, 'FIRING', { digest: true });
      st.last_notified_at = this.now;
      st.window_start = this.now;
      st.notified = true;
      st.suppressed = 0;
      await saveState(this.client, this.workspaceId, st);
    }
  }

  private async notify(
    rule: AlertRuleRow,
    subject: AlertSubject,
    st: AlertStateRow,
    kind: AlertKind,
    detail: Record<string, unknown>,
  ): Promise<void> {
    const base =
      kind === 'RESOLVED'
        ? resolvedSummary(rule.condition, subject)
        : detail.digest
          ? digestSummary(rule.condition, subject, st.occurrences)
          : firingSummary(rule.condition, subject, detail);
    const summary = withSuppressed(base, st.suppressed);
    const windowStart = kind === 'FIRING' ? this.now : st.window_start!;
    // A silence in force holds back delivery only: the notification is written all the same,
    // naming the silence, so what happened while it was quiet stays on record.
    this.silences ??= await silencesInForce(this.client, this.workspaceId);
    const silence = this.silences.find((x) => x.rule_id === rule.id && (x.subject_key === null || x.subject_key === subject.key));
    const row = await insertNotification(this.client, {
      workspaceId: this.workspaceId,
      ruleId: rule.id,
      condition: rule.condition,
      kind,
      subjectType: subject.type,
      subjectKey: subject.key,
      subjectId: subject.id,
      subjectName: subject.name,
      windowStart,
      firstSeenAt: st.first_seen_at ?? this.now,
      lastSeenAt: st.last_seen_at ?? this.now,
      occurrences: st.occurrences,
      suppressedCount: st.suppressed,
      summary,
      detail,
      silenceId: silence?.id ?? null,
    });
    if (!row) return;
    this.notified++;
    if (silence) return;
    const message: AlertMessage = {
      id: row.id,
      kind,
      condition: rule.condition,
      rule: { id: rule.id, name: rule.name },
      workspaceId: this.workspaceId,
      subject,
      summary,
      windowStart,
      firstSeenAt: st.first_seen_at ?? this.now,
      lastSeenAt: st.last_seen_at ?? this.now,
      occurrences: st.occurrences,
      suppressedCount: st.suppressed,
      detail,
      createdAt: row.created_at,
      consoleUrl: consoleUrl(this.publicUrl, row.id),
    };
    const webhook = rule.webhook_endpoint_id
      ? await enqueueDelivery(
          this.client,
          this.workspaceId,
          { endpointId: rule.webhook_endpoint_id },
          row.id,
          webhookBody(message, rule.webhook_format),
        )
      : undefined;
    const email = rule.email
      ? await enqueueDelivery(this.client, this.workspaceId, { internalName: ALERT_EMAIL_HANDLER }, row.id, emailInput(message))
      : undefined;
    await setDeliveryJobs(this.client, row.id, { webhook: webhook ?? null, email: email ?? null });
  }
}
