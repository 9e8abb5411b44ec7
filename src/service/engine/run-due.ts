/**
 * The serverless pass (POST|GET /jobs/run-due, gate.runDue()): everything a long-running worker
 * would have done since the last call, bounded, for hosts whose only clock is a platform's
 * cron. In order: expired leases are reconciled (an attempt killed with its function instance
 * counts, and its execution is retried or FAILED, instead of staying RUNNING forever), due cron
 * occurrences fire, then up to `limit` due executions run. Safe concurrently with workers and
 * with itself: the reconciler takes rows with SKIP LOCKED, the scheduler claims ticks with a
 * compare-and-set, the claim uses SKIP LOCKED.
 */
import type pg from 'pg';
import { reconcileExpiredLeases } from '../../db/queries/lease.js';
import type { SecretBox } from '../secrets.js';
import { drainDue, type DrainResult } from './drain.js';
import type { HandlerRegistry } from './handlers.js';
import type { Scheduler } from './scheduler.js';

export interface RunDueResult {
  /** Executions whose expired lease was reconciled, by the status they were left in. */
  reconciled: { retrying: number; failed: number; cancelled: number };
  schedule: Awaited<ReturnType<Scheduler['tick']>>;
  executions: DrainResult;
}

export interface RunDueDeps {
  pool: pg.Pool;
  handlers: HandlerRegistry;
  scheduler: Pick<Scheduler, 'tick'>;
  defaultTimeoutMs: number;
  outboundAllow?: string[] | undefined;
  secrets?: SecretBox | undefined;
}

export async function runDuePass(deps: RunDueDeps, options: { limit?: number } = {}): Promise<RunDueResult> {
  const lapsed = await reconcileExpiredLeases(deps.pool);
  const count = (s: string) => lapsed.filter((r) => r.status === s).length;
  const schedule = await deps.scheduler.tick();
  const executions = await drainDue(deps.pool, deps.handlers, {
    limit: options.limit ?? 100,
    defaultTimeoutMs: deps.defaultTimeoutMs,
    outboundAllow: deps.outboundAllow,
    secrets: deps.secrets,
  });
  return { reconciled: { retrying: count('PENDING'), failed: count('FAILED'), cancelled: count('CANCELLED') }, schedule, executions };
}
