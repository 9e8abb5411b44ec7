import { useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { OverviewQuery } from '../gql/graphql.ts';
import { addSample, formatCount, formatDuration, runProgress, type ProgressSample } from '../lib/format.ts';
import { useCan, useMutation, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { Empty, ErrorBox, LineChart, Link, Loading, ProgressBar, Status, Time } from '../ui/common.tsx';
import { RunProgressDocument } from './shared.tsx';

const PruneHistoryDocument = graphql(`
  mutation PruneHistory {
    pruneHistory {
      complete
      removed {
        jobs
        executions
        attempts
        runs
        findings
        auditLog
        alertNotifications
        events
      }
    }
  }
`);

const OverviewDocument = graphql(`
  query Overview {
    executionStats(windowMinutes: 60) {
      windowMinutes
      workersAlive
      byEndpoint {
        endpointId
        endpointName
        pausedAt
        heldUntil
        pending
        running
        failed
        succeededInWindow
        failedInWindow
        cancelledInWindow
      }
      internalEndpoints {
        endpointId
        endpointName
        pending
        running
        failed
        succeededInWindow
      }
      perMinute {
        minute
        succeeded
        failed
        started
        latencyP50Ms
        latencyP95Ms
      }
    }
    runConnection(status: RUNNING, first: 10) {
      totalCount
      nodes {
        ...RunRow
      }
    }
    failedRuns: runConnection(status: FAILED, first: 1) {
      totalCount
      totalCountCapped
    }
    pausedRuns: runConnection(status: PAUSED, first: 20) {
      totalCount
      totalCountCapped
      nodes {
        id
        pauseKind
      }
    }
    openAlerts: alertStates(status: [OPEN], first: 1) {
      totalCount
      totalCountCapped
    }
    intervalHandlers: handlerConnection(kind: INTERVAL, first: 100) {
      nodes {
        name
        lastOutcome {
          status
        }
      }
    }
  }
`);

const OverviewAlertsDocument = graphql(`
  subscription OverviewAlerts($after: String) {
    alertRaised(after: $after) {
      cursor
    }
  }
`);

const OverviewExecutionsDocument = graphql(`
  subscription OverviewExecutions($after: String) {
    executionUpdates(after: $after) {
      cursor
      executionId
      status
    }
  }
`);

const OverviewRunsDocument = graphql(`
  subscription OverviewRuns($after: String) {
    runEvents(after: $after) {
      cursor
      runId
      status
    }
  }
`);

export function Overview() {
  const q = useQuery(OverviewDocument, {}, { throttleMs: 2000 });
  useSubscription(
    OverviewExecutionsDocument,
    {},
    { next: () => q.reloadSoon(), cursor: (d) => d.executionUpdates.cursor, reset: q.reload },
  );
  useSubscription(OverviewRunsDocument, {}, { next: () => q.reloadSoon(), cursor: (d) => d.runEvents.cursor, reset: q.reload });
  useSubscription(OverviewAlertsDocument, {}, { next: () => q.reloadSoon(), cursor: (d) => d.alertRaised.cursor, reset: q.reload });
  if (!q.data) return q.error ? <ErrorBox error={q.error} /> : <Loading />;
  const s = q.data.executionStats;
  const times = s.perMinute.map((m) => m.minute);
  const totals = s.byEndpoint.reduce(
    (a, e) => ({
      pending: a.pending + e.pending,
      running: a.running + e.running,
      failed: a.failed + e.failed,
      succeeded: a.succeeded + e.succeededInWindow,
    }),
    { pending: 0, running: 0, failed: 0, succeeded: 0 },
  );
  return (
    <section aria-labelledby="overview-title">
      <h1 id="overview-title">Overview</h1>
      <ErrorBox error={q.error} title="Could not refresh" />
      <div className="tiles" data-testid="overview-tiles">
        <Tile label="Pending" value={totals.pending} />
        <Tile label="Running" value={totals.running} />
        <Tile label={`Succeeded (last ${s.windowMinutes} min)`} value={totals.succeeded} />
        <Tile label="Failed (dead-letter)" value={totals.failed} to={href('executions') + '?status=FAILED'} />
        <Tile label="Workers alive" value={s.workersAlive} />
        <Tile
          label="Open alerts (not acknowledged)"
          value={q.data.openAlerts.totalCount ?? 0}
          capped={!!q.data.openAlerts.totalCountCapped}
          to={href('alerts')}
          bad
        />
        <Tile
          label="Failing interval handlers"
          value={q.data.intervalHandlers.nodes.filter((h) => h.lastOutcome?.status === 'ERROR').length}
          to={href('handlers')}
          bad
        />
        <Tile
          label="Failed runs"
          value={q.data.failedRuns.totalCount ?? 0}
          capped={!!q.data.failedRuns.totalCountCapped}
          to={href('runs') + '?status=FAILED'}
          bad
        />
        {/* A run whose worker died waits, paused, for someone to resume it: a problem, as a failure is. */}
        <Tile
          label="Paused runs"
          value={q.data.pausedRuns.totalCount ?? 0}
          capped={!!q.data.pausedRuns.totalCountCapped}
          to={href('runs') + '?status=PAUSED'}
          bad={q.data.pausedRuns.nodes.some((r) => r.pauseKind === 'CRASHED')}
          warn
        />
      </div>
      <div className="charts">
        <LineChart
          title="Throughput per minute"
          times={times}
          series={[
            { name: 'succeeded', values: s.perMinute.map((m) => m.succeeded), className: 'ok' },
            { name: 'started', values: s.perMinute.map((m) => m.started), className: 'info' },
          ]}
        />
        <LineChart
          title="Failures per minute"
          times={times}
          series={[{ name: 'failed', values: s.perMinute.map((m) => m.failed), className: 'bad' }]}
        />
        <LineChart
          title="Enqueue-to-start latency"
          unit=" ms"
          times={times}
          series={[
            { name: 'p50', values: s.perMinute.map((m) => m.latencyP50Ms ?? null), className: 'info' },
            { name: 'p95', values: s.perMinute.map((m) => m.latencyP95Ms ?? null), className: 'warn' },
          ]}
        />
      </div>
      <h2>Executions by endpoint</h2>
      {s.byEndpoint.length === 0 ? (
        <Empty>
          No executions yet. <Link to={href('endpoints')}>Register an endpoint</Link>, then{' '}
          <Link to={href('jobs', 'new')}>create a job</Link> on it.
        </Empty>
      ) : (
        <div className="table-box" tabIndex={0} role="region" aria-label="Executions by endpoint">
          <table data-testid="by-endpoint">
            <caption className="sr-only">Executions by status per endpoint</caption>
            <thead>
              <tr>
                <th scope="col">Endpoint</th>
                <th scope="col">Pending</th>
                <th scope="col">Running</th>
                <th scope="col">Failed (dead-letter)</th>
                <th scope="col">Succeeded ({s.windowMinutes} min)</th>
                <th scope="col">Failed ({s.windowMinutes} min)</th>
                <th scope="col">Cancelled ({s.windowMinutes} min)</th>
              </tr>
            </thead>
            <tbody>
              {s.byEndpoint.map((e) => (
                <tr key={e.endpointId}>
                  <th scope="row">
                    <Link to={`${href('executions')}?endpoint=${encodeURIComponent(e.endpointId)}`}>{e.endpointName}</Link>
                    {/* Why a backlog grows on purpose: said where the backlog is, not only on the endpoint's page. */}
                    {/* On lines of their own, so that on a narrow screen they wrap rather than push the counts away. */}
                    {e.pausedAt && (
                      <span className="row-note" data-testid="endpoint-paused">
                        <Status value="PAUSED" label="paused" /> since <Time iso={e.pausedAt} />
                      </span>
                    )}
                    {e.heldUntil && (
                      <span className="row-note" data-testid="endpoint-held">
                        <Status value="WARNING" label="held" /> by its target until <Time iso={e.heldUntil} />
                      </span>
                    )}
                  </th>
                  <td>{formatCount(e.pending)}</td>
                  <td>{formatCount(e.running)}</td>
                  <td>
                    {e.failed > 0 ? (
                      <Link to={`${href('executions')}?status=FAILED&endpoint=${encodeURIComponent(e.endpointId)}`}>
                        {formatCount(e.failed)}
                      </Link>
                    ) : (
                      0
                    )}
                  </td>
                  <td>{formatCount(e.succeededInWindow)}</td>
                  <td>{formatCount(e.failedInWindow)}</td>
                  <td>{formatCount(e.cancelledInWindow)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {s.internalEndpoints.length > 0 && (
        <>
          <h2>jobgate&apos;s own work</h2>
          <p className="muted">
            Internal endpoints (alert delivery, the reaper, retention): not counted in the numbers above, and managed by jobgate.
          </p>
          <div className="table-box" tabIndex={0} role="region" aria-label="jobgate's own work">
            <table data-testid="internal-endpoints">
              <caption className="sr-only">Executions of jobgate&apos;s internal endpoints</caption>
              <thead>
                <tr>
                  <th scope="col">Internal endpoint</th>
                  <th scope="col">Pending</th>
                  <th scope="col">Running</th>
                  <th scope="col">Failed</th>
                  <th scope="col">Succeeded ({s.windowMinutes} min)</th>
                </tr>
              </thead>
              <tbody>
                {s.internalEndpoints.map((e) => (
                  <tr key={e.endpointId}>
                    <th scope="row">{e.endpointName}</th>
                    <td>{formatCount(e.pending)}</td>
                    <td>{formatCount(e.running)}</td>
                    <td>{formatCount(e.failed)}</td>
                    <td>{formatCount(e.succeededInWindow)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
      <h2>Runs in progress</h2>
      <RunsInProgress runs={q.data.runConnection.nodes} paused={q.data.pausedRuns.totalCount ?? 0} />
      <PruneNow />
    </section>
  );
}

/** ADMIN: prune the workspace's finished history now, to its windows, and say what went. */
function PruneNow() {
  const can = useCan();
  const prune = useMutation(PruneHistoryDocument);
  const [result, setResult] = useState<string | null>(null);
  if (!can('ADMIN')) return null;
  const run = async () => {
    const r = await prune.run({});
    if (!r) return;
    const parts = Object.entries(r.pruneHistory.removed)
      .filter(([k, n]) => k !== '__typename' && typeof n === 'number' && n > 0)
      .map(([k, n]) => `${formatCount(n as number)} ${k}`);
    setResult(
      `${parts.length ? `Removed ${parts.join(', ')}` : 'Nothing was past its window'}${r.pruneHistory.complete ? '.' : '; more is left: prune again.'}`,
    );
  };
  return (
    <>
      <h2>History</h2>
      <p className="muted">
        Finished history is pruned to the workspace&apos;s retention windows in the background; prune it now if you need the room.
      </p>
      <ErrorBox error={prune.error} title="Pruning was refused" />
      <button type="button" disabled={prune.pending} onClick={() => void run()}>
        Prune history now
      </button>
      {result && <p data-testid="prune-result">{result}</p>}
    </>
  );
}

/** A figure; `bad` marks it as a problem when it is not zero, `warn` (unless bad) as something to look at. */
function Tile({
  label,
  value,
  to,
  capped,
  bad,
  warn,
}: {
  label: string;
  value: number;
  to?: string;
  capped?: boolean;
  bad?: boolean;
  warn?: boolean;
}) {
  const mark = value === 0 ? '' : bad ? ' bad' : warn ? ' warn' : '';
  const body = (
    <>
      <span className={`tile-value${mark}`}>
        {formatCount(value)}
        {capped ? '+' : ''}
      </span>
      <span className="tile-label">{label}</span>
    </>
  );
  return <div className="tile">{to ? <Link to={to}>{body}</Link> : body}</div>;
}

function RunsInProgress({ runs, paused }: { runs: OverviewQuery['runConnection']['nodes']; paused: number }) {
  if (runs.length === 0)
    return (
      <Empty>
        {paused > 0 ? (
          <>
            No run in progress; <Link to={href('runs') + '?status=PAUSED'}>{formatCount(paused)} paused</Link>, waiting to be resumed.
          </>
        ) : (
          <>
            No run in progress. Recoverable handlers start runs from the <Link to={href('handlers')}>Handlers</Link> screen.
          </>
        )}
      </Empty>
    );
  return (
    <ul className="runs">
      {runs.map((r) => (
        <LiveRunRow key={r.id} run={r} />
      ))}
    </ul>
  );
}

function LiveRunRow({ run }: { run: OverviewQuery['runConnection']['nodes'][number] }) {
  const [now, setNow] = useState(run);
  const [samples, setSamples] = useState<ProgressSample[]>([{ at: Date.now(), processed: run.processed }]);
  useSubscription(
    RunProgressDocument,
    { runId: run.id },
    {
      next: (d) => {
        setNow((r) => ({ ...r, ...d.runProgress }));
        setSamples((s) => addSample(s, { at: Date.now(), processed: d.runProgress.processed }));
      },
    },
  );
  const p = runProgress(now.processed, now.total, samples);
  return (
    <li>
      <Link to={href('runs', run.id)}>{run.name}</Link> <Status value={now.status} />
      <ProgressBar fraction={p.fraction} label={`${run.name}: ${p.label}`} />
      <span className="muted">
        {p.label}
        {p.rate !== null && ` · ${p.rate.toFixed(1)}/s`}
        {p.etaMs !== null && ` · ETA ${formatDuration(p.etaMs, true)}`}
      </span>
    </li>
  );
}
