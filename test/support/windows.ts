/**
 * Sliding windows over start times, for the rate-limit tests: a token bucket's bound holds in
 * every window, not only in the fixed seconds a clock would cut.
 */

/** The most of `times` (ms) in any window of `ms` that begins at one of them. */
export function mostInWindow(times: readonly number[], ms: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (j < sorted.length && sorted[j]! < sorted[i]! + ms) j++;
    most = Math.max(most, j - i);
  }
  return most;
}
