/**
 * The watermark's bookkeeping, on its own: when candidates settle, and that they keep settling
 * when writers overlap without end.
 */
import { describe, expect, it } from 'vitest';
import { Watermark } from '../../src/subscriptions/hub/watermark.js';

describe('Watermark', () => {
  it('settles a position at once when no writer is open, and only after its listed writers end otherwise', () => {
    const w = new Watermark<number>();
    expect(w.offer(10, [])).toBe(10);
    expect(w.offer(20, ['3/7'])).toBeUndefined();
    expect(w.offer(25, ['3/7', '4/2'])).toBeUndefined(); // 3/7 still open: 20 waits
    expect(w.offer(30, ['4/2'])).toBe(20); // 3/7 ended: 20 settles; 25 still waits on 4/2
    expect(w.offer(40, ['5/1'])).toBe(30); // 4/2 ended: 25 and 30 settle, the newest is returned
    expect(w.waiting).toBe(true);
    expect(w.offer(50, [])).toBe(50);
    expect(w.waiting).toBe(false);
  });

  it('keeps advancing under writers that always overlap and each outlive many reads', () => {
    const w = new Watermark<number>();
    const settled: number[] = [];
    // Writer k opens at read 20k and stays open for 100 reads: there is never a read with no
    // writer open, and each lasts longer than the 64 candidates the watermark keeps.
    for (let read = 1; read <= 2_000; read++) {
      const writers: string[] = [];
      for (let k = Math.max(0, Math.floor((read - 99) / 20)); 20 * k <= read; k++) if (read < 20 * k + 100) writers.push(`${k}/1`);
      expect(writers.length).toBeGreaterThan(0);
      const p = w.offer(read, writers);
      if (p !== undefined) settled.push(p);
    }
    expect([...settled].sort((a, b) => a - b)).toEqual(settled);
    expect(settled.length).toBeGreaterThan(10);
    expect(settled.at(-1)!).toBeGreaterThan(1_700);
  });
});
