import { useId, useRef, useState } from 'react';
import { graphql } from '../gql/index.ts';
import type { EndpointKind, HttpMethod } from '../gql/graphql.ts';
import { formatCount, formatDuration, formatLocal, formatRelative } from '../lib/format.ts';
import { useCan, useMutation, useNow, useQuery, useSubscription } from '../lib/hooks.ts';
import { href } from '../lib/router.ts';
import type { ApiError } from '../lib/api.ts';
import { Empty, ErrorBox, Link, Loading, Time } from '../ui/common.tsx';
import { useConfirm } from '../ui/confirm.tsx';

const EndpointsDocument = graphql(`
  query Endpoints {
    endpoints(first: 100) {
      totalCount
      nodes {
        id
        name
        kind
        url
        method
        handlerName
        maxAttempts
        concurrencyLimit
        keyConcurrencyLimit
        defaultPriority
        rateLimit {
          count
          periodMs
          burst
        }
        keyRateLimit {
          count
          periodMs
          burst
        }
        busiestKeys {
          key
          running
          pending
        }
        pausedAt
        retryAfterHold {
          until
          statusCode
        }
        createdAt
        viewerCan {
          update
        }
      }
    }
    workspace {
      id
      concurrencyLimit
    }
    executionStats(windowMinutes: 60) {
      byEndpoint {
        endpointId
        pending
        running
      }
    }
  }
`);

/** "5 per 1.0 s (burst 5)": a rate limit as its bucket reads. */
export const rate = (r: { count: number; periodMs: number; burst: number }) =>
  `${formatCount(r.count)} per ${formatDuration(r.periodMs)} (burst ${formatCount(r.burst)})`;

const EndpointsExecutionsDocument = graphql(`
  subscription EndpointsExecutions($after: String) {
    executionUpdates(after: $after) {
      cursor
      executionId
    }
  }
`);

const UpdateEndpointLimitsDocument = graphql(`
  mutation UpdateEndpointLimits($input: UpdateEndpointInput!) {
    updateEndpoint(input: $input) {
      id
      concurrencyLimit
      keyConcurrencyLimit
      rateLimit {
        count
        periodMs
        burst
      }
      keyRateLimit {
        count
        periodMs
        burst
      }
    }
  }
`);

const UpdateWorkspaceCapDocument = graphql(`
  mutation UpdateWorkspaceCap($input: UpdateWorkspaceInput!) {
    updateWorkspace(input: $input) {
      id
      concurrencyLimit
    }
  }
`);

const PauseEndpointDocument = graphql(`
  mutation PauseEndpoint($id: ID!) {
    pauseEndpoint(id: $id) {
      id
      pausedAt
    }
  }
`);

const ResumeEndpointDocument = graphql(`
  mutation ResumeEndpoint($id: ID!) {
    resumeEndpoint(id: $id) {
      id
      pausedAt
    }
  }
`);

const RegisterEndpointDocument = graphql(`
  mutation RegisterEndpoint($input: RegisterEndpointInput!) {
    registerEndpoint(input: $input) {
      id
      name
    }
  }
`);

