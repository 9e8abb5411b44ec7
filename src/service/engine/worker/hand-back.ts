/**
 * Giving leases back to the queue uncounted (releaseExecutions), as a stopping worker does with
 * what it holds (stop.ts) and the attempt runner with waiting executions whose lease the self-fence
 * gave up (attempt-runner.ts). The release is fenced by each lease's epoch: what it does not take
 * back (taken over, a cancellation requested) is the caller's to end.
 */
import type pg from 'pg';
import { releaseExecutions } from '../../../db/statements/lease.js';
import type { InFlight } from './state.js';

/**
 * Releases the leases of `entries`; resolves with the ids the release took back, or undefined when
 * it failed (`failed` is told why: nothing was taken back then, the statement being one).
 */
export async function releaseLeases(
  pool: pg.Pool,
  entries: readonly InFlight[],
  failed: (error: Error) => void,
): Promise<Set<string> | undefined> {
  try {
    return new Set(
      await releaseExecutions(
        pool,
        entries.map((entry) => ({ id: entry.ex.id, epoch: entry.ex.lease_epoch })),
      ),
    );
  } catch (error) {
    failed(error as Error);
    return undefined;
  }
}
