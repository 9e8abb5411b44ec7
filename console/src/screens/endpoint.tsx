/**
 * One endpoint's page: its settings, its executions pending and running (live), its state (paused,
 * held by its target, archived), and for a key allowed to (Endpoint.viewerCan): pause and resume,
 * its limits in place, the edit form (./endpoint-edit.tsx) and archiving.
 */
import { graphql } from '../gql/index.ts';
import type { EndpointPageQuery } from '../gql/graphql.ts';
import { formatCount, formatDuration, formatLocal } from '../lib/format.ts';
import { useMutation, useNow, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { ErrorBox, Link, Loading, Status, Time } from '../ui/common.tsx';
import { useConfirm } from '../ui/confirm.tsx';
import { EditEndpoint } from './endpoint-edit.tsx';
import { held, LimitField, rate, RateLimitField, RetryAfterHoldNote } from './endpoints.tsx';

const EndpointPageDocument = graphql(`
  query EndpointPage($id: ID!) {
    endpoint(id: $id) {
      ...EndpointSettings
      kind
      concurrencyLimit
      keyConcurrencyLimit
      rateLimit {
        count
        periodMs
        burst
      }
      keyRateLimit {
        count
        periodMs
        burst
      }
      busiestKeys {
        key
        running
        pending
      }
      hasSigningSecret
      pausedAt
      archivedAt
      retryAfterHold {
        until
        statusCode
      }
      createdAt
      updatedAt
      viewerCan {
        update
        archive
        pause
        resume
      }
    }
    executionStats(windowMinutes: 60) {
      byEndpoint {
        endpointId
        pending
        running
      }
    }
  }
`);

const EndpointPageExecutionsDocument = graphql(`
  subscription EndpointPageExecutions($after: String) {
    executionUpdates(after: $after) {
      cursor
      executionId
    }
  }
`);

const ArchiveEndpointDocument = graphql(`
  mutation ArchiveEndpoint($id: ID!) {
    archiveEndpoint(id: $id) {
      id
      archivedAt
    }
  }
`);

const PauseEndpointPageDocument = graphql(`
  mutation PauseEndpointPage($id: ID!) {
    pauseEndpoint(id: $id) {
      id
      pausedAt
    }
  }
`);

const ResumeEndpointPageDocument = graphql(`
  mutation ResumeEndpointPage($id: ID!) {
    resumeEndpoint(id: $id) {
      id
      pausedAt
    }
  }
`);

type Endpoint = EndpointPageQuery['endpoint'];

export function EndpointScreen({ id }: { id: string }) {
  const q = useQuery(EndpointPageDocument, { id }, { throttleMs: 1000 });
  // Its counts move with every execution: read again (coalesced) as they change.
  useSubscription(
    EndpointPageExecutionsDocument,
    {},
    { next: () => q.reloadSoon(), cursor: (d) => d.executionUpdates.cursor, reset: q.reload },
  );
  if (!q.data) return q.error ? <ErrorBox error={q.error} title="Could not load the endpoint" /> : <Loading />;
  const e = q.data.endpoint;
  const count = q.data.executionStats.byEndpoint.find((c) => c.endpointId === e.id);
  // An archived endpoint takes no change: it is shown as it was left, with no lever.
  const live = !e.archivedAt;
  return (
    <section aria-labelledby="endpoint-title">
      <p>
        <Link to={href('endpoints')}>← Endpoints</Link>
      </p>
      <h1 id="endpoint-title">
        Endpoint <code>{e.name}</code>{' '}
        {e.archivedAt ? <Status value="RETIRED" label="Archived" /> : e.pausedAt && <Status value="PAUSED" />}
      </h1>
      <ErrorBox error={q.error} title="Could not refresh" />
      <dl className="facts" data-testid="endpoint-facts">
        <dt>State</dt>
        <dd data-testid="endpoint-state">
          <EndpointState endpoint={e} onDone={q.reload} />
        </dd>
        <dt>Pending</dt>
        <dd data-testid="endpoint-pending">{formatCount(count?.pending ?? 0)}</dd>
        <dt>Running</dt>
        <dd data-testid="endpoint-running">{formatCount(count?.running ?? 0)}</dd>
        <dt>Executions</dt>
        <dd>
          <Link to={`${href('executions')}?endpoint=${encodeURIComponent(e.id)}`}>All executions of {e.name}</Link>
        </dd>
        <Settings endpoint={e} />
        <Limits endpoint={e} editable={live && e.viewerCan.update} onDone={q.reload} />
      </dl>
      {live && e.viewerCan.update && <EditEndpoint endpoint={e} onDone={q.reload} />}
      {live && e.viewerCan.archive && <ArchiveEndpoint endpoint={e} onDone={q.reload} />}
    </section>
  );
}

/** Running, paused, held by its target or archived; and the lever that changes it, when the key may. */
function EndpointState({ endpoint: e, onDone }: { endpoint: Endpoint; onDone(): void }) {
  const pause = useMutation(PauseEndpointPageDocument);
  const resume = useMutation(ResumeEndpointPageDocument);
  const [confirmation, confirm] = useConfirm();
  // A hold ends at its time with no event to say so: the page counts it down and drops it then.
  const now = useNow(1000);
  if (e.archivedAt)
    return (
      <>
        Archived <Time iso={e.archivedAt} />: it takes no new jobs, and its name is free for another endpoint.
      </>
    );
  const isHeld = held(e, now);
  return (
    <>
      {e.pausedAt ? (
        <>
          Paused since <Time iso={e.pausedAt} />
        </>
      ) : (
        !isHeld && 'Running'
      )}
      {isHeld && <RetryAfterHoldNote hold={e.retryAfterHold} now={now} />}{' '}
      {e.pausedAt && e.viewerCan.resume && (
        <button type="button" onClick={async () => (await resume.run({ id: e.id })) && onDone()}>
          Resume
        </button>
      )}
      {!e.pausedAt && e.viewerCan.pause && (
        <button
          type="button"
          onClick={async () =>
            (await confirm({
              message: `Pause endpoint ${e.name}? None of its executions starts until it is resumed; attempts running now finish, and new jobs wait.`,
              action: 'Pause endpoint',
            })) &&
            (await pause.run({ id: e.id })) &&
            onDone()
          }
        >
          Pause
        </button>
      )}
      {!e.pausedAt && isHeld && e.viewerCan.resume && (
        <button
          type="button"
          onClick={async () =>
            (await confirm({
              message: `Lift the hold on ${e.name}? Its target asked for no requests before ${formatLocal(e.retryAfterHold.until)}; its due executions start now.`,
              action: 'Lift the hold',
            })) &&
            // resumeEndpoint lifts a Retry-After hold as it ends a pause.
            (await resume.run({ id: e.id })) &&
            onDone()
          }
        >
          Lift hold
        </button>
      )}
      <ErrorBox error={pause.error ?? resume.error} title="The action was refused" />
      {confirmation}
    </>
  );
}

/** What the endpoint calls and how it retries, as the API holds it. */
function Settings({ endpoint: e }: { endpoint: Endpoint }) {
  return (
    <>
      <dt>Kind</dt>
      <dd>{e.kind}</dd>
      {e.kind === 'HTTP' ? (
        <>
          <dt>Target</dt>
          <dd data-testid="endpoint-target">
            {e.method ?? 'POST'} <code>{e.url}</code>
          </dd>
          <dt>Headers</dt>
          <dd>{Object.keys(e.headers ?? {}).length === 0 ? 'none' : <pre>{JSON.stringify(e.headers, null, 2)}</pre>}</dd>
          <dt>Signed</dt>
          <dd>{e.hasSigningSecret ? 'yes' : 'no'}</dd>
          <dt>Timeout per attempt</dt>
          <dd data-testid="endpoint-timeout">{e.timeoutMs == null ? 'default' : formatDuration(e.timeoutMs)}</dd>
        </>
      ) : (
        <>
          <dt>Handler</dt>
          <dd>
            <code>{e.handlerName}</code>
          </dd>
        </>
      )}
      <dt>Description</dt>
      <dd data-testid="endpoint-description">{e.description ?? <span className="muted">none</span>}</dd>
      <dt>Max attempts</dt>
      <dd data-testid="endpoint-max-attempts">{e.maxAttempts ?? 'default'}</dd>
      <dt>Retry delays</dt>
      <dd>
        {formatDuration(e.backoffBaseMs)} doubling up to {formatDuration(e.backoffMaxMs)}
        {e.jitter ? ', randomised (jitter)' : ', exact (no jitter)'}
      </dd>
      <dt>Default priority</dt>
      <dd>{e.defaultPriority}</dd>
      <dt>Created</dt>
      <dd>
        <Time iso={e.createdAt} />
      </dd>
      <dt>Updated</dt>
      <dd>
        <Time iso={e.updatedAt} />
      </dd>
    </>
  );
}

/** Its limits: changed in place where the key may (as on the list), read otherwise. */
function Limits({ endpoint: e, editable, onDone }: { endpoint: Endpoint; editable: boolean; onDone(): void }) {
  return (
    <>
      <dt>Concurrency limit</dt>
      <dd>{editable ? <LimitField endpoint={e} field="concurrencyLimit" onDone={onDone} /> : (e.concurrencyLimit ?? 'unlimited')}</dd>
      <dt>Rate limit</dt>
      <dd data-testid="endpoint-rate-limit">
        {editable ? <RateLimitField endpoint={e} field="rateLimit" onDone={onDone} /> : e.rateLimit ? rate(e.rateLimit) : 'unlimited'}
      </dd>
      <dt>Per-key limits</dt>
      <dd data-testid="endpoint-key-limits">
        {editable ? (
          <div className="limit-editors">
            <LimitField endpoint={e} field="keyConcurrencyLimit" onDone={onDone} />
            <RateLimitField endpoint={e} field="keyRateLimit" onDone={onDone} />
          </div>
        ) : e.keyConcurrencyLimit == null && !e.keyRateLimit ? (
          'none'
        ) : (
          <ul className="plain">
            {e.keyConcurrencyLimit != null && <li>{formatCount(e.keyConcurrencyLimit)} in flight</li>}
            {e.keyRateLimit && <li>{rate(e.keyRateLimit)}</li>}
          </ul>
        )}
      </dd>
      <dt>Busiest keys</dt>
      <dd>
        {e.busiestKeys.length === 0 ? (
          '—'
        ) : (
          <ul className="plain">
            {e.busiestKeys.map((k) => (
              <li key={k.key}>
                <code>{k.key}</code>: {formatCount(k.running)} running, {formatCount(k.pending)} waiting
              </li>
            ))}
          </ul>
        )}
      </dd>
    </>
  );
}

/** Archiving, after a confirmation that says what it does (the API's archiveEndpoint). */
function ArchiveEndpoint({ endpoint: e, onDone }: { endpoint: Endpoint; onDone(): void }) {
  const archive = useMutation(ArchiveEndpointDocument);
  const [confirmation, confirm] = useConfirm();
  return (
    <section className="form endpoint-archive" aria-labelledby="archive-title">
      <h2 id="archive-title">Archive</h2>
      <p>
        An archived endpoint takes no new jobs and its name is free again for a new endpoint; it stays readable here. Only an endpoint whose
        jobs are all retired can be archived.
      </p>
      <ErrorBox error={archive.error} title="Not archived" />
      <p>
        <button
          type="button"
          disabled={archive.pending}
          onClick={async () =>
            (await confirm({
              message: `Archive endpoint ${e.name}? It takes no new jobs from now on, and its name is free for another endpoint. This cannot be undone.`,
              action: 'Archive endpoint',
            })) &&
            (await archive.run({ id: e.id })) &&
            onDone()
          }
        >
          Archive {e.name}
        </button>
      </p>
      {confirmation}
    </section>
  );
}
