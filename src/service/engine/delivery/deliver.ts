/**
 * One attempt at delivering an execution: an HTTP request or an in-process handler call, under
 * a timeout and an abort signal. Returns the outcome to record; never throws.
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { Agent, request, type Dispatcher } from 'undici';
import type { ClaimedExecution } from '../../../db/statements/claim.js';
import type { AttemptOutcome, AttemptTarget } from '../../../db/types.js';
import type { HandlerRegistry } from './handler-registry.js';
import { UnrecoverableError } from './handler-registry.js';
import { fencedTransaction, type FencedTransaction } from './fenced-transaction.js';
import { createOutboundPolicy, OutboundRefusedError, type OutboundPolicy } from '../../endpoints/outbound-policy.js';
import { isSealed, type SecretBox } from '../../kernel/secrets.js';
import { signatureHeaders } from './signing.js';
import { createRedactor, FormsCache, type Redactor } from './redaction.js';
import { render, renderDeep, TemplateError, type TemplateScope } from '../../endpoints/template.js';
import { maySendSecret, secretOwner } from '../../endpoints/config-secrets.js';
import { storableText } from '../../kernel/inputs.js';
import { traceparentFor } from './trace.js';

export interface AttemptResult {
  outcome: AttemptOutcome;
  retryable: boolean;
  retryDelayMs: number | null;
  statusCode: number | null;
  error: string | null;
  responseExcerpt: string | null;
  /** Already recorded by the handler's fenced transaction (`complete: true`): nothing to flush. */
  recorded?: boolean;
  /** What an HTTP attempt called, as sent (secrets redacted); null for handlers and unbuilt requests. */
  target?: AttemptTarget | null;
  /** The stack of the error a handler threw (redacted, capped), for diagnosing it; null otherwise. */
  errorStack?: string | null;
}

/** Longest stack kept with an attempt: enough for the frames that matter, bounded per row. */
const STACK_CAP = 8000;

/** What one attempt leaves behind besides its result, whichever way it ends (an abort included). */
interface AttemptState {
  recorded: boolean;
  target: AttemptTarget | null;
  /** How long the execution waited in the worker for a slot before this attempt started. */
  queuedMs: number;
}

export interface DeliveryOptions {
  handlers: HandlerRegistry;
  /** CIDRs outbound HTTP may reach although they are private or special-purpose. */
  outboundAllow?: string[];
  defaultTimeoutMs: number;
  /** Bytes of response body kept; the connection is dropped past it. */
  responseCapBytes?: number;
  /** Opens signing secrets and secret config values sealed at rest. */
  secrets?: SecretBox | undefined;
  /** The pool, worker id and lease length handlers' fenced transactions (ctx.transaction) run with. */
  fence?: { pool: pg.Pool; workerId: string; leaseMs?: number } | undefined;
}

/** Why the attempt's signal was aborted, when it was. */
export type AbortReason = 'timeout' | 'cancelled' | 'lease-lost' | 'shutdown';

const RETRYABLE_STATUS = (s: number) => s === 408 || s === 429 || s >= 500;
/** undici's codes for a request it refused as built: sent again, it is refused again. */
const UNBUILDABLE = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED', 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH']);
const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

// The three HTTP-date forms (RFC 9110 §5.6.7). Date.parse alone reads almost anything as a date:
// "1.5", "-1" and "+5" as days of 2001, so "retry now" instead of the endpoint's backoff.
const IMF_FIXDATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const RFC850_DATE = /^[A-Z][a-z]+, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT$/;
const ASCTIME_DATE = /^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;

/**
 * An input value as it goes into an endpoint's url. Encoding keeps it inside its path segment,
 * query value or fragment, except for `.` and `..`, which encoding leaves as they are (and the URL
 * parser treats `%2e` as a dot too): as a whole segment, either would move the request to another
 * path of the target, with the endpoint's headers (`/customers/{{input.id}}/notify` with `..` is
 * `/notify`). Both are refused, wherever they fall.
 */
