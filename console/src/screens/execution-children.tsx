/**
 * An execution's child jobs, for the Execution screen: how they stand (childProgress) as a bar and
 * in words, and the children themselves, linked, each with its state and its scheduled execution.
 * Nothing at all when the execution has no child. Read again when an execution of the workspace
 * changes (a child created or ending), while the parent or a child has not ended.
 */
import { useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { ExecutionChildrenQuery } from '../gql/graphql.ts';
import { formatCount, shortId } from '../lib/format.ts';
import { useQuery, useSubscription } from '../lib/hooks.ts';
import { firstPage, type PageStack } from '../lib/paging.ts';
import { href } from '../lib/router.ts';
import { ErrorBox, Link, ProgressBar, Status } from '../ui/common.tsx';
import { PagedTable } from '../ui/paged-table.tsx';

const ExecutionChildrenDocument = graphql(`
  query ExecutionChildren($id: ID!, $after: String) {
    execution(id: $id) {
      id
      status
      childProgress {
        total
        pending
        running
        succeeded
        failed
        cancelled
      }
      children(first: 25, after: $after) {
        pageInfo {
          endCursor
          hasNextPage
        }
        nodes {
          id
          name
          state
          scheduledExecution {
            id
            status
          }
        }
      }
    }
  }
`);

const ExecutionChildrenLiveDocument = graphql(`
  subscription ExecutionChildrenLive($after: String) {
    executionUpdates(after: $after) {
      cursor
      executionId
    }
  }
`);

type Progress = ExecutionChildrenQuery['execution']['childProgress'];

/** "3 of 5 ended: 1 pending, 1 running, 2 succeeded, 1 failed, 0 cancelled". */
export function childSummary(p: Progress): string {
  const ended = p.succeeded + p.failed + p.cancelled;
  return `${formatCount(ended)} of ${formatCount(p.total)} ended: ${p.pending} pending, ${p.running} running, ${p.succeeded} succeeded, ${p.failed} failed, ${p.cancelled} cancelled`;
}

const ENDED = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);

/** The execution's children and their progress; null when it has none. */
export function ExecutionChildren({ id }: { id: string }) {
  const [page, setPage] = useState<PageStack>(firstPage);
  const q = useQuery(ExecutionChildrenDocument, { id, after: page.after }, { throttleMs: 1000 });
  const e = q.data?.execution;
  const settled = e && ENDED.has(e.status) && e.childProgress.pending + e.childProgress.running === 0;
  useSubscription(
    ExecutionChildrenLiveDocument,
    {},
    { next: () => q.reloadSoon(), cursor: (d) => d.executionUpdates.cursor, reset: q.reload },
    { skip: !e || Boolean(settled) },
  );
  if (!e) return <ErrorBox error={q.error} title="Could not load the child jobs" />;
  const p = e.childProgress;
  if (p.total === 0) return null;
  const summary = childSummary(p);
  return (
    <section aria-labelledby="children-title" data-testid="execution-children">
      <h2 id="children-title">Child jobs ({formatCount(p.total)})</h2>
      <ProgressBar fraction={(p.succeeded + p.failed + p.cancelled) / p.total} label={`Child jobs: ${summary}`} />
      <p role="status" data-testid="child-progress">
        {summary}
      </p>
      <PagedTable
        testId="children"
        caption="Child jobs of this execution, in creation order"
        columns={[
          { header: 'Child job', cell: (c) => <Link to={href('jobs', c.id)}>{c.name ?? `Job ${shortId(c.id)}`}</Link> },
          { header: 'Job state', cell: (c) => <Status value={c.state} /> },
          {
            header: 'Its execution',
            cell: (c) =>
              c.scheduledExecution ? (
                <Link
                  to={href('executions', c.scheduledExecution.id)}
                  ariaLabel={`Execution of ${c.name ?? shortId(c.id)}: ${c.scheduledExecution.status}`}
                >
                  <Status value={c.scheduledExecution.status} />
                </Link>
              ) : (
                '—'
              ),
          },
        ]}
        rows={e.children.nodes}
        rowKey={(c) => c.id}
        rowAttributes={(c) => ({ 'data-child': c.id })}
        page={page}
        pageInfo={e.children.pageInfo}
        onPage={setPage}
      />
    </section>
  );
}
