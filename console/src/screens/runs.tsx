import { useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { RunStatus } from '../gql/graphql.ts';
import { runProgress } from '../lib/format.ts';
import { useQuery, useSubscription } from '../lib/hooks.ts';
import { firstPage } from '../lib/paging.ts';
import { href } from '../lib/router.ts';
import { Empty, ErrorBox, Link, Loading, ProgressBar, Status, Time } from '../ui/common.tsx';
import { PagedTable } from '../ui/paged-table.tsx';

const RunsDocument = graphql(`
  query Runs($status: RunStatus, $after: String) {
    runConnection(status: $status, first: 25, after: $after) {
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

export function RunsScreen() {
  const [status, setStatus] = useState<RunStatus | ''>('');
  const [page, setPage] = useState(firstPage);
  const q = useQuery(RunsDocument, { status: status || null, after: page.after });
  useSubscription(RunsLiveDocument, {}, { next: () => q.reloadSoon(), cursor: (d) => d.runEvents.cursor, reset: q.reload });
  return (
    <section aria-labelledby="runs-title">
      <h1 id="runs-title">Runs</h1>
      <div className="filters">
        <label>
          Status
          <select
            value={status}
            onChange={(e) => {
              setStatus(e.target.value as RunStatus | '');
              setPage(firstPage);
            }}
          >
            <option value="">Any</option>
            {STATUSES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
      </div>
      <ErrorBox error={q.error} />
      {!q.data ? (
        !q.error && <Loading />
      ) : q.data.runConnection.nodes.length === 0 ? (
        <Empty>
          No runs{status ? ` in status ${status}` : ''}. Recoverable handlers start runs on their schedule, or from the{' '}
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
            page={page}
            pageInfo={q.data.runConnection.pageInfo}
            onPage={setPage}
          />
        </>
      )}
    </section>
  );
}