export function EndpointsScreen() {
  const can = useCan();
  const q = useQuery(EndpointsDocument, {}, { throttleMs: 1000 });
  // Counts move with every execution: read again (coalesced) as they change.
  useSubscription(
    EndpointsExecutionsDocument,
    {},
    { next: () => q.reloadSoon(), cursor: (d) => d.executionUpdates.cursor, reset: q.reload },
  );
  const counts = new Map(q.data?.executionStats.byEndpoint.map((c) => [c.endpointId, c]));
  const pause = useMutation(PauseEndpointDocument);
  const resume = useMutation(ResumeEndpointDocument);
  const [confirmation, confirm] = useConfirm();
  // A hold ends at its time with no event to say so: the screen counts it down and drops it then.
  const now = useNow(1000);
  return (
    <section aria-labelledby="endpoints-title">
      <h1 id="endpoints-title">Endpoints</h1>
      {can('OPERATOR') && <RegisterEndpoint onDone={q.reload} />}
      <h2>Registered</h2>
      {q.data?.workspace.concurrencyLimit != null && (
        <p data-testid="workspace-cap">
          The workspace runs at most {formatCount(q.data.workspace.concurrencyLimit)} attempts at once across its endpoints.
        </p>
      )}
      {q.data && can('ADMIN') && <WorkspaceCap workspace={q.data.workspace} onDone={q.reload} />}
      <ErrorBox error={q.error} />
      {!q.data ? (
        !q.error && <Loading />
      ) : q.data.endpoints.nodes.length === 0 ? (
        <Empty>
          No endpoint yet.{' '}
          {can('OPERATOR')
            ? 'Register one above: an HTTP URL, or the name of a handler your workers registered.'
            : 'An OPERATOR or ADMIN key can register one.'}
        </Empty>
      ) : (
        // Wide (fourteen columns, a target's URL): it scrolls in its box, never the page.
        <div className="table-box" tabIndex={0} role="region" aria-label="Registered endpoints">
          <table data-testid="endpoints">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                {can('OPERATOR') && <th scope="col">Actions</th>}
                <th scope="col">Pending</th>
                <th scope="col">Running</th>
                <th scope="col">Concurrency limit</th>
                <th scope="col">Per-key limits</th>
                <th scope="col">Rate limit</th>
                <th scope="col">Busiest keys</th>
                <th scope="col">Default priority</th>
                <th scope="col">Kind</th>
                <th scope="col">Target</th>
                <th scope="col">Max attempts</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {q.data.endpoints.nodes.map((e) => (
                <tr key={e.id}>
                  <th scope="row">
                    <Link to={href('endpoints', e.id)}>{e.name}</Link>{' '}
                    <Link
                      to={`${href('executions')}?endpoint=${encodeURIComponent(e.id)}`}
                      className="muted"
                      ariaLabel={`Executions of ${e.name}`}
                    >
                      executions
                    </Link>
                  </th>
                  <td data-testid="endpoint-state">
                    {e.pausedAt ? (
                      <>
                        Paused since <Time iso={e.pausedAt} />
                      </>
                    ) : (
                      !held(e, now) && 'Running'
                    )}
                    {held(e, now) && <RetryAfterHoldNote hold={e.retryAfterHold} now={now} />}
                  </td>
                  {/* The lever comes right after the name and state, so a phone reaches it without scrolling the table. */}
                  {can('OPERATOR') && (
                    <td>
                      {/* An OPERATOR changes only the endpoints its key registered (viewerCan: one rule for every change). */}
                      {!e.viewerCan.update ? (
                        '—'
                      ) : e.pausedAt ? (
                        <button
                          type="button"
                          aria-label={`Resume ${e.name}`}
                          onClick={async () => (await resume.run({ id: e.id })) && q.reload()}
                        >
                          Resume
                        </button>
                      ) : (
                        <>
                          <button
                            type="button"
                            aria-label={`Pause ${e.name}`}
                            onClick={async () =>
                              (await confirm({
                                message: `Pause endpoint ${e.name}? None of its executions starts until it is resumed; attempts running now finish, and new jobs wait.`,
                                action: 'Pause endpoint',
                              })) &&
                              (await pause.run({ id: e.id })) &&
                              q.reload()
                            }
                          >
                            Pause
                          </button>
                          {held(e, now) && (
                            <button
                              type="button"
                              aria-label={`Lift the hold on ${e.name}`}
                              onClick={async () =>
                                (await confirm({
                                  message: `Lift the hold on ${e.name}? Its target asked for no requests before ${formatLocal(e.retryAfterHold.until)}; its due executions start now.`,
                                  action: 'Lift the hold',
                                })) &&
                                // resumeEndpoint lifts a Retry-After hold as it ends a pause.
                                (await resume.run({ id: e.id })) &&
                                q.reload()
                              }
                            >
                              Lift hold
                            </button>
                          )}
                        </>
                      )}
                    </td>
                  )}
                  <td data-testid="endpoint-pending">{formatCount(counts.get(e.id)?.pending ?? 0)}</td>
                  <td data-testid="endpoint-running">{formatCount(counts.get(e.id)?.running ?? 0)}</td>
                  <td>
                    {e.viewerCan.update ? (
                      <LimitField endpoint={e} field="concurrencyLimit" onDone={q.reload} />
                    ) : (
                      (e.concurrencyLimit ?? 'unlimited')
                    )}
                  </td>
                  <td data-testid="endpoint-key-limits">
                    {e.viewerCan.update ? (
                      <div className="limit-editors">
                        <LimitField endpoint={e} field="keyConcurrencyLimit" onDone={q.reload} />
                        <RateLimitField endpoint={e} field="keyRateLimit" onDone={q.reload} />
                      </div>
                    ) : e.keyConcurrencyLimit == null && !e.keyRateLimit ? (
                      'none'
                    ) : (
                      <ul className="plain">
                        {e.keyConcurrencyLimit != null && <li>{formatCount(e.keyConcurrencyLimit)} in flight</li>}
                        {e.keyRateLimit && <li>{rate(e.keyRateLimit)}</li>}
                      </ul>
                    )}
                  </td>
                  <td data-testid="endpoint-rate-limit">
                    {e.viewerCan.update ? (
                      <RateLimitField endpoint={e} field="rateLimit" onDone={q.reload} />
                    ) : e.rateLimit ? (
                      rate(e.rateLimit)
                    ) : (
                      'unlimited'
                    )}
                  </td>
                  <td data-testid="endpoint-busiest-keys">
                    {e.busiestKeys.length === 0 ? (
                      '—'
                    ) : (
                      <ul className="plain">
                        {e.busiestKeys.map((k) => (
                          <li key={k.key}>
                            <code>{k.key}</code>: {formatCount(k.running)} running, {formatCount(k.pending)} waiting
                          </li>
                        ))}
                      </ul>
                    )}
                  </td>
                  <td>{e.defaultPriority}</td>
                  <td>{e.kind}</td>
                  <td>{e.kind === 'HTTP' ? `${e.method ?? 'POST'} ${e.url ?? ''}` : e.handlerName}</td>
                  <td>{e.maxAttempts ?? 'default'}</td>
                  <td>
                    <Time iso={e.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ErrorBox error={pause.error ?? resume.error} title="The action was refused" />
      {confirmation}
    </section>
  );
}

interface RetryAfterHold {
  until: string;
  statusCode: number;
}

/** Is a hold its target asked for in force at `now`? */
export function held<E extends { retryAfterHold?: RetryAfterHold | null }>(
  endpoint: E,
  now: number,
): endpoint is E & { retryAfterHold: RetryAfterHold } {
  return !!endpoint.retryAfterHold && Date.parse(endpoint.retryAfterHold.until) > now;
}

/**
 * A hold the endpoint's target asked for (a 429 or 503 with Retry-After): until when, how long from
 * now, and which answer asked for it. No execution of the endpoint starts before then.
 */
export function RetryAfterHoldNote({ hold, now }: { hold: RetryAfterHold; now: number }) {
  return (
    <span className="hold" data-testid="endpoint-hold">
      Held by its target until <Time iso={hold.until} /> ({formatRelative(hold.until, now)}; {hold.statusCode} Retry-After)
    </span>
  );
}

/**
 * A form's fields as typed, starting from what the server holds. When the server's value changes (a
 * save's reload, another operator, a live update) the fields follow it only if they hold nothing
 * typed since they last did: a value being typed is never swept away under the user, nor its Save
 * button with it, and the form stays mounted throughout (its fields, its button, its focus).
 * `edit` is the user's typing; `settle(sent, answer)` takes the value a save of `sent` was answered
 * with, unless the user typed again while it was on its way; `changed`: the fields differ from the
 * server's value.
 */
export function useDraft<T extends Record<string, string>>(
  saved: T,
): { draft: T; edit(draft: T): void; settle(sent: T, answer: T): void; changed: boolean } {
  const key = JSON.stringify(saved);
  // `base`: the server's value last seen; `synced`: the value the fields were last set to by the server.
  const [state, setState] = useState({ draft: saved, base: key, synced: key });
  if (state.base !== key) {
    setState((s) => (JSON.stringify(s.draft) === s.synced ? { draft: saved, base: key, synced: key } : { ...s, base: key }));
  }
  const edit = (draft: T) => setState((s) => ({ ...s, draft }));
  const settle = (sent: T, answer: T) => setState((s) => (s.draft === sent ? { ...s, draft: answer, synced: JSON.stringify(answer) } : s));
  return { draft: state.draft, edit, settle, changed: JSON.stringify(state.draft) !== key };
}

/**
 * Where a refusal shows: under the control, announced (role=alert), and named by the fields it
 * concerns (aria-describedby, aria-invalid) so a screen reader reads it on the field too.
 */
export function useFieldError(error: ApiError | null): { id: string; fieldProps: { 'aria-invalid'?: true; 'aria-describedby'?: string } } {
  const id = useId();
  return { id, fieldProps: error ? { 'aria-invalid': true, 'aria-describedby': id } : {} };
}

type EndpointLimits = {
  id: string;
  name: string;
  concurrencyLimit?: number | null;
  keyConcurrencyLimit?: number | null;
  rateLimit?: RateLimit | null;
  keyRateLimit?: RateLimit | null;
};

interface RateLimit {
  count: number;
  periodMs: number;
  burst: number;
}

/** A limit as its field shows it: empty for none. */
const limitDraft = (limit: number | null | undefined) => ({ value: limit == null ? '' : String(limit) });

/** A rate limit as its three fields show it (the period in seconds): all empty for none. */
const rateDraft = (limit: RateLimit | null | undefined) => ({
  count: limit ? String(limit.count) : '',
  seconds: limit ? String(limit.periodMs / 1000) : '',
  burst: limit ? String(limit.burst) : '',
});

const LIMIT_WORDS = {
  concurrencyLimit: { label: 'Concurrency limit', saveLabel: 'concurrency limit', empty: 'unlimited', unit: null },
  // Beside the per-key rate limit in one cell: the unit tells the two apart.
  keyConcurrencyLimit: { label: 'Per-key concurrency limit', saveLabel: 'per-key concurrency limit', empty: 'none', unit: 'in flight' },
} as const;

/**
 * One of the endpoint's attempts-in-flight limits (its total, or per concurrency key), changed in
 * place: empty removes it. After a save the field keeps the focus the vanishing Save button had.
 */
export function LimitField({
  endpoint,
  field,
  onDone,
}: {
  endpoint: EndpointLimits;
  field: 'concurrencyLimit' | 'keyConcurrencyLimit';
  onDone(): void;
}) {
  const set = useMutation(UpdateEndpointLimitsDocument);
  const words = LIMIT_WORDS[field];
  const { draft, edit, settle, changed } = useDraft(limitDraft(endpoint[field]));
  const input = useRef<HTMLInputElement>(null);
  // A refusal concerns the value typed: put back as saved, the field has nothing to be refused.
  const refusal = changed ? set.error : null;
  const { id: errorId, fieldProps } = useFieldError(refusal);
  return (
    <form
      className="inline-form"
      onSubmit={async (ev) => {
        ev.preventDefault();
        const r = await set.run({ input: { id: endpoint.id, [field]: draft.value === '' ? null : Number(draft.value) } });
        if (r) {
          settle(draft, limitDraft(r.updateEndpoint[field]));
          input.current?.focus();
          onDone();
        }
      }}
    >
      <span className="fields">
        <input
          ref={input}
          type="number"
          min={1}
          inputMode="numeric"
          placeholder={words.empty}
          aria-label={`${words.label} of ${endpoint.name} (empty: ${words.empty})`}
          value={draft.value}
          onChange={(ev) => edit({ value: ev.target.value })}
          {...fieldProps}
        />
        {words.unit && <span aria-hidden="true">{words.unit}</span>}
        {changed && (
          <button type="submit" disabled={set.pending} aria-label={`Save the ${words.saveLabel} of ${endpoint.name}`}>
            Save
          </button>
        )}
      </span>
      {refusal && (
        <div id={errorId} className="field-error">
          <ErrorBox error={refusal} title="Not changed" />
        </div>
      )}
    </form>
  );
}

const RATE_WORDS = {
  rateLimit: { label: 'Rate limit', saveLabel: 'rate limit', empty: 'unlimited' },
  keyRateLimit: { label: 'Per-key rate limit', saveLabel: 'per-key rate limit', empty: 'none' },
} as const;

/**
 * One of the endpoint's rate limits (its total, or per concurrency key) changed in place: so many
 * starts per so many seconds, in bursts of up to so many. An empty count removes it; an empty period
 * is a second; an empty burst is the count (the API's default).
 */
export function RateLimitField({
  endpoint,
  field,
  onDone,
}: {
  endpoint: EndpointLimits;
  field: 'rateLimit' | 'keyRateLimit';
  onDone(): void;
}) {
  const set = useMutation(UpdateEndpointLimitsDocument);
  const words = RATE_WORDS[field];
  const { draft, edit, settle, changed } = useDraft(rateDraft(endpoint[field]));
  const first = useRef<HTMLInputElement>(null);
  // A refusal concerns the value typed: put back as saved, the field has nothing to be refused.
  const refusal = changed ? set.error : null;
  const { id: errorId, fieldProps } = useFieldError(refusal);
  const of = `${words.label} of ${endpoint.name}`;
  return (
    <form
      className="inline-form rate-form"
      onSubmit={async (ev) => {
        ev.preventDefault();
        const limit =
          draft.count === ''
            ? null
            : {
                count: Number(draft.count),
                periodMs: Math.round(Number(draft.seconds === '' ? '1' : draft.seconds) * 1000),
                ...(draft.burst === '' ? {} : { burst: Number(draft.burst) }),
              };
        const r = await set.run({ input: { id: endpoint.id, [field]: limit } });
        if (r) {
          settle(draft, rateDraft(r.updateEndpoint[field]));
          first.current?.focus();
          onDone();
        }
      }}
    >
      <span className="fields">
        <input
          ref={first}
          type="number"
          min={1}
          inputMode="numeric"
          placeholder={words.empty}
          aria-label={`${of}: starts per period (empty: ${words.empty})`}
          value={draft.count}
          onChange={(ev) => edit({ ...draft, count: ev.target.value })}
          {...fieldProps}
        />
        <span aria-hidden="true">starts per</span>
        <input
          type="number"
          min={1}
          step="any"
          inputMode="decimal"
          placeholder="1"
          aria-label={`${of}: period in seconds (empty: 1)`}
          value={draft.seconds}
          onChange={(ev) => edit({ ...draft, seconds: ev.target.value })}
          {...fieldProps}
        />
        <span aria-hidden="true">s, burst</span>
        <input
          type="number"
          min={1}
          inputMode="numeric"
          placeholder="= count"
          aria-label={`${of}: burst (empty: the count)`}
          value={draft.burst}
          onChange={(ev) => edit({ ...draft, burst: ev.target.value })}
          {...fieldProps}
        />
        {changed && (
          <button type="submit" disabled={set.pending} aria-label={`Save the ${words.saveLabel} of ${endpoint.name}`}>
            Save
          </button>
        )}
      </span>
      {refusal && (
        <div id={errorId} className="field-error">
          <ErrorBox error={refusal} title="Not changed" />
        </div>
      )}
    </form>
  );
}

/** The workspace's cap on attempts in flight across its endpoints, for an ADMIN: empty removes it. */
function WorkspaceCap({ workspace, onDone }: { workspace: { id: string; concurrencyLimit?: number | null }; onDone(): void }) {
  const set = useMutation(UpdateWorkspaceCapDocument);
  const { draft, edit, settle, changed } = useDraft(limitDraft(workspace.concurrencyLimit));
  const input = useRef<HTMLInputElement>(null);
  // A refusal concerns the value typed: put back as saved, the field has nothing to be refused.
  const refusal = changed ? set.error : null;
  const { id: errorId, fieldProps } = useFieldError(refusal);
  return (
    <form
      className="inline-form workspace-cap"
      onSubmit={async (ev) => {
        ev.preventDefault();
        const r = await set.run({ input: { concurrencyLimit: draft.value === '' ? null : Number(draft.value) } });
        if (r) {
          settle(draft, limitDraft(r.updateWorkspace.concurrencyLimit));
          input.current?.focus();
          onDone();
        }
      }}
    >
      <span className="fields">
        <label className="inline">
          Workspace cap on attempts in flight (empty: no cap)
          <input
            ref={input}
            type="number"
            min={1}
            inputMode="numeric"
            placeholder="no cap"
            value={draft.value}
            onChange={(ev) => edit({ value: ev.target.value })}
            {...fieldProps}
          />
        </label>
        {changed && (
          <button type="submit" disabled={set.pending}>
            Save the workspace cap
          </button>
        )}
      </span>
      {refusal && (
        <div id={errorId} className="field-error">
          <ErrorBox error={refusal} title="Not changed" />
        </div>
      )}
    </form>
  );
}

function RegisterEndpoint({ onDone }: { onDone(): void }) {
  const register = useMutation(RegisterEndpointDocument);
  const [name, setName] = useState('');
  const [kind, setKind] = useState<EndpointKind>('HTTP');
  const [url, setUrl] = useState('');
  const [method, setMethod] = useState<HttpMethod>('POST');
  const [handlerName, setHandlerName] = useState('');
  const [maxAttempts, setMaxAttempts] = useState('');
  const [done, setDone] = useState<string | null>(null);
  return (
    <form
      className="form"
      aria-labelledby="register-title"
      onSubmit={async (e) => {
        e.preventDefault();
        setDone(null);
        const r = await register.run({
          input: {
            name,
            kind,
            ...(kind === 'HTTP' ? { url, method } : { handlerName }),
            ...(maxAttempts ? { maxAttempts: Number(maxAttempts) } : {}),
          },
        });
        if (r) {
          setDone(r.registerEndpoint.name);
          setName('');
          onDone();
        }
      }}
    >
      <h2 id="register-title">Register an endpoint</h2>
      <label>
        Name (dotted lowercase, e.g. billing.send-invoice)
        <input value={name} onChange={(e) => setName(e.target.value)} required />
      </label>
      <fieldset>
        <legend>Kind</legend>
        {(['HTTP', 'HANDLER'] as const).map((k) => (
          <label key={k} className="inline">
            <input type="radio" name="endpoint-kind" value={k} checked={kind === k} onChange={() => setKind(k)} /> {k}
          </label>
        ))}
      </fieldset>
      {kind === 'HTTP' ? (
        <>
          <label>
            URL
            <input type="url" value={url} onChange={(e) => setUrl(e.target.value)} required />
          </label>
          <label>
            Method
            <select value={method} onChange={(e) => setMethod(e.target.value as HttpMethod)}>
              {(['POST', 'PUT', 'PATCH', 'GET', 'DELETE'] as const).map((m) => (
                <option key={m}>{m}</option>
              ))}
            </select>
          </label>
        </>
      ) : (
        <label>
          Handler name
          <input value={handlerName} onChange={(e) => setHandlerName(e.target.value)} required />
        </label>
      )}
      <label>
        Max attempts (optional)
        <input type="number" min={1} max={100} value={maxAttempts} onChange={(e) => setMaxAttempts(e.target.value)} />
      </label>
      <ErrorBox error={register.error} title="Not registered" />
      {done && (
        <p className="ok" role="status">
          Registered {done}. <Link to={href('jobs', 'new')}>Create a job on it</Link>
        </p>
      )}
      <button type="submit" disabled={register.pending}>
        Register endpoint
      </button>
    </form>
  );
}
