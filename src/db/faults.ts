/**
 * Faults of the database connection that no wait cures: a process meeting one at start-up stops
 * with a one-line message saying what to fix, where an unreachable database (src/db/unavailable.ts)
 * is waited for.
 */
import { MigrationError } from './migrate.js';
import { UNSUPPORTED_STARTUP_PARAMETER } from './unavailable.js';

/** invalid_password: the password in the connection string is wrong. */
export const INVALID_PASSWORD = '28P01';
/** invalid_authorization_specification: no such role, or pg_hba.conf refuses this one. */
export const INVALID_AUTHORIZATION = '28000';
/** invalid_catalog_name: the database in the connection string does not exist. */
export const INVALID_CATALOG_NAME = '3D000';
/** undefined_table: jobgate's tables are missing (the database was never migrated). */
export const UNDEFINED_TABLE = '42P01';

/** A fault of the database or its connection string that retrying cannot cure. */
export class DatabaseFaultError extends Error {
  override name = 'DatabaseFaultError';
}

const FIXES: Record<string, string> = {
  [INVALID_PASSWORD]: 'the database refused the password; fix DATABASE_URL',
  [INVALID_AUTHORIZATION]: "the database refused the user; fix DATABASE_URL (or the server's pg_hba.conf)",
  [INVALID_CATALOG_NAME]: 'the database does not exist; fix the database name in DATABASE_URL, or create it',
  [UNDEFINED_TABLE]: 'the database is not migrated; run `jobgate migrate` (or createJobgate with migrate: true)',
};

/**
 * The error to stop with: one of the faults above, said with what to fix, or a migration refused
 * (a checksum mismatch, an unknown or a pending migration) as it is; anything else unchanged.
 */
export function explainFault(error: unknown): unknown {
  if (error instanceof MigrationError || error instanceof DatabaseFaultError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message === 'string' && UNSUPPORTED_STARTUP_PARAMETER.test(message))
    return new DatabaseFaultError(
      `a pooler in front of the database refused a startup parameter (jobgate sends \`options=-c jit=off\` unless told it is behind a transaction pooler): set JOBGATE_DATABASE_POOLER=transaction, or add options to PgBouncer's ignore_startup_parameters (${String(code ?? '')}: ${message})`,
      { cause: error },
    );
  const fix = typeof code === 'string' ? FIXES[code] : undefined;
  if (!fix) return error;
  return new DatabaseFaultError(`${fix} (${code}: ${(error as Error).message})`, { cause: error });
}
