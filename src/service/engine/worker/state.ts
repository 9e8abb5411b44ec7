/**
 * What a worker holds, in one object: whether it runs, the leases it holds (attempts running, and
 * attempts ended whose outcome is not recorded yet) and who waits for it to hold nothing. The
 * worker (./worker.ts) creates it and hands its parts (claim loop, attempt runner, lease keeper,
 * outcome recorder, loops, stop) the pieces each reads or changes. Its types live here, apart
 * from the worker that assembles the parts, so that each part depends on the state alone.
 */
import type { ClaimedExecution } from '../../../db/statements/claim.js';
import type { Completion } from '../../../db/statements/complete.js';

/**
 * A lease this worker holds: its attempt, waiting for a slot (claimed past the free ones), running,
 * or ended with its outcome on the way.
 */
export interface InFlight {
  ex: ClaimedExecution;
  controller: AbortController;
  /** When its attempt started (performance.now()); 0 while it waits for a slot. */
  started: number;
  /** Claimed, waiting for a slot to start its attempt (attempt-runner.ts). */
  waiting?: boolean;
  /** When it began to wait for a slot (performance.now()), if it did. */
  queuedAt?: number;
  /**
   * The self-fence gave its lease up (lease-keeper.ts): not known to be lost, so a waiting one is
   * handed back rather than ended (attempt-runner.ts).
   */
  givenUp?: boolean;
  /** The attempt has ended; its outcome is waiting to be recorded (the lease is still held). */
  finished: boolean;
  /** Being handed back at shutdown: its outcome waits in `held` for the release's answer. */
  released?: boolean;
  held?: Completion;
}

export interface WorkerState {
  /** Between start() and stop(): claims, heartbeats and loops run only while it is true. */
  running: boolean;
  /** The leases held, by execution id. */
  readonly inFlight: Map<string, InFlight>;
  /** Waiting for the worker to hold nothing (stop's grace period); called once, then dropped. */
  readonly idleWaiters: (() => void)[];
}

export function createWorkerState(): WorkerState {
  return { running: false, inFlight: new Map(), idleWaiters: [] };
}

/** A worker's lease unless configured. */
export const DEFAULT_LEASE_MS = 30_000;
