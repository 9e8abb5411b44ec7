import { useCallback, useEffect, useRef, useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { FindingRowFragment, RunQuery, Severity } from '../gql/graphql.ts';
import { ApiError } from '../lib/api.ts';
import { addSample, cursorText, formatDuration, runProgress, type ProgressSample } from '../lib/format.ts';
import { useMutation, useQuery, useSession, useSubscription } from '../lib/hooks.ts';
import { emptyLog, withLive, withPage, type FollowedLog } from '../lib/paging.ts';
import { href } from '../lib/router.ts';
import { goWith } from '../lib/url-state.ts';
import { Empty, ErrorBox, Link, Loading, ProgressBar, Status, Time } from '../ui/common.tsx';
import { RunProgressDocument } from './shared.tsx';

/** A run still moving (its progress and findings may change at any moment). */
const LIVE = new Set<string>(['RUNNING', 'CANCEL_REQUESTED']);

/** What paused a run, for people (RunPauseKind). */
const PAUSED_BY: Record<string, string> = {
  CANCELLED: 'by an operator',
  CRASHED: 'its worker stopped',
  HANDLER: 'by its handler',
};

const RunDocument = graphql(`
  query Run($id: ID!) {
    run(id: $id) {
      ...RunRow
      updatedAt
      heartbeatAt
      stats
      params
      cursor
      error
      pauseKind
      waitingToRetry
      retryAttempt
      retryBudget
      nextAttemptAt
      viewerCan {
        cancel
        resume
      }
      findingCounts {
        kind
        severity
        count
      }
    }
  }
`);

const RunFindingsPageDocument = graphql(`
  query RunFindingsPage($id: ID!, $kind: String, $severity: Severity, $after: String) {
    run(id: $id) {
      id
      findingConnection(first: 100, after: $after, kind: $kind, severity: $severity) {
        pageInfo {
          endCursor
          hasNextPage
        }
        nodes {
          ...FindingRow
        }
      }
    }
  }
  fragment FindingRow on Finding {
    id
    kind
    severity
    resourceId
    detail
    createdAt
  }
`);

const RunFindingsDocument = graphql(`
  subscription RunFindings($runId: ID!, $after: String) {
    runFindings(runId: $runId, after: $after) {
      ...FindingRow
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

const ResumeFromCheckpointDocument = graphql(`
  mutation ResumeRunFromCheckpoint($name: String!) {
    triggerRun(input: { name: $name, fromCheckpoint: true }) {
      result
      run {
        id
        status
      }
    }
  }
`);

const SEVERITIES: Severity[] = ['INFO', 'WARNING', 'ERROR', 'DATA_LOSS'];

/**
 * The run's findings, oldest first, a page at a time ("Load more"); once the pages reach the end,
 * new ones are appended live from right after the last one shown (lib/paging.ts): no gap, none
 * twice. A filter starts over. Live findings are filtered here (the stream carries them all).
 */
function useFindings(runId: string, kind: string, severity: Severity | '', onLive: () => void) {
  const { api } = useSession();
  const [log, setLog] = useState(() => emptyLog<FindingRowFragment>());
  const [error, setError] = useState<ApiError | null>(null);
  const [loading, setLoading] = useState(false);
  const filter = useRef({ kind, severity });
  filter.current = { kind, severity };
  const load = useCallback(
    async (after: string | null, from: FollowedLog<FindingRowFragment>) => {
      const asked = `${kind}\u0000${severity}`;
      setLoading(true);
      try {
        const r = await api.request(RunFindingsPageDocument, { id: runId, kind: kind || null, severity: severity || null, after });
        if (asked !== `${filter.current.kind}\u0000${filter.current.severity}`) return;
        setLog(withPage(from, r.run.findingConnection.nodes, r.run.findingConnection.pageInfo));
        setError(null);
      } catch (e) {
        setError(e instanceof ApiError ? e : new ApiError('INTERNAL_SERVER_ERROR', String(e)));
      } finally {
        setLoading(false);
      }
    },
    [api, runId, kind, severity],
  );
  useEffect(() => {
    const fresh = emptyLog<FindingRowFragment>();
    setLog(fresh);
    void load(null, fresh);
  }, [load]);
  useSubscription(
    RunFindingsDocument,
    { runId, after: log.followFrom },
    {
      next: (d) => {
        const f = d.runFindings;
        onLive();
        if ((filter.current.kind && f.kind !== filter.current.kind) || (filter.current.severity && f.severity !== filter.current.severity))
          return;
        setLog((l) => withLive(l, f));
      },
      cursor: (d) => d.runFindings.id,
      reset: () => {
        const fresh = emptyLog<FindingRowFragment>();
        setLog(fresh);
        void load(null, fresh);
      },
    },
    { skip: log.followFrom === null },
  );
  return { log, error, loading, more: () => void load(log.endCursor, log) };
}

/** A run: its progress, live, and its findings; the findings' kind and severity filters are in the URL. */
/** The last checkpoint's cursor: decoded when it is JSON or text, else the base64 its handler reads. */
function RunCursor({ base64 }: { base64: string | null | undefined }) {
  const cursor = cursorText(base64);
  if (!cursor) return <span className="muted">none yet: no checkpoint</span>;
  return (
    <>
      <pre data-testid="run-cursor">{cursor.text}</pre>
      {cursor.decoded === 'base64' && <span className="muted">base64: bytes only its handler reads</span>}
    </>
  );
}

export function RunScreen({ id, search }: { id: string; search: URLSearchParams }) {
  const kind = search.get('kind') ?? '';
  const severity = (SEVERITIES as string[]).includes(search.get('severity') ?? '') ? (search.get('severity') as Severity) : '';
  const go = (patch: Record<string, string | null>) => goWith(href('runs', id), search, patch);
  const q = useQuery(RunDocument, { id });
  const [live, setLive] = useState<Partial<RunQuery['run']>>({});
  const [samples, setSamples] = useState<ProgressSample[]>([]);
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
  // New findings change the counts: the run is read again (coalesced).
  const findings = useFindings(id, kind, severity, q.reloadSoon);
  const cancel = useMutation(CancelRunDocument);
  const resume = useMutation(ResumeRunDocument);
  const fromCheckpoint = useMutation(ResumeFromCheckpointDocument);
  if (!q.data) return q.error ? <ErrorBox error={q.error} title="Could not load the run" /> : <Loading />;
  const run = { ...q.data.run, ...live };
  const p = runProgress(run.processed, run.total, samples);
  // A kind from the URL the counts do not list (yet) is still offered, so the filter shows as applied.
  const kinds = [...new Set([...q.data.run.findingCounts.map((c) => c.kind), ...(kind ? [kind] : [])])];
  const shown = findings.log.items;
  return (
    <section aria-labelledby="run-title">
      <p>
        <Link to={href('runs')}>← Runs</Link>
      </p>
      <h1 id="run-title">
        {run.name} <Status value={run.status} />
      </h1>
      {(run.viewerCan.cancel || run.viewerCan.resume) && (
        <div className="actions">
          {(run.status === 'RUNNING' || run.status === 'CANCEL_REQUESTED') && run.viewerCan.cancel && (
            <button
              type="button"
              onClick={async () => (await cancel.run({ id })) && q.reload()}
              disabled={run.status === 'CANCEL_REQUESTED'}
              title="Stops the run at its next safe point, its cursor kept; Resume run continues it from there"
            >
              Pause run
            </button>
          )}
          {run.status === 'PAUSED' && run.viewerCan.resume && (
            <button type="button" onClick={async () => (await resume.run({ name: run.name })) && q.reload()}>
              Resume run
            </button>
          )}
          {run.status === 'FAILED' && run.viewerCan.resume && (
            <button
              type="button"
              onClick={async () => (await fromCheckpoint.run({ name: run.name })) && q.reload()}
              title="Continues this run from its last checkpoint, its retry budget whole (while no other run of its handler is live and this is its newest)"
            >
              Resume from its checkpoint
            </button>
          )}
          <ErrorBox error={cancel.error ?? resume.error ?? fromCheckpoint.error} title="The action was refused" />
        </div>
      )}
      <div className="run-progress" data-testid="run-progress">
        {/* Without a total, a live run's bar is indeterminate (moving); an ended one has none to show. */}
        {(p.fraction !== null || LIVE.has(run.status)) && <ProgressBar fraction={p.fraction} label={`Progress: ${p.label}`} />}
        <p>
          Processed: <span data-testid="run-processed">{p.label}</span>
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
        {run.status === 'PAUSED' && (
          <>
            <dt>Paused</dt>
            <dd data-testid="run-paused">{run.pauseReason ?? (run.pauseKind ? PAUSED_BY[run.pauseKind] : 'yes')}</dd>
          </>
        )}
        {run.waitingToRetry && (
          <>
            <dt>Retrying</dt>
            <dd data-testid="run-retry">
              its handler threw: retry {run.retryAttempt}
              {run.retryBudget !== null && <> of {run.retryBudget}</>} from its last checkpoint at <Time iso={run.nextAttemptAt} />
            </dd>
          </>
        )}
        {run.error && (
          <>
            <dt>{run.waitingToRetry ? 'Last error' : 'Error'}</dt>
            <dd className="bad">{run.error}</dd>
          </>
        )}
        <dt>Stats</dt>
        <dd>
          <pre>{JSON.stringify(run.stats, null, 2)}</pre>
        </dd>
        <dt>Params</dt>
        <dd>
          <pre data-testid="run-params">{JSON.stringify(run.params, null, 2)}</pre>
        </dd>
        <dt>Cursor</dt>
        <dd>
          <RunCursor base64={run.cursor} />
        </dd>
      </dl>
      <h2>Findings</h2>
      <ul className="counts">
        {q.data.run.findingCounts.map((c) => (
          <li key={`${c.kind}-${c.severity}`}>
            {c.kind} <Status value={c.severity} /> {c.count}
          </li>
        ))}
      </ul>
      <div className="filters">
        <label>
          Kind
          <select value={kind} onChange={(e) => go({ kind: e.target.value })}>
            <option value="">Any</option>
            {kinds.map((k) => (
              <option key={k}>{k}</option>
            ))}
          </select>
        </label>
        <label>
          Severity
          <select value={severity} onChange={(e) => go({ severity: e.target.value })}>
            <option value="">Any</option>
            {SEVERITIES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
      </div>
      <ErrorBox error={findings.error} title="Could not load the findings" />
      {shown.length === 0 ? (
        findings.loading ? (
          <Loading />
        ) : (
          <Empty>
            {kind || severity
              ? 'No findings match these filters.'
              : LIVE.has(run.status) || run.status === 'PAUSED'
                ? 'No findings yet: they appear here as the run records them.'
                : 'No findings: the run recorded none.'}
          </Empty>
        )
      ) : (
        <div className="table-box" tabIndex={0} role="region" aria-label="Findings">
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
              {shown.map((f) => (
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
        </div>
      )}
      {!findings.log.complete && shown.length > 0 && (
        <p className="muted">
          Showing the oldest {shown.length} findings; new ones are added here once all are shown.{' '}
          <button type="button" onClick={findings.more} disabled={findings.loading}>
            Load more findings
          </button>
        </p>
      )}
    </section>
  );
}
