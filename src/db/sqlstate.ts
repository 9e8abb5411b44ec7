/** Postgres SQLSTATE codes the service maps to domain errors. Match on codes, not message text. */
export const UNIQUE_VIOLATION = '23505';
export const FOREIGN_KEY_VIOLATION = '23503';
export const CHECK_VIOLATION = '23514';
export const NOT_NULL_VIOLATION = '23502';
export const SERIALIZATION_FAILURE = '40001';
/** Postgres aborted this statement to break a cycle of lock waits; nothing of it was applied. */
export const DEADLOCK_DETECTED = '40P01';
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

// Whether an error means "the database is unavailable, retry": src/db/unavailable.ts.
