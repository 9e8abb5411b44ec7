import { useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { JobKind, JobStatus } from '../gql/graphql.ts';
import { formatRelative } from '../lib/format.ts';
import { useCan, useQuery, useSubscription } from '../lib/hooks.ts';
import { firstPage } from '../lib/paging.ts';
import { href } from '../lib/router.ts';
import { Empty, ErrorBox, Link, Loading, Status, Time } from '../ui/common.tsx';
import { PagedTable } from '../ui/paged-table.tsx';

const JobsDocument = graphql(`
  query Jobs($filter: JobFilter, $after: String) {
    jobs(filter: $filter, first: 25, after: $after) {
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

const KINDS: JobKind[] = ['IMMEDIATE', 'DELAYED', 'CRON'];
const STATUSES: JobStatus[] = ['ACTIVE', 'PAUSED', 'RETIRED'];

export function JobsScreen() {
  const can = useCan();
  const [kind, setKind] = useState<JobKind | ''>('');
  const [status, setStatus] = useState<JobStatus | ''>('');
  const [endpointId, setEndpointId] = useState('');
  const [search, setSearch] = useState('');
  const [applied, setApplied] = useState('');
  const [page, setPage] = useState(firstPage);
  const filter = {
    ...(kind ? { kind } : {}),
    ...(status ? { status } : {}),
    ...(endpointId ? { endpointId } : {}),
    ...(applied ? { search: applied } : {}),
  };
  const q = useQuery(JobsDocument, { filter, after: page.after });
  useSubscription(JobsEventsDocument, {}, { next: () => q.reloadSoon(), cursor: (d) => d.jobEvents.cursor, reset: q.reload });
  const change =
    <T,>(set: (v: T) => void) =>
    (v: T) => {
      set(v);
      setPage(firstPage);
    };
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
          change(setApplied)(search.trim());
        }}
      >
        <label>
          Kind
          <select value={kind} onChange={(e) => change(setKind)(e.target.value as JobKind | '')}>
            <option value="">Any</option>
            {KINDS.map((k) => (
              <option key={k}>{k}</option>
            ))}
          </select>
        </label>
        <label>
          Status
          <select value={status} onChange={(e) => change(setStatus)(e.target.value as JobStatus | '')}>
            <option value="">Any</option>
            {STATUSES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Endpoint
          <select value={endpointId} onChange={(e) => change(setEndpointId)(e.target.value)}>
            <option value="">Any</option>
            {q.data?.endpoints.nodes.map((e) => (
              <option key={e.id} value={e.id}>
                {e.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Name or idempotency key
          <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} placeholder="starts with…" />
        </label>
        <button type="submit">Search</button>
      </form>
      <ErrorBox error={q.error} />
      {!q.data ? (
        !q.error && <Loading />
      ) : q.data.jobs.nodes.length === 0 ? (
        <Empty>
          {applied || kind || status || endpointId ? 'No job matches these filters: clear them to see every job.' : 'No jobs yet.'}{' '}
          {can('OPERATOR') && <Link to={href('jobs', 'new')}>Create a job</Link>}
        </Empty>
      ) : (
        <>
          <p className="muted">
            {q.data.jobs.totalCount ?? '?'}
            {q.data.jobs.totalCountCapped ? '+' : ''} jobs
          </p>
          <PagedTable
            testId="jobs"
            columns={[
              { header: 'Job', cell: (j) => <Link to={href('jobs', j.id)}>{j.name ?? j.idempotencyKey ?? j.id.slice(0, 8)}</Link> },
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
                  ) : j.runAt ? (
                    <Time iso={j.runAt} />
                  ) : (
                    '—'
                  ),
              },
              { header: 'Created', cell: (j) => <Time iso={j.createdAt} /> },
            ]}
            rows={q.data.jobs.nodes}
            rowKey={(j) => j.id}
            page={page}
            pageInfo={q.data.jobs.pageInfo}
            onPage={setPage}
          />
        </>
      )}
    </section>
  );
}
