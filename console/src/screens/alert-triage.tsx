/**
 * Triage on the Alerts screen: what is firing now, grouped by rule, one row per subject, with
 * who acknowledged it and what silences it; an OPERATOR or ADMIN acknowledges, silences a subject or a whole
 * rule for a while, and lifts a silence. Read again (coalesced) when an alert is raised.
 */
import { useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { AlertStateRowFragment, AlertSubjectType } from '../gql/graphql.ts';
import { formatCount, shortId } from '../lib/format.ts';
import { useCan, useMutation, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { Empty, ErrorBox, Link, Loading, Status, Time } from '../ui/common.tsx';

const FiringDocument = graphql(`
  query FiringAlerts {
    alertStates(first: 100) {
      totalCount
      nodes {
        ...AlertStateRow
      }
    }
    alertSilences(first: 50, activeOnly: true) {
      nodes {
        id
        ruleName
        subjectType
        subjectId
        subjectName
        endsAt
        comment
        createdBy
      }
    }
  }
  fragment AlertStateRow on AlertState {
    id
    ruleId
    ruleName
    condition
    subjectType
    subjectId
    subjectName
    status
    firstSeenAt
    lastSeenAt
    occurrences
    acknowledgedAt
    acknowledgedBy
    silencedUntil
    lastAlert {
      id
    }
  }
`);

const FiringLiveDocument = graphql(`
  subscription FiringAlertsLive($after: String) {
    alertRaised(after: $after) {
      cursor
    }
  }
`);

const AcknowledgeDocument = graphql(`
  mutation AcknowledgeAlertState($id: ID!) {
    acknowledgeAlertState(id: $id) {
      ...AlertStateRow
    }
  }
`);

const SilenceDocument = graphql(`
  mutation SilenceAlerts($input: SilenceAlertsInput!) {
    silenceAlerts(input: $input) {
      id
      endsAt
    }
  }
`);

const UnsilenceDocument = graphql(`
  mutation UnsilenceAlerts($id: ID!) {
    unsilenceAlerts(id: $id) {
      id
      active
    }
  }
`);

/** The durations offered; the API takes any whole number of ms from 1 minute to 30 days. */
const DURATIONS = [
  { label: '15 minutes', ms: 15 * 60_000 },
  { label: '1 hour', ms: 3_600_000 },
  { label: '4 hours', ms: 4 * 3_600_000 },
  { label: '1 day', ms: 86_400_000 },
  { label: '7 days', ms: 7 * 86_400_000 },
];

export interface AlertSubject {
  subjectType: AlertSubjectType;
  subjectId?: string | null;
  subjectName?: string | null;
}

/** What an alert is about, linked to where it can be looked at: the job, or the handlers. */
export function SubjectLink({ subject }: { subject: AlertSubject }) {
  const { subjectType, subjectId, subjectName } = subject;
  if (subjectType === 'JOB' && subjectId) return <Link to={href('jobs', subjectId)}>{subjectName ?? shortId(subjectId)}</Link>;
  if (subjectName) return <Link to={href('handlers')}>{subjectName}</Link>;
  return <>—</>;
}

export const subjectLabel = (s: AlertSubject) => s.subjectName ?? (s.subjectId ? shortId(s.subjectId) : s.subjectType);

/** OPEN or ACKNOWLEDGED (by whom), and silenced until when. */
export function StateBadges({
  state,
}: {
  state: Pick<AlertStateRowFragment, 'status' | 'acknowledgedBy' | 'acknowledgedAt' | 'silencedUntil'>;
}) {
  return (
    <>
      <Status value={state.status === 'OPEN' ? 'FAILED' : state.status === 'ACKNOWLEDGED' ? 'PAUSED' : 'SUCCEEDED'} label={state.status} />
      {state.status === 'ACKNOWLEDGED' && (
        <div className="muted">
          by {state.acknowledgedBy ?? 'the application'} <Time iso={state.acknowledgedAt} />
        </div>
      )}
      {state.silencedUntil && (
        <div className="muted">
          Silenced until <Time iso={state.silencedUntil} />
        </div>
      )}
    </>
  );
}

/** Acknowledge (when OPEN) and silence this subject, for an OPERATOR or ADMIN (whoever is on call); `onDone` reloads what shows them. */
export function StateActions({ state, onDone }: { state: AlertStateRowFragment; onDone(): void }) {
  const ack = useMutation(AcknowledgeDocument);
  const label = subjectLabel(state);
  return (
    <div className="triage-actions">
      <ErrorBox error={ack.error} title="Acknowledging was refused" />
      {state.status === 'OPEN' && (
        <button
          type="button"
          disabled={ack.pending}
          aria-label={`Acknowledge ${state.ruleName} on ${label}`}
          onClick={() => void ack.run({ id: state.id }).then((r) => r && onDone())}
        >
          Acknowledge
        </button>
      )}
      <SilenceControl ruleId={state.ruleId} subject={state} what={`${state.ruleName} on ${label}`} onDone={onDone} />
    </div>
  );
}

/** A duration and a "Silence" button: the rule, or one subject of it when `subject` is given. */
export function SilenceControl({
  ruleId,
  subject,
  what,
  onDone,
}: {
  ruleId: string;
  subject?: AlertSubject;
  what: string;
  onDone(): void;
}) {
  const silence = useMutation(SilenceDocument);
  const [ms, setMs] = useState(DURATIONS[1]!.ms);
  const run = async () => {
    const input = subject
      ? {
          ruleId,
          durationMs: ms,
          subjectType: subject.subjectType,
          ...(subject.subjectType === 'JOB' ? { subjectId: subject.subjectId } : { subjectName: subject.subjectName }),
        }
      : { ruleId, durationMs: ms };
    if (await silence.run({ input })) onDone();
  };
  return (
    <span className="silence-control">
      <ErrorBox error={silence.error} title="Silencing was refused" />
      <select aria-label={`Silence ${what} for`} value={ms} onChange={(e) => setMs(Number(e.target.value))}>
        {DURATIONS.map((d) => (
          <option key={d.ms} value={d.ms}>
            {d.label}
          </option>
        ))}
      </select>
      {/* The name holds the visible text (WCAG 2.5.3), so voice control and getByRole find it by what it shows. */}
      <button
        type="button"
        disabled={silence.pending}
        aria-label={subject ? `Silence ${what}` : `Silence rule: ${what}`}
        onClick={() => void run()}
      >
        {subject ? 'Silence' : 'Silence rule'}
      </button>
    </span>
  );
}

export function FiringNow() {
  const can = useCan();
  const admin = can('OPERATOR');
  const q = useQuery(FiringDocument, {});
  useSubscription(FiringLiveDocument, {}, { next: () => q.reloadSoon(), cursor: (d) => d.alertRaised.cursor, reset: q.reload });
  const unsilence = useMutation(UnsilenceDocument);
  const states = q.data?.alertStates.nodes ?? [];
  const byRule = new Map<string, AlertStateRowFragment[]>();
  for (const s of states) byRule.set(s.ruleId, [...(byRule.get(s.ruleId) ?? []), s]);
  const open = states.filter((s) => s.status === 'OPEN').length;
  return (
    <section aria-labelledby="firing-title">
      <h2 id="firing-title">Firing now</h2>
      <ErrorBox error={q.error} title="Could not load what is firing" />
      {!q.data ? (
        !q.error && <Loading />
      ) : states.length === 0 ? (
        <Empty>
          <span data-testid="firing-empty">Nothing is firing.</span>
        </Empty>
      ) : (
        <>
          <p className="muted" data-testid="firing-summary">
            {formatCount(q.data.alertStates.totalCount ?? states.length)} firing, {formatCount(open)} not acknowledged. An acknowledgement
            lasts until the condition resolves; a silence holds back deliveries (they are still recorded) until it ends.
          </p>
          {[...byRule.entries()].map(([ruleId, rows]) => (
            <div key={ruleId} className="firing-rule" data-testid="firing-rule" data-rule={rows[0]!.ruleName}>
              <div className="title-row">
                <h3>
                  {rows[0]!.ruleName} <code>{rows[0]!.condition}</code>
                </h3>
                {admin && <SilenceControl ruleId={ruleId} what={`every subject of ${rows[0]!.ruleName}`} onDone={q.reload} />}
              </div>
              <div className="table-box" tabIndex={0} role="region" aria-label={`Firing under ${rows[0]!.ruleName}`}>
                <table data-testid="firing">
                  <caption className="sr-only">Subjects firing under {rows[0]!.ruleName}</caption>
                  <thead>
                    <tr>
                      <th scope="col">Subject</th>
                      {admin && <th scope="col">Actions</th>}
                      <th scope="col">State</th>
                      <th scope="col">Since</th>
                      <th scope="col">Last seen</th>
                      <th scope="col">Occurrences</th>
                      <th scope="col">Latest alert</th>
                    </tr>
                  </thead>
                  <tbody>
                    {rows.map((s) => (
                      <tr key={s.id} data-state={s.id} data-subject={subjectLabel(s)}>
                        <th scope="row">
                          <span className="muted">{s.subjectType} </span>
                          <SubjectLink subject={s} />
                        </th>
                        {admin && (
                          <td>
                            <StateActions state={s} onDone={q.reload} />
                          </td>
                        )}
                        <td>
                          <StateBadges state={s} />
                        </td>
                        <td>
                          <Time iso={s.firstSeenAt} />
                        </td>
                        <td>
                          <Time iso={s.lastSeenAt} />
                        </td>
                        <td>{formatCount(s.occurrences)}</td>
                        <td>{s.lastAlert ? <Link to={href('alerts', s.lastAlert.id)}>Open alert</Link> : '—'}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            </div>
          ))}
        </>
      )}
      {q.data && q.data.alertSilences.nodes.length > 0 && (
        <>
          <h3 id="silences-title">Silences in force</h3>
          <ErrorBox error={unsilence.error} title="Lifting the silence was refused" />
          <div className="table-box" tabIndex={0} role="region" aria-labelledby="silences-title">
            <table data-testid="silences">
              <thead>
                <tr>
                  <th scope="col">Rule</th>
                  <th scope="col">Subject</th>
                  {admin && <th scope="col">Actions</th>}
                  <th scope="col">Until</th>
                  <th scope="col">By</th>
                  <th scope="col">Comment</th>
                </tr>
              </thead>
              <tbody>
                {q.data.alertSilences.nodes.map((x) => (
                  <tr key={x.id} data-silence={x.id}>
                    <th scope="row">{x.ruleName}</th>
                    <td>{x.subjectType ? <SubjectLink subject={{ ...x, subjectType: x.subjectType }} /> : 'Every subject'}</td>
                    {admin && (
                      <td>
                        <button
                          type="button"
                          disabled={unsilence.pending}
                          aria-label={`Lift the silence of ${x.ruleName}${x.subjectType ? ` on ${subjectLabel({ ...x, subjectType: x.subjectType })}` : ''}`}
                          onClick={() => void unsilence.run({ id: x.id }).then((r) => r && q.reload())}
                        >
                          Unsilence
                        </button>
                      </td>
                    )}
                    <td>
                      <Time iso={x.endsAt} />
                    </td>
                    <td>{x.createdBy ?? 'the application'}</td>
                    <td>{x.comment ?? '—'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  );
}