function urlInputValue(value: string): string {
  if (value === '.' || value === '..')
    throw new TemplateError(`an input value rendered into the url is "${value}", which would change the url's path`);
  return encodeURIComponent(value);
}

/**
 * What was thrown, as text, whatever it is: handlers and handler schemas may throw anything
 * (undefined, a string, an object whose conversion throws), and describing it must not throw.
 */
function describeThrown(thrown: unknown, withName = false): string {
  if (thrown instanceof Error) return withName ? `${thrown.name}: ${thrown.message}` : thrown.message;
  try {
    return String(thrown);
  } catch {
    return Object.prototype.toString.call(thrown);
  }
}

/** Retry-After as seconds or an HTTP date, in milliseconds from now; undefined if absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Math.min(Number(v) * 1000, MAX_RETRY_AFTER_MS);
  // asctime carries no zone but means GMT; Date.parse would read it as local time.
  const at = IMF_FIXDATE.test(v) || RFC850_DATE.test(v) ? Date.parse(v) : ASCTIME_DATE.test(v) ? Date.parse(`${v} GMT`) : Number.NaN;
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS);
}

const failure = (outcome: AttemptOutcome, error: string, retryable: boolean, extra: Partial<AttemptResult> = {}): AttemptResult => ({
  outcome,
  retryable,
  retryDelayMs: null,
  statusCode: null,
  error,
  responseExcerpt: null,
  ...extra,
});
async function readCapped(body: Dispatcher.ResponseData['body'], limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buf = chunk as Buffer;
    chunks.push(buf);
    size += buf.length;
    if (size >= limit) {
      // Enough: drop the connection rather than download the rest.
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, limit);
}
/** An HTTP endpoint's secrets, opened for one attempt, and the redactor that keeps them out of its record. */
interface Opened {
  scope: TemplateScope;
  /** The scope the job's input (the body) is rendered in: without the secrets its key may not name. */
  inputScope: TemplateScope;
  signingSecret: string | null;
  redactor: Redactor;
}
const unfenced: FencedTransaction = async () => {
  throw new Error('ctx.transaction needs a worker started by jobgate (no pool to run it on)');
};
/**
 * The scopes a request is rendered in (src/service/endpoints/config-secrets.ts): of the config's
 * secrets, the url and headers get those the key that aimed the endpoint may send, and the job's
 * input (the body, sent to the same place) only those both that key and the job's may send, by the
 * one rule of src/service/endpoints/config-secrets.ts (maySendSecret). Checked here, when
 * the request is built, as well as when the endpoint or job was written: a config gains secrets, an
 * endpoint changes its config, after they are written, and a database upgraded from before the
 * rule holds endpoints and jobs that never met it.
 */
function scopesOf(ex: ClaimedExecution, scope: TemplateScope): { scope: TemplateScope; inputScope: TemplateScope } {
  const entries = ex.config_entries ?? {};
  const owner = (key: string) => {
    const entry = entries[key];
    return entry ? secretOwner(entry, ex.config_key_id ?? null) : (ex.config_key_id ?? null);
  };
  const maySend = (keyId: string | null | undefined, admin: boolean | null | undefined) => (key: string) =>
    maySendSecret({ keyId: keyId ?? null, admin: admin === true }, owner(key));
  const endpointMay = maySend(ex.endpoint_key_id, ex.endpoint_key_admin);
  const jobMay = maySend(ex.job_key_id, ex.job_key_admin);
  const refuse = (may: (key: string) => boolean, why: string, from: TemplateScope['config']) =>
    Object.fromEntries(Object.entries(from).map(([key, e]) => [key, e.secret && !e.refused && !may(key) ? { ...e, refused: why } : e]));
  const config = refuse(
    endpointMay,
    "a secret this endpoint may not send: the key that last set its url, headers or config did not write it (an ADMIN's update of the endpoint approves it)",
    scope.config,
  );
  const inputConfig = refuse(jobMay, "a secret that the job's input may not name (only the key that set it, or an ADMIN, may)", config);
  return { scope: { config, input: scope.input }, inputScope: { config: inputConfig, input: scope.input } };
}

