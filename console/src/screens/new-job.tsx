import { useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { JobKind } from '../gql/graphql.ts';
import { useCan, useMutation, useQuery } from '../lib/hooks.ts';
import { href, navigate } from '../lib/router.ts';
import { Empty, ErrorBox, Link, Loading, Time } from '../ui/common.tsx';

const NewJobEndpointsDocument = graphql(`
  query NewJobEndpoints {
    endpoints(first: 100) {
      nodes {
        id
        name
        kind
      }
    }
  }
`);

const PreviewDocument = graphql(`
  query NewJobPreview($expression: String!, $timezone: String) {
    cronPreview(expression: $expression, timezone: $timezone, count: 5)
  }
`);

const CreateJobDocument = graphql(`
  mutation CreateJob($input: CreateJobInput!) {
    createJob(input: $input) {
      created
      job {
        id
      }
    }
  }
`);

const localZone = Intl.DateTimeFormat().resolvedOptions().timeZone;

export function NewJobScreen() {
  const can = useCan();
  const endpoints = useQuery(NewJobEndpointsDocument, {});
  const create = useMutation(CreateJobDocument);
  const [endpointId, setEndpointId] = useState('');
  const [kind, setKind] = useState<JobKind>('IMMEDIATE');
  const [name, setName] = useState('');
  const [idempotencyKey, setIdempotencyKey] = useState('');
  const [input, setInput] = useState('{}');
  const [runAt, setRunAt] = useState('');
  const [expression, setExpression] = useState('*/5 * * * *');
  const [timezone, setTimezone] = useState(localZone);
  const [maxAttempts, setMaxAttempts] = useState('');
  const [priority, setPriority] = useState('');
  const [parseError, setParseError] = useState<string | null>(null);
  const preview = useQuery(PreviewDocument, { expression, timezone }, { skip: kind !== 'CRON' || !expression });

  if (!can('OPERATOR')) return <Empty>Your key is a VIEWER: it cannot create jobs.</Empty>;
  if (!endpoints.data) return endpoints.error ? <ErrorBox error={endpoints.error} /> : <Loading />;
  const list = endpoints.data.endpoints.nodes;
  if (list.length === 0) {
    return (
      <Empty>
        A job runs on an endpoint, and there is none yet. <Link to={href('endpoints')}>Register an endpoint</Link> first.
      </Empty>
    );
  }
  const chosen = endpointId || list[0]!.id;
  return (
    <section aria-labelledby="new-job-title">
      <p>
        <Link to={href('jobs')}>← Jobs</Link>
      </p>
      <h1 id="new-job-title">New job</h1>
      <form
        className="form"
        onSubmit={async (e) => {
          e.preventDefault();
          let parsed: unknown;
          try {
            parsed = JSON.parse(input || '{}');
          } catch {
            setParseError('Input is not valid JSON.');
            return;
          }
          setParseError(null);
          const r = await create.run({
            input: {
              endpointId: chosen,
              kind,
              input: parsed,
              ...(name ? { name } : {}),
              ...(idempotencyKey ? { idempotencyKey } : {}),
              ...(maxAttempts ? { maxAttempts: Number(maxAttempts) } : {}),
              ...(priority ? { priority: Number(priority) } : {}),
              ...(kind === 'DELAYED' ? { runAt: runAt ? new Date(runAt).toISOString() : undefined } : {}),
              ...(kind === 'CRON' ? { cron: { expression, timezone } } : {}),
            },
          });
          if (r) navigate(href('jobs', r.createJob.job.id));
        }}
      >
        <label>
          Endpoint
          <select value={chosen} onChange={(e) => setEndpointId(e.target.value)}>
            {list.map((ep) => (
              <option key={ep.id} value={ep.id}>
                {ep.name} ({ep.kind})
              </option>
            ))}
          </select>
        </label>
        <fieldset>
          <legend>Kind</legend>
          {(['IMMEDIATE', 'DELAYED', 'CRON'] as const).map((k) => (
            <label key={k} className="inline">
              <input type="radio" name="kind" value={k} checked={kind === k} onChange={() => setKind(k)} /> {k}
            </label>
          ))}
        </fieldset>
        <label>
          Name (optional)
          <input value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <label>
          Idempotency key (optional)
          <input value={idempotencyKey} onChange={(e) => setIdempotencyKey(e.target.value)} />
        </label>
        {kind === 'DELAYED' && (
          <label>
            Run at (your time, {localZone})
            <input type="datetime-local" value={runAt} onChange={(e) => setRunAt(e.target.value)} required />
          </label>
        )}
        {kind === 'CRON' && (
          <>
            <label>
              Cron expression
              <input value={expression} onChange={(e) => setExpression(e.target.value)} required />
            </label>
            <label>
              Time zone (IANA)
              <input value={timezone} onChange={(e) => setTimezone(e.target.value)} />
            </label>
            <div aria-live="polite">
              <ErrorBox error={preview.error} title="Not a valid schedule" />
              {preview.data && (
                <>
                  <p>Next fire times:</p>
                  <ol>
                    {preview.data.cronPreview.map((t) => (
                      <li key={t}>
                        <Time iso={t} timeZone={timezone} /> ({timezone})
                      </li>
                    ))}
                  </ol>
                </>
              )}
            </div>
          </>
        )}
        <label>
          Max attempts (optional)
          <input type="number" min={1} max={100} value={maxAttempts} onChange={(e) => setMaxAttempts(e.target.value)} />
        </label>
        <label>
          Priority (optional, -100 to 100, higher first; default the endpoint&apos;s)
          <input type="number" min={-100} max={100} value={priority} onChange={(e) => setPriority(e.target.value)} />
        </label>
        <label>
          Input (JSON)
          <textarea rows={5} value={input} onChange={(e) => setInput(e.target.value)} />
        </label>
        {parseError && (
          <p className="error" role="alert">
            {parseError}
          </p>
        )}
        <ErrorBox error={create.error} title="The job was not created" />
        <button type="submit" disabled={create.pending}>
          Create job
        </button>
      </form>
    </section>
  );
}
