/**
 * The engine's retries of a statement aborted by a conflict (src/db/conflicts.ts): the outcome flush
 * and the heartbeat, both fenced on the lease epoch (src/db/statements/complete.ts,
 * src/db/statements/lease.ts): a retried flush records only outcomes whose lease is still current,
 * a retried heartbeat renews only leases still held. Each retry is counted and logged.
 */
import type { ConflictRetryReport } from '../../../db/conflicts.js';
import type { Logger } from '../../../log.js';
import type { ConflictedStatement, Observer } from '../../kernel/observer.js';

export { retryConflicts } from '../../../db/conflicts.js';

/** A worker's `onRetry`: counts the retry through the observer and logs it (`what` failed). */
export function reportConflictRetry(
  worker: { id: string; log: Logger; observer: Observer },
  statement: ConflictedStatement,
  what: string,
): (report: ConflictRetryReport) => void {
  return (r) => {
    worker.observer.conflictRetried(statement, r.sqlstate);
    worker.log.warn(`worker ${worker.id}: ${what} hit a conflict (${r.sqlstate}: ${r.error.message}); retry ${r.retry}`);
  };
}
