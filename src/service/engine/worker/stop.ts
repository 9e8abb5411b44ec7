/**
 * A worker's stop (worker.ts), once it claims no more: waits up to the grace period for the
 * attempts in flight (heartbeats keep their leases meanwhile), aborts the rest and hands their
 * executions back to other workers, records what could not be handed back, and waits for the
 * outcomes on their way to the database. Claims whose answer was lost are handed back meanwhile.
 */
import type pg from 'pg';
import type { Logger } from '../../../log.js';
import type { AbortReason, Delivery } from '../delivery/deliver.js';
import type { AttemptRunner } from './attempt-runner.js';
import type { ClaimLoop } from './claim-loop.js';
import { releaseLeases } from './hand-back.js';
import type { OutcomeRecorder } from './outcome-recorder.js';
import type { InFlight } from './state.js';

export interface WorkerStopDeps {
  id: string;
  pool: pg.Pool;
  log: Logger;
  inFlight: Map<string, InFlight>;
  outcomes: OutcomeRecorder;
  delivery: Delivery;
  /** Its claims whose answer was lost, not settled yet, are handed back here too. */
  claims: Pick<ClaimLoop, 'lostClaims'>;
  heartbeatMs: number;
  beat(): Promise<void>;
  /** Its claimed executions still waiting for a slot are handed back first. */
  attempts: Pick<AttemptRunner, 'waitingLeases'>;
  /** Resolves when no lease is held and no outcome waits (see worker.ts). */
  idle(): Promise<void>;
}

/** Finishes or hands back what a stopping worker holds; see the file's comment. */
export async function drainWorker(deps: WorkerStopDeps, graceMs: number): Promise<void> {
  const { id, log, inFlight } = deps;
  // Alongside the grace period: what a lost claim took runs nowhere, so it goes back at once.
  const lostSettled = deps.claims.lostClaims.drain(graceMs);
  // Leases must outlive the hand-back and the grace period.
  const keepAlive = setInterval(deps.beat, deps.heartbeatMs);
  try {
    // What waits for a slot, or was taken by a claim answered after stop began, has not started:
    // back at once, not after the grace period. Aborted, each ends without running (delivery's
    // abortedBeforeStart), which gives it the outcome recorded when the release does not take it back.
    const waiting = deps.attempts.waitingLeases();
    if (waiting.length > 0) {
      const released = await handBack(deps, waiting);
      // Those the release would not take back have their outcome on its way (handBack); a failed
      // release leaves them to the reconciler, as below.
      for (const f of waiting) if (!released || released.has(f.ex.id)) inFlight.delete(f.ex.id);
    }
    if (inFlight.size > 0) {
      log.info(`worker ${id}: waiting up to ${graceMs} ms for ${inFlight.size} attempt(s)`);
      await Promise.race([deps.idle(), new Promise((r) => setTimeout(r, graceMs).unref())]);
    }
  } finally {
    clearInterval(keepAlive);
  }
  const left = [...inFlight.values()].filter((f) => !f.finished);
  if (left.length > 0) await handBack(deps, left);
  await deps.outcomes.settled();
  // Outcomes of released attempts are fenced out; do not wait on them.
  for (const f of left) inFlight.delete(f.ex.id);
  await lostSettled;
  await deps.delivery.close().catch(() => {});
}

/** Hands `left` back; resolves with the ids the release took back (undefined when it failed). */
async function handBack(deps: WorkerStopDeps, left: InFlight[]): Promise<Set<string> | undefined> {
  const { id, log } = deps;
  // Abort first, then hand back: a handler that honours its signal has stopped before
  // another worker can claim the execution (one that ignores it is at-least-once anyway).
  for (const f of left) {
    f.released = true;
    f.controller.abort('shutdown' satisfies AbortReason);
  }
  const released = await releaseLeases(deps.pool, left, (e) =>
    log.error(`worker ${id}: release failed (${e.message}); the reconciler will take them when their leases expire`),
  );
  if (!released) return undefined;
  log.info(`worker ${id}: released ${released.size} execution(s) to other workers`);
  // What the release would not take back (a cancellation was requested, or the lease was taken
  // over) gets its outcome recorded, fenced as any: a cancelled one ends
  // CANCELLED now instead of staying RUNNING, holding its lock key, concurrency slot and
  // serial turn, until its lease expires.
  for (const f of left) {
    if (released.has(f.ex.id)) continue;
    f.released = false;
    if (f.held) deps.outcomes.record(f.held, f.ex);
  }
  return released;
}
