import { useEffect, useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { BatchQuery, BatchRowFragment, PrerequisiteOutcome } from '../gql/graphql.ts';
import { formatCount, shortId } from '../lib/format.ts';
import { useCan, useMutation, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { listView } from '../lib/url-state.ts';
import { Empty, ErrorBox, Link, Loading, PageSize, ProgressBar, Status, Time, ParamTabs } from '../ui/common.tsx';
import { useConfirm } from '../ui/confirm.tsx';
import { PagedTable } from '../ui/paged-table.tsx';
import { BulkBar, useSelection } from '../ui/selection.tsx';
import { batchLabel, batchProgress, batchState } from './batches.tsx';

const BatchDocument = graphql(`
  query Batch($id: ID!, $outcome: PrerequisiteOutcome, $ended: Boolean, $after: String, $first: Int) {
    batch(id: $id) {
      ...BatchRow
      key
      viewerCan {
        close
        cancel
      }
      onComplete {
        id
        name
        state
      }
      jobs(first: $first, after: $after, outcome: $outcome, ended: $ended) {
        pageInfo {
          endCursor
          hasNextPage
        }
        nodes {
          id
          name
          state
          batchOutcome
          scheduledExecution {
            id
            status
          }
        }
      }
    }
  }
`);

const BatchProgressDocument = graphql(`
  subscription BatchProgress($batchId: ID!) {
    batchProgress(batchId: $batchId) {
      ...BatchRow
    }
  }
`);

const CloseBatchDocument = graphql(`
  mutation CloseBatch($id: ID!) {
    closeBatch(id: $id) {
      ...BatchRow
    }
  }
`);

const CancelBatchDocument = graphql(`
  mutation CancelBatch($id: ID!) {
    cancelBatch(id: $id) {
      cancelledJobs
      batch {
        ...BatchRow
      }
    }
  }
`);

const RetryMembersDocument = graphql(`
  mutation RetryMembers($ids: [ID!]!) {
    retryExecutions(filter: { ids: $ids, statuses: [FAILED] }, limit: 1000) {
      matched
      changed
      skipped {
        id
        code
        message
      }
    }
  }
`);

type Member = BatchQuery['batch']['jobs']['nodes'][number];

/** The member lists: every member, those not ended, or those that ended one way (`members` in the URL). */
const MEMBER_TABS: { value: string; label: string }[] = [
  { value: '', label: 'All' },
  { value: 'unfinished', label: 'Not ended' },
  { value: 'SUCCEEDED', label: 'Succeeded' },
  { value: 'FAILED', label: 'Failed' },
  { value: 'CANCELLED', label: 'Cancelled' },
];
const OUTCOMES: PrerequisiteOutcome[] = ['SUCCEEDED', 'FAILED', 'CANCELLED'];

/** "1 member", "3 members". */
const members = (n: number) => `${formatCount(n)} member${n === 1 ? '' : 's'}`;

/**
 * A member's selection key: its scheduled execution, the one its batch counted and a retry
 * re-drives (a "Run now" of the member would be newer, and is not the member's run in the batch).
 */
const executionOf = (m: Member) => m.scheduledExecution?.id ?? m.id;

/**
 * A batch: its counts live (batchProgress), its onComplete job, its members (filtered and paged in
 * the URL) and the operator's actions: close, cancel, and retry of failed members.
 */
export function BatchScreen({ id, search }: { id: string; search: URLSearchParams }) {
  const can = useCan();
  const tab = search.get('members') ?? '';
  const outcome = (OUTCOMES as string[]).includes(tab) ? (tab as PrerequisiteOutcome) : null;
  const path = href('batches', id);
  const view = listView(path, search);
  const q = useQuery(BatchDocument, {
    id,
    outcome,
    ended: tab === 'unfinished' ? false : null,
    after: view.page.after,
    first: view.size,
  });
  // The counts as they change; the members' rows are read again (coalesced).
  const [live, setLive] = useState<BatchRowFragment | null>(null);
  useSubscription(
    BatchProgressDocument,
    { batchId: id },
    {
      next: (d) => {
        setLive(d.batchProgress);
        q.reloadSoon();
      },
      error: () => q.reloadSoon(),
    },
  );
  if (!q.data) return q.error ? <ErrorBox error={q.error} title="Could not load the batch" /> : <Loading />;
  // The newer of the two: the stream's latest state, or the snapshot read after it.
  const newer = live && live.id === id && Date.parse(live.updatedAt) >= Date.parse(q.data.batch.updatedAt);
  const batch = { ...q.data.batch, ...(newer ? live : {}) };
  const progress = batchProgress(batch);
  return (
    <section aria-labelledby="batch-title">
      <p>
        <Link to={href('batches')}>← Batches</Link>
      </p>
      <h1 id="batch-title">
        {batchLabel(batch)} <Status value={batchState(batch)} />
      </h1>
      <ErrorBox error={q.error} title="Could not refresh" />
      <div data-testid="batch-progress">
        <ProgressBar fraction={progress.fraction} label={`${batchLabel(batch)}: ${progress.label}`} />
        <p role="status">{progress.label}</p>
      </div>
      <dl className="facts" data-testid="batch-facts">
        <dt>Members</dt>
        <dd data-testid="batch-counts">
          {formatCount(batch.total)} in all: {formatCount(batch.pending)} not ended, {formatCount(batch.succeeded)} succeeded,{' '}
          {formatCount(batch.failed)} failed, {formatCount(batch.cancelled)} cancelled
        </dd>
        <dt>State</dt>
        <dd>
          {batch.completedAt ? (
            <>
              Completed <Time iso={batch.completedAt} />
            </>
          ) : batch.open ? (
            'Open: members may still be added; it completes once closed and every member has ended'
          ) : (
            'Closed: it completes once every member has ended'
          )}
        </dd>
        <dt>When done</dt>
        <dd>
          {batch.onComplete ? (
            <>
              <Link to={href('jobs', batch.onComplete.id)}>{batch.onComplete.name ?? `Job ${shortId(batch.onComplete.id)}`}</Link>{' '}
              <Status value={batch.onComplete.state} />
            </>
          ) : (
            'No onComplete job'
          )}
        </dd>
        {batch.key && (
          <>
            <dt>Key</dt>
            <dd>
              <code>{batch.key}</code>
            </dd>
          </>
        )}
        <dt>Created</dt>
        <dd>
          <Time iso={batch.createdAt} />
        </dd>
      </dl>
      {can('OPERATOR') && (q.data.batch.viewerCan.close || q.data.batch.viewerCan.cancel) && (
        <BatchActions batch={batch} may={q.data.batch.viewerCan} onDone={q.reload} />
      )}
      <h2>Members</h2>
      <ParamTabs label="Members" path={path} search={search} param="members" tabs={MEMBER_TABS} current={tab} />
      <div className="filters">
        <PageSize value={view.size} onChange={view.toSize} />
      </div>
      <MemberTable batch={q.data.batch} scope={`${tab}\u0000${view.page.after ?? ''}`} view={view} onDone={q.reload} />
    </section>
  );
}

/**
 * Close (no member may be added) and cancel (the members not ended, and the onComplete job), each
 * confirmed; each only when the key may (an OPERATOR key: only a batch it created).
 */
function BatchActions({ batch, may, onDone }: { batch: BatchRowFragment; may: { close: boolean; cancel: boolean }; onDone(): void }) {
  const close = useMutation(CloseBatchDocument);
  const cancel = useMutation(CancelBatchDocument);
  const [confirmation, confirm] = useConfirm();
  const [note, setNote] = useState<string | null>(null);
  if (batch.completedAt && !note) return null;
  const ended = batch.succeeded + batch.failed + batch.cancelled;
  return (
    <div className="actions" data-testid="batch-actions">
      {may.close && batch.open && !batch.completedAt && (
        <button
          type="button"
          disabled={close.pending}
          onClick={async () => {
            if (await close.run({ id: batch.id })) {
              setNote('Closed: no member can be added any more.');
              onDone();
            }
          }}
        >
          Close batch
        </button>
      )}
      {may.cancel && !batch.completedAt && (
        <button
          type="button"
          className="danger"
          disabled={cancel.pending}
          onClick={async () => {
            const ok = await confirm({
              message: `Cancel ${batchLabel(batch)}? Its ${members(batch.pending)} not ended ${batch.pending === 1 ? 'is' : 'are'} cancelled (pending ones at once, running ones asked to stop) and its onComplete job does not run. The ${members(ended)} that ended ${ended === 1 ? 'stays' : 'stay'} as ${ended === 1 ? 'it' : 'they'} ended.`,
              action: `Cancel batch and ${members(batch.pending)}`,
            });
            if (!ok) return;
            const r = await cancel.run({ id: batch.id });
            if (r) {
              setNote(`Cancelled ${members(r.cancelBatch.cancelledJobs)}; the batch is closed.`);
              onDone();
            }
          }}
        >
          Cancel batch
        </button>
      )}
      <p role="status" className="muted">
        {note ?? ''}
      </p>
      <ErrorBox error={close.error ?? cancel.error} title="The action was refused" />
      {confirmation}
    </div>
  );
}

/** The members, with their scheduled execution and how each was counted; an OPERATOR chooses failed ones to retry. */
function MemberTable({
  batch,
  scope,
  view,
  onDone,
}: {
  batch: BatchQuery['batch'];
  scope: string;
  view: ReturnType<typeof listView>;
  onDone(): void;
}) {
  const can = useCan();
  const selection = useSelection(scope);
  const retry = useMutation(RetryMembersDocument);
  const [confirmation, confirm] = useConfirm();
  const [note, setNote] = useState<string | null>(null);
  useEffect(() => setNote(null), [scope]);
  const rows = batch.jobs.nodes;
  const operator = can('OPERATOR');
  return (
    <>
      {operator && (
        <BulkBar selection={selection} noun="members" matching={undefined} capped={false} note={note}>
          <button
            type="button"
            disabled={retry.pending}
            onClick={async () => {
              const n = members(selection.ids.size);
              const ok = await confirm({
                message: `Retry the ${n} selected? Those whose execution FAILED run again with a fresh attempt budget; the others are left as they are. The batch keeps the outcome it counted.`,
                action: `Retry ${n}`,
              });
              if (!ok) return;
              const r = await retry.run({ ids: [...selection.ids] });
              if (r) {
                const b = r.retryExecutions;
                setNote(
                  `Re-drove ${b.changed} of ${b.matched} failed members${b.skipped[0] ? `; skipped ${b.skipped.length} (${b.skipped[0].code}: ${b.skipped[0].message})` : ''}.`,
                );
              }
              selection.clear();
              onDone();
            }}
          >
            Retry failed selected
          </button>
        </BulkBar>
      )}
      <ErrorBox error={retry.error} title="The retry was refused" />
      {rows.length === 0 ? (
        <Empty>No member here{batch.open ? ': add members with createJob and batchId while the batch is open.' : '.'}</Empty>
      ) : (
        <PagedTable
          testId="batch-members"
          caption="Members of the batch"
          columns={[
            { header: 'Member', cell: (m) => <Link to={href('jobs', m.id)}>{m.name ?? `Job ${shortId(m.id)}`}</Link> },
            {
              header: 'Scheduled execution',
              cell: (m) =>
                m.scheduledExecution ? (
                  <Link
                    to={href('executions', m.scheduledExecution.id)}
                    ariaLabel={`Scheduled execution of ${m.name ?? shortId(m.id)}: ${m.scheduledExecution.status}`}
                  >
                    <Status value={m.scheduledExecution.status} />
                  </Link>
                ) : (
                  '—'
                ),
            },
            { header: 'Job state', cell: (m) => <Status value={m.state} /> },
            {
              header: 'Counted as',
              cell: (m) => (m.batchOutcome ? <Status value={m.batchOutcome} /> : <span className="muted">not yet</span>),
            },
          ]}
          rows={rows}
          rowKey={(m) => m.id}
          rowAttributes={(m) => ({ 'data-member': m.id })}
          select={
            operator
              ? {
                  isSelected: (m) => selection.has(executionOf(m)),
                  toggle: (m) => selection.toggle(executionOf(m)),
                  togglePage: () => selection.togglePage(rows.map(executionOf)),
                  label: (m) => `Select member ${m.name ?? shortId(m.id)}`,
                }
              : undefined
          }
          page={view.page}
          pageInfo={batch.jobs.pageInfo}
          onPage={view.toPage}
        />
      )}
      {confirmation}
    </>
  );
}