/** Runs a registered handler's attempt, with its fenced transaction when the worker has a pool. */
async function runHandler(
  options: DeliveryOptions,
  ex: ClaimedExecution,
  signal: AbortSignal,
  state: AttemptState,
): Promise<AttemptResult> {
  const registered = options.handlers.get(ex.handler_name!);
  if (!registered) return failure('FAILED', `no handler "${ex.handler_name}" is registered in this worker`, true);
  let input = ex.input;
  if (registered.schema) {
    const parsed = registered.schema.safeParse(input);
    if (!parsed.success) {
      const detail = parsed.error.issues.map((i) => `${i.path.join('.') || '(input)'}: ${i.message}`).join('; ');
      return failure('FAILED', `input rejected by the handler's schema: ${detail}`, false);
    }
    input = parsed.data;
  }
  const fence = options.fence;
  const startedAt = performance.now();
  try {
    await registered.fn(input, {
      signal,
      executionId: ex.id,
      jobId: ex.job_id,
      workspaceId: ex.workspace_id,
      attempt: ex.attempt_count,
      // Built when the handler calls it: most handlers never do, and every attempt runs this.
      transaction: fence
        ? (fn, transactionOptions) =>
            fencedTransaction({
              ...fence,
              executionId: ex.id,
              epoch: ex.lease_epoch,
              startedAt,
              queuedMs: state.queuedMs,
              onRecorded: () => void (state.recorded = true),
            })(fn, transactionOptions)
        : unfenced,
    });
    return { outcome: 'SUCCEEDED', retryable: false, retryDelayMs: null, statusCode: null, error: null, responseExcerpt: null };
  } catch (error) {
    if (signal.aborted) throw error;
    const stack = error instanceof Error && typeof error.stack === 'string' ? error.stack.slice(0, STACK_CAP) : null;
    return failure('FAILED', describeThrown(error, true).slice(0, 2000), !(error instanceof UnrecoverableError), { errorStack: stack });
  }
}

/**
 * The first `cap` bytes of the body, redacted before it is cut: a secret (in any of its forms)
 * that the cap cuts through is kept whole so that it is redacted whole; cut first, and its
 * start would be left in clear. So the body is read past the cap by the longest form's length.
 */
async function excerptOf(body: Dispatcher.ResponseData['body'], redactor: Redactor, cap: number): Promise<string> {
  const raw = await readCapped(body, cap + redactor.longestFormBytes);
  return redactor.redactPrefix(raw.toString('utf8'), raw.subarray(0, cap).toString('utf8').length);
}

/** The outcome of an attempt whose signal was aborted before it started, by `reason`. */
function abortedBeforeStart(reason: AbortReason): AttemptResult {
  if (reason === 'cancelled') return failure('CANCELLED', 'cancelled before it started', false);
  if (reason === 'lease-lost') return failure('FAILED', 'lease lost before it started: another worker may run it', true);
  return failure('FAILED', 'worker shutting down before it started', true);
}

