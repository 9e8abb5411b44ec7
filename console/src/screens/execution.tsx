import { graphql } from '../gql/index.ts';
import { useMutation, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { ErrorBox, Link, Loading, Status, Time } from '../ui/common.tsx';
import { Table } from '../ui/paged-table.tsx';
import { CancelExecutionDocument, executionWithAttemptsColumns, RetryExecutionDocument } from './shared.tsx';

const ExecutionDocument = graphql(`
  query Execution($id: ID!) {
    execution(id: $id) {
      ...ExecutionWithAttempts
      input
      createdAt
      nextAttemptAt
      job {
        id
        name
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
  if (!q.data) return q.error ? <ErrorBox error={q.error} title="Could not load the execution" /> : <Loading />;
  const e = q.data.execution;
  return (
    <section aria-labelledby="execution-title">
      <p>
        <Link to={href('executions')}>← Executions</Link>
      </p>
      <h1 id="execution-title">
        Execution {e.id.slice(0, 8)} <Status value={e.status} />
      </h1>
      {(e.viewerCan.retry || e.viewerCan.cancel) && (
        <div className="actions">
          {e.status === 'FAILED' && e.viewerCan.retry && (
            <button type="button" onClick={async () => (await retry.run({ id })) && q.reload()}>
              Retry
            </button>
          )}
          {(e.status === 'PENDING' || e.status === 'RUNNING') && e.viewerCan.cancel && (
            <button type="button" onClick={async () => (await cancel.run({ id })) && q.reload()}>
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
        <dd>{e.trigger}</dd>
        <dt>Scheduled for</dt>
        <dd>
          <Time iso={e.scheduledFor} />
        </dd>
        <dt>Next attempt</dt>
        <dd>
          <Time iso={e.nextAttemptAt} />
        </dd>
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
      <h2>Attempts</h2>
      <Table testId="execution-attempts" columns={executionWithAttemptsColumns} rows={[e]} rowKey={(x) => x.id} />
    </section>
  );
}
