/** Postgres SQLSTATE codes the service maps to domain errors. Match on codes, not message text. */
export const UNIQUE_VIOLATION = '23505';
export const FOREIGN_KEY_VIOLATION = '23503';
export const CHECK_VIOLATION = '23514';
export const NOT_NULL_VIOLATION = '23502';
export const SERIALIZATION_FAILURE = '40001';
export const INVALID_TEXT_REPRESENTATION = '22P02';
export const LOCK_NOT_AVAILABLE = '55P03';
/** SAVEPOINT outside a transaction block. */
export const NO_ACTIVE_TRANSACTION = '25P01';

export interface PgError extends Error {
  code: string;
  constraint?: string;
  detail?: string;
}

export function isPgError(error: unknown, code?: string): error is PgError {
  return (
    error instanceof Error &&
    typeof (error as Partial<PgError>).code === 'string' &&
    (code === undefined || (error as PgError).code === code)
  );
}

/**
 * Whether an error means the database could not be reached or the connection was lost (not
 * that the statement was wrong): Postgres's connection-exception class (08), an administrator
 * or crash shutdown (57P01-3), too many connections, the network's own errors, and pg / pg-pool
 * reporting a dead connection or a pool wait that ran out. Worth waiting out and retrying.
 * (The one place that reads message text: pg and pg-pool report these without codes.)
 */
export function isConnectionError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  const network = ['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'];
  if (typeof code === 'string' && (code.startsWith('08') || ['57P01', '57P02', '57P03', '53300', ...network].includes(code))) return true;
  return /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(
    (error as Error | null)?.message ?? '',
  );
}
