import { useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { JobQuery } from '../gql/graphql.ts';
import { useMutation, useQuery, useSubscription } from '../lib/hooks.ts';
import { firstPage } from '../lib/paging.ts';
import { href } from '../lib/router.ts';
import { Empty, ErrorBox, Link, Loading, Status, Time } from '../ui/common.tsx';
import { useConfirm } from '../ui/confirm.tsx';
import { PagedTable } from '../ui/paged-table.tsx';
import { JobGraph } from './job-graph.tsx';
import { executionWithAttemptsColumns } from './shared.tsx';

const JobDocument = graphql(`
  query Job($id: ID!, $executionsAfter: String) {
    job(id: $id) {
      id
      name
      kind
      status
      state
      idempotencyKey
      lockKey
      maxAttempts
      priority
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
      viewerCan {
        trigger
        pause
        resume
        update
        cancel
      }
      executions(first: 20, after: $executionsAfter) {
        totalCount
        pageInfo {
          endCursor
          hasNextPage
        }
        nodes {
          ...ExecutionWithAttempts
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
  const [page, setPage] = useState(firstPage);
  const q = useQuery(JobDocument, { id, executionsAfter: page.after }, { throttleMs: 250 });
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
        {job.name ? <bdi>{job.name}</bdi> : 'Job'} <Status value={job.state} />
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
        <dt>Priority</dt>
        <dd>{job.priority}</dd>
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
      {job.cron && <Schedule cron={job.cron} paused={job.status === 'PAUSED'} />}
      <JobGraph id={job.id} />
      <h2>Executions ({job.executions.totalCount ?? job.executions.nodes.length})</h2>
      {job.executions.nodes.length === 0 ? (
        <Empty>No execution yet: {job.cron ? 'the schedule creates one at its next fire time.' : 'trigger the job to run it now.'}</Empty>
      ) : (
        <PagedTable
          testId="job-executions"
          caption="Executions, newest first"
          columns={executionWithAttemptsColumns}
          rows={job.executions.nodes}
          rowKey={(e) => e.id}
          page={page}
          pageInfo={job.executions.pageInfo}
          onPage={setPage}
        />
      )}
    </section>
  );
}

function Schedule({ cron, paused }: { cron: NonNullable<JobQuery['job']['cron']>; paused: boolean }) {
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
      {paused ? (
        // A paused schedule fires nothing; resumed, it continues from then, with no backlog.
        <p data-testid="cron-preview">None while the job is paused: resumed, it fires from then on, with no backlog.</p>
      ) : (
        <>
          <ErrorBox error={preview.error} />
          <ol data-testid="cron-preview">
            {preview.data?.cronPreview.map((t) => (
              <li key={t}>
                <Time iso={t} timeZone={cron.timezone} /> ({cron.timezone}) · <Time iso={t} /> (yours)
              </li>
            ))}
          </ol>
        </>
      )}
    </>
  );
}

function JobActions({ job, onDone }: { job: JobQuery['job']; onDone(): void }) {
  const trigger = useMutation(TriggerJobDocument);
  const pause = useMutation(PauseJobDocument);
  const resume = useMutation(ResumeJobDocument);
  const cancel = useMutation(CancelJobDocument);
  const [editing, setEditing] = useState(false);
  const [confirmDialog, confirm] = useConfirm();
  const may = job.viewerCan;
  if (!may.trigger && !may.pause && !may.resume && !may.update && !may.cancel) return null;
  const act = async (m: { run(v: { id: string }): Promise<unknown> }) => {
    if (await m.run({ id: job.id })) onDone();
  };
  const error = trigger.error ?? pause.error ?? resume.error ?? cancel.error;
  return (
    <div className="actions">
      {may.trigger && (
        <button type="button" onClick={() => act(trigger)} disabled={trigger.pending}>
          Trigger now
        </button>
      )}
      {job.status === 'ACTIVE'
        ? may.pause && (
            <button type="button" onClick={() => act(pause)} disabled={pause.pending}>
              Pause
            </button>
          )
        : may.resume && (
            <button type="button" onClick={() => act(resume)} disabled={resume.pending}>
              Resume
            </button>
          )}
      {may.update && (
        <button type="button" onClick={() => setEditing((e) => !e)} aria-expanded={editing}>
          Edit
        </button>
      )}
      {may.cancel && (
        <button
          type="button"
          className="danger"
          onClick={async () => {
            const ok = await confirm({
              message:
                'Cancel this job? It is retired: its schedule stops, its pending executions are cancelled, and a running attempt is asked to stop.',
              action: 'Cancel job',
            });
            if (ok) await act(cancel);
          }}
          disabled={cancel.pending}
        >
          Cancel job
        </button>
      )}
      {confirmDialog}
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
