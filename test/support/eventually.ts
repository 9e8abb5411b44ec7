/**
 * Waiting in tests: one polling helper, and named quiet periods.
 *
 * A test waits for what it asserts with `eventually`, never with a fixed sleep: it returns as
 * soon as the condition holds, so a slow machine costs time, not a failure. A fixed wait is
 * right only for the opposite question, "nothing happens during this period" (no second
 * delivery, no event after a revoke); those waits use one of the `QUIET` periods below, so each
 * says which question it answers and none is a bare number.
 */

export interface EventuallyOptions {
  /** Give up after this many milliseconds (default 10 s). */
  timeout?: number;
  /** Poll every this many milliseconds (default 25). */
  interval?: number;
  /** What is awaited, for the timeout's message. */
  what?: string;
}

/**
 * Calls `fn` until it returns a truthy value, and returns that value. An error thrown by `fn` (a failed `expect`, a row not there yet) counts as "not
 * yet"; when the time is up the last one is thrown, so the failure reads as the assertion's.
 * An assertion-style `fn` returns `true` at its end.
 */
export async function eventually<T>(
  fn: () => T | undefined | null | false | 0 | '' | Promise<T | undefined | null | false | 0 | ''>,
  options: EventuallyOptions | number = {},
  what?: string,
): Promise<T> {
  const { timeout = 10_000, interval = 25, what: named = what } = typeof options === 'number' ? { timeout: options } : options;
  const until = Date.now() + timeout;
  for (;;) {
    let lastError: unknown;
    try {
      const value = await fn();
      if (value) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= until) {
      if (lastError instanceof Error) {
        lastError.message = `timed out after ${timeout} ms waiting for ${named ?? 'a condition'}: ${lastError.message}`;
        throw lastError;
      }
      throw new Error(`timed out after ${timeout} ms waiting for ${named ?? 'a condition'}`);
    }
    await pause(interval);
  }
}

/**
 * How long a test watches for something that must NOT happen. No wait can prove a negative;
 * each period is a few times longer than the thing it watches for takes when it does happen.
 */
export const QUIET = {
  /** A NOTIFY or an in-process event reaching a listener on loopback (a few ms when it comes). */
  delivery: 200,
  /** A worker's claim loop, which polls at least every 100 ms, picking up work it should not. */
  claim: 300,
  /** A stopped loop's last iteration that stop() did not wait for (one poll interval). */
  afterStop: 300,
  /** A new subscription's first answer: its cursor checked, its replay begun. */
  firstAnswer: 300,
  /** A stop() with nothing to wait for returning (a few ms; these tests give it 100 ms of grace). */
  stopReturn: 200,
  /** A worker woken from SIGSTOP writing the outcomes it holds (which fencing must refuse). */
  lateOutcome: 1000,
} as const;

/** Waits out a quiet period: only before asserting that something did not happen. */
export function quietPeriod(ms: number): Promise<void> {
  return pause(ms);
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
