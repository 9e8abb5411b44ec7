/**
 * Whether an error means "the database is unavailable just now, retry", as opposed to "the
 * statement is wrong". This is the one list: every loop of the engine, the live hub and the
 * GraphQL error mask ask it, so a code added here is waited out everywhere at once.
 *
 * What an outage, a restart or a failover looks like from a client, in the order it tends to
 * arrive: backends terminated (57P01), the server shutting down or starting up (57P03), the port
 * closed (ECONNREFUSED), a database refusing connections (55000), connections reset or timing
 * out, too many connections while everyone reconnects at once (53300), and pg / pg-pool
 * reporting a dead connection or a pool wait that ran out.
 */

/** PgBouncer's refusal of a startup parameter it was not told to ignore (ignore_startup_parameters). */
export const UNSUPPORTED_STARTUP_PARAMETER = /unsupported startup parameter/i;

/** Class 08, connection exception: every code in it (08000, 08003, 08006, 08001, 08004, ...). */
export const CONNECTION_EXCEPTION_CLASS = '08';
/** `pg_terminate_backend`, or a fast/smart shutdown of the server. */
export const ADMIN_SHUTDOWN = '57P01';
/** Another backend crashed: the postmaster ends every session and restarts. */
export const CRASH_SHUTDOWN = '57P02';
/** The server is starting up, shutting down or in recovery. */
export const CANNOT_CONNECT_NOW = '57P03';
/** max_connections reached: transient while every client reconnects after a restart. */
export const TOO_MANY_CONNECTIONS = '53300';
/**
 * object_not_in_prerequisite_state: among much else, what a database with `ALLOW_CONNECTIONS
 * false` answers to a new connection. Only that use of it is unavailability (see below).
 */
export const OBJECT_NOT_IN_PREREQUISITE_STATE = '55000';

export const UNAVAILABLE_SQLSTATES: readonly string[] = [ADMIN_SHUTDOWN, CRASH_SHUTDOWN, CANNOT_CONNECT_NOW, TOO_MANY_CONNECTIONS];

/** Errors of the network (Node's `error.code`) while reaching or talking to the server. */
export const UNAVAILABLE_NETWORK_CODES: readonly string[] = [
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  // DNS: during a failover the name may briefly resolve to nothing.
  'ENOTFOUND',
  'EAI_AGAIN',
];

/**
 * pg and pg-pool report these without a code; the one place that reads message text. The pool's
 * wait for a connection running out ("timeout exceeded when trying to connect") is here: while
 * the server is unreachable, every waiter gets it.
 */
const UNCODED_MESSAGES = [
  /Connection terminated/i,
  /connection timeout/i,
  /timeout exceeded when trying to connect/i,
  /Client has encountered a connection error and is not queryable/i,
];

/**
 * pg-pool's wait for a free client of a full pool running out: this process holds every
 * connection it may open. Worth retrying, but the database answers (see isSaturation).
 */
const POOL_WAIT_TIMEOUT = /timeout exceeded when trying to connect/i;

interface ErrorFields {
  code?: unknown;
  severity?: unknown;
  routine?: unknown;
  message?: unknown;
  cause?: unknown;
  errors?: unknown;
}

function classify(error: unknown, depth: number): boolean {
  if (depth > 4 || error === null || typeof error !== 'object') return false;
  const e = error as ErrorFields;
  const code = typeof e.code === 'string' ? e.code : undefined;
  if (code !== undefined) {
    // A pooler refusing a startup parameter answers 08P01 too; no wait cures it (./faults.ts).
    if (typeof e.message === 'string' && UNSUPPORTED_STARTUP_PARAMETER.test(e.message)) return false;
    if (code.startsWith(CONNECTION_EXCEPTION_CLASS) && code.length === 5) return true;
    if (UNAVAILABLE_SQLSTATES.includes(code) || UNAVAILABLE_NETWORK_CODES.includes(code)) return true;
    // 55000 is also "lastval is not yet defined", "cannot ... during recovery" and the like,
    // which no wait cures. Refusing a connection is the one 55000 the server ends the session
    // with (FATAL, raised by CheckMyDatabase at connection start), so nothing of ours ran.
    if (code === OBJECT_NOT_IN_PREREQUISITE_STATE) return e.severity === 'FATAL' || e.routine === 'CheckMyDatabase';
  }
  if (typeof e.message === 'string' && UNCODED_MESSAGES.some((m) => m.test(e.message as string))) return true;
  // Node reports a connection to a name with several addresses (localhost: ::1 and 127.0.0.1)
  // that all failed as an AggregateError of the attempts; wrappers keep the original as `cause`.
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((inner) => classify(inner, depth + 1))) return true;
  return e.cause !== undefined && classify(e.cause, depth + 1);
}

/**
 * Whether `error` means the database answers but has no connection for us just now: the server
 * is at max_connections (53300), or this process's pool is full and the wait for a free client
 * ran out. Retried like an outage (isConnectionError holds for it too), but it is not one: other
 * processes reach the database meanwhile, so it proves nothing about leases running out
 * unnoticed (a worker whose heartbeats fail so fences itself, src/service/engine/worker/worker.ts). A
 * 53300 while every client reconnects after a restart comes after the restart's own errors,
 * which have already said the database was unreachable.
 */
export function isSaturation(error: unknown, depth = 0): boolean {
  if (depth > 4 || error === null || typeof error !== 'object') return false;
  const e = error as ErrorFields;
  if (e.code === TOO_MANY_CONNECTIONS) return true;
  if (typeof e.message === 'string' && POOL_WAIT_TIMEOUT.test(e.message)) return true;
  return e.cause !== undefined && isSaturation(e.cause, depth + 1);
}

/**
 * Whether `error` means the database could not be reached or the connection was lost (not that
 * the statement was wrong): worth waiting out and retrying. A statement whose connection was cut
 * may or may not have committed; callers retry only what is safe to repeat (fenced writes).
 */
export function isConnectionError(error: unknown): boolean {
  return classify(error, 0);
}
