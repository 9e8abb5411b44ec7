/**
 * Trying again what Postgres aborted because of a conflict with another transaction: a deadlock it
 * broke (40P01) or a serialization failure (40001). Either way the statement, or the transaction,
 * was rolled back whole, nothing of it applied, and a second try usually goes through at once (the
 * other side has finished or moved on).
 *
 * Only for work that is safe to send again as it is: a single statement outside any transaction of
 * the caller (after an abort the caller's transaction could not go on), or a whole transaction of
 * its own, whose effect does not depend on how many times it is tried. The engine retries its
 * outcome flush and its heartbeat (src/service/engine/worker/conflict-retry.ts), both fenced on
 * the lease epoch; the service retries its own transactions (src/db/transaction.ts), each of which
 * reads what it decides on inside itself.
 *
 * Statements lock rows in one order (by id), so a deadlock between jobgate's own statements should
 * be rare; this is the second line, for a cycle with a statement outside that order (an operator's
 * own SQL, two changes that meet rows in different orders). The tries are few and short: a
 * conflict that persists is the caller's failure, not something to wait out like an outage.
 */
import { DEADLOCK_DETECTED, isPgError, SERIALIZATION_FAILURE } from './sqlstate.js';

/** Conflicts worth one more try of the same statement. */
const RETRIED_SQLSTATES: readonly string[] = [DEADLOCK_DETECTED, SERIALIZATION_FAILURE];

export interface ConflictRetryOptions {
  /** Tries in all, the first included. */
  tries: number;
  /** The wait before the first retry is up to this (ms), doubling each retry. */
  baseMs: number;
  /** No wait is longer than this (ms). */
  maxMs: number;
}

/**
 * Five tries, waits of at most 5, 10, 20 and 40 ms: about 75 ms at worst, well inside a heartbeat
 * period, so a retried heartbeat still answers before the self-fence looks
 * (src/service/engine/worker/lease-keeper.ts).
 */
export const CONFLICT_RETRY: Readonly<ConflictRetryOptions> = Object.freeze({ tries: 5, baseMs: 5, maxMs: 40 });

/** What a retry reports: the SQLSTATE that caused it, which retry it is (1-based), the wait before it. */
export interface ConflictRetryReport {
  sqlstate: string;
  retry: number;
  delayMs: number;
  error: Error;
}

/** Whether `error` is a conflict that a second try of the same statement may get past. */
export function isRetriedConflict(error: unknown): boolean {
  return isPgError(error) && RETRIED_SQLSTATES.includes(error.code);
}

/**
 * Runs `statement`, and again after a short random wait each time it fails with a conflict
 * (isRetriedConflict), at most `options.tries` times in all; `onRetry` hears each retry before its
 * wait. Any other error, and the last conflict, is thrown. The wait is random up to its bound (full
 * jitter), so the two sides of a broken deadlock do not come back in step.
 */
export async function retryConflicts<T>(
  statement: () => Promise<T>,
  onRetry: (report: ConflictRetryReport) => void,
  options: Readonly<ConflictRetryOptions> = CONFLICT_RETRY,
): Promise<T> {
  for (let retry = 0; ; retry++) {
    try {
      return await statement();
    } catch (error) {
      if (retry + 1 >= options.tries || !isRetriedConflict(error)) throw error;
      const delayMs = Math.random() * Math.min(options.maxMs, options.baseMs * 2 ** retry);
      onRetry({ sqlstate: (error as { code: string }).code, retry: retry + 1, delayMs, error: error as Error });
      await new Promise((r) => setTimeout(r, delayMs).unref());
    }
  }
}
