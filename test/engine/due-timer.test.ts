/**
 * The worker's due timer (src/service/engine/worker/due-timer.ts) on a fake clock: hints of work
 * due later arm it without a read, reads replace it, and neither a read that was in flight when a
 * hint came nor an older read answering after a newer one can push a wake past work that is due.
 * The reads are promises this test settles, in the orders a pool can answer them.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createDueTimer, type DueTimer } from '../../src/service/engine/worker/due-timer.js';

const POLL_MS = 5_000;

beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] }));
afterEach(() => void vi.useRealTimers());

/** A due timer whose reads wait for `answer` (in the order they were sent, unless told). */
function harness() {
  const reads: { resolve: (inMs: number | null) => void; reject: (error: Error) => void }[] = [];
  const failures: unknown[] = [];
  let running = true;
  const kicks = vi.fn();
  const timer: DueTimer = createDueTimer({
    read: () => new Promise((resolve, reject) => reads.push({ resolve, reject })),
    pollMs: POLL_MS,
    running: () => running,
    kick: kicks,
    readFailed: (error) => failures.push(error),
    now: () => Date.now(),
  });
  return {
    timer,
    kicks,
    failures,
    stop: () => void (running = false),
    /** Sends a read; returns a function that answers it and waits for the timer to take it. */
    read() {
      const done = timer.arm();
      const sent = reads[reads.length - 1]!;
      const answer = async (inMs: number | null) => {
        sent.resolve(inMs);
        await done;
      };
      return Object.assign(answer, {
        fail: async (error: Error) => {
          sent.reject(error);
          await done;
        },
      });
    },
    /** Advances the clock by `ms`; how many times the timer fired meanwhile. */
    after(ms: number) {
      const before = kicks.mock.calls.length;
      vi.advanceTimersByTime(ms);
      return kicks.mock.calls.length - before;
    },
  };
}

describe('the due timer', () => {
  it('is armed by a hint without a read, for the earliest hinted time; a hint at or past the poll is left to it', async () => {
    const h = harness();
    h.timer.hinted(POLL_MS);
    expect(h.after(POLL_MS + 1)).toBe(0);
    h.timer.hinted(300);
    h.timer.hinted(900); // later: does not push the first back
    expect(h.after(299)).toBe(0);
    expect(h.after(1)).toBe(1);
    h.timer.hinted(500);
    h.timer.hinted(200); // earlier: brings it forward
    expect(h.after(200)).toBe(1);
    expect(h.after(1_000)).toBe(0);
  });

  it('is replaced by a read, which knows what every hint before it said', async () => {
    const h = harness();
    h.timer.hinted(100);
    await h.read()(2_000); // sent after the hint: its row was seen, and is not due before 2 s (taken meanwhile, say)
    expect(h.after(1_999)).toBe(0);
    expect(h.after(1)).toBe(1);
    await h.read()(null); // nothing ahead: no timer
    expect(h.after(POLL_MS * 2)).toBe(0);
  });

  it('keeps a hint heard while a read was in flight: the read may not have seen its row', async () => {
    const h = harness();
    const answer = h.read();
    h.timer.hinted(300);
    await answer(2_000); // later than the hint: it does not replace it
    expect(h.after(299)).toBe(0);
    expect(h.after(1)).toBe(1);
  });

  it('lets an older read answering after a newer one bring the timer forward only', async () => {
    const h = harness();
    const older = h.read();
    h.timer.hinted(200);
    const newer = h.read();
    await newer(200); // saw the hinted row
    await older(4_000); // sent before the row existed
    expect(h.after(200)).toBe(1);

    const older2 = h.read();
    const newer2 = h.read();
    await newer2(3_000);
    await older2(1_000); // earlier: it may know of work the newer one's snapshot missed, so it counts
    expect(h.after(1_000)).toBe(1);
    expect(h.after(5_000)).toBe(0);
  });

  it('forgets a hint a claim sent after its time took, so a later read is not overruled by it', async () => {
    const h = harness();
    h.timer.hinted(100);
    expect(h.after(100)).toBe(1);
    h.timer.claimed(Date.now()); // the wake's claim answered
    const answer = h.read();
    h.timer.hinted(3_000); // heard during the read: kept, but the first hint is not
    await answer(null);
    expect(h.after(2_999)).toBe(0);
    expect(h.after(1)).toBe(1);
  });

  it('reports a failed read and keeps its timer; after clear, or once stopped, nothing fires', async () => {
    const h = harness();
    h.timer.hinted(1_000);
    const error = new Error('unreachable (test)');
    await h.read().fail(error);
    expect(h.failures).toEqual([error]);
    expect(h.after(1_000)).toBe(1);
    // Cleared (stop) while a read is in flight: the hint heard meanwhile is forgotten too.
    const answer = h.read();
    h.timer.hinted(500);
    h.timer.clear();
    expect(h.after(POLL_MS)).toBe(0);
    await answer(null);
    expect(h.after(POLL_MS)).toBe(0);
    h.stop();
    h.timer.hinted(100);
    expect(h.after(POLL_MS)).toBe(0);
  });
});