/** Runs one attempt's path under its timeout, and answers with a failure for any abort or throw. */
async function attemptOnce(
  timeoutMs: number,
  external: AbortController,
  path: (signal: AbortSignal) => Promise<AttemptResult>,
): Promise<AttemptResult> {
  const signal = external.signal;
  // Aborted before it started (cancelled, its lease lost or its worker stopping while it waited for
  // a slot in the worker's queue, or claimed with a cancellation already requested): the handler
  // is not called and no request is sent.
  if (signal.aborted) return abortedBeforeStart(signal.reason as AbortReason);
  const timer = setTimeout(() => external.abort('timeout' satisfies AbortReason), timeoutMs);
  const aborted = new Promise<never>((_, reject) => {
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
  aborted.catch(() => {});
  try {
    const run = path(signal);
    // A handler that ignores its signal cannot hold the attempt past an abort.
    return await Promise.race([run, aborted]);
  } catch (error) {
    const reason = signal.aborted ? (signal.reason as AbortReason) : undefined;
    if (reason === 'timeout') return failure('TIMED_OUT', `timed out after ${timeoutMs} ms`, true);
    if (reason === 'cancelled') return failure('CANCELLED', 'cancelled while running', false);
    if (reason === 'lease-lost') return failure('FAILED', 'lease lost: another worker may run it', true);
    if (reason === 'shutdown') return failure('FAILED', 'worker shutting down', true);
    // Not a rethrow of a known failure: this must still answer, or the attempt never ends.
    return failure('FAILED', `unexpected: ${describeThrown(error).slice(0, 2000)}`, true);
  } finally {
    clearTimeout(timer);
  }
}

// eslint-disable-next-line max-lines-per-function -- the attempt's paths (HTTP, handler) share the outbound policy, the agent and the secret box it holds
export function createDelivery(options: DeliveryOptions) {
  const policy: OutboundPolicy = createOutboundPolicy(options.outboundAllow ?? []);
  const cap = options.responseCapBytes ?? 4096;
  // Redirects are not followed: undici's request() returns a 3xx as it is.
  const agent: Dispatcher = new Agent({ connect: { lookup: policy.lookup }, keepAliveTimeout: 10_000 });

  const formsCache = new FormsCache();

  const open = (value: string): string => {
    if (!isSealed(value)) return value;
    if (!options.secrets) throw new TemplateError('a secret is sealed but this worker has no JOBGATE_SECRET_KEY to open it');
    return options.secrets.open(value);
  };

  function openSecrets(ex: ClaimedExecution): Opened {
    const config = Object.fromEntries(
      Object.entries(ex.config_entries ?? {}).map(([k, e]) => [k, { ...e, value: e.secret ? open(e.value) : e.value }]),
    );
    const signingSecret = ex.signing_secret ? open(ex.signing_secret) : null;
    // The signing secret is never sent, but the target holds it too and may quote it back.
    const secrets = Object.values(config)
      .filter((e) => e.secret)
      .map((e) => e.value);
    if (signingSecret) secrets.push(signingSecret);
    return { ...scopesOf(ex, { config, input: ex.input }), signingSecret, redactor: createRedactor(secrets, formsCache) };
  }

  async function http(ex: ClaimedExecution, opened: Opened, signal: AbortSignal, state: AttemptState): Promise<AttemptResult> {
    const { scope, signingSecret, redactor } = opened;
    let url: URL;
    let headers: Record<string, string>;
    let body: string | undefined;
    try {
      // Input values are user data: encode them inside the URL. Config values are the operator's.
      url = new URL(render(ex.url!, scope, (s, from) => (from === 'input' ? urlInputValue(s) : s)));
      headers = Object.fromEntries(Object.entries(ex.headers ?? {}).map(([k, v]) => [k.toLowerCase(), render(v, scope)]));
      body = ex.method === 'GET' ? undefined : JSON.stringify(renderDeep(ex.input, opened.inputScope));
    } catch (error) {
      if (error instanceof TemplateError || error instanceof TypeError) {
        return failure('FAILED', `cannot build the request: ${(error as Error).message}`, false);
      }
      throw error;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return failure('FAILED', `refused scheme ${url.protocol}`, false);
    // Registration refuses a Host header (src/service/kernel/inputs.ts): the outbound policy checks
    // the url's address, and a Host of another name reaches another site behind it. An endpoint
    // stored before that rule still holds one; it is refused here rather than sent or dropped.
    if ('host' in headers)
      return failure(
        'FAILED',
        "cannot build the request: the endpoint's headers name Host, which is taken from the url's host (remove it with updateEndpoint)",
        false,
      );
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const literalRefusal = /^[\d.]+$|:/.test(host) ? policy.refusal(host) : undefined;
    if (literalRefusal) return failure('FAILED', `refused to connect to ${host}: ${literalRefusal}`, false);

    if (body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
    headers['user-agent'] ??= 'jobgate';
    // W3C trace context: the execution is the trace, this attempt a new span (./trace.ts).
    headers.traceparent ??= traceparentFor(ex.id);
    if (signingSecret) Object.assign(headers, signatureHeaders(signingSecret, ex.id, body ?? ''));
    const method = ex.method ?? 'POST';
    // Recorded on the attempt as sent, before sending: a timeout or an abort called it too.
    state.target = {
      url: redactor.redact(url.toString()),
      method,
      headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, redactor.redact(v)])),
    };

    try {
      const res = await request(url, { method: method as Dispatcher.HttpMethod, headers, body, signal, dispatcher: agent });
      const excerpt = await excerptOf(res.body, redactor, cap);
      const code = res.statusCode;
      if (code >= 200 && code < 300) {
        return { outcome: 'SUCCEEDED', retryable: false, retryDelayMs: null, statusCode: code, error: null, responseExcerpt: excerpt };
      }
      if (code >= 300 && code < 400) {
        // Redacted before it is cut short, so that the cut cannot leave the start of a secret.
        const to = res.headers.location ? ` to ${redactor.redactPrefix(String(res.headers.location), 200)}` : '';
        return failure('FAILED', `redirect (${code}${to}) not followed`, false, { statusCode: code, responseExcerpt: excerpt });
      }
      const retryable = RETRYABLE_STATUS(code);
      const retryAfter = code === 429 || code === 503 ? parseRetryAfter(res.headers['retry-after']) : undefined;
      return failure('FAILED', `HTTP ${code}`, retryable, { statusCode: code, responseExcerpt: excerpt, retryDelayMs: retryAfter ?? null });
    } catch (error) {
      if (signal.aborted) throw error; // the caller names the abort
      const cause = (error as { cause?: unknown }).cause ?? error;
      if (cause instanceof OutboundRefusedError || (error as { code?: string }).code === 'EJOBGATEREFUSED') {
        return failure('FAILED', (cause as Error).message, false);
      }
      // undici refused the request as built, before sending it (a header value with a line break
      // or a character beyond Latin-1, from the input or the config; a framing header, which
      // registration refuses since, on an endpoint registered before): the same request next time.
      if (UNBUILDABLE.has((error as { code?: string }).code ?? '')) {
        return failure('FAILED', `cannot build the request: ${(error as Error).message}`, false);
      }
      return failure('FAILED', `network error: ${(error as Error).message}`, true);
    }
  }

  /**
   * Runs one attempt under its timeout; `signal` carries cancellation, lease loss and shutdown.
   * What it returns is what gets recorded (attempt row, lastError, logs, notifications), so every
   * error is redacted here, whichever path built it: the url in a refusal or a DNS error, an
   * undici message, an unexpected throw. The excerpt was redacted before it was cut.
   */
  async function attempt(ex: ClaimedExecution, external: AbortController, queuedMs = 0): Promise<AttemptResult> {
    const state: AttemptState = { recorded: false, target: null, queuedMs };
    let opened: Opened | undefined;
    let result: AttemptResult | undefined;
    try {
      if (ex.kind === 'HTTP') opened = openSecrets(ex);
    } catch (error) {
      result = failure('FAILED', `cannot open the endpoint's secrets: ${(error as Error).message}`, false);
    }
    result ??= await attemptOnce(ex.timeout_ms ?? options.defaultTimeoutMs, external, (signal) =>
      opened ? http(ex, opened, signal, state) : runHandler(options, ex, signal, state),
    );
    // Every path builds a result of its own, so it is finished in place. Postgres text cannot
    // hold NUL (a binary response body, a handler's message): one would fail the statement that
    // records the outcome, and with it every outcome batched alongside.
    const redactor = opened?.redactor;
    if (result.error !== null) result.error = storableText(redactor ? redactor.redact(result.error) : result.error);
    result.errorStack = result.errorStack ? storableText(redactor ? redactor.redact(result.errorStack) : result.errorStack) : null;
    if (result.responseExcerpt !== null) result.responseExcerpt = storableText(result.responseExcerpt);
    // Read after the attempt ended: a fenced commit that recorded success wins over whatever the
    // handler did next (a throw, an abort).
    result.recorded = state.recorded;
    result.target = state.target;
    return result;
  }

  return { attempt, close: () => agent.close() };
}

export type Delivery = ReturnType<typeof createDelivery>;
