/**
 * Shutdown in steps. A process stopping while its database is unreachable still has to close
 * its pool and stop an embedded server, so no step is skipped because an earlier one failed.
 */

/**
 * The first step of a stop: from now on `/readyz` answers 503, so load balancers and orchestrators
 * take the process out of rotation; it keeps serving for `delayMs` while they notice, and only
 * then closes its servers and drains.
 */
export async function turnNotReady(health: { markStopping(): void } | undefined, delayMs: number): Promise<void> {
  health?.markStopping();
  if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
}

/** Runs every step in order, whatever fails; then throws the first failure, if any. */
export async function inOrder(steps: (() => unknown)[]): Promise<void> {
  let first: { error: unknown } | undefined;
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      first ??= { error };
    }
  }
  if (first) throw first.error;
}

/** Waits for all of them, whatever fails (no step cut short by another's failure); then throws the first failure. */
export async function settled(steps: (Promise<unknown> | undefined)[]): Promise<void> {
  const results = await Promise.allSettled(steps);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
