import { graphql } from '../gql/index.ts';
import type { AttemptDetailFragment, WaitReason } from '../gql/graphql.ts';
import { formatDuration, shortId } from '../lib/format.ts';
import { useMutation, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { ErrorBox, Link, Loading, Status, Time } from '../ui/common.tsx';
import { useConfirm } from '../ui/confirm.tsx';
import { ExecutionChildren } from './execution-children.tsx';
import { CancelExecutionDocument, RetryExecutionDocument } from './shared.tsx';

/** An attempt as its execution's page shows it: everything for diagnosing it. */
export const AttemptFragments = graphql(`
  fragment AttemptDetail on Attempt {
    id
    attemptNumber
    outcome
    startedAt
    finishedAt
    durationMs
    workerId
    workerHost
    workerPid
    statusCode
    responseExcerpt
    error
    errorStack
    gapBeforeNextMs
    target {
      method
      url
    }
  }
`);

const ExecutionDocument = graphql(`
  query Execution($id: ID!) {
    execution(id: $id) {
      ...ExecutionRow
      attempts {
        ...AttemptDetail
      }
      input
      createdAt
      nextAttemptAt
      waitingFor {
        reason
        detail
      }
      job {
        id
        name
        kind
        endpoint {
          name
        }
      }
    }
  }
`);

const ExecutionLiveDocument = graphql(`
  subscription ExecutionLive($jobId: ID!, $after: String) {
    executionUpdates(jobId: $jobId, after: $after) {
      cursor
      executionId
      status
    }
  }
`);

export function ExecutionScreen({ id }: { id: string }) {
  const q = useQuery(ExecutionDocument, { id }, { throttleMs: 250 });
  const jobId = q.data?.execution.job.id;
  useSubscription(
    ExecutionLiveDocument,
    { jobId: jobId ?? '' },
    { next: (d) => d.executionUpdates.executionId === id && q.reloadSoon(), cursor: (d) => d.executionUpdates.cursor, reset: q.reload },
    { skip: !jobId },
  );
  const retry = useMutation(RetryExecutionDocument);
  const cancel = useMutation(CancelExecutionDocument);
  const [confirmation, confirm] = useConfirm();
  if (!q.data) return q.error ? <ErrorBox error={q.error} title="Could not load the execution" /> : <Loading />;
  const e = q.data.execution;
  return (
    <section aria-labelledby="execution-title">
      <p>
        <Link to={href('executions')}>← Executions</Link>
      </p>
      <h1 id="execution-title" tabIndex={-1}>
        Execution {shortId(e.id)} <Status value={e.status} />
      </h1>
      {(e.viewerCan.retry || e.viewerCan.cancel) && (
        <div className="actions">
          {e.status === 'FAILED' && e.viewerCan.retry && (
            <button
              type="button"
              onClick={async () => {
                if (!(await retry.run({ id }))) return;
                q.reload();
                // The button goes with the FAILED status: focus the heading, whose status changes, not the page.
                document.getElementById('execution-title')?.focus();
              }}
            >
              Retry
            </button>
          )}
          {(e.status === 'PENDING' || e.status === 'RUNNING') && e.viewerCan.cancel && (
            <button
              type="button"
              onClick={async () =>
                (await confirm({
                  message: `Cancel execution ${shortId(e.id)}? Its attempts stop and it ends CANCELLED.`,
                  action: 'Cancel execution',
                })) &&
                (await cancel.run({ id })) &&
                q.reload()
              }
            >
              Cancel
            </button>
          )}
          <ErrorBox error={retry.error ?? cancel.error} title="The action was refused" />
        </div>
      )}
      <dl className="facts">
        <dt>Job</dt>
        <dd>
          <Link to={href('jobs', e.job.id)}>{e.job.name ?? e.job.id}</Link> on {e.job.endpoint.name}
        </dd>
        <dt>Trigger</dt>
        <dd data-testid="execution-trigger">{triggerText(e.trigger, e.job.kind)}</dd>
        <dt>Scheduled for</dt>
        <dd>
          <Time iso={e.scheduledFor} />
        </dd>
        <dt>Next attempt</dt>
        <dd>
          <Time iso={e.nextAttemptAt} />
        </dd>
        {e.waitingFor && (
          <>
            <dt>Waiting for</dt>
            <dd data-testid="waiting-for">
              <strong>{WAIT_REASONS[e.waitingFor.reason]}</strong>: <WithTimes text={e.waitingFor.detail} />
            </dd>
          </>
        )}
        <dt>Finished</dt>
        <dd>
          <Time iso={e.finishedAt} />
        </dd>
        <dt>Last error</dt>
        <dd className="bad">{e.lastError ?? '—'}</dd>
        <dt>Input</dt>
        <dd>
          <pre>{JSON.stringify(e.input, null, 2)}</pre>
        </dd>
      </dl>
      <ExecutionChildren id={id} />
      <h2>
        Attempts ({e.attemptCount} of {e.maxAttempts})
      </h2>
      {e.attempts.length === 0 ? (
        <p className="muted">No attempt yet{e.status === 'PENDING' ? ': it waits for its time or a free worker.' : '.'}</p>
      ) : (
        <ol className="attempt-list" data-testid="execution-attempts">
          {e.attempts.map((a, i) => (
            <AttemptCard
              key={a.id}
              attempt={a}
              nextAttemptAt={i === e.attempts.length - 1 && e.status === 'PENDING' ? e.nextAttemptAt : null}
            />
          ))}
        </ol>
      )}
      {confirmation}
    </section>
  );
}

/** A wait reason in an operator's words (the detail gives its figures). */
const WAIT_REASONS: Record<WaitReason, string> = {
  ENDPOINT_PAUSED: 'Endpoint paused',
  JOB_PAUSED: 'Job paused',
  PREREQUISITES: 'Waiting for prerequisite jobs',
  NOT_DUE: 'Not due yet',
  RETRY_BACKOFF: 'Retry backoff',
  ENDPOINT_RETRY_AFTER: 'Target asked to wait (Retry-After)',
  PREVIOUS_OCCURRENCE: 'Previous occurrence',
  ENDPOINT_CONCURRENCY_FULL: 'Endpoint concurrency full',
  WORKSPACE_CONCURRENCY_FULL: 'Workspace concurrency full',
  KEY_CONCURRENCY_FULL: 'Key concurrency full',
  RATE_LIMITED: 'Rate limited',
  KEY_RATE_LIMITED: 'Key rate limited',
  NO_LIVE_WORKER: 'No live worker',
  READY: 'Ready',
};

/** One attempt, with everything needed to say why it ended as it did and what came next. */
function AttemptCard({ attempt: a, nextAttemptAt }: { attempt: AttemptDetailFragment; nextAttemptAt: string | null | undefined }) {
  const worker = [a.workerHost, a.workerPid !== null && a.workerPid !== undefined ? `pid ${a.workerPid}` : null].filter(Boolean).join(', ');
  return (
    <li className="attempt" data-attempt={a.attemptNumber}>
      <h3>
        Attempt {a.attemptNumber} <Status value={a.outcome ?? 'RUNNING'} />
      </h3>
      <dl className="facts">
        <dt>Started</dt>
        <dd>
          <Time iso={a.startedAt} />
        </dd>
        <dt>Ended</dt>
        <dd>{a.finishedAt ? <Time iso={a.finishedAt} /> : 'still running'}</dd>
        <dt>Duration</dt>
        <dd>{formatDuration(a.durationMs)}</dd>
        <dt>Worker</dt>
        <dd>
          <code>{a.workerId || '—'}</code>
          {worker && <span className="muted"> ({worker})</span>}
        </dd>
        {a.target && (
          <>
            <dt>Request</dt>
            <dd className="wrap">
              {a.target.method} {a.target.url}
            </dd>
          </>
        )}
        {a.statusCode !== null && a.statusCode !== undefined && (
          <>
            <dt>HTTP status</dt>
            <dd>{a.statusCode}</dd>
          </>
        )}
        {a.responseExcerpt && (
          <>
            <dt>Response</dt>
            <dd>
              <pre className="excerpt" tabIndex={0}>
                {a.responseExcerpt}
              </pre>
            </dd>
          </>
        )}
        {a.error && (
          <>
            <dt>Error</dt>
            <dd className="bad wrap">{a.error}</dd>
          </>
        )}
        {a.errorStack && (
          <>
            <dt>Stack</dt>
            <dd>
              <details>
                <summary>Show the handler's stack</summary>
                <pre className="excerpt" tabIndex={0}>
                  {a.errorStack}
                </pre>
              </details>
            </dd>
          </>
        )}
        {a.gapBeforeNextMs !== null && a.gapBeforeNextMs !== undefined && (
          <>
            <dt>Wait before retry</dt>
            <dd>
              {formatDuration(a.gapBeforeNextMs)} until attempt {a.attemptNumber + 1} started
            </dd>
          </>
        )}
        {nextAttemptAt && (
          <>
            <dt>Retry due</dt>
            <dd>
              <Time iso={nextAttemptAt} />
            </dd>
          </>
        )}
      </dl>
    </li>
  );
}

/** What made the execution, in words: SCHEDULE is a cron occurrence, or the creation of a one-off job. */
function triggerText(trigger: string, kind: string): string {
  if (trigger === 'MANUAL') return 'Run by hand (triggerJob)';
  if (kind === 'CRON') return 'Its cron schedule';
  return `Its job's creation (${kind})`;
}

/** `text` with each instant it quotes (the API writes them in UTC) shown as the console shows times: local, UTC on hover. */
function WithTimes({ text }: { text: string }) {
  const parts = text.split(/(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z)/);
  return <>{parts.map((part, i) => (i % 2 === 1 ? <Time key={i} iso={part} /> : part))}</>;
}
