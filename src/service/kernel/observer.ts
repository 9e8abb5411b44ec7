/**
 * What the engine, the live hub and the gateway report as they work, for an adapter at the edge
 * to count (src/metrics/prometheus.ts turns it into Prometheus metrics). The one composition root
 * (src/composition-root.ts) hands an observer in; everything else defaults to `noopObserver`, so the library
 * and the tests pay nothing, and no service file imports a metrics library.
 *
 * Every method is a fire-and-forget report: it must not throw and must not block. Labels are the
 * adapter's business (it caps endpoint names); callers pass what they know.
 */

/** The tables retention prunes. */
export type PrunedTable =
  'executions' | 'attempts' | 'audit_log' | 'runs' | 'findings' | 'events' | 'jobs' | 'alert_notifications' | 'batches';

/**
 * What was tried again after a conflict (src/db/conflicts.ts): the engine's outcome batches and
 * heartbeats (src/service/engine/worker/conflict-retry.ts), the service's transactions (a mutation).
 */
export type ConflictedStatement = 'outcomes' | 'heartbeat' | 'mutation';

/** How an execution's recorded outcome left it. `PENDING` means a retry was scheduled. */
export type RecordedStatus = 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | 'PENDING';

export interface Observer {
  /** A worker started an attempt, `waitedSeconds` after the execution became due (its run_after). */
  attemptStarted(endpoint: string, waitedSeconds: number): void;
  /** An attempt ended (whatever its outcome), after `seconds`. */
  attemptEnded(endpoint: string, outcome: string, seconds: number): void;
  /** An attempt's outcome was recorded (fenced on its lease): the execution is now `status`. */
  executionRecorded(endpoint: string, status: RecordedStatus): void;
  /** A reconcile pass ran and ended `expired` executions whose lease had run out (now PENDING for a retry, FAILED or CANCELLED). */
  leasesReconciled(expired: { status: string }[]): void;
  /** A worker found one of its leases lost (taken over) and aborted the attempt. */
  leaseLost(): void;
  /**
   * A worker's statement (`outcomes`: an outcome batch; `heartbeat`) was aborted by a conflict
   * with another transaction (`sqlstate` 40P01 deadlock, 40001 serialization) and is sent again.
   */
  conflictRetried(statement: ConflictedStatement, sqlstate: string): void;
  /** A scheduler batch fired occurrences this late (seconds each), missed `missed` and skipped `skipped`. */
  cronFired(latenessSeconds: number[], missed: number, skipped: number): void;
  /** A recoverable run stored a checkpoint. */
  runCheckpointed(): void;
  /** The live hub handed `count` events or findings to subscribers. */
  eventsDelivered(count: number): void;
  /** A subscriber was cut off for reading nothing while events waited (SLOW_CONSUMER). */
  slowConsumerCut(): void;
  /** A LISTEN connection (`who`: its application name) listens again after losing its connection. */
  listenReconnected(who: string): void;
  /** A LISTEN connection found that notifications do not arrive and fell back to polling. */
  listenFellBackToPolling(who: string): void;
  /** A GraphQL operation ended: its type (query, mutation, subscription) and whether it had errors. */
  graphqlOperation(type: string, outcome: 'ok' | 'error'): void;
  /** An HTTP request was answered: its route (a fixed set), status code and duration. */
  httpRequest(route: string, status: number, seconds: number): void;
  /** Pending executions an operator cancelled (no worker records those): they finished CANCELLED. */
  pendingCancelled(endpoint: string, count: number): void;
  /**
   * A serverless pass (POST /jobs/run-due, `gate.runDue()`) ended: `error` when it threw;
   * otherwise what the executions it ran were left as.
   */
  runDuePass(outcome: 'ok' | 'error', executions?: Readonly<Record<'succeeded' | 'failed' | 'retrying' | 'cancelled', number>>): void;
  /** Retention pruned a batch of history: rows deleted per table (executions, attempts, audit_log, runs, findings, events, jobs, alert_notifications, batches). */
  historyPruned(rows: Readonly<Record<PrunedTable, number>>): void;
  /** An interval tick was abandoned past its timeout and grace, its handler still running in this process. */
  intervalTickAbandoned(handler: string): void;
  /** An abandoned interval handler settled at last. */
  intervalAbandonedSettled(handler: string): void;
}

const nothing = () => {};

/** Reports go nowhere: the default everywhere but the composition root. */
export const noopObserver: Observer = Object.freeze({
  attemptStarted: nothing,
  attemptEnded: nothing,
  executionRecorded: nothing,
  leasesReconciled: nothing,
  leaseLost: nothing,
  conflictRetried: nothing,
  cronFired: nothing,
  runCheckpointed: nothing,
  eventsDelivered: nothing,
  slowConsumerCut: nothing,
  listenReconnected: nothing,
  listenFellBackToPolling: nothing,
  graphqlOperation: nothing,
  httpRequest: nothing,
  historyPruned: nothing,
  intervalTickAbandoned: nothing,
  intervalAbandonedSettled: nothing,
  pendingCancelled: nothing,
  runDuePass: nothing,
});
