/**
 * What several screens share: the fragments of executions, attempts and runs (one selection
 * set each, spread where a screen shows them), the mutations on executions, the run progress
 * stream, and the table of executions with their attempts.
 */
import { graphql } from '../gql/index.ts';
import type { ExecutionWithAttemptsFragment } from '../gql/graphql.ts';
import { formatDuration, shortId, truncate } from '../lib/format.ts';
import { href } from '../lib/router.ts';
import { Link, Status, Time } from '../ui/common.tsx';
import type { Column } from '../ui/paged-table.tsx';

export const Fragments = graphql(`
  fragment ExecutionRow on Execution {
    id
    status
    scheduledFor
    finishedAt
    attemptCount
    maxAttempts
    lastError
    trigger
    viewerCan {
      retry
      cancel
    }
  }
  fragment AttemptRow on Attempt {
    id
    attemptNumber
    outcome
    statusCode
    durationMs
    error
    responseExcerpt
    startedAt
  }
  fragment ExecutionWithAttempts on Execution {
    ...ExecutionRow
    attempts {
      ...AttemptRow
    }
  }
  fragment RunRow on Run {
    id
    name
    status
    processed
    total
    progress
    startedAt
    finishedAt
    pauseReason
  }
`);

export const RetryExecutionDocument = graphql(`
  mutation RetryExecution($id: ID!) {
    retryExecution(id: $id) {
      id
      status
    }
  }
`);

export const CancelExecutionDocument = graphql(`
  mutation CancelExecution($id: ID!) {
    cancelExecution(id: $id) {
      id
      status
    }
  }
`);

export const RunProgressDocument = graphql(`
  subscription RunProgress($runId: ID!) {
    runProgress(runId: $runId) {
      id
      status
      processed
      total
      progress
      updatedAt
      stats
      cursor
      pauseKind
      pauseReason
      error
      finishedAt
      waitingToRetry
      retryAttempt
      retryBudget
      nextAttemptAt
    }
  }
`);

/** The columns of executions shown with their attempts (a job's page, an execution's page). */
export const executionWithAttemptsColumns: Column<ExecutionWithAttemptsFragment>[] = [
  { header: 'Execution', cell: (e) => <Link to={href('executions', e.id)}>{shortId(e.id)}</Link> },
  { header: 'Status', cell: (e) => <Status value={e.status} /> },
  { header: 'Scheduled for', cell: (e) => <Time iso={e.scheduledFor} /> },
  {
    header: 'Attempts',
    cell: (e) => (
      <>
        {e.attemptCount} / {e.maxAttempts}
        {e.attempts.length > 0 && (
          <ul className="attempts">
            {e.attempts.map((a) => (
              <li key={a.id}>
                #{a.attemptNumber} {a.outcome ?? 'RUNNING'}
                {a.statusCode !== null && ` · HTTP ${a.statusCode}`}
                {a.durationMs !== null && ` · ${formatDuration(a.durationMs)}`}
                {a.error && <span className="bad"> · {truncate(a.error, 160)}</span>}
                {a.responseExcerpt && <span className="muted"> · {truncate(a.responseExcerpt, 120)}</span>}
              </li>
            ))}
          </ul>
        )}
      </>
    ),
  },
];
