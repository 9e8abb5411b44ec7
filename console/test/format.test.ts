import { describe, expect, it } from 'vitest';
import {
  addSample,
  cursorText,
  formatCount,
  formatDuration,
  formatClock,
  formatLocal,
  formatRelative,
  formatUtc,
  runProgress,
  truncate,
} from '../src/lib/format.ts';

describe('times', () => {
  it('writes an instant in the given zone and locale, and its UTC form for the hover', () => {
    const iso = '2026-03-08T07:30:05.000Z';
    expect(formatLocal(iso, 'America/New_York', ['en-GB'])).toBe('8 Mar 2026, 03:30:05');
    expect(formatLocal(iso, 'Asia/Kolkata', ['en-GB'])).toBe('8 Mar 2026, 13:00:05');
    expect(formatLocal(iso, 'Asia/Kolkata', ['en-US'])).toBe('Mar 8, 2026, 1:00:05 PM');
    expect(formatLocal(iso, 'Asia/Kolkata', ['de-DE'])).toBe('08.03.2026, 13:00:05');
    expect(formatUtc(iso)).toBe('2026-03-08 07:30:05 UTC');
  });

  it("follows the locale's clock (12- or 24-hour), the same in a table and on a chart's axis", () => {
    const iso = '2026-03-08T19:05:05.000Z';
    for (const [locales, clock] of [
      [['en-US'], '7:05 PM'],
      [['en-GB'], '19:05'],
      [['de-DE'], '19:05'],
      [['fr-FR'], '19:05'],
      [['en-AU'], '7:05 pm'],
      // The first of the viewer's languages the runtime knows.
      [['xx-XX', 'en-US'], '7:05 PM'],
    ] as const) {
      expect(formatClock(iso, 'UTC', locales)).toBe(clock);
      // A table's time is the axis's with the seconds.
      expect(formatLocal(iso, 'UTC', locales).replace(':05', '')).toContain(clock);
    }
  });

  it('shows a dash for a missing or invalid time', () => {
    expect(formatLocal(null)).toBe('—');
    expect(formatLocal('not a time')).toBe('—');
    expect(formatUtc(undefined)).toBe('');
  });

  it('says how far an instant is from now, either way', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(formatRelative('2026-01-01T00:03:00Z', now)).toBe('in 3 min');
    expect(formatRelative('2025-12-31T23:59:48Z', now)).toBe('12 s ago');
    expect(formatRelative('2026-01-01T00:00:00.400Z', now)).toBe('now');
  });
});

describe('durations and counts', () => {
  it('picks the unit by size', () => {
    expect(formatDuration(850)).toBe('850 ms');
    expect(formatDuration(1500)).toBe('1.5 s');
    expect(formatDuration(61_000)).toBe('1 min 1 s');
    expect(formatDuration(61_000, true)).toBe('1 min');
    expect(formatDuration(7_260_000)).toBe('2 h 1 min');
    expect(formatDuration(3 * 86_400_000)).toBe('3 d');
    expect(formatDuration(null)).toBe('—');
  });

  it('groups digits and shortens long text', () => {
    expect(formatCount(1_234_567)).toBe('1,234,567');
    expect(formatCount(undefined)).toBe('—');
    expect(truncate('abcdef', 4)).toBe('abc…');
    expect(truncate('abc', 4)).toBe('abc');
  });
});

describe('run progress', () => {
  it('computes the fraction, the rate over the samples and the time left', () => {
    const p = runProgress(600, 1000, [
      { at: 0, processed: 200 },
      { at: 2000, processed: 600 },
    ]);
    expect(p.fraction).toBe(0.6);
    expect(p.label).toBe('600 / 1,000');
    expect(p.rate).toBe(200);
    expect(p.etaMs).toBe(2000);
  });

  it('has no fraction or ETA without a total, and no rate from one sample', () => {
    const p = runProgress(42, null, [{ at: 0, processed: 42 }]);
    expect(p).toEqual({ fraction: null, label: '42', rate: null, etaMs: null });
  });

  it('clamps a count past its total and says nothing is left', () => {
    const p = runProgress(12, 10, []);
    expect(p.fraction).toBe(1);
    expect(p.etaMs).toBe(0);
  });

  it('keeps only recent samples (at least two), and starts over when the count goes back', () => {
    let s = addSample([], { at: 0, processed: 0 }, 10_000);
    s = addSample(s, { at: 5000, processed: 5 }, 10_000);
    s = addSample(s, { at: 20_000, processed: 20 }, 10_000);
    expect(s).toEqual([
      { at: 5000, processed: 5 },
      { at: 20_000, processed: 20 },
    ]);
    expect(addSample(s, { at: 21_000, processed: 3 }, 10_000)).toEqual([{ at: 21_000, processed: 3 }]);
  });
});

describe("a run's cursor", () => {
  const b64 = (s: string) => btoa(String.fromCharCode(...new TextEncoder().encode(s)));

  it('shows a JSON cursor pretty-printed, a text one as text, and bytes as the base64 they came as', () => {
    expect(cursorText(b64('{"table":"orders","after":41}'))).toEqual({
      text: '{\n  "table": "orders",\n  "after": 41\n}',
      decoded: 'json',
    });
    expect(cursorText(b64('orders/2026-12-04/é'))).toEqual({ text: 'orders/2026-12-04/é', decoded: 'text' });
    expect(cursorText('AAECAw==')).toEqual({ text: 'AAECAw==', decoded: 'base64' }); // 00 01 02 03
    expect(cursorText('//79')).toEqual({ text: '//79', decoded: 'base64' }); // not UTF-8
  });

  it('is null before the first checkpoint', () => {
    expect(cursorText(null)).toBeNull();
    expect(cursorText('')).toBeNull();
  });
});
