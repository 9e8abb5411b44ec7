import { useEffect, useId, useRef, useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { HandlerRowFragment } from '../gql/graphql.ts';
import { formatDuration } from '../lib/format.ts';
import { useCan, useMutation, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import { Empty, ErrorBox, Link, Loading, Status, Time } from '../ui/common.tsx';
import { RecentRuns } from './handler-runs.tsx';

// 50, not the largest page: a page of 100 of these rows is priced over the gateway's cost limit
// (console/test/documents.test.ts). The live catalogue below carries every handler.
const HandlersDocument = graphql(`
  query Handlers {
    handlerConnection(first: 50) {
      nodes {
        ...HandlerRow
      }
    }
  }
  fragment HandlerRow on Handler {
    kind
    name
    cadence {
      cron
      everyMs
      timezone
    }
    workers {
      id
      heartbeatAt
    }
    alertsOptOut
    lastOutcome {
      status
      finishedAt
      message
      cause
      count
      extra
    }
    interval {
      nextDueAt
      okRuns
      errorRuns
      running
      abandonedRunning
    }
    schedule {
      nextDueAt
      lastTickAt
    }
    lastRun {
      id
      status
      processed
      total
    }
  }
`);

const HandlersLiveDocument = graphql(`
  subscription HandlersLive {
    handlerCatalog {
      handlers {
        ...HandlerRow
      }
    }
  }
`);

// While a tick runs, either button queues one more right after it (never beside it). "Force run"
// also tells the handler to skip its own grace window (ctx.force).
const TriggerHandlerDocument = graphql(`
  mutation TriggerHandler($name: String!, $force: Boolean) {
    triggerHandler(input: { name: $name, force: $force, ifRunning: QUEUE }) {
      outcome
    }
  }
`);

/** A tick's extra as one line (the whole of it in the tooltip). */
function ExtraJson({ value }: { value: unknown }) {
  if (value === null || value === undefined) return null;
  const text = JSON.stringify(value);
  return (
    <code className="muted" title={JSON.stringify(value, null, 2)} data-testid="tick-extra">
      {' '}
      {text.length > 80 ? `${text.slice(0, 79)}…` : text}
    </code>
  );
}
const TriggerRunDocument = graphql(`
  mutation TriggerRunFromHandlers($input: TriggerRunInput!) {
    triggerRun(input: $input) {
      result
      run {
        id
      }
    }
  }
`);

export function HandlersScreen() {
  const can = useCan();
  // The catalogue is pushed whole at each change (and at once on each (re)subscription); the
  // query is the first paint and the fallback that polls while the socket is down. Last one wins.
  const q = useQuery(HandlersDocument, {});
  const [handlers, setHandlers] = useState<HandlerRowFragment[] | null>(null);
  useEffect(() => {
    if (q.data) setHandlers(q.data.handlerConnection.nodes);
  }, [q.data]);
  useSubscription(HandlersLiveDocument, {}, { next: (d) => setHandlers(d.handlerCatalog.handlers), error: () => q.reloadSoon() });
  const triggerHandler = useMutation(TriggerHandlerDocument);
  // The recoverable handler whose "Start run" form is open, and the button that opened it (focus goes back there).
  const [starting, setStarting] = useState<{ name: string; opener: HTMLElement | null } | null>(null);
  const [started, setStarted] = useState<{ name: string; runId: string; result: string } | null>(null);
  return (
    <section aria-labelledby="handlers-title">
      <h1 id="handlers-title">Handlers</h1>
      <ErrorBox error={q.error} />
      <ErrorBox error={triggerHandler.error} title="The action was refused" />
      {!handlers ? (
        !q.error && <Loading />
      ) : handlers.length === 0 ? (
        <Empty>No handler is registered: start a worker (npm start, or jobgate worker) with your handlers.</Empty>
      ) : (
        <div className="table-box" tabIndex={0} role="region" aria-label="Registered handlers">
          <table data-testid="handlers">
            <thead>
              <tr>
                <th scope="col">Handler</th>
                <th scope="col">Kind</th>
                <th scope="col">Workers</th>
                <th scope="col">Cadence</th>
                <th scope="col">Next tick</th>
                <th scope="col">Last outcome</th>
                <th scope="col">Recent runs</th>
                {can('OPERATOR') && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {handlers.map((h) => (
                <tr key={`${h.kind}:${h.name}`} data-handler={h.name}>
                  <th scope="row">{h.name}</th>
                  <td>{h.kind}</td>
                  <td>{h.workers.length}</td>
                  <td>
                    {h.cadence
                      ? h.cadence.cron
                        ? `${h.cadence.cron} (${h.cadence.timezone ?? 'UTC'})`
                        : `every ${formatDuration(h.cadence.everyMs)}`
                      : '—'}
                  </td>
                  <td>
                    <Time iso={h.interval?.nextDueAt ?? h.schedule?.nextDueAt} />
                  </td>
                  <td>
                    {h.lastOutcome ? (
                      <>
                        <Status value={h.lastOutcome.status} /> <Time iso={h.lastOutcome.finishedAt} />
                        {h.lastOutcome.count !== null && h.lastOutcome.count !== undefined && <> count {h.lastOutcome.count}</>}{' '}
                        {h.lastOutcome.message}
                        <ExtraJson value={h.lastOutcome.extra} />
                      </>
                    ) : h.lastRun ? (
                      <Link to={href('runs', h.lastRun.id)}>
                        last run <Status value={h.lastRun.status} />
                      </Link>
                    ) : (
                      '—'
                    )}
                    {h.interval && (
                      <span className="muted">
                        {' '}
                        ({h.interval.okRuns} ok, {h.interval.errorRuns} errors)
                      </span>
                    )}
                    {h.alertsOptOut && (
                      <span className="muted" title="Registered with alertsOptOut: no alert rule fires about it.">
                        {' '}
                        alerts off
                      </span>
                    )}
                    {h.interval && h.interval.abandonedRunning > 0 && (
                      <span
                        className="warn"
                        title="Ticks that ignored their signal past their timeout and grace: the next ticks run, but these still run in their worker."
                      >
                        {' '}
                        {h.interval.abandonedRunning} abandoned, still running
                      </span>
                    )}
                  </td>
                  {/* Recoverable runs are kept, each with its screen; an interval's ticks are not (its totals are under Last outcome). */}
                  <td>{h.kind === 'RECOVERABLE' ? <RecentRuns name={h.name} /> : '—'}</td>
                  {can('OPERATOR') && (
                    <td>
                      {h.kind === 'INTERVAL' && can('ADMIN') && (
                        <>
                          <button type="button" onClick={() => void triggerHandler.run({ name: h.name })}>
                            Run now
                          </button>{' '}
                          <button
                            type="button"
                            title="Run now, telling the handler to skip its own grace window"
                            onClick={() => void triggerHandler.run({ name: h.name, force: true })}
                          >
                            Force run
                          </button>
                        </>
                      )}
                      {h.kind === 'RECOVERABLE' && (
                        <button
                          type="button"
                          aria-expanded={starting?.name === h.name}
                          aria-controls="start-run"
                          aria-label={`Start a run of ${h.name}`}
                          onClick={(ev) => {
                            setStarted(null);
                            setStarting({ name: h.name, opener: ev.currentTarget });
                          }}
                        >
                          Start run…
                        </button>
                      )}
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {starting && (
        <StartRun
          key={starting.name}
          name={starting.name}
          onClose={(run) => {
            if (run) setStarted({ name: starting.name, ...run });
            setStarting(null);
            starting.opener?.focus();
          }}
        />
      )}
      {started && (
        <p className="ok" role="status" data-testid="run-started">
          {started.result === 'STARTED'
            ? `Started a run of ${started.name}. `
            : started.result === 'RESUMED'
              ? `Resumed the paused run of ${started.name} from its cursor (a resumed run keeps its own parameters). `
              : `A run of ${started.name} is already running; it keeps its own parameters. `}
          <Link to={href('runs', started.runId)}>Open the run</Link>
        </p>
      )}
    </section>
  );
}

/** What a params text holds: nothing (no params), a JSON value, or why it is not JSON. */
function parseParams(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  if (text.trim() === '') return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    return { ok: false, message: `The parameters are not valid JSON: ${(error as Error).message}.` };
  }
}

/**
 * "Start run" for a recoverable handler: its parameters as JSON (the API does not publish a
 * handler's params schema, so there are no fields to generate; the handler's worker checks them and
 * fails the run, saying why, when they do not fit). Text that is not JSON is not sent.
 */
function StartRun({ name, onClose }: { name: string; onClose(run?: { runId: string; result: string }): void }) {
  const trigger = useMutation(TriggerRunDocument);
  const [text, setText] = useState('');
  const [force, setForce] = useState(false);
  const [shown, setShown] = useState<string | null>(null);
  const area = useRef<HTMLTextAreaElement>(null);
  const ids = { title: useId(), hint: useId(), error: useId() };
  useEffect(() => area.current?.focus(), []);
  // Once a parse error is shown, it follows the text as it is corrected.
  const parsed = parseParams(text);
  const invalid = shown !== null ? (parsed.ok ? null : parsed.message) : null;
  return (
    <form
      id="start-run"
      className="form start-run"
      aria-labelledby={ids.title}
      onSubmit={async (ev) => {
        ev.preventDefault();
        if (!parsed.ok) {
          setShown(parsed.message);
          area.current?.focus();
          return;
        }
        const r = await trigger.run({
          input: { name, ...(parsed.value === undefined ? {} : { params: parsed.value }), ...(force ? { force: true } : {}) },
        });
        if (r) onClose({ runId: r.triggerRun.run.id, result: r.triggerRun.result });
      }}
      onKeyDown={(ev) => {
        if (ev.key === 'Escape') onClose();
      }}
    >
      <h2 id={ids.title}>Start a run of {name}</h2>
      <label>
        Parameters (JSON, optional)
        <textarea
          ref={area}
          rows={6}
          spellCheck={false}
          value={text}
          placeholder='{"since": "2026-01-01"}'
          onChange={(ev) => setText(ev.target.value)}
          aria-invalid={invalid ? true : undefined}
          aria-describedby={invalid ? `${ids.hint} ${ids.error}` : ids.hint}
        />
      </label>
      <p className="muted" id={ids.hint}>
        Empty starts it without parameters. The handler&apos;s worker checks them against its own schema; a run whose parameters do not fit
        fails at once, saying why.
      </p>
      {invalid && (
        <p className="error" role="alert" id={ids.error}>
          {invalid}
        </p>
      )}
      <label className="inline">
        <input type="checkbox" checked={force} onChange={(ev) => setForce(ev.target.checked)} /> Queue it even when no live worker has the
        handler
      </label>
      <ErrorBox error={trigger.error} title="The run was not started" />
      <div className="actions">
        <button type="submit" disabled={trigger.pending}>
          Start run
        </button>
        <button type="button" onClick={() => onClose()}>
          Cancel
        </button>
      </div>
    </form>
  );
}
