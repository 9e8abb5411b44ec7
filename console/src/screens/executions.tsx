import { useEffect, useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { ExecutionStatus } from '../gql/graphql.ts';
import { formatCount, truncate } from '../lib/format.ts';
import { useCan, useMutation, useQuery, useSubscription } from '../lib/hooks.ts';
import { firstPage } from '../lib/paging.ts';
import { href, navigate } from '../lib/router.ts';
import { Empty, ErrorBox, Link, Loading, Status, Time } from '../ui/common.tsx';
import { PagedTable } from '../ui/paged-table.tsx';
import { patched, unseenBy, withPatch, type Patches } from '../lib/patches.ts';
import { CancelExecutionDocument, RetryExecutionDocument } from './shared.tsx';

const ExecutionsDocument = graphql(`
  query Executions($filter: ExecutionFilter, $after: String) {
    executions(filter: $filter, first: 25, after: $after) {
      totalCount
      totalCountCapped
      pageInfo {
        endCursor
        hasNextPage
      }
      nodes {
        ...ExecutionRow
        job {
          id
          name
          endpoint {
            id
            name
          }
        }
      }
    }
    endpoints(first: 100) {
      nodes {
        id
        name
      }
    }
  }
`);

const ExecutionsLiveDocument = graphql(`
  subscription ExecutionsLive($endpointId: ID, $after: String) {
    executionUpdates(endpointId: $endpointId, after: $after) {
      cursor
      executionId
      status
      attemptCount
    }
  }
`);

const RetryAllDocument = graphql(`
  mutation RetryAll($filter: ExecutionFilter) {
    retryExecutions(filter: $filter, limit: 1000) {
      matched
      changed
      more
      skipped {
        id
        code
        message
      }
    }
  }
`);

const TABS: { status: ExecutionStatus | ''; label: string }[] = [
  { status: '', label: 'All' },
  { status: 'PENDING', label: 'Pending' },
  { status: 'RUNNING', label: 'Running' },
  { status: 'SUCCEEDED', label: 'Succeeded' },
  { status: 'FAILED', label: 'Failed (dead-letter)' },
  { status: 'CANCELLED', label: 'Cancelled' },
];

export function ExecutionsScreen({ search }: { search: URLSearchParams }) {
  const can = useCan();
  const status = (search.get('status') ?? '') as ExecutionStatus | '';
  const endpointId = search.get('endpoint') ?? '';
  const [page, setPage] = useState(firstPage);
  useEffect(() => setPage(firstPage), [status, endpointId]);
  const filter = { ...(status ? { statuses: [status] } : {}), ...(endpointId ? { endpointId } : {}) };
  const q = useQuery(ExecutionsDocument, { filter, after: page.after });
  // Rows change in place at once from the event; the page reloads (coalesced) for new rows and counts.
  const [patches, setPatches] = useState<Patches<ExecutionStatus>>({});
  const { requestedAt } = q;
  useEffect(() => setPatches((p) => unseenBy(p, requestedAt)), [q.data, requestedAt]);
  useSubscription(ExecutionsLiveDocument, endpointId ? { endpointId } : {}, {
    next: (d) => {
      const at = performance.now();
      setPatches((p) => withPatch(p, d.executionUpdates.executionId, d.executionUpdates.status, at));
      q.reloadSoon();
    },
    cursor: (d) => d.executionUpdates.cursor,
    reset: q.reload,
  });
  const retry = useMutation(RetryExecutionDocument);
  const cancel = useMutation(CancelExecutionDocument);
  const retryAll = useMutation(RetryAllDocument);
  const [bulkNote, setBulkNote] = useState<string | null>(null);
  const setParam = (name: string, value: string) => {
    const p = new URLSearchParams(search);
    if (value) p.set(name, value);
    else p.delete(name);
    const qs = p.toString();
    navigate(`${href('executions')}${qs ? `?${qs}` : ''}`);
  };
  const deadLetter = status === 'FAILED';
  const error = retry.error ?? cancel.error ?? retryAll.error;
  return (
    <section aria-labelledby="executions-title">
      <h1 id="executions-title">{deadLetter ? 'Dead-letter queue' : 'Executions'}</h1>
      <nav className="tabs" aria-label="Status">
        {TABS.map((t) => (
          <Link
            key={t.label}
            to={`${href('executions')}?${new URLSearchParams({ ...(t.status ? { status: t.status } : {}), ...(endpointId ? { endpoint: endpointId } : {}) }).toString()}`}
            className={t.status === status ? 'current' : undefined}
          >
            {t.label}
          </Link>
        ))}
      </nav>
      <div className="filters">
        <label>
          Endpoint
          <select value={endpointId} onChange={(e) => setParam('endpoint', e.target.value)}>
            <option value="">Any</option>
            {q.data?.endpoints.nodes.map((e) => (
              <option key={e.id} value={e.id}>
                {e.name}
              </option>
            ))}
          </select>
        </label>
        {deadLetter && can('OPERATOR') && q.data && q.data.executions.nodes.length > 0 && (
          <button
            type="button"
            onClick={async () => {
              const r = await retryAll.run({ filter });
              if (r) {
                const b = r.retryExecutions;
                setBulkNote(
                  `Re-drove ${b.changed} of ${b.matched} failed executions${b.skipped.length ? `; skipped ${b.skipped.length} (${b.skipped[0]!.code}: ${b.skipped[0]!.message})` : ''}${b.more ? '; more remain: retry all again' : ''}.`,
                );
                q.reload();
              }
            }}
            disabled={retryAll.pending}
          >
            Retry all matching
          </button>
        )}
      </div>
      {bulkNote && (
        <p className="ok" role="status">
          {bulkNote}
        </p>
      )}
      <ErrorBox error={error} title="The action was refused" />
      <ErrorBox error={q.error} />
      {!q.data ? (
        !q.error && <Loading />
      ) : q.data.executions.nodes.length === 0 ? (
        <Empty>
          {deadLetter
            ? 'The dead-letter queue is empty: no execution has failed its last attempt.'
            : status || endpointId
              ? 'No execution matches: choose another status or endpoint.'
              : 'No executions yet: create a job and it runs here.'}
        </Empty>
      ) : (
        <>
          <p className="muted">
            {formatCount(q.data.executions.totalCount)}
            {q.data.executions.totalCountCapped ? '+' : ''} executions
          </p>
          <PagedTable
            testId="executions"
            columns={[
              { header: 'Execution', cell: (e) => <Link to={href('executions', e.id)}>{e.id.slice(0, 8)}</Link> },
              { header: 'Job', cell: (e) => <Link to={href('jobs', e.job.id)}>{e.job.name ?? e.job.id.slice(0, 8)}</Link> },
              { header: 'Endpoint', cell: (e) => e.job.endpoint.name },
              { header: 'Status', cell: (e) => <Status value={patched(patches, e.id, e.status)} /> },
              { header: 'Attempts', cell: (e) => `${e.attemptCount} / ${e.maxAttempts}` },
              { header: 'Scheduled for', cell: (e) => <Time iso={e.scheduledFor} /> },
              { header: 'Last error', cell: (e) => truncate(e.lastError, 80), className: 'bad' },
              can('OPERATOR') && {
                header: 'Actions',
                cell: (e) => {
                  const st = patched(patches, e.id, e.status);
                  return (
                    <>
                      {st === 'FAILED' && e.viewerCan.retry && (
                        <button
                          type="button"
                          onClick={async () => (await retry.run({ id: e.id })) && q.reload()}
                          aria-label={`Retry execution ${e.id.slice(0, 8)}`}
                        >
                          Retry
                        </button>
                      )}
                      {(st === 'PENDING' || st === 'RUNNING') && e.viewerCan.cancel && (
                        <button
                          type="button"
                          onClick={async () => (await cancel.run({ id: e.id })) && q.reload()}
                          aria-label={`Cancel execution ${e.id.slice(0, 8)}`}
                        >
                          Cancel
                        </button>
                      )}
                    </>
                  );
                },
              },
            ]}
            rows={q.data.executions.nodes}
            rowKey={(e) => e.id}
            rowAttributes={(e) => ({ 'data-execution': e.id })}
            page={page}
            pageInfo={q.data.executions.pageInfo}
            onPage={setPage}
          />
        </>
      )}
    </section>
  );
}
