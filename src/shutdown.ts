/**
 * Shutdown in steps. A process stopping while its database is unreachable still has to close
 * its pool and stop an embedded server, so no step is skipped because an earlier one failed.
 */

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
