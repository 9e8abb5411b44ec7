import { graphql } from '../gql/index.ts';
import type { BatchRowFragment, BatchState } from '../gql/graphql.ts';
import { formatCount, shortId } from '../lib/format.ts';
import { useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { listView } from '../lib/url-state.ts';
import { Empty, ErrorBox, Link, Loading, PageSize, ProgressBar, Status, Time, ParamTabs } from '../ui/common.tsx';
import { PagedTable } from '../ui/paged-table.tsx';

export const BatchFragments = graphql(`
  fragment BatchRow on Batch {
    id
    name
    open
    completedAt
    createdAt
    updatedAt
    total
    pending
    succeeded
    failed
    cancelled
  }
`);

const BatchesDocument = graphql(`
  query Batches($after: String, $first: Int, $state: BatchState) {
    batches(first: $first, after: $after, state: $state) {
      pageInfo {
        endCursor
        hasNextPage
      }
      nodes {
        ...BatchRow
      }
    }
  }
`);

/** Any execution of the workspace changed: a member may have ended, so the counts may have moved. */
const BatchesLiveDocument = graphql(`
  subscription BatchesLive($after: String) {
    executionUpdates(after: $after) {
      cursor
      executionId
    }
  }
`);

type BatchCounts = Pick<BatchRowFragment, 'open' | 'completedAt' | 'total' | 'pending' | 'succeeded' | 'failed' | 'cancelled'>;

/** OPEN (members may still be added), CLOSED (waiting for its members) or COMPLETED (its onComplete job released). */
export function batchState(b: Pick<BatchCounts, 'open' | 'completedAt'>): 'OPEN' | 'CLOSED' | 'COMPLETED' {
  return b.completedAt ? 'COMPLETED' : b.open ? 'OPEN' : 'CLOSED';
}

/** The batch's name, or its id's last characters for one without (shortId). */
export function batchLabel(b: { id: string; name?: string | null }): string {
  return b.name ?? `Batch ${shortId(b.id)}`;
}

/** How far the members are: "3 of 5 ended (2 succeeded, 1 failed, 0 cancelled)". */
export function batchProgress(b: BatchCounts): { fraction: number | null; label: string } {
  const ended = b.succeeded + b.failed + b.cancelled;
  const label = `${formatCount(ended)} of ${formatCount(b.total)} ended (${b.succeeded} succeeded, ${b.failed} failed, ${b.cancelled} cancelled)`;
  if (b.total === 0) return { fraction: b.completedAt ? 1 : null, label };
  return { fraction: ended / b.total, label };
}

/** The state tabs (`state` in the URL): every batch, or those that stand one way. */
const STATE_TABS: { value: BatchState | ''; label: string }[] = [
  { value: '', label: 'All' },
  { value: 'OPEN', label: 'Open' },
  { value: 'CLOSED', label: 'Closed' },
  { value: 'COMPLETED', label: 'Completed' },
];

/** What an empty list says under each tab. */
const NONE_IN: Record<BatchState, string> = {
  OPEN: 'No open batch: every batch is closed.',
  CLOSED: 'No batch is closed and waiting for its members.',
  COMPLETED: 'No batch has completed yet.',
};

/** The workspace's batches, newest first; the state, the page and its size are in the URL. */
export function BatchesScreen({ search }: { search: URLSearchParams }) {
  const path = href('batches');
  const view = listView(path, search);
  const raw = search.get('state') ?? '';
  const state = STATE_TABS.some((t) => t.value === raw) ? (raw as BatchState | '') : '';
  const q = useQuery(BatchesDocument, { after: view.page.after, first: view.size, state: state || null }, { throttleMs: 2000 });
  useSubscription(BatchesLiveDocument, {}, { next: () => q.reloadSoon(), cursor: (d) => d.executionUpdates.cursor, reset: q.reload });
  return (
    <section aria-labelledby="batches-title">
      <h1 id="batches-title">Batches</h1>
      <ParamTabs label="State" path={path} search={search} param="state" tabs={STATE_TABS} current={state} />
      <div className="filters">
        <PageSize value={view.size} onChange={view.toSize} />
      </div>
      <ErrorBox error={q.error} />
      {!q.data ? (
        !q.error && <Loading />
      ) : q.data.batches.nodes.length === 0 && state ? (
        <Empty>{NONE_IN[state]}</Empty>
      ) : q.data.batches.nodes.length === 0 ? (
        <Empty>
          No batches yet. A batch is created through the API (createBatch): jobs run together, and one job runs once they have all ended.
        </Empty>
      ) : (
        <PagedTable
          testId="batches"
          caption={state ? `${STATE_TABS.find((t) => t.value === state)!.label} batches, newest first` : 'Batches, newest first'}
          columns={[
            { header: 'Batch', cell: (b) => <Link to={href('batches', b.id)}>{batchLabel(b)}</Link> },
            { header: 'State', cell: (b) => <Status value={batchState(b)} /> },
            {
              header: 'Progress',
              cell: (b) => {
                const p = batchProgress(b);
                return (
                  <>
                    <ProgressBar fraction={p.fraction} label={`${batchLabel(b)}: ${p.label}`} />
                    <span className="muted">
                      {formatCount(b.total - b.pending)} of {formatCount(b.total)} ended
                    </span>
                  </>
                );
              },
            },
            { header: 'Members', cell: (b) => formatCount(b.total) },
            { header: 'Not ended', cell: (b) => formatCount(b.pending) },
            { header: 'Succeeded', cell: (b) => formatCount(b.succeeded) },
            { header: 'Failed', cell: (b) => formatCount(b.failed) },
            { header: 'Cancelled', cell: (b) => formatCount(b.cancelled) },
            { header: 'Created', cell: (b) => <Time iso={b.createdAt} /> },
          ]}
          rows={q.data.batches.nodes}
          rowKey={(b) => b.id}
          rowAttributes={(b) => ({ 'data-batch': b.id })}
          page={view.page}
          pageInfo={q.data.batches.pageInfo}
          onPage={view.toPage}
        />
      )}
    </section>
  );
}
