/**
 * The serverless pass (POST|GET /jobs/run-due, gate.runDue()): everything a long-running worker
 * would have done since the last call, bounded, for hosts whose only clock is a platform's
 * cron. In order: expired leases are reconciled (an attempt killed with its function instance
 * counts, and its execution is retried or FAILED, instead of staying RUNNING forever; not within a
 * lease of an outage, see RunDueDeps.availability), due cron
 * occurrences fire, then up to `limit` due executions run, then a bounded slice of retention
 * (RunDueDeps.prune: at most that many pruning batches, the pruner's slices and fences; a host
 * with no long-running worker has no other pruner). Safe concurrently with workers and with
 * itself: the reconciler takes rows with SKIP LOCKED, the scheduler claims ticks with a
 * compare-and-set, the claim uses SKIP LOCKED, a retention slice is taken by one pruner at a time.
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { reconcileExpiredLeases } from '../../../db/statements/lease.js';
import { analyzeGrownTables } from '../../../db/statements/statistics.js';
import { mayReconcile, type Availability } from '../runtime/availability.js';
import type { SecretBox } from '../../kernel/secrets.js';
import { drainDue, type DrainResult } from './claim-and-run.js';
import type { HandlerRegistry } from '../delivery/handler-registry.js';
import type { CronJobScheduler } from '../cron/scheduler.js';
import { DEFAULT_LEASE_MS } from '../worker/state.js';
import { NO_ROWS } from '../../../db/statements/pruning.js';
import { pruneBounded, type BoundedPruneOptions, type PruneReport } from '../maintenance/pruner.js';

export interface RunDueResult {
  /** Executions whose expired lease was reconciled, by the status they were left in. */
  reconciled: { retrying: number; failed: number; cancelled: number };
  schedule: Awaited<ReturnType<CronJobScheduler['tick']>>;
  executions: DrainResult;
  /** What the pass's slice of retention removed (all zeros, complete, when it prunes nothing). */
  pruned: PruneReport;
}

export interface RunDueDeps {
  pool: pg.Pool;
  handlers: HandlerRegistry;
  scheduler: Pick<CronJobScheduler, 'tick'>;
  defaultTimeoutMs: number;
  outboundAllow?: string[] | undefined;
  secrets?: SecretBox | undefined;
  /**
   * The process's view of its database. With it, the pass holds off reconciling while the
   * database is unreachable and for a lease's length after it answers again, as the worker's
   * reconciler does (mayReconcile), so attempts that ran through the outage are not taken from
   * their workers the moment it is back; and the pass's own failures and answers count there.
   */
  availability?: Availability | undefined;
  /** The workers' lease, the length of that grace. Default: the worker's default lease. */
  leaseMs?: number | undefined;
  /** Retention's windows and pace, and the most batches a pass prunes (`maxBatches` 0 or no `prune`: none). */
  prune?: Omit<BoundedPruneOptions, 'pool' | 'workspaceId'> | undefined;
}

export async function runDuePass(deps: RunDueDeps, options: { limit?: number } = {}): Promise<RunDueResult> {
  const { availability } = deps;
  if (!availability) return pass(deps, options, true);
  const askedAt = performance.now();
  try {
    const result = await pass(deps, options, mayReconcile(availability, deps.leaseMs ?? DEFAULT_LEASE_MS));
    availability.reached(askedAt);
    return result;
  } catch (error) {
    availability.unreachable(error, 'run-due');
    throw error;
  }
}

async function pass(deps: RunDueDeps, options: { limit?: number }, reconcile: boolean): Promise<RunDueResult> {
  const lapsed = reconcile ? await reconcileExpiredLeases(deps.pool) : [];
  const count = (s: string) => lapsed.filter((r) => r.status === s).length;
  const schedule = await deps.scheduler.tick();
  // A pass has no worker between passes to keep the claim's statistics (src/db/statements/statistics.ts): it looks first.
  await analyzeGrownTables(deps.pool);
  const executions = await drainDue(deps.pool, deps.handlers, {
    limit: options.limit ?? 100,
    defaultTimeoutMs: deps.defaultTimeoutMs,
    outboundAllow: deps.outboundAllow,
    secrets: deps.secrets,
  });
  const pruned =
    deps.prune && deps.prune.maxBatches > 0
      ? await pruneBounded({ ...deps.prune, pool: deps.pool })
      : { removed: { ...NO_ROWS }, complete: true };
  return {
    reconciled: { retrying: count('PENDING'), failed: count('FAILED'), cancelled: count('CANCELLED') },
    schedule,
    executions,
    pruned,
  };
}
