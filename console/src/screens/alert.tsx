/**
 * One alert (/alerts/<id>), reached from the Alerts list: what fired or resolved, about what,
 * under which rule, when, how often, what the rate limit held back, and how it was delivered.
 * Read again (coalesced) when a new alert is raised: a resolution or an occurrence changes it.
 */
import { graphql } from '../gql/index.ts';
import { formatCount, formatDuration } from '../lib/format.ts';
import { useCan, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { ErrorBox, Link, Loading, Status, Time } from '../ui/common.tsx';
import { alertKindLabel } from './alert-kind.ts';
import { StateActions, StateBadges, SubjectLink } from './alert-triage.tsx';

const AlertDocument = graphql(`
  query Alert($id: ID!) {
    alert(id: $id) {
      ...AlertRow
      silence {
        id
        endsAt
        createdBy
        comment
      }
      webhookJob {
        id
      }
      emailJob {
        id
      }
      state {
        ...AlertStateRow
      }
    }
  }
`);

const AlertLiveDocument = graphql(`
  subscription AlertLive($after: String) {
    alertRaised(after: $after) {
      cursor
    }
  }
`);

interface FindingGroup {
  kind: string;
  severity: string;
  count: number;
  example?: { resourceId?: string | null; runId?: string };
}

/** A FINDING alert's findings by (kind, severity), worst first, as the evaluator grouped them. */
function FindingGroups({ detail }: { detail: unknown }) {
  const groups = (detail as { groups?: FindingGroup[] } | null)?.groups;
  if (!Array.isArray(groups) || groups.length === 0) return null;
  return (
    <table data-testid="finding-groups">
      <thead>
        <tr>
          <th scope="col">Severity</th>
          <th scope="col">Kind</th>
          <th scope="col">Count</th>
          <th scope="col">Example</th>
        </tr>
      </thead>
      <tbody>
        {groups.map((g) => (
          <tr key={`${g.severity}:${g.kind}`}>
            <td>{g.severity}</td>
            <td>{g.kind}</td>
            <td>{formatCount(g.count)}</td>
            <td>
              {g.example?.runId ? <Link to={href('runs', g.example.runId)}>{g.example.resourceId ?? 'run'}</Link> : g.example?.resourceId}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Links to what the detail names: the failed execution, the run. */
function DetailLinks({ detail }: { detail: unknown }) {
  const d = (detail ?? {}) as { executionId?: unknown; runId?: unknown };
  const links = [
    typeof d.executionId === 'string' && <Link to={href('executions', d.executionId)}>The failed execution</Link>,
    typeof d.runId === 'string' && <Link to={href('runs', d.runId)}>The run</Link>,
  ].filter(Boolean);
  if (links.length === 0) return null;
  return (
    <>
      <dt>Look at</dt>
      <dd>
        {links.map((l, i) => (
          <span key={i}>
            {i > 0 && ' · '}
            {l}
          </span>
        ))}
      </dd>
    </>
  );
}

/** One delivery's state, linked to the job that delivers it (its executions are the delivery history). */
function Delivery({ label, state, jobId }: { label: string; state: string; jobId: string | null | undefined }) {
  return (
    <span className="delivery">
      {jobId ? (
        <Link to={href('jobs', jobId)} ariaLabel={`${label} delivery job: ${state}`}>
          {label}
        </Link>
      ) : (
        label
      )}{' '}
      <Status value={state} />
    </span>
  );
}

export function AlertScreen({ id }: { id: string }) {
  const can = useCan();
  const q = useQuery(AlertDocument, { id });
  useSubscription(AlertLiveDocument, {}, { next: () => q.reloadSoon(), cursor: (d) => d.alertRaised.cursor, reset: q.reload });
  if (!q.data) return q.error ? <ErrorBox error={q.error} title="Could not load the alert" /> : <Loading />;
  const a = q.data.alert;
  return (
    <section aria-labelledby="alert-title">
      <p>
        <Link to={href('alerts')}>← Alerts</Link>
      </p>
      <h1 id="alert-title">
        Alert <Status value={a.kind === 'FIRING' ? 'FAILED' : 'SUCCEEDED'} label={alertKindLabel(a)} /> <code>{a.condition}</code>
      </h1>
      <ErrorBox error={q.error} title="Could not refresh" />
      <dl className="facts" data-testid="alert-facts">
        <dt>Summary</dt>
        <dd>{a.summary}</dd>
        <dt>Subject</dt>
        <dd>
          <span className="muted">{a.subjectType} </span>
          <SubjectLink subject={a} />
        </dd>
        <DetailLinks detail={a.detail} />
        <dt>Now</dt>
        <dd data-testid="alert-state">
          {a.state ? (
            <>
              <StateBadges state={a.state} />
              {can('OPERATOR') && <StateActions state={a.state} onDone={q.reload} />}
            </>
          ) : (
            <span className="muted">Its rule was deleted since.</span>
          )}
        </dd>
        <dt>Rule</dt>
        <dd>{a.ruleName}</dd>
        <dt>First seen</dt>
        <dd>
          <Time iso={a.firstSeenAt} />
        </dd>
        <dt>Last seen</dt>
        <dd>
          <Time iso={a.lastSeenAt} />
        </dd>
        <dt>Raised</dt>
        <dd>
          <Time iso={a.createdAt} />
        </dd>
        <dt>{a.kind === 'RESOLVED' ? 'Lasted' : 'Elapsed since first seen'}</dt>
        <dd>{formatDuration(Math.max(0, Date.parse(a.createdAt) - Date.parse(a.firstSeenAt)))}</dd>
        <dt>Occurrences</dt>
        <dd>{formatCount(a.occurrences)}</dd>
        <dt>Suppressed by the rate limit</dt>
        <dd>{formatCount(a.suppressedCount)}</dd>
        <dt>Delivery</dt>
        <dd data-testid="alert-delivery">
          {a.silence ? (
            <span>
              <Status value="PAUSED" label="Silenced" /> Recorded, not delivered: a silence by {a.silence.createdBy ?? 'the application'}{' '}
              was in force (until <Time iso={a.silence.endsAt} />){a.silence.comment ? `: ${a.silence.comment}` : ''}.
            </span>
          ) : (
            <>
              <Delivery label="Webhook" state={a.webhookDelivery} jobId={a.webhookJob?.id} />{' '}
              <Delivery label="Email" state={a.emailDelivery} jobId={a.emailJob?.id} />
            </>
          )}
        </dd>
        {a.condition === 'FINDING' && (
          <>
            <dt>Findings</dt>
            <dd>
              <FindingGroups detail={a.detail} />
            </dd>
          </>
        )}
        <dt>Detail</dt>
        <dd>
          <pre>{JSON.stringify(a.detail, null, 2)}</pre>
        </dd>
      </dl>
    </section>
  );
}
