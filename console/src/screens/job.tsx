import { useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { JobQuery } from '../gql/graphql.ts';
import { formatDuration, truncate } from '../lib/format.ts';
import { useCan, useMutation, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { Empty, ErrorBox, Link, Loading, Status, Time } from '../ui/common.tsx';

const JobDocument = graphql(`
  query Job($id: ID!) {
    job(id: $id) {
      id
      name
      kind
      status
      state
      idempotencyKey
      lockKey
      maxAttempts
      input
      runAt
      createdAt
      updatedAt
      retiredAt
      endpoint {
        id
        name
        kind
      }
      cron {
        expression
        timezone
        nextFireAt
        lastFiredAt
        missedTicks
        skippedTicks
        lastSkipAt
        lastSkipReason
        scheduleError
        misfirePolicy
        overlapPolicy
      }
      executions(first: 20) {
        totalCount
        nodes {
          id
          status
          scheduledFor
          finishedAt
          attemptCount
          maxAttempts
          lastError
          trigger
          attempts {
            id
            attemptNumber
            outcome
            statusCode
            durationMs
            error
            responseExcerpt
            startedAt
          }
        }
      }
    }
  }
`);

const CronPreviewDocument = graphql(`
  query CronPreview($expression: String!, $timezone: String) {
    cronPreview(expression: $expression, timezone: $timezone, count: 5)
  }
`);

const JobExecutionsDocument = graphql(`
  subscription JobExecutions($jobId: ID!, $after: String) {
    executionUpdates(jobId: $jobId, after: $after) {
      cursor
      executionId
      status
    }
  }
`);

const JobEventsOneDocument = graphql(`
  subscription JobEventsOne($jobId: ID!, $after: String) {
    jobEvents(jobId: $jobId, after: $after) {
      cursor
      status
    }
  }
`);

const TriggerJobDocument = graphql(`
  mutation TriggerJob($id: ID!) {
    triggerJob(input: { id: $id, force: true }) {
      created
      execution {
        id
        status
      }
    }
  }
`);
const PauseJobDocument = graphql(`
  mutation PauseJob($id: ID!) {
    pauseJob(id: $id) {
      id
      status
    }
  }
`);
const ResumeJobDocument = graphql(`
  mutation ResumeJob($id: ID!) {
    resumeJob(id: $id) {
      id
      status
    }
  }
`);
const CancelJobDocument = graphql(`
  mutation CancelJob($id: ID!) {
    cancelJob(id: $id) {
      cancelledExecutions
      job {
        id
        status
      }
    }
  }
`);
const UpdateJobDocument = graphql(`
  mutation UpdateJob($input: UpdateJobInput!) {
    updateJob(input: $input) {
      id
    }
  }
`);

export function JobScreen({ id }: { id: string }) {
  const q = useQuery(JobDocument, { id }, { throttleMs: 250 });
  useSubscription(
    JobExecutionsDocument,
    { jobId: id },
    { next: () => q.reloadSoon(), cursor: (d) => d.executionUpdates.cursor, reset: q.reload },
  );
  useSubscription(JobEventsOneDocument, { jobId: id }, { next: () => q.reloadSoon(), cursor: (d) => d.jobEvents.cursor, reset: q.reload });
  if (!q.data) return q.error ? <ErrorBox error={q.error} title="Could not load the job" /> : <Loading />;
  const job = q.data.job;
  return (
    <section aria-labelledby="job-title">
      <p>
        <Link to={href('jobs')}>← Jobs</Link>
      </p>
      <h1 id="job-title">
        {job.name ?? 'Job'} <Status value={job.state} />
      </h1>
      <ErrorBox error={q.error} title="Could not refresh" />
      <JobActions job={job} onDone={q.reload} />
      <dl className="facts">
        <dt>Id</dt>
        <dd>
          <code>{job.id}</code>
        </dd>
        <dt>Kind</dt>
        <dd>{job.kind}</dd>
        <dt>Status</dt>
        <dd>{job.status}</dd>
        <dt>Endpoint</dt>
        <dd>
          {job.endpoint.name} ({job.endpoint.kind})
        </dd>
        <dt>Idempotency key</dt>
        <dd>{job.idempotencyKey ?? '—'}</dd>
        <dt>Max attempts</dt>
        <dd>{job.maxAttempts}</dd>
        {job.runAt && (
          <>
            <dt>Runs at</dt>
            <dd>
              <Time iso={job.runAt} />
            </dd>
          </>
        )}
        <dt>Created</dt>
        <dd>
          <Time iso={job.createdAt} />
        </dd>
        <dt>Input</dt>
        <dd>
          <pre>{JSON.stringify(job.input, null, 2)}</pre>
        </dd>
      </dl>
      {job.cron && <Schedule cron={job.cron} />}
      <h2>Executions ({job.executions.totalCount ?? job.executions.nodes.length})</h2>
      {job.executions.nodes.length === 0 ? (
        <Empty>No execution yet: {job.cron ? 'the schedule creates one at its next fire time.' : 'trigger the job to run it now.'}</Empty>
      ) : (
        <ExecutionsWithAttempts executions={job.executions.nodes} />
      )}
    </section>
  );
}

function Schedule({ cron }: { cron: NonNullable<JobQuery['job']['cron']> }) {
  const preview = useQuery(CronPreviewDocument, { expression: cron.expression, timezone: cron.timezone });
  return (
    <>
      <h2>Schedule</h2>
      <dl className="facts">
        <dt>Cron</dt>
        <dd>
          <code>{cron.expression}</code> in {cron.timezone}
        </dd>
        <dt>Next fire</dt>
        <dd>
          <Time iso={cron.nextFireAt} /> (
          <Time iso={cron.nextFireAt} timeZone={cron.timezone} /> in {cron.timezone})
        </dd>
        <dt>Last fired</dt>
        <dd>
          <Time iso={cron.lastFiredAt} />
        </dd>
        <dt>Missed / skipped ticks</dt>
        <dd>
          {cron.missedTicks} / {cron.skippedTicks}
          {cron.lastSkipReason && (
            <span className="muted">
              {' '}
              (last skip <Time iso={cron.lastSkipAt} />: {cron.lastSkipReason})
            </span>
          )}
        </dd>
        <dt>Policies</dt>
        <dd>
          misfire {cron.misfirePolicy}, overlap {cron.overlapPolicy}
        </dd>
        {cron.scheduleError && (
          <>
            <dt>Schedule error</dt>
            <dd className="bad">{cron.scheduleError}</dd>
          </>
        )}
      </dl>
      <h3>Next fire times</h3>
      <ErrorBox error={preview.error} />
      <ol data-testid="cron-preview">
        {preview.data?.cronPreview.map((t) => (
          <li key={t}>
            <Time iso={t} timeZone={cron.timezone} /> ({cron.timezone}) · <Time iso={t} /> (yours)
          </li>
        ))}
      </ol>
    </>
  );
}

function JobActions({ job, onDone }: { job: JobQuery['job']; onDone(): void }) {
  const can = useCan();
  const trigger = useMutation(TriggerJobDocument);
  const pause = useMutation(PauseJobDocument);
  const resume = useMutation(ResumeJobDocument);
  const cancel = useMutation(CancelJobDocument);
  const [editing, setEditing] = useState(false);
  if (!can('OPERATOR') || job.status === 'RETIRED') return null;
  const act = async (m: { run(v: { id: string }): Promise<unknown> }) => {
    if (await m.run({ id: job.id })) onDone();
  };
  const error = trigger.error ?? pause.error ?? resume.error ?? cancel.error;
  return (
    <div className="actions">
      <button type="button" onClick={() => act(trigger)} disabled={trigger.pending}>
        Trigger now
      </button>
      {job.status === 'ACTIVE' ? (
        <button type="button" onClick={() => act(pause)} disabled={pause.pending}>
          Pause
        </button>
      ) : (
        <button type="button" onClick={() => act(resume)} disabled={resume.pending}>
          Resume
        </button>
      )}
      <button type="button" onClick={() => setEditing((e) => !e)} aria-expanded={editing}>
        Edit
      </button>
      <button
        type="button"
        className="danger"
        onClick={() => {
          if (confirm('Cancel this job? It is retired, its pending executions are cancelled and its schedule stops.')) void act(cancel);
        }}
        disabled={cancel.pending}
      >
        Cancel job
      </button>
      <ErrorBox error={error} title="The action was refused" />
      {editing && (
        <EditJob
          job={job}
          onSaved={() => {
            setEditing(false);
            onDone();
          }}
        />
      )}
    </div>
  );
}

function EditJob({ job, onSaved }: { job: JobQuery['job']; onSaved(): void }) {
  const update = useMutation(UpdateJobDocument);
  const [name, setName] = useState(job.name ?? '');
  const [input, setInput] = useState(JSON.stringify(job.input, null, 2));
  const [maxAttempts, setMaxAttempts] = useState(String(job.maxAttempts));
  const [expression, setExpression] = useState(job.cron?.expression ?? '');
  const [timezone, setTimezone] = useState(job.cron?.timezone ?? '');
  const [parseError, setParseError] = useState<string | null>(null);
  return (
    <form
      className="edit"
      onSubmit={async (e) => {
        e.preventDefault();
        let parsed: unknown;
        try {
          parsed = JSON.parse(input);
        } catch {
          setParseError('Input is not valid JSON.');
          return;
        }
        setParseError(null);
        const r = await update.run({
          input: {
            id: job.id,
            name: name || undefined,
            input: parsed,
            maxAttempts: Number(maxAttempts),
            ...(job.cron ? { cron: { expression, timezone } } : {}),
          },
        });
        if (r) onSaved();
      }}
    >
      <label>
        Name <input value={name} onChange={(e) => setName(e.target.value)} />
      </label>
      <label>
        Max attempts <input type="number" min={1} max={100} value={maxAttempts} onChange={(e) => setMaxAttempts(e.target.value)} />
      </label>
      {job.cron && (
        <>
          <label>
            Cron expression <input value={expression} onChange={(e) => setExpression(e.target.value)} />
          </label>
          <label>
            Time zone <input value={timezone} onChange={(e) => setTimezone(e.target.value)} />
          </label>
        </>
      )}
      <label>
        Input (JSON) <textarea rows={5} value={input} onChange={(e) => setInput(e.target.value)} />
      </label>
      {parseError && (
        <p className="error" role="alert">
          {parseError}
        </p>
      )}
      <ErrorBox error={update.error} title="Not saved" />
      <button type="submit" disabled={update.pending}>
        Save
      </button>
    </form>
  );
}

export function ExecutionsWithAttempts({ executions }: { executions: JobQuery['job']['executions']['nodes'] }) {
  return (
    <table data-testid="job-executions">
      <thead>
        <tr>
          <th scope="col">Execution</th>
          <th scope="col">Status</th>
          <th scope="col">Scheduled for</th>
          <th scope="col">Attempts</th>
        </tr>
      </thead>
      <tbody>
        {executions.map((e) => (
          <tr key={e.id}>
            <th scope="row">
              <Link to={href('executions', e.id)}>{e.id.slice(0, 8)}</Link>
            </th>
            <td>
              <Status value={e.status} />
            </td>
            <td>
              <Time iso={e.scheduledFor} />
            </td>
            <td>
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
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
