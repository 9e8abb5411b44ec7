/**
 * The one place errors are shaped for clients. Domain errors keep their message and get their
 * stable `extensions.code` (plus machine-readable details such as validation issue paths).
 * GraphQL's own errors (syntax, validation, variable coercion) pass through, without any
 * "Did you mean …" suggestion; a variable's value that cannot be coerced (an unknown enum value,
 * a missing field, a wrong type) is bad input like any other: VALIDATION_FAILED, with the
 * variable as its issue's path. A database that
 * cannot be reached is UNAVAILABLE (retry later), said in the log at most every 10 s. Everything else is a bug: logged here with its stack, and sent as a bare "Unexpected error." with code
 * INTERNAL_SERVER_ERROR — never a stack trace or an internal message.
 *
 * Yoga also logs, at error level, every error that masking replaced, as `String(error)`: for a
 * GraphQLError that prints the lines of the operation around it, literal arguments and all (a
 * signing secret written inline in a refused mutation). This function has already logged what the
 * server needs (nothing for a domain error: the client got it), so `handled` lets the gateway's
 * log adapter drop yoga's copy.
 */
import { GraphQLError, Kind } from 'graphql';
import { DomainError } from '../service/kernel/errors.js';
import { isConnectionError } from '../service/ops/unavailable.js';
import { atMostEvery, type Logger } from '../log.js';
import type { ErrorOrigins } from './request-id.js';
import { withMessage, withoutSuggestions, withoutSyntaxPrefix } from './hardening.js';

export interface MaskError {
  (error: unknown, message: string): Error;
  /** Whether `value` is an error this function was given: logged by it as far as it needs. */
  handled(value: unknown): boolean;
}

/**
 * `base` logs what masking logs, unless `origins` knows the request the error came from: then
 * that request's logger does, so the line carries its id.
 */
export function createMaskError(base: Logger, origins?: ErrorOrigins): MaskError {
  const seen = new WeakSet<object>();
  // Through an outage every request meets it: a line every 10 s at most, the rest counted into the
  // next one (on the logger of the request that writes it, so it carries that request's id).
  let unreachableLog = base;
  const unreachable = atMostEvery(10_000, (msg) => unreachableLog.warn(msg));
  const mask = (error: unknown, message: string): Error => {
    if (typeof error === 'object' && error !== null) seen.add(error);
    const log = origins?.logOf(error) ?? base;
    const gqlError = error instanceof GraphQLError ? error : undefined;
    const original = gqlError ? gqlError.originalError : error;
    const location = gqlError ? { nodes: gqlError.nodes, source: gqlError.source, positions: gqlError.positions, path: gqlError.path } : {};

    if (original instanceof DomainError) {
      const http =
        original.code === 'UNAUTHENTICATED' ? { http: { status: 401 } } : original.code === 'RATE_LIMITED' ? tooMany(original) : {};
      return new GraphQLError(original.message, { ...location, extensions: { code: original.code, ...original.details, ...http } });
    }
    if (gqlError && (original == null || original instanceof GraphQLError)) {
      return withCode(withoutSuggestions(withParserMessageCut(gqlError)));
    }
    // yoga reads `variables` and `extensions` of a GET or a form with JSON.parse, whose error
    // comes bare, outside any field: bad input, not a bug (it was a 500 with its stack logged).
    if (!gqlError && original instanceof SyntaxError) {
      return new GraphQLError("the request's variables or extensions are not valid JSON", {
        extensions: { code: 'BAD_REQUEST', http: { status: 400 } },
      });
    }
    // The database could not be reached (a restart, a cut connection, every pooled connection
    // held): not a bug, and a client can retry. Logged in one line, answered UNAVAILABLE (503).
    if (isConnectionError(original)) {
      unreachableLog = log;
      unreachable(`database unreachable${gqlError?.path ? ` at ${gqlError.path.join('.')}` : ''}: ${(original as Error).message}`);
      return new GraphQLError('the database is unreachable just now; try again', {
        ...location,
        extensions: { code: 'UNAVAILABLE', http: { status: 503 } },
      });
    }
    const cause = original instanceof Error ? original : new Error(String(original));
    log.error(`unexpected error${gqlError?.path ? ` at ${gqlError.path.join('.')}` : ''}: ${cause.stack ?? cause.message}`);
    return new GraphQLError(message, { ...location, extensions: { code: 'INTERNAL_SERVER_ERROR' } });
  };
  return Object.assign(mask, { handled: (value: unknown) => typeof value === 'object' && value !== null && seen.has(value) });
}

/**
 * A refusal by a bound on load: over HTTP, 429 with Retry-After (whole seconds, rounded up) beside
 * the error's own `retryAfterMs`, whether it came before the document was read (authentication,
 * the key's rate) or from a subscription refused as its SSE stream opened (yoga answers a result
 * that has only errors with their status). WebSocket messages carry no `http` (src/subscriptions/ws.ts).
 */
function tooMany(error: DomainError): { http: { status: number; headers: Record<string, string> } } {
  const ms = Number(error.details.retryAfterMs) || 1000;
  return { http: { status: 429, headers: { 'Retry-After': retryAfterSeconds(ms) } } };
}

/** Retry-After for a wait of `ms`: whole seconds, rounded up, at least 1. */
export const retryAfterSeconds = (ms: number): string => String(Math.max(1, Math.ceil(ms / 1000)));

/**
 * yoga's request parser puts the JSON parser's own error into `extensions.originalError`, and
 * that message quotes the whole body: a body of a megabyte came back as a 6 MB error, escaped.
 * Its message is cut short here, in the error yoga made: yoga reads that field's presence to
 * answer 400 rather than 200, so it stays, and a copy of the error was answered 200.
 */
function withParserMessageCut(error: GraphQLError): GraphQLError {
  const original = error.extensions?.originalError as { message?: unknown } | undefined;
  if (original && typeof original.message === 'string' && original.message.length > ORIGINAL_MESSAGE_CAP)
    original.message = `${original.message.slice(0, ORIGINAL_MESSAGE_CAP)}…`;
  return error;
}

/** How much of a request parser's own message a client gets back. */
const ORIGINAL_MESSAGE_CAP = 120;

/**
 * graphql-js reports a variable value it cannot coerce against the variable's definition, and
 * gives it no code (yoga's own codes, GRAPHQL_PARSE_FAILED and GRAPHQL_VALIDATION_FAILED, are for
 * the document). Recognised by that node, never by the message's text.
 */
function withCode(error: GraphQLError): GraphQLError {
  const node = error.nodes?.[0];
  if (error.extensions?.code !== undefined) return error;
  if (node?.kind !== Kind.VARIABLE_DEFINITION) {
    // A refusal of the whole document that yoga did not code: graphql-armor's cost limit throws
    // out of validation, and the page-size repricing refuses at execution. Neither has a path
    // (field errors do) nor a cause (masked errors do). "Syntax Error:" is armor's wording, and
    // wrong: the document parsed.
    if (error.path !== undefined || error.originalError != null) return error;
    const reworded = withoutSyntaxPrefix(error);
    return withMessage(reworded, reworded.message, { ...error.extensions, code: 'GRAPHQL_VALIDATION_FAILED' });
  }
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    extensions: { ...error.extensions, code: 'VALIDATION_FAILED', issues: [{ path: [node.variable.name.value], message: error.message }] },
  });
}
