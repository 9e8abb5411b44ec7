/**
 * One alert (/alerts/<id>), reached from the Alerts list: what fired or resolved, about what,
 * under which rule, when, how often, what the rate limit held back, and how it was delivered.
 * Read again (coalesced) when a new alert is raised: a resolution or an occurrence changes it.
 */
import { graphql } from '../gql/index.ts';
import { formatCount, formatDuration } from '../lib/format.ts';
import { useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { ErrorBox, Link, Loading, Status, Time } from '../ui/common.tsx';
import { alertKindLabel } from './alert-kind.ts';

const AlertDocument = graphql(`
  query Alert($id: ID!) {
    alert(id: $id) {
      ...AlertRow
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

export function AlertScreen({ id }: { id: string }) {
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
          {a.subjectType === 'JOB' && a.subjectId ? (
            <Link to={href('jobs', a.subjectId)}>{a.subjectName ?? a.subjectId.slice(0, 8)}</Link>
          ) : (
            (a.subjectName ?? '—')
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
        <dd>
          <span className="delivery">
            Webhook <Status value={a.webhookDelivery} />
          </span>{' '}
          <span className="delivery">
            Email <Status value={a.emailDelivery} />
          </span>
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
