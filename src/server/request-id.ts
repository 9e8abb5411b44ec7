/**
 * Request ids: every GraphQL request over HTTP has one. An incoming `x-request-id` is kept when
 * it is sane (1-128 characters of letters, digits and `-_.:@/+=`), so a proxy's or a client's id
 * follows the request through; anything else is replaced by a new UUID. The id is sent back in
 * the `x-request-id` response header and in every error's `extensions.requestId` (each event's
 * errors too, for a subscription over Server-Sent Events; WebSocket operations get theirs in
 * src/subscriptions/ws.ts), and every log line the request causes carries it (`requestId`).
 *
 * The log lines: resolvers and the service log through the request's logger (`ctx.log`). The
 * error masking (./mask-error.ts), which yoga calls with the error alone, finds the request's
 * logger through the error (`ErrorOrigins`): each error is marked with it where the request is
 * known, when an operation's result is done or a hook before it throws. An AsyncLocalStorage
 * scope did this before, but on Node 20 and 22 an active one runs hooks on every promise the
 * process makes, the engine's included: 8% of a createJob's CPU.
 */
import { randomUUID } from 'node:crypto';
import { GraphQLError, type ExecutionResult } from 'graphql';
import { handleStreamOrSingleExecutionResult, type Plugin } from 'graphql-yoga';
import type { Logger } from '../log.js';
import { mapIterator } from '../subscriptions/map-iterator.js';

const SANE = /^[A-Za-z0-9\-_.:@/+=]{1,128}$/;

/** The id for a request that sent `header`: kept when sane, else a new one. */
export function requestIdFrom(header: string | string[] | null | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  return value && SANE.test(value) ? value : randomUUID();
}

/** Which request's logger an error belongs to, for code that is handed the error alone. */
export interface ErrorOrigins {
  /** Marks `error` (and the error it wraps) as the request's that logs through `log`. */
  mark(error: unknown, log: Logger): void;
  /** The logger of the request `error` (or the error it wraps) was marked with, if any. */
  logOf(error: unknown): Logger | undefined;
}

export function createErrorOrigins(): ErrorOrigins {
  const logs = new WeakMap<object, Logger>();
  const isObject = (v: unknown): v is object => typeof v === 'object' && v !== null;
  return {
    mark(error, log) {
      if (!isObject(error)) return;
      logs.set(error, log);
      if (error instanceof GraphQLError && isObject(error.originalError)) logs.set(error.originalError, log);
    },
    logOf(error) {
      if (!isObject(error)) return undefined;
      return (
        logs.get(error) ?? (error instanceof GraphQLError && isObject(error.originalError) ? logs.get(error.originalError) : undefined)
      );
    },
  };
}

/**
 * Marks every error of an operation's result (each event's, for a stream) with the operation's
 * logger, before the masking sees it: yoga's masking plugin comes after every plugin of ours, and
 * envelop runs their result hooks in that order.
 */
export function useErrorOrigins(origins: ErrorOrigins): Plugin {
  const logOf = (context: unknown) => (context as { log?: Logger } | undefined)?.log;
  const markAll = (result: ExecutionResult, log: Logger | undefined) => {
    if (log) for (const error of result.errors ?? []) origins.mark(error, log);
  };
  return {
    onExecute({ args }) {
      return {
        onExecuteDone: (payload) => handleStreamOrSingleExecutionResult(payload, ({ result }) => markAll(result, logOf(args.contextValue))),
      };
    },
    onSubscribe({ args }) {
      return {
        onSubscribeResult: (payload) =>
          handleStreamOrSingleExecutionResult(payload, ({ result }) => markAll(result, logOf(args.contextValue))),
        onSubscribeError({ error }) {
          const log = logOf(args.contextValue);
          if (log) origins.mark(error, log);
        },
      };
    },
  };
}

/**
 * The yoga side: the request's id (the one the HTTP handler chose, passed in the server context,
 * else from the request itself, for `yoga.fetch`), answered in the `x-request-id` header and each
 * error's extensions; and, at debug, one line per request with its operation and its errors'
 * codes, through `logOf(request)` (yoga's own debug lines, which cannot carry the id, are not
 * written: see the gateway's log adapter).
 */
export function useRequestId(ids: WeakMap<Request, string>, logOf: (request: Request) => Logger): Plugin {
  const operations = new WeakMap<Request, string>();
  return {
    onRequest({ request, serverContext }) {
      ids.set(request, (serverContext as { requestId?: string }).requestId ?? requestIdFrom(request.headers.get('x-request-id')));
    },
    onParams({ request, params }) {
      if (params.operationName) operations.set(request, params.operationName);
    },
    onResultProcess({ request, result, setResult }) {
      const requestId = ids.get(request);
      if (!requestId || Array.isArray(result)) return;
      // A subscription over Server-Sent Events: each event's errors carry the id too.
      if (isStream(result)) {
        logOf(request).debug('graphql: request answered with a stream', { operationName: operations.get(request) });
        setResult(mapIterator(result[Symbol.asyncIterator](), (item) => withRequestIds(item, requestId)));
        return;
      }
      if (!isPlainResult(result)) return;
      const codes = result.errors?.map((e) => String(e.extensions?.code ?? 'ERROR'));
      logOf(request).debug('graphql: request answered', { operationName: operations.get(request), errors: codes });
      setResult(withRequestIds(result, requestId));
    },
    onResponse({ request, response }) {
      const requestId = ids.get(request);
      if (requestId) response.headers.set('x-request-id', requestId);
    },
  };
}

function withRequestIds<R extends ExecutionResult>(result: R, requestId: string): R {
  return result.errors?.length ? { ...result, errors: result.errors.map((e) => withRequestId(e, requestId)) } : result;
}

function isStream(result: unknown): result is AsyncIterable<ExecutionResult> {
  return typeof result === 'object' && result !== null && Symbol.asyncIterator in result;
}

function isPlainResult(result: unknown): result is ExecutionResult {
  return typeof result === 'object' && result !== null && !(Symbol.asyncIterator in result);
}

function withRequestId(error: GraphQLError, requestId: string): GraphQLError {
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions: { ...error.extensions, requestId },
  });
}
