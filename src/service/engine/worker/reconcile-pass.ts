/**
 * The reconciler's passes, on time or not at all. A pass reads the database's clock, then sends
 * the reconcile with a deadline a quarter of a lease past that reading; past it the statement
 * takes nothing (src/db/statements/lease.ts). A pass whose reading took longer than that waited
 * in a queue (the pool's, a transaction pooler's, a stalled server's), and so did the owners'
 * heartbeats and outcomes: it takes nothing, and neither does any pass for a lease after it, so
 * the owners renew and record first. An outage the process sees as errors holds passes off the
 * same way (mayReconcile); a stall shows only as slowness.
 *
 * Why a quarter: heartbeats go every third of a lease at most (./worker.ts), so a lease that
 * expires before a deadline a quarter of a lease past a prompt reading belongs to an owner whose
 * last heartbeat landed three quarters of a lease before that reading: two heartbeats missed,
 * not stuck behind this pass. Found through PgBouncer: a pass held by PAUSE past the lease ran
 * first at RESUME and took leases from live workers, whose finished attempts were then refused
 * (one ended FAILED "lease expired" after its target had answered 200).
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { databaseNow } from '../../../db/statements/clock.js';
import { reconcileExpiredLeases } from '../../../db/statements/lease.js';

export interface Reconciler {
  /** The executions a pass moved on; undefined when it took none for being late or held off. */
  pass(): Promise<{ id: string; status: string }[] | undefined>;
}

export function createReconciler(pool: pg.Pool, leaseMs: number): Reconciler {
  const lateMs = leaseMs / 4;
  let heldUntil = -Infinity;
  return {
    async pass() {
      if (performance.now() < heldUntil) return undefined;
      const askedAt = performance.now();
      const now = await databaseNow(pool);
      const answeredAt = performance.now();
      if (answeredAt - askedAt > lateMs) heldUntil = Math.max(heldUntil, answeredAt + leaseMs);
      // Checked after the reading too: passes sent during the stall answer at its end, oldest first.
      if (answeredAt < heldUntil) return undefined;
      return reconcileExpiredLeases(pool, 500, new Date(now.getTime() + lateMs));
    },
  };
}
