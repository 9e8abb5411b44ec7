/**
 * Request ids: every GraphQL request over HTTP has one. An incoming `x-request-id` is kept when
 * it is sane (1-128 characters of letters, digits and `-_.:@/+=`), so a proxy's or a client's id
 * follows the request through; anything else is replaced by a new UUID. The id is sent back in
 * the `x-request-id` response header and in every error's `extensions.requestId` (each event's
 * errors too, for a subscription over Server-Sent Events; WebSocket operations get theirs in
 * src/subscriptions/ws.ts), and every log
 * line the request causes carries it (`requestId`).
 *
 * The log lines: the HTTP handler runs the request inside an AsyncLocalStorage scope holding the
 * request's child logger, so code that only has the process's logger (error masking, yoga's own
 * lines) logs through `scopedLog`, which picks the request's. Resolvers get it as `ctx.log`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { GraphQLError, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { withFields, type Logger, type LogFields } from '../log.js';
import { mapIterator } from '../subscriptions/map-iterator.js';

export interface RequestScope {
  requestId: string;
  log: Logger;
}

const scope = new AsyncLocalStorage<RequestScope>();

const SANE = /^[A-Za-z0-9\-_.:@/+=]{1,128}$/;

/** The id for a request that sent `header`: kept when sane, else a new one. */
export function requestIdFrom(header: string | string[] | null | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  return value && SANE.test(value) ? value : randomUUID();
}

/** Runs `fn` as the request with this id: log lines written meanwhile through `scopedLog` carry it. */
export function inRequestScope<T>(log: Logger, requestId: string, fn: () => T): T {
  return scope.run({ requestId, log: withFields(log, { requestId }) }, fn);
}

/** The request being served in this async context, if any. */
export function currentRequest(): RequestScope | undefined {
  return scope.getStore();
}

/** A logger that writes through the current request's logger when there is one, else `base`. */
export function scopedLog(base: Logger): Logger {
  const at = (lvl: 'debug' | 'info' | 'warn' | 'error') => (msg: string, fields?: LogFields) =>
    (scope.getStore()?.log ?? base)[lvl](msg, fields);
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (fields) => withFields(scope.getStore()?.log ?? base, fields),
  };
}

/**
 * The yoga side: the request's id (from the scope the HTTP handler opened, else from the request
 * itself, for `yoga.fetch`), answered in the `x-request-id` header and each error's extensions.
 */
export function useRequestId(ids: WeakMap<Request, string>): Plugin {
  return {
    onRequest({ request }) {
      ids.set(request, currentRequest()?.requestId ?? requestIdFrom(request.headers.get('x-request-id')));
    },
    onResultProcess({ request, result, setResult }) {
      const requestId = ids.get(request);
      if (!requestId || Array.isArray(result)) return;
      // A subscription over Server-Sent Events: each event's errors carry the id too.
      if (isStream(result)) {
        setResult(mapIterator(result[Symbol.asyncIterator](), (item) => withRequestIds(item, requestId)));
        return;
      }
      if (isPlainResult(result)) setResult(withRequestIds(result, requestId));
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
