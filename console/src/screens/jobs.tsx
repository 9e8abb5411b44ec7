import { useEffect, useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { JobFilter, JobIdsQuery, JobKind, JobStatus, ListOrder } from '../gql/graphql.ts';
import { formatCount, formatRelative, shortId } from '../lib/format.ts';
import { useCan, useMutation, useQuery, useSession, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { parseSearch } from '../lib/search-syntax.ts';
import { DEFAULT_PAGE_SIZE, goWith, pageFromSearch, pageParams, pageSizeFrom } from '../lib/url-state.ts';
import { Empty, ErrorBox, Link, Loading, PageSize, Status, Time } from '../ui/common.tsx';
import { useConfirm } from '../ui/confirm.tsx';
import { PagedTable } from '../ui/paged-table.tsx';
import { BulkBar, selectedCount, useSelection } from '../ui/selection.tsx';

const JobsDocument = graphql(`
  query Jobs($filter: JobFilter, $after: String, $first: Int) {
    jobs(filter: $filter, first: $first, after: $after) {
      totalCount
      totalCountCapped
      pageInfo {
        endCursor
        hasNextPage
      }
      nodes {
        id
        name
        kind
        state
        idempotencyKey
        createdAt
        endpoint {
          id
          name
        }
        cron {
          expression
          timezone
          nextFireAt
        }
        runAt
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

const JobsEventsDocument = graphql(`
  subscription JobsEvents($after: String) {
    jobEvents(after: $after) {
      cursor
      jobId
      status
    }
  }
`);

/** The ids of every job a filter matches, a page at a time, for "select all matching". */
const JobIdsDocument = graphql(`
  query JobIds($filter: JobFilter, $after: String) {
    jobs(filter: $filter, first: 100, after: $after) {
      pageInfo {
        endCursor
        hasNextPage
      }
      nodes {
        id
      }
    }
  }
`);

const PauseJobsDocument = graphql(`
  mutation PauseJobs($ids: [ID!]!) {
    pauseJobs(ids: $ids) {
      matched
      changed
      skipped {
        code
        message
      }
    }
  }
`);

const ResumeJobsDocument = graphql(`
  mutation ResumeJobs($ids: [ID!]!) {
    resumeJobs(ids: $ids) {
      matched
      changed
      skipped {
        code
        message
      }
    }
  }
`);

const CancelJobsDocument = graphql(`
  mutation CancelJobs($ids: [ID!]!) {
    cancelJobs(ids: $ids) {
      matched
      changed
      skipped {
        code
        message
      }
    }
  }
`);

/** The most jobs one bulk action takes (the API's bound). */
const BULK_LIMIT = 1000;

const KINDS: JobKind[] = ['IMMEDIATE', 'DELAYED', 'CRON'];
const STATUSES: JobStatus[] = ['ACTIVE', 'PAUSED', 'RETIRED'];

type JobAction = 'pause' | 'resume' | 'cancel';
const ACTIONS: Record<JobAction, { verb: string; done: string; what: string; danger?: boolean }> = {
  pause: { verb: 'Pause', done: 'Paused', what: 'They run nothing until resumed.' },
  resume: { verb: 'Resume', done: 'Resumed', what: 'A cron schedule continues from now, with no backlog.' },
  cancel: {
    verb: 'Cancel',
    done: 'Cancelled',
    what: 'Each is retired for good: its pending executions are cancelled and its schedule stops.',
    danger: true,
  },
};

export function JobsScreen({ search }: { search: URLSearchParams }) {
  const can = useCan();
  const { api } = useSession();
  const kind = (search.get('kind') ?? '') as JobKind | '';
  const status = (search.get('status') ?? '') as JobStatus | '';
  const endpointId = search.get('endpoint') ?? '';
  const applied = search.get('q') ?? '';
  const order = (search.get('order') ?? '') as ListOrder | '';
  const includeInternal = search.get('internal') === '1';
  const size = pageSizeFrom(search);
  const page = pageFromSearch(search);
  const path = href('jobs');
  const go = (patch: Record<string, string | null>, keepPage = false) => goWith(path, search, patch, keepPage);
  const [text, setText] = useState(applied);
  useEffect(() => setText(applied), [applied]);
  const filter: JobFilter = {
    ...(kind ? { kind } : {}),
    ...(status ? { status } : {}),
    ...(endpointId ? { endpointId } : {}),
    ...(applied ? { search: applied } : {}),
    ...(order ? { order } : {}),
    ...(includeInternal ? { includeInternal } : {}),
  };
  const q = useQuery(JobsDocument, { filter, after: page.after, first: size });
  useSubscription(JobsEventsDocument, {}, { next: () => q.reloadSoon(), cursor: (d) => d.jobEvents.cursor, reset: q.reload });
  const scope = JSON.stringify(filter);
  const selection = useSelection(scope);
  const [confirmation, confirm] = useConfirm();
  const [note, setNote] = useState<string | null>(null);
  useEffect(() => setNote(null), [scope]);
  const pause = useMutation(PauseJobsDocument);
  const resume = useMutation(ResumeJobsDocument);
  const cancel = useMutation(CancelJobsDocument);
  const [collecting, setCollecting] = useState(false);
  const matching = q.data?.jobs.totalCount;
  const capped = q.data?.jobs.totalCountCapped;
  const chosen = selectedCount(selection, matching);
  /** The ids to act on: those chosen, or every match (up to the API's bound), read a page at a time. */
  const targetIds = async (): Promise<string[]> => {
    if (!selection.allMatching) return [...selection.ids];
    const ids: string[] = [];
    let after: string | null = null;
    do {
      const r: JobIdsQuery = await api.request(JobIdsDocument, { filter, after });
      ids.push(...r.jobs.nodes.map((n) => n.id));
      after = r.jobs.pageInfo.hasNextPage ? (r.jobs.pageInfo.endCursor ?? null) : null;
    } while (after && ids.length < BULK_LIMIT);
    return ids.slice(0, BULK_LIMIT);
  };
  const act = async (action: JobAction) => {
    const a = ACTIONS[action];
    const n = `${formatCount(Math.min(chosen, BULK_LIMIT))}`;
    if (!(await confirm({ message: `${a.verb} ${n} selected jobs? ${a.what}`, action: `${a.verb} ${n} jobs` }))) return;
    setCollecting(true);
    let ids: string[];
    try {
      ids = await targetIds();
    } finally {
      setCollecting(false);
    }
    const run = action === 'pause' ? pause : action === 'resume' ? resume : cancel;
    const r = await run.run({ ids });
    if (!r) return;
    const b = 'pauseJobs' in r ? r.pauseJobs : 'resumeJobs' in r ? r.resumeJobs : r.cancelJobs;
    const first = b.skipped[0];
    setNote(
      `${a.done} ${b.changed} of ${b.matched} jobs${first ? `; skipped ${b.skipped.length} (${first.code}: ${first.message})` : ''}${selection.allMatching && (matching ?? 0) > BULK_LIMIT ? `; only the first ${BULK_LIMIT} were taken: select again for the rest` : ''}.`,
    );
    selection.clear();
    q.reload();
  };
  const busy = collecting || pause.pending || resume.pending || cancel.pending;
  const rows = q.data?.jobs.nodes ?? [];
  return (
    <section aria-labelledby="jobs-title">
      <div className="title-row">
        <h1 id="jobs-title">Jobs</h1>
        {can('OPERATOR') && (
          <Link to={href('jobs', 'new')} className="button">
            New job
          </Link>
        )}
      </div>
      <form
        className="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          // status:paused kind:cron endpoint:billing.send and free text (name or idempotency key).
          const { terms, text: free } = parseSearch(text, ['status', 'kind', 'endpoint']);
          const left = [free];
          const patch: Record<string, string | null> = {};
          const st = terms.status?.toUpperCase();
          if (st && (STATUSES as string[]).includes(st)) patch.status = st;
          else if (st) left.push(`status:${terms.status}`);
          const kd = terms.kind?.toUpperCase();
          if (kd && (KINDS as string[]).includes(kd)) patch.kind = kd;
          else if (kd) left.push(`kind:${terms.kind}`);
          if (terms.endpoint) {
            const named = q.data?.endpoints.nodes.find((n) => n.name === terms.endpoint);
            if (named) patch.endpoint = named.id;
            else left.push(`endpoint:${terms.endpoint}`);
          }
          const rest = left.filter(Boolean).join(' ');
          setText(rest);
          go({ ...patch, q: rest });
        }}
      >
        <label>
          Kind
          <select value={kind} onChange={(e) => go({ kind: e.target.value })}>
            <option value="">Any</option>
            {KINDS.map((k) => (
              <option key={k}>{k}</option>
            ))}
          </select>
        </label>
        <label>
          Status
          <select value={status} onChange={(e) => go({ status: e.target.value })}>
            <option value="">Any</option>
            {STATUSES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
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
          Sort
          <select
            value={order || 'NEWEST_FIRST'}
            onChange={(e) => go({ order: e.target.value === 'NEWEST_FIRST' ? null : e.target.value })}
          >
            <option value="NEWEST_FIRST">Newest first</option>
            <option value="OLDEST_FIRST">Oldest first</option>
          </select>
        </label>
        <PageSize value={size} onChange={(n) => go({ size: n === DEFAULT_PAGE_SIZE ? null : String(n) })} />
        <label className="inline">
          <input type="checkbox" checked={includeInternal} onChange={(e) => go({ internal: e.target.checked ? '1' : null })} />
          jobgate's own jobs
        </label>
        <label>
          Name or idempotency key
          <input
            type="search"
            value={text}
            onChange={(e) => setText(e.target.value)}
            placeholder="starts with…, or status:paused kind:cron endpoint:name"
          />
        </label>
        {/* Until the endpoints are known, endpoint:<name> could not be read. */}
        <button type="submit" disabled={!q.data}>
          Search
        </button>
      </form>
      {can('OPERATOR') && (
        <BulkBar selection={selection} noun="jobs" matching={matching} capped={capped} note={note}>
          {(['pause', 'resume', 'cancel'] as const).map((action) => (
            <button
              key={action}
              type="button"
              className={ACTIONS[action].danger ? 'danger' : undefined}
              onClick={() => void act(action)}
              disabled={busy}
            >
              {ACTIONS[action].verb} selected
            </button>
          ))}
        </BulkBar>
      )}
      <ErrorBox error={pause.error ?? resume.error ?? cancel.error} title="The action was refused" />
      <ErrorBox error={q.error} />
      {!q.data ? (
        !q.error && <Loading />
      ) : q.data.jobs.nodes.length === 0 ? (
        <Empty>
          {applied || kind || status || endpointId || includeInternal
            ? 'No job matches these filters: clear them to see every job.'
            : 'No jobs yet.'}{' '}
          {can('OPERATOR') && <Link to={href('jobs', 'new')}>Create a job</Link>}
        </Empty>
      ) : (
        <>
          <p className="muted">
            {q.data.jobs.totalCount ?? '?'}
            {q.data.jobs.totalCountCapped ? '+' : ''} {q.data.jobs.totalCount === 1 && !q.data.jobs.totalCountCapped ? 'job' : 'jobs'}
          </p>
          <PagedTable
            testId="jobs"
            columns={[
              { header: 'Job', cell: (j) => <Link to={href('jobs', j.id)}>{j.name ?? j.idempotencyKey ?? shortId(j.id)}</Link> },
              { header: 'Kind', cell: (j) => j.kind },
              { header: 'Endpoint', cell: (j) => j.endpoint.name },
              { header: 'State', cell: (j) => <Status value={j.state} /> },
              {
                header: 'Next',
                cell: (j) =>
                  j.cron ? (
                    <span title={j.cron.nextFireAt ?? ''}>
                      {formatRelative(j.cron.nextFireAt)} ({j.cron.expression})
                    </span>
                  ) : j.state === 'ACTIVE' && j.runAt && Date.parse(j.runAt) > Date.now() ? (
                    // A delayed job's start, while it is still ahead and will happen: once it ran, or
                    // was cancelled, retired or paused, it is not next.
                    <Time iso={j.runAt} />
                  ) : (
                    '—'
                  ),
              },
              { header: 'Created', cell: (j) => <Time iso={j.createdAt} /> },
            ]}
            rows={q.data.jobs.nodes}
            rowKey={(j) => j.id}
            rowAttributes={(j) => ({ 'data-job': j.id })}
            select={
              can('OPERATOR')
                ? {
                    isSelected: (j) => selection.has(j.id),
                    toggle: (j) => selection.toggle(j.id),
                    togglePage: () => selection.togglePage(rows.map((j) => j.id)),
                    label: (j) => `Select job ${j.name ?? j.idempotencyKey ?? shortId(j.id)}`,
                  }
                : undefined
            }
            page={page}
            pageInfo={q.data.jobs.pageInfo}
            onPage={(p) => go(pageParams(p), true)}
          />
        </>
      )}
      {confirmation}
    </section>
  );
}
