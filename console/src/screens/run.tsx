import { useEffect, useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { RunQuery, Severity } from '../gql/graphql.ts';
import { addSample, formatDuration, runProgress, type ProgressSample } from '../lib/format.ts';
import { useCan, useMutation, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { Empty, ErrorBox, Link, Loading, ProgressBar, Status, Time } from '../ui/common.tsx';
import { RunProgressDocument } from './overview.tsx';

const RunDocument = graphql(`
  query Run($id: ID!, $kind: String, $severity: Severity) {
    run(id: $id) {
      id
      name
      status
      processed
      total
      progress
      startedAt
      finishedAt
      updatedAt
      heartbeatAt
      stats
      params
      cursor
      error
      pauseKind
      pauseReason
      findings(first: 100, kind: $kind, severity: $severity) {
        counts {
          kind
          severity
          count
        }
        nextCursor
        nodes {
          id
          kind
          severity
          resourceId
          detail
          createdAt
        }
      }
    }
  }
`);

const RunFindingsDocument = graphql(`
  subscription RunFindings($runId: ID!, $after: String) {
    runFindings(runId: $runId, after: $after) {
      id
      kind
      severity
      resourceId
      detail
      createdAt
    }
  }
`);

const CancelRunDocument = graphql(`
  mutation CancelRun($id: ID!) {
    cancelRun(id: $id) {
      id
      status
    }
  }
`);
const ResumeRunDocument = graphql(`
  mutation ResumeRun($name: String!) {
    triggerRun(input: { name: $name }) {
      result
      run {
        id
        status
      }
    }
  }
`);

type Finding = RunQuery['run']['findings']['nodes'][number];
const SEVERITIES: Severity[] = ['INFO', 'WARNING', 'ERROR', 'DATA_LOSS'];

export function RunScreen({ id }: { id: string }) {
  const can = useCan();
  const [kind, setKind] = useState('');
  const [severity, setSeverity] = useState<Severity | ''>('');
  const q = useQuery(RunDocument, { id, kind: kind || null, severity: severity || null });
  const [live, setLive] = useState<Partial<RunQuery['run']>>({});
  const [samples, setSamples] = useState<ProgressSample[]>([]);
  const [streamed, setStreamed] = useState<Finding[]>([]);
  useEffect(() => setStreamed([]), [q.data]);
  const lastFindingId = q.data?.run.findings.nodes.at(-1)?.id;
  useSubscription(
    RunProgressDocument,
    { runId: id },
    {
      next: (d) => {
        setLive(d.runProgress);
        setSamples((s) => addSample(s, { at: Date.now(), processed: d.runProgress.processed }));
      },
      error: () => q.reloadSoon(),
    },
  );
  // Findings after the last one the page loaded (the first page shows the oldest 100: stream from
  // there only when that page is complete).
  const complete = q.data ? q.data.run.findings.nextCursor === null : false;
  useSubscription(
    RunFindingsDocument,
    { runId: id, after: lastFindingId ?? '0' },
    {
      next: (d) => {
        const f = d.runFindings;
        if ((kind && f.kind !== kind) || (severity && f.severity !== severity)) return;
        setStreamed((s) => (s.some((x) => x.id === f.id) ? s : [...s, f]));
      },
      cursor: (d) => d.runFindings.id,
      reset: q.reload,
    },
    { skip: !q.data || !complete },
  );
  const cancel = useMutation(CancelRunDocument);
  const resume = useMutation(ResumeRunDocument);
  if (!q.data) return q.error ? <ErrorBox error={q.error} title="Could not load the run" /> : <Loading />;
  const run = { ...q.data.run, ...live };
  const p = runProgress(run.processed, run.total, samples);
  const findings = [...q.data.run.findings.nodes, ...streamed];
  const kinds = [...new Set(q.data.run.findings.counts.map((c) => c.kind))];
  // The page's counts, plus what streamed in since (when no filter hides any).
  const counts = new Map(q.data.run.findings.counts.map((c) => [`${c.kind}\u0000${c.severity}`, { ...c }]));
  if (!kind && !severity) {
    for (const f of streamed) {
      const k = `${f.kind}\u0000${f.severity}`;
      const c = counts.get(k) ?? { kind: f.kind, severity: f.severity, count: 0 };
      counts.set(k, { ...c, count: c.count + 1 });
    }
  }
  return (
    <section aria-labelledby="run-title">
      <p>
        <Link to={href('runs')}>← Runs</Link>
      </p>
      <h1 id="run-title">
        {run.name} <Status value={run.status} />
      </h1>
      {can('OPERATOR') && (
        <div className="actions">
          {(run.status === 'RUNNING' || run.status === 'CANCEL_REQUESTED') && (
            <button
              type="button"
              onClick={async () => (await cancel.run({ id })) && q.reload()}
              disabled={run.status === 'CANCEL_REQUESTED'}
            >
              Cancel run
            </button>
          )}
          {run.status === 'PAUSED' && (
            <button type="button" onClick={async () => (await resume.run({ name: run.name })) && q.reload()}>
              Resume run
            </button>
          )}
          <ErrorBox error={cancel.error ?? resume.error} title="The action was refused" />
        </div>
      )}
      <div className="run-progress" data-testid="run-progress">
        <ProgressBar fraction={p.fraction} label={`Progress: ${p.label}`} />
        <p>
          <span data-testid="run-processed">{p.label}</span>
          {p.rate !== null && <> · {p.rate.toFixed(1)} per second</>}
          {p.etaMs !== null && run.status === 'RUNNING' && <> · about {formatDuration(p.etaMs, true)} left</>}
        </p>
      </div>
      <dl className="facts">
        <dt>Started</dt>
        <dd>
          <Time iso={run.startedAt} />
        </dd>
        <dt>Finished</dt>
        <dd>
          <Time iso={run.finishedAt} />
        </dd>
        {run.pauseReason && (
          <>
            <dt>Paused</dt>
            <dd>
              {run.pauseKind}: {run.pauseReason}
            </dd>
          </>
        )}
        {run.error && (
          <>
            <dt>Error</dt>
            <dd className="bad">{run.error}</dd>
          </>
        )}
        <dt>Stats</dt>
        <dd>
          <pre>{JSON.stringify(run.stats, null, 2)}</pre>
        </dd>
      </dl>
      <h2>Findings</h2>
      <ul className="counts">
        {[...counts.values()].map((c) => (
          <li key={`${c.kind}-${c.severity}`}>
            {c.kind} <Status value={c.severity} /> {c.count}
          </li>
        ))}
      </ul>
      <div className="filters">
        <label>
          Kind
          <select value={kind} onChange={(e) => setKind(e.target.value)}>
            <option value="">Any</option>
            {kinds.map((k) => (
              <option key={k}>{k}</option>
            ))}
          </select>
        </label>
        <label>
          Severity
          <select value={severity} onChange={(e) => setSeverity(e.target.value as Severity | '')}>
            <option value="">Any</option>
            {SEVERITIES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
      </div>
      {findings.length === 0 ? (
        <Empty>No findings{kind || severity ? ' match these filters' : ' yet'}: they appear here as the run records them.</Empty>
      ) : (
        <table data-testid="findings">
          <thead>
            <tr>
              <th scope="col">Kind</th>
              <th scope="col">Severity</th>
              <th scope="col">Resource</th>
              <th scope="col">Detail</th>
              <th scope="col">Recorded</th>
            </tr>
          </thead>
          <tbody>
            {findings.map((f) => (
              <tr key={f.id}>
                <td>{f.kind}</td>
                <td>
                  <Status value={f.severity} />
                </td>
                <td>
                  <code>{f.resourceId}</code>
                </td>
                <td>
                  <code>{JSON.stringify(f.detail)}</code>
                </td>
                <td>
                  <Time iso={f.createdAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {!complete && <p className="muted">Showing the first 100 findings; new ones stream in once the page is complete.</p>}
    </section>
  );
}
