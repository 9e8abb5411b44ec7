import { graphql } from '../gql/index.ts';
import type { RunStatus } from '../gql/graphql.ts';
import { runProgress } from '../lib/format.ts';
import { useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { listView } from '../lib/url-state.ts';
import { Empty, ErrorBox, Link, Loading, PageSize, ProgressBar, Status, Time } from '../ui/common.tsx';
import { PagedTable } from '../ui/paged-table.tsx';

const RunsDocument = graphql(`
  query Runs($status: RunStatus, $name: String, $after: String, $first: Int) {
    runConnection(status: $status, name: $name, first: $first, after: $after) {
      totalCount
      pageInfo {
        endCursor
        hasNextPage
      }
      nodes {
        ...RunRow
      }
    }
  }
`);

const RunsLiveDocument = graphql(`
  subscription RunsLive($after: String) {
    runEvents(after: $after) {
      cursor
      runId
      status
    }
  }
`);

const STATUSES: RunStatus[] = ['RUNNING', 'CANCEL_REQUESTED', 'PAUSED', 'COMPLETED', 'FAILED'];

/** Runs, newest first; the status and handler filters, the page size and the page are in the URL. */
export function RunsScreen({ search }: { search: URLSearchParams }) {
  const status = (STATUSES as string[]).includes(search.get('status') ?? '') ? (search.get('status') as RunStatus) : '';
  const name = search.get('name') ?? '';
  const view = listView(href('runs'), search);
  const q = useQuery(RunsDocument, { status: status || null, name: name || null, after: view.page.after, first: view.size });
  useSubscription(RunsLiveDocument, {}, { next: () => q.reloadSoon(), cursor: (d) => d.runEvents.cursor, reset: q.reload });
  return (
    <section aria-labelledby="runs-title">
      <h1 id="runs-title">Runs</h1>
      <div className="filters">
        <label>
          Status
          <select value={status} onChange={(e) => view.go({ status: e.target.value })}>
            <option value="">Any</option>
            {STATUSES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <PageSize value={view.size} onChange={view.toSize} />
      </div>
      {name && (
        <p data-testid="runs-of">
          The runs of <strong>{name}</strong> only.{' '}
          <button type="button" onClick={() => view.go({ name: null })}>
            Show every handler&apos;s runs
          </button>
        </p>
      )}
      <ErrorBox error={q.error} />
      {!q.data ? (
        !q.error && <Loading />
      ) : q.data.runConnection.nodes.length === 0 ? (
        <Empty>
          No runs{name ? ` of ${name}` : ''}
          {status ? ` in status ${status}` : ''}. Recoverable handlers start runs on their schedule, or from the{' '}
          <Link to={href('handlers')}>Handlers</Link> screen.
        </Empty>
      ) : (
        <>
          <PagedTable
            testId="runs"
            columns={[
              { header: 'Run', cell: (r) => <Link to={href('runs', r.id)}>{r.name}</Link> },
              { header: 'Status', cell: (r) => <Status value={r.status} /> },
              {
                header: 'Progress',
                cell: (r) => {
                  const p = runProgress(r.processed, r.total, []);
                  return (
                    <>
                      <ProgressBar fraction={p.fraction} label={`${r.name}: ${p.label}`} /> {p.label}
                    </>
                  );
                },
              },
              { header: 'Started', cell: (r) => <Time iso={r.startedAt} /> },
              { header: 'Finished', cell: (r) => <Time iso={r.finishedAt} /> },
            ]}
            rows={q.data.runConnection.nodes}
            rowKey={(r) => r.id}
            page={view.page}
            pageInfo={q.data.runConnection.pageInfo}
            onPage={view.toPage}
          />
        </>
      )}
    </section>
  );
}
