/**
 * A job's place in a workflow, for the Job screen: the jobs it waits on (each edge with the outcome
 * it recorded), the jobs waiting on it, the execution it is a child of and the batch it is a member
 * of. Drawn as three columns of linked nodes, each coloured by its state and saying it in words:
 * lists and headings, so a screen reader reads what waits on what and what is done.
 */
import { useRef, type ReactNode } from 'react';
import { graphql } from '../gql/index.ts';
import type { JobGraphQuery } from '../gql/graphql.ts';
import { useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { ErrorBox, Link, Status } from '../ui/common.tsx';
import { shortId } from '../lib/format.ts';

const JobGraphDocument = graphql(`
  query JobGraph($id: ID!) {
    job(id: $id) {
      id
      name
      state
      onPrerequisiteFailure
      batchOutcome
      dependsOn {
        outcome
        prerequisite {
          id
          name
          state
        }
      }
      dependents(first: 50) {
        totalCount
        nodes {
          id
          name
          state
        }
      }
      parentExecution {
        id
        status
        job {
          id
          name
        }
      }
      batch {
        id
        name
        open
        completedAt
      }
      completesBatch {
        id
        name
        open
        completedAt
      }
    }
  }
`);

/** Executions of the workspace changing: the graph is read again when one of its jobs' did. */
const JobGraphLiveDocument = graphql(`
  subscription JobGraphLive($after: String) {
    executionUpdates(after: $after) {
      cursor
      jobId
    }
  }
`);

type GraphJob = { id: string; name?: string | null; state: string };

const jobName = (j: { id: string; name?: string | null }) => j.name ?? `Job ${shortId(j.id)}`;

/** One node: the job linked, its state as a coloured tag and in its accessible name. */
function Node({ job, current = false, children }: { job: GraphJob; current?: boolean; children?: ReactNode }) {
  return (
    <li className={`graph-node state-${job.state.toLowerCase()}`} data-job={job.id}>
      {current ? <strong>{jobName(job)}</strong> : <Link to={href('jobs', job.id)}>{jobName(job)}</Link>} <Status value={job.state} />
      {children}
    </li>
  );
}

/** What the job waits on and what waits on it; nothing when it is in no workflow. */
export function JobGraph({ id }: { id: string }) {
  const q = useQuery(JobGraphDocument, { id });
  const neighbours = useRef(new Set<string>());
  useSubscription(
    JobGraphLiveDocument,
    {},
    {
      next: (d) => neighbours.current.has(d.executionUpdates.jobId) && q.reloadSoon(),
      cursor: (d) => d.executionUpdates.cursor,
      reset: q.reload,
    },
  );
  if (!q.data) return <ErrorBox error={q.error} title="Could not load the workflow" />;
  const job = q.data.job;
  const dependents = job.dependents.nodes;
  neighbours.current = new Set([
    job.id,
    ...job.dependsOn.map((d) => d.prerequisite.id),
    ...dependents.map((d) => d.id),
    ...(job.parentExecution ? [job.parentExecution.job.id] : []),
  ]);
  if (job.dependsOn.length === 0 && dependents.length === 0 && !job.parentExecution && !job.batch && !job.completesBatch) return null;
  return (
    <section aria-labelledby="graph-title" data-testid="job-graph">
      <h2 id="graph-title">Workflow</h2>
      <p className="muted">{summary(job)}</p>
      <div className="graph">
        <div className="graph-col" data-testid="graph-waits-on">
          <h3>Waits on</h3>
          {job.dependsOn.length === 0 ? (
            <p className="muted">Nothing: it starts when due.</p>
          ) : (
            <ul>
              {job.dependsOn.map((d) => (
                <Node key={d.prerequisite.id} job={d.prerequisite}>
                  <span className="edge">
                    {d.outcome ? (
                      <>
                        ended <Status value={d.outcome} />
                      </>
                    ) : (
                      'not ended yet'
                    )}
                  </span>
                </Node>
              ))}
            </ul>
          )}
        </div>
        <div className="graph-arrow" aria-hidden="true">
          →
        </div>
        <div className="graph-col" data-testid="graph-this">
          <h3>This job</h3>
          <ul>
            <Node job={job} current />
          </ul>
          <Context job={job} />
        </div>
        <div className="graph-arrow" aria-hidden="true">
          →
        </div>
        <div className="graph-col" data-testid="graph-dependents">
          <h3>Waiting on it</h3>
          {dependents.length === 0 ? (
            <p className="muted">No job waits on it.</p>
          ) : (
            <ul>
              {dependents.map((d) => (
                <Node key={d.id} job={d} />
              ))}
            </ul>
          )}
          {(job.dependents.totalCount ?? 0) > dependents.length && (
            <p className="muted">and {(job.dependents.totalCount ?? 0) - dependents.length} more</p>
          )}
        </div>
      </div>
    </section>
  );
}

type GraphBatch = { id: string; name?: string | null; open: boolean; completedAt?: string | null };

/** A batch linked, with its state. */
function BatchLink({ batch }: { batch: GraphBatch }) {
  return (
    <>
      <Link to={href('batches', batch.id)}>{batch.name ?? `batch ${shortId(batch.id)}`}</Link>{' '}
      <Status value={batch.completedAt ? 'COMPLETED' : batch.open ? 'OPEN' : 'CLOSED'} />
    </>
  );
}

/** The execution the job is a child of, the batch it is a member of, and the batch it runs after (its onComplete job). */
function Context({ job }: { job: JobGraphQuery['job'] }) {
  const parent = job.parentExecution;
  const batch = job.batch;
  const completes = job.completesBatch;
  if (!parent && !batch && !completes && !job.onPrerequisiteFailure) return null;
  return (
    <dl className="graph-context">
      {job.onPrerequisiteFailure && (
        <>
          <dt>If one it waits on fails</dt>
          <dd>{job.onPrerequisiteFailure === 'RUN' ? 'it runs anyway (RUN)' : 'it is cancelled (CANCEL)'}</dd>
        </>
      )}
      {parent && (
        <>
          <dt>Child of</dt>
          <dd>
            <Link to={href('executions', parent.id)}>execution {shortId(parent.id)}</Link> <Status value={parent.status} /> of{' '}
            <Link to={href('jobs', parent.job.id)}>{jobName(parent.job)}</Link>
          </dd>
        </>
      )}
      {batch && (
        <>
          <dt>Member of</dt>
          <dd>
            <BatchLink batch={batch} />
            {job.batchOutcome && (
              <>
                {' '}
                counted <Status value={job.batchOutcome} />
              </>
            )}
          </dd>
        </>
      )}
      {completes && (
        <>
          <dt>Runs when this batch completes</dt>
          <dd>
            <BatchLink batch={completes} />{' '}
            {completes.completedAt ? 'completed: this job was released' : 'not completed: this job waits for it'}
          </dd>
        </>
      )}
    </dl>
  );
}

/** The graph in a sentence: "Waits on 2 jobs (1 ended); 1 job waits on it." */
function summary(job: JobGraphQuery['job']): string {
  const n = job.dependsOn.length;
  const ended = job.dependsOn.filter((d) => d.outcome).length;
  const waiting = job.dependents.totalCount ?? job.dependents.nodes.length;
  const jobs = (k: number) => `${k} job${k === 1 ? '' : 's'}`;
  return [
    n ? `Waits on ${jobs(n)} (${ended} ended)` : 'Waits on no job',
    waiting ? `${jobs(waiting)} ${waiting === 1 ? 'waits' : 'wait'} on it` : 'no job waits on it',
  ]
    .join('; ')
    .concat('.');
}
