/**
 * Recording attempt outcomes (worker.ts): queued as attempts end, flushed as soon as the previous
 * flush returns (no added delay; under load many outcomes share one statement), retried while the
 * database is unreachable, fenced on each attempt's lease epoch in SQL (src/db/statements/complete.ts).
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import type { ClaimedExecution } from '../../../db/statements/claim.js';
import { completeExecutions, type Completion } from '../../../db/statements/complete.js';
import type { Logger } from '../../../log.js';
import type { Observer, RecordedStatus } from '../../kernel/observer.js';
import type { Availability } from '../runtime/availability.js';
import { reportConflictRetry, retryConflicts } from './conflict-retry.js';
import { idsOf } from './lease-keeper.js';
import type { InFlight } from './state.js';

export interface OutcomeRecorderDeps {
  id: string;
  pool: pg.Pool;
  log: Logger;
  observer: Observer;
  availability: Availability;
  /** The leases held; a recorded outcome's entry leaves it. */
  inFlight: Map<string, InFlight>;
  /** Whether the worker runs (a stopped one does not retry a failed record). */
  running(): boolean;
  /** A retry was scheduled by a recorded outcome (or maybe by a try whose answer was lost). */
  onRetryScheduled(): void;
  /** A flush ended; `freedTurn`: it recorded an outcome that can make another execution claimable. */
  flushed(freedTurn: boolean): void;
}

export interface OutcomeRecorder {
  /** Queues an attempt's outcome and flushes. */
  record(completion: Completion, ex: ClaimedExecution): void;
  /** Outcomes queued or being recorded. */
  busy(): boolean;
  /** Resolves when the flush in flight (if any) is done. */
  settled(): Promise<void>;
}

export function createOutcomeRecorder(deps: OutcomeRecorderDeps): OutcomeRecorder {
  const { id, pool, log, observer, availability, inFlight } = deps;
  // Outcomes to record, each with the attempt it is the outcome of (its endpoint, serial flag and
  // ids), not looked up by execution: the execution may have been claimed again since.
  const queue: PendingOutcome[] = [];
  let flushing: Promise<void> | undefined;

  function scheduleFlush() {
    if (flushing) return;
    // Whether this flush records an outcome that can make another execution claimable.
    let freedTurn = false;
    flushing = (async () => {
      // Let outcomes that finish in the same tick share the statement.
      await new Promise((r) => setImmediate(r));
      let failures = 0;
      // When the outcomes now queued first failed to be recorded, if they have.
      let failingSince: number | undefined;
      while (queue.length > 0) {
        const taken = queue.splice(0, 1000);
        const batch = taken.map((p) => p.completion);
        // A serial execution's outcome gives its job's next occurrence the turn.
        if (taken.some((p) => p.ex.serial)) freedTurn = true;
        const askedAt = performance.now();
        try {
          // A conflict (a deadlock Postgres broke, a serialization failure) rolled the whole
          // statement back: sending it again is safe, since each outcome is fenced on its lease
          // epoch and records only while that lease is current (src/db/statements/complete.ts).
          const accepted = await retryConflicts(
            () => completeExecutions(pool, id, batch),
            reportConflictRetry(deps, 'outcomes', `recording ${batch.length} outcome(s)`),
          );
          availability.reached(askedAt);
          const epochs = acceptedEpochs(taken, accepted);
          for (const { completion: c, ex } of taken) {
            const status = accepted.get(c.executionId);
            // Only the current lease records (one epoch per execution), so an accepted id is the
            // outcome of the attempt of that epoch; an earlier, fenced-out one of the same batch
            // is not.
            if (status !== undefined && c.epoch === epochs.get(c.executionId)) {
              observer.executionRecorded(ex.endpoint_name, status as RecordedStatus);
              continue;
            }
            // After a failed try the first one may have committed, its answer lost: then this
            // one matches nothing, and the outcome is recorded all the same.
            const ids = idsOf(ex);
            if (failingSince === undefined) log.warn(`worker ${id}: outcome of ${c.executionId} not recorded: its lease was lost`, ids);
            else
              log.warn(
                `worker ${id}: outcome of ${c.executionId} not recorded on a retry: its lease was lost, or the failed try had committed`,
                ids,
              );
          }
          // A retry was scheduled: claim it if it is due already, else time it (claims running
          // beside this flush could not see it; nor can a committed try whose answer was lost).
          if (failingSince !== undefined || [...accepted.values()].includes('PENDING')) {
            freedTurn = true;
            deps.onRetryScheduled();
          }
          failures = 0;
          failingSince = undefined;
        } catch (error) {
          // The database went away (a restart, a cut connection, an outage of any length): try
          // again, at most a second apart, for as long as it takes and the worker runs, rather
          // than lose these outcomes. They stay recordable: the fence is the lease's epoch, which
          // only a reconciler or another claim moves, and reconcilers hold off for a lease after
          // an outage (see reconcile) so the owners that lived through it record first.
          const first = failingSince === undefined;
          failingSince ??= performance.now();
          if (deps.running() && availability.unreachable(error, 'recording outcomes')) {
            const delay = Math.min(1_000, 100 * 2 ** failures++);
            if (first)
              log.warn(
                `worker ${id}: recording ${batch.length} outcome(s) failed (${(error as Error).message}); retrying until the database answers`,
              );
            queue.unshift(...taken);
            await new Promise((r) => setTimeout(r, delay).unref());
            continue;
          }
          failingSince = undefined;
          // The leases will expire and the reconciler will retry these: at-least-once.
          log.error(`worker ${id}: recording ${batch.length} outcome(s) failed: ${(error as Error).message}`);
        }
        // Only the entry of this attempt: the execution may have been claimed again since (its
        // earlier lease lost), and that attempt's entry keeps its heartbeats.
        for (const c of batch) if (inFlight.get(c.executionId)?.ex.lease_epoch === c.epoch) inFlight.delete(c.executionId);
      }
    })().finally(() => {
      flushing = undefined;
      if (queue.length > 0) scheduleFlush();
      deps.flushed(freedTurn);
    });
  }

  return {
    record(completion, ex) {
      queue.push({ completion, ex });
      scheduleFlush();
    },
    busy: () => queue.length > 0 || flushing !== undefined,
    settled: async () => {
      while (flushing) await flushing;
    },
  };
}

/** An outcome waiting to be recorded, and the attempt it ends. */
interface PendingOutcome {
  completion: Completion;
  ex: ClaimedExecution;
}

/**
 * For each accepted execution, the epoch whose outcome `accepted` answers for: the highest of the
 * batch's outcomes of that execution (a claim only raises the epoch, and only the current lease
 * records). One pass over the batch: a flush holds up to a thousand outcomes.
 */
function acceptedEpochs(pending: PendingOutcome[], accepted: Map<string, string>): Map<string, number> {
  const epochs = new Map<string, number>();
  for (const { completion: c } of pending) {
    if (!accepted.has(c.executionId)) continue;
    const seen = epochs.get(c.executionId);
    if (seen === undefined || c.epoch > seen) epochs.set(c.executionId, c.epoch);
  }
  return epochs;
}
