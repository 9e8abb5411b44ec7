import { useEffect, useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { AlertsQuery } from '../gql/graphql.ts';
import { formatCount, formatDuration, shortId } from '../lib/format.ts';
import { useCan, useQuery, useSubscription } from '../lib/hooks.ts';
import { firstPage, nextPage, previousPage } from '../lib/paging.ts';
import { href } from '../lib/router.ts';
import { listView } from '../lib/url-state.ts';
import { Empty, ErrorBox, Link, Loading, PageSize, Pager, Status, Time } from '../ui/common.tsx';
import { alertKindLabel } from './alert-kind.ts';
import { FiringNow, SubjectLink } from './alert-triage.tsx';

const AlertsDocument = graphql(`
  query Alerts($after: String, $first: Int) {
    alerts(first: $first, after: $after) {
      totalCount
      totalCountCapped
      pageInfo {
        endCursor
        hasNextPage
      }
      nodes {
        ...AlertRow
      }
    }
  }
  fragment AlertRow on Alert {
    id
    kind
    condition
    subjectType
    subjectId
    subjectName
    summary
    ruleId
    ruleName
    firstSeenAt
    lastSeenAt
    createdAt
    occurrences
    suppressedCount
    detail
    webhookDelivery
    emailDelivery
    silenced
  }
`);

const AlertsLiveDocument = graphql(`
  subscription AlertsLive($after: String) {
    alertRaised(after: $after) {
      cursor
      alert {
        ...AlertRow
      }
    }
  }
`);

const AlertRulesDocument = graphql(`
  query AlertRules {
    alertRules(first: 100) {
      totalCount
      nodes {
        id
        name
        condition
        enabled
        minSeverity
        minConsecutive
        noSuccessMs
        rateLimitMs
        email
        emailTo
        webhookEndpointId
        webhookFormat
        jobIds
        endpointIds
        handlerNames
      }
    }
  }
`);

type AlertRow = AlertsQuery['alerts']['nodes'][number];

/** The alerts, newest first, with the rules for ADMIN keys; the page size and the page are in the URL. */
export function AlertsScreen({ search }: { search: URLSearchParams }) {
  const can = useCan();
  const admin = can('ADMIN');
  const view = listView(href('alerts'), search);
  const page = view.page;
  const q = useQuery(AlertsDocument, { after: page.after, first: view.size });
  // New alerts are put at the top at once from the event (first page only); the page reloads
  // (coalesced) for the counts and the delivery states.
  const [arrived, setArrived] = useState<AlertRow[]>([]);
  const [newer, setNewer] = useState(0);
  useEffect(() => {
    const shown = new Set(q.data?.alerts.nodes.map((a) => a.id));
    setArrived((a) => a.filter((x) => !shown.has(x.id)));
  }, [q.data]);
  useEffect(() => {
    setArrived([]);
    if (page.after === null) setNewer(0);
  }, [page.after]);
  useSubscription(
    AlertsLiveDocument,
    {},
    {
      next: (d) => {
        const alert = d.alertRaised.alert;
        if (page.after === null) {
          setArrived((a) => (a.some((x) => x.id === alert.id) ? a : [alert, ...a]));
          q.reloadSoon();
        } else setNewer((n) => n + 1);
      },
      cursor: (d) => d.alertRaised.cursor,
      reset: q.reload,
    },
  );
  const rules = useQuery(AlertRulesDocument, {}, { skip: !admin });
  const shownIds = new Set(q.data?.alerts.nodes.map((a) => a.id));
  const rows = q.data ? [...arrived.filter((a) => !shownIds.has(a.id)), ...q.data.alerts.nodes] : [];
  return (
    <section aria-labelledby="alerts-title">
      <h1 id="alerts-title">Alerts</h1>
      <FiringNow />
      <h2 id="notifications-title">Notifications</h2>
      <ErrorBox error={q.error} />
      {newer > 0 && (
        <p className="notice" role="status">
          {newer} new {newer === 1 ? 'alert' : 'alerts'} raised since this page was loaded.{' '}
          <button type="button" onClick={() => view.toPage(firstPage)}>
            Show the newest
          </button>
        </p>
      )}
      {!q.data ? (
        !q.error && <Loading />
      ) : rows.length === 0 ? (
        <Empty>
          <span data-testid="alerts-empty">
            No alerts yet. Alerts appear here when an ADMIN creates alert rules (createAlertRule) and a rule&apos;s condition holds: a
            failed execution, a failed run, a finding, an interval error, a schedule error or no success for too long.
          </span>
        </Empty>
      ) : (
        <>
          <div className="filters">
            <PageSize value={view.size} onChange={view.toSize} />
          </div>
          <p className="muted">
            {q.data.alerts.totalCount === null || q.data.alerts.totalCount === undefined
              ? 'Newest first'
              : `${formatCount(q.data.alerts.totalCount + (page.after === null ? arrived.filter((a) => !shownIds.has(a.id)).length : 0))}${q.data.alerts.totalCountCapped ? '+' : ''} alerts, newest first`}
          </p>
          <div className="table-box" tabIndex={0} role="region" aria-labelledby="notifications-title">
            <table data-testid="alerts">
              <caption className="sr-only">Alerts, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Kind</th>
                  <th scope="col">Condition</th>
                  <th scope="col">Subject</th>
                  <th scope="col">Rule</th>
                  <th scope="col">First seen</th>
                  <th scope="col">Last seen</th>
                  <th scope="col">Occurrences</th>
                  <th scope="col">Suppressed</th>
                  <th scope="col">Delivery</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((a) => (
                  <tr key={a.id} data-alert={a.id}>
                    <td>
                      <Link
                        to={href('alerts', a.id)}
                        ariaLabel={`${alertKindLabel(a)} alert: ${a.condition} on ${a.subjectName ?? a.subjectType}`}
                      >
                        <Status value={a.kind === 'FIRING' ? 'FAILED' : 'SUCCEEDED'} label={alertKindLabel(a)} />
                      </Link>
                    </td>
                    <td>
                      <code>{a.condition}</code>
                    </td>
                    <td>
                      <span className="muted">{a.subjectType} </span>
                      <SubjectLink subject={a} />
                      <div className="muted">{a.summary}</div>
                    </td>
                    <td>{a.ruleName}</td>
                    <td>
                      <Time iso={a.firstSeenAt} />
                    </td>
                    <td>
                      <Time iso={a.lastSeenAt} />
                    </td>
                    <td>{formatCount(a.occurrences)}</td>
                    <td>{formatCount(a.suppressedCount)}</td>
                    <td>
                      {a.silenced && (
                        <>
                          <Status value="PAUSED" label="Silenced" />{' '}
                        </>
                      )}
                      <span className="delivery">
                        Webhook <Status value={a.webhookDelivery} />
                      </span>{' '}
                      <span className="delivery">
                        Email <Status value={a.emailDelivery} />
                      </span>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager
            stack={page}
            hasNext={q.data.alerts.pageInfo.hasNextPage}
            onNext={() => view.toPage(nextPage(page, q.data?.alerts.pageInfo.endCursor))}
            onPrevious={() => view.toPage(previousPage(page))}
          />
        </>
      )}
      {admin && (
        <section aria-labelledby="alert-rules-title">
          <h2 id="alert-rules-title">Alert rules</h2>
          <p className="muted">Read-only; rules are created and changed through the API (createAlertRule, updateAlertRule).</p>
          <ErrorBox error={rules.error} />
          {!rules.data ? (
            !rules.error && <Loading />
          ) : rules.data.alertRules.nodes.length === 0 ? (
            <Empty>No alert rules: create one with the createAlertRule mutation and its alerts show above.</Empty>
          ) : (
            <div className="table-box" tabIndex={0} role="region" aria-labelledby="alert-rules-title">
              <table data-testid="alert-rules">
                <thead>
                  <tr>
                    <th scope="col">Rule</th>
                    <th scope="col">Condition</th>
                    <th scope="col">Subjects</th>
                    <th scope="col">Destinations</th>
                    <th scope="col">Rate limit</th>
                    <th scope="col">State</th>
                  </tr>
                </thead>
                <tbody>
                  {rules.data.alertRules.nodes.map((r) => (
                    <tr key={r.id}>
                      <th scope="row">{r.name}</th>
                      <td>
                        <code>{r.condition}</code>
                        {r.minSeverity && <span className="muted"> at least {r.minSeverity}</span>}
                        {r.condition === 'INTERVAL_ERROR' && <span className="muted"> {r.minConsecutive} in a row</span>}
                        {r.noSuccessMs !== null && r.noSuccessMs !== undefined && (
                          <span className="muted"> for {formatDuration(r.noSuccessMs)}</span>
                        )}
                      </td>
                      <td>
                        {r.jobIds.length + r.endpointIds.length + r.handlerNames.length === 0
                          ? 'Every subject'
                          : [
                              r.jobIds.length ? `${r.jobIds.length} job(s)` : '',
                              r.endpointIds.length ? `${r.endpointIds.length} endpoint(s)` : '',
                              r.handlerNames.join(', '),
                            ]
                              .filter(Boolean)
                              .join('; ')}
                      </td>
                      <td>
                        {[
                          r.webhookEndpointId ? `Webhook (${r.webhookFormat}) to endpoint ${shortId(r.webhookEndpointId)}` : '',
                          r.email ? `Email to ${r.emailTo.length ? r.emailTo.join(', ') : 'the default recipients'}` : '',
                        ]
                          .filter(Boolean)
                          .join('; ') || '—'}
                      </td>
                      <td>at most one per {formatDuration(r.rateLimitMs)}</td>
                      <td>
                        <Status value={r.enabled ? 'ACTIVE' : 'PAUSED'} label={r.enabled ? 'Enabled' : 'Disabled'} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </section>
      )}
    </section>
  );
}
