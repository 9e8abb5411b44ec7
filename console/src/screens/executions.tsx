import { useEffect, useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { ExecutionFilter, ExecutionStatus } from '../gql/graphql.ts';
import { executionSearchParams, executionSearchText } from '../lib/execution-search.ts';
import { formatCount, shortId, truncate } from '../lib/format.ts';
import { useCan, useMutation, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import {
  goWith,
  instantFromLocal,
  localFromInstant,
  DEFAULT_PAGE_SIZE,
  pageFromSearch,
  pageParams,
  pageSizeFrom,
} from '../lib/url-state.ts';
import { Empty, ErrorBox, Link, Loading, PageSize, Status, Time, ParamTabs } from '../ui/common.tsx';
import { useConfirm } from '../ui/confirm.tsx';
import { PagedTable } from '../ui/paged-table.tsx';
import { BulkBar, selectedCount, useSelection } from '../ui/selection.tsx';
import { patched, unseenBy, withPatch, type Patches } from '../lib/patches.ts';
import { CancelExecutionDocument, RetryExecutionDocument } from './shared.tsx';

const ExecutionsDocument = graphql(`
  query Executions($filter: ExecutionFilter, $after: String, $first: Int) {
    executions(filter: $filter, first: $first, after: $after) {
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

const CancelManyDocument = graphql(`
  mutation CancelMany($filter: ExecutionFilter) {
    cancelExecutions(filter: $filter, limit: 1000) {
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

interface BulkOutcome {
  matched: number;
  changed: number;
  more: boolean;
  skipped: readonly { code: string; message: string }[];
}

/** What a bulk action did, in a sentence: "Re-drove 3 of 4 executions; skipped 1 (CONFLICT: …)." */
function bulkSentence(verb: string, noun: string, b: BulkOutcome): string {
  const first = b.skipped[0];
  return `${verb} ${b.changed} of ${b.matched} ${noun}${first ? `; skipped ${b.skipped.length} (${first.code}: ${first.message})` : ''}${b.more ? `; more remain: ${verb.toLowerCase()} again` : ''}.`;
}

const TABS: { value: ExecutionStatus | ''; label: string }[] = [
  { value: '', label: 'All' },
  { value: 'PENDING', label: 'Pending' },
  { value: 'RUNNING', label: 'Running' },
  { value: 'SUCCEEDED', label: 'Succeeded' },
  { value: 'FAILED', label: 'Failed (dead-letter)' },
  { value: 'CANCELLED', label: 'Cancelled' },
];

export function ExecutionsScreen({ search }: { search: URLSearchParams }) {
  const can = useCan();
  const status = (search.get('status') ?? '') as ExecutionStatus | '';
  const endpointId = search.get('endpoint') ?? '';
  const from = search.get('from');
  const to = search.get('to');
  const includeInternal = search.get('internal') === '1';
  const jobSearch = search.get('q') ?? '';
  const errorText = search.get('error') ?? '';
  const applied = executionSearchText(search);
  const [text, setText] = useState(applied);
  useEffect(() => setText(applied), [applied]);
  const order = search.get('order') === 'OLDEST_FIRST' ? 'OLDEST_FIRST' : null;
  const size = pageSizeFrom(search);
  const page = pageFromSearch(search);
  const path = href('executions');
  const go = (patch: Record<string, string | null>, keepPage = false) => goWith(path, search, patch, keepPage);
  const filter: ExecutionFilter = {
    ...(status ? { statuses: [status] } : {}),
    ...(endpointId ? { endpointId } : {}),
    ...(from ? { createdAfter: from } : {}),
    ...(to ? { createdBefore: to } : {}),
    ...(jobSearch ? { search: jobSearch } : {}),
    ...(errorText ? { errorContains: errorText } : {}),
    // jobgate's own work (alert deliveries, the reaper, retention) only when asked for.
    ...(includeInternal ? {} : { endpointType: 'USER' as const }),
    ...(order ? { order } : {}),
  };
  const q = useQuery(ExecutionsDocument, { filter, after: page.after, first: size });
  const scope = JSON.stringify(filter);
  const selection = useSelection(scope);
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
  const cancelMany = useMutation(CancelManyDocument);
  const [confirmation, confirm] = useConfirm();
  const [bulkNote, setBulkNote] = useState<string | null>(null);
  useEffect(() => setBulkNote(null), [scope]);
  const deadLetter = status === 'FAILED';
  const error = retry.error ?? cancel.error ?? retryAll.error ?? cancelMany.error;
  const matching = q.data?.executions.totalCount;
  const capped = q.data?.executions.totalCountCapped;
  const chosen = selectedCount(selection, matching);
  // The chosen rows, or every match: the filter the bulk mutation takes.
  const target: ExecutionFilter = selection.allMatching ? filter : { ids: [...selection.ids] };
  const bulk = async (kind: 'retry' | 'cancel') => {
    const n = `${formatCount(chosen)}${selection.allMatching && capped ? '+' : ''}`;
    const ok = await confirm(
      kind === 'retry'
        ? {
            message: `Retry ${n} selected executions? Each FAILED one runs again with a fresh attempt budget; others are left as they are.`,
            action: `Retry ${n} executions`,
          }
        : {
            message: `Cancel ${n} selected executions? Each PENDING or RUNNING one ends CANCELLED; others are left as they are.`,
            action: `Cancel ${n} executions`,
          },
    );
    if (!ok) return;
    if (kind === 'retry') {
      const r = await retryAll.run({ filter: { ...target, statuses: ['FAILED'] } });
      if (r) setBulkNote(bulkSentence('Re-drove', 'failed executions', r.retryExecutions));
    } else {
      const r = await cancelMany.run({ filter: { ...target, statuses: ['PENDING', 'RUNNING'] } });
      if (r) setBulkNote(bulkSentence('Cancelled', 'live executions', r.cancelExecutions));
    }
    selection.clear();
    q.reload();
  };
  const rows = q.data?.executions.nodes ?? [];
  return (
    <section aria-labelledby="executions-title">
      <h1 id="executions-title">{deadLetter ? 'Dead-letter queue' : 'Executions'}</h1>
      <ParamTabs label="Status" path={path} search={search} param="status" tabs={TABS} current={status} />
      <form
        className="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          go(executionSearchParams(text, q.data?.endpoints.nodes ?? []));
        }}
      >
        <label className="wide">
          Job name or key, error text
          <input
            type="search"
            value={text}
            onChange={(e) => setText(e.target.value)}
            placeholder='nightly, or status:failed endpoint:billing error:"timeout"'
          />
        </label>
        {/* Until the endpoints are known, endpoint:<name> could not be read. */}
        <button type="submit" disabled={!q.data}>
          Search
        </button>
        <label>
          Endpoint
          <select value={endpointId} onChange={(e) => go({ endpoint: e.target.value })}>
            <option value="">Any</option>
            {q.data?.endpoints.nodes.map((e) => (
              <option key={e.id} value={e.id}>
                {e.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Created from
          <input type="datetime-local" value={localFromInstant(from)} onChange={(e) => go({ from: instantFromLocal(e.target.value) })} />
        </label>
        <label>
          Created before
          <input type="datetime-local" value={localFromInstant(to)} onChange={(e) => go({ to: instantFromLocal(e.target.value) })} />
        </label>
        <label>
          Sort
          <select
            value={order ?? 'NEWEST_FIRST'}
            onChange={(e) => go({ order: e.target.value === 'NEWEST_FIRST' ? null : e.target.value })}
          >
            <option value="NEWEST_FIRST">Newest first</option>
            <option value="OLDEST_FIRST">Oldest first</option>
          </select>
        </label>
        <PageSize value={size} onChange={(n) => go({ size: n === DEFAULT_PAGE_SIZE ? null : String(n) })} />
        <label className="inline">
          <input type="checkbox" checked={includeInternal} onChange={(e) => go({ internal: e.target.checked ? '1' : null })} />
          jobgate's own executions
        </label>
        {deadLetter && can('OPERATOR') && rows.length > 0 && (
          <button
            type="button"
            onClick={async () => {
              const n = `${formatCount(matching)}${capped ? '+' : ''}`;
              if (!(await confirm({ message: `Retry all ${n} failed executions that match?`, action: `Retry ${n} executions` }))) return;
              const r = await retryAll.run({ filter });
              if (r) {
                setBulkNote(bulkSentence('Re-drove', 'failed executions', r.retryExecutions));
                q.reload();
              }
            }}
            disabled={retryAll.pending}
          >
            Retry all matching
          </button>
        )}
      </form>
      {can('OPERATOR') && (
        <BulkBar selection={selection} noun="executions" matching={matching} capped={capped} note={bulkNote}>
          <button type="button" onClick={() => void bulk('retry')} disabled={retryAll.pending}>
            Retry selected
          </button>
          <button type="button" className="danger" onClick={() => void bulk('cancel')} disabled={cancelMany.pending}>
            Cancel selected
          </button>
        </BulkBar>
      )}
      <ErrorBox error={error} title="The action was refused" />
      <ErrorBox error={q.error} />
      {!q.data ? (
        !q.error && <Loading />
      ) : q.data.executions.nodes.length === 0 ? (
        <Empty>
          {deadLetter && !(applied || endpointId || from || to)
            ? 'The dead-letter queue is empty: no execution has failed its last attempt.'
            : applied || status || endpointId || from || to || includeInternal
              ? 'No execution matches: change the search, or choose another status, endpoint or time range.'
              : 'No executions yet: create a job and it runs here.'}
        </Empty>
      ) : (
        <>
          <p className="muted">
            {formatCount(q.data.executions.totalCount)}
            {q.data.executions.totalCountCapped ? '+' : ''}{' '}
            {q.data.executions.totalCount === 1 && !q.data.executions.totalCountCapped ? 'execution' : 'executions'}
          </p>
          <PagedTable
            testId="executions"
            columns={[
              { header: 'Execution', cell: (e) => <Link to={href('executions', e.id)}>{shortId(e.id)}</Link> },
              { header: 'Job', cell: (e) => <Link to={href('jobs', e.job.id)}>{e.job.name ?? shortId(e.job.id)}</Link> },
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
                          aria-label={`Retry execution ${shortId(e.id)}`}
                        >
                          Retry
                        </button>
                      )}
                      {(st === 'PENDING' || st === 'RUNNING') && e.viewerCan.cancel && (
                        <button
                          type="button"
                          onClick={async () =>
                            (await confirm({
                              message: `Cancel execution ${shortId(e.id)}? It ends CANCELLED.`,
                              action: 'Cancel execution',
                            })) &&
                            (await cancel.run({ id: e.id })) &&
                            q.reload()
                          }
                          aria-label={`Cancel execution ${shortId(e.id)}`}
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
            select={
              can('OPERATOR')
                ? {
                    isSelected: (e) => selection.has(e.id),
                    toggle: (e) => selection.toggle(e.id),
                    togglePage: () => selection.togglePage(rows.map((e) => e.id)),
                    label: (e) => `Select execution ${shortId(e.id)}`,
                  }
                : undefined
            }
            page={page}
            pageInfo={q.data.executions.pageInfo}
            onPage={(p) => go(pageParams(p), true)}
          />
        </>
      )}
      {confirmation}
    </section>
  );
}
