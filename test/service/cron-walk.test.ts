/**
 * The fire-time walk against an independent computation: a brute-force walk of UTC minutes,
 * each mapped to wall time with Intl.DateTimeFormat, applying the DST rules directly.
 */
import { describe, expect, it } from 'vitest';
import { nextOccurrences, normalizeCron } from '../../src/service/cron/expressions.js';

const MIN = 60_000;

/** An independent matcher for the plain crontab syntax used below: *, a, a-b, steps, lists. */
function fieldSet(field: string, lo: number, hi: number): Set<number> {
  const out = new Set<number>();
  for (const part of field.split(',')) {
    const [range, stepText] = part.split('/');
    const step = stepText ? Number(stepText) : 1;
    let [a, b] = range === '*' ? [lo, hi] : range!.includes('-') ? range!.split('-').map(Number) : [Number(range), Number(range)];
    if (stepText && range !== '*' && !range!.includes('-')) b = hi;
    for (let v = a!; v <= b!; v += step) out.add(v);
  }
  return out;
}

function matcher(expr: string) {
  const [mi, h, dom, mo, dow] = expr.split(' ') as [string, string, string, string, string];
  const sets = {
    mi: fieldSet(mi, 0, 59),
    h: fieldSet(h, 0, 23),
    dom: fieldSet(dom, 1, 31),
    mo: fieldSet(mo, 1, 12),
    dow: fieldSet(dow, 0, 6),
  };
  const both = dom.startsWith('*') || dow.startsWith('*');
  return {
    allHours: sets.h.size === 24,
    matches(w: Wall) {
      if (!sets.mi.has(w.mi) || !sets.h.has(w.h) || !sets.mo.has(w.mo)) return false;
      const a = sets.dom.has(w.d);
      const b = sets.dow.has(new Date(Date.UTC(w.y, w.mo - 1, w.d)).getUTCDay());
      return both ? a && b : a || b;
    },
  };
}

interface Wall {
  y: number;
  mo: number;
  d: number;
  h: number;
  mi: number;
}

function wallOf(fmt: Intl.DateTimeFormat, t: number): Wall & { key: number } {
  const p = Object.fromEntries(fmt.formatToParts(new Date(t)).map((x) => [x.type, x.value]));
  const w = { y: +p.year!, mo: +p.month!, d: +p.day!, h: +p.hour!, mi: +p.minute! };
  return { ...w, key: Date.UTC(w.y, w.mo - 1, w.d, w.h, w.mi) };
}

function bruteForce(expr: string, tz: string, from: number, to: number): number[] {
  const fmt = new Intl.DateTimeFormat('en-US', {
    timeZone: tz,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
  });
  const m = matcher(expr);
  const fires = new Set<number>();
  let prev = wallOf(fmt, from - MIN);
  let maxSeen = prev.key;
  for (let t = from; t < to; t += MIN) {
    const w = wallOf(fmt, t);
    if (w.key - prev.key > MIN) {
      // Spring forward: each skipped wall minute that matches fires shifted by the gap.
      for (let s = prev.key + MIN; s < w.key; s += MIN) {
        const d = new Date(s);
        const sw = { y: d.getUTCFullYear(), mo: d.getUTCMonth() + 1, d: d.getUTCDate(), h: d.getUTCHours(), mi: d.getUTCMinutes() };
        if (m.matches(sw)) fires.add(t + (s - prev.key - MIN));
      }
    }
    const secondPass = w.key <= maxSeen;
    if (m.matches(w) && (!secondPass || m.allHours)) fires.add(t);
    maxSeen = Math.max(maxSeen, w.key);
    prev = w;
  }
  return [...fires].filter((t) => t >= from).sort((a, b) => a - b);
}

/** Instants in [from, to) where the zone's offset changes, found by scanning hours. */
function transitions(tz: string, from: number, to: number): number[] {
  const fmt = new Intl.DateTimeFormat('en-US', { timeZone: tz, timeZoneName: 'longOffset' });
  const off = (t: number) => fmt.formatToParts(new Date(t)).find((p) => p.type === 'timeZoneName')!.value;
  const out: number[] = [];
  for (let t = from; t < to; t += 3_600_000) if (off(t) !== off(t + 3_600_000)) out.push(t);
  return out;
}

const ZONES = [
  'America/New_York',
  'Europe/London',
  'Europe/Berlin',
  'Australia/Sydney',
  'Australia/Lord_Howe', // 30-minute shift
  'Antarctica/Troll', // 2-hour shift
  'America/Havana', // transitions at midnight
  'America/Santiago',
  'Pacific/Chatham', // +12:45 / +13:45
  'Asia/Kolkata', // none
];
const EXPRESSIONS = ['30 2 * * *', '0 * * * *', '*/15 * * * *', '0 0 * * *', '30 1 * * *', '45 23 * * *', '0 0 */2 * 1', '10 0-23/2 * * *'];

describe('cron fire times across DST, against a brute-force walk', () => {
  const yearStart = Date.UTC(2026, 0, 1);
  const yearEnd = Date.UTC(2027, 0, 1);
  for (const tz of ZONES) {
    it(`agrees in ${tz}`, () => {
      const windows = transitions(tz, yearStart, yearEnd).map((t) => [t - 2 * 86_400_000, t + 2 * 86_400_000] as const);
      if (windows.length === 0) windows.push([Date.UTC(2026, 5, 1), Date.UTC(2026, 5, 5)]);
      for (const expr of EXPRESSIONS) {
        for (const [from, to] of windows) {
          const expected = bruteForce(expr, tz, from, to).map((t) => new Date(t).toISOString());
          const got = nextOccurrences(normalizeCron(expr), tz, new Date(from - 1), 10_000, new Date(to)).map((d) => d.toISOString());
          expect(got, `${expr} in ${tz} around ${new Date(from).toISOString()}`).toEqual(expected);
        }
      }
    });
  }

  it("keeps real cadence through a fall-back at 00:01, which repeats the end of the previous day (St John's until 2011)", () => {
    // 00:01 NDT became 23:01 NST: 00:00 NDT on the 7th comes before 23:15 NST on the 6th.
    const got = nextOccurrences('*/15 * * * *', 'America/St_Johns', new Date('2010-11-07T01:59:00Z'), 6).map((d) => d.toISOString());
    expect(got).toEqual([
      '2010-11-07T02:00:00.000Z', // 23:30 NDT
      '2010-11-07T02:15:00.000Z', // 23:45 NDT
      '2010-11-07T02:30:00.000Z', // 00:00 NDT
      '2010-11-07T02:45:00.000Z', // 23:15 NST
      '2010-11-07T03:00:00.000Z', // 23:30 NST
      '2010-11-07T03:15:00.000Z', // 23:45 NST
    ]);
    const from = Date.UTC(2010, 10, 5);
    const to = Date.UTC(2010, 10, 9);
    for (const expr of EXPRESSIONS) {
      const expected = bruteForce(expr, 'America/St_Johns', from, to).map((t) => new Date(t).toISOString());
      const walked = nextOccurrences(normalizeCron(expr), 'America/St_Johns', new Date(from - 1), 10_000, new Date(to)).map((d) =>
        d.toISOString(),
      );
      expect(walked, expr).toEqual(expected);
    }
  });

  it('shifts a skipped 02:30 by the gap in New York and fires it once that day', () => {
    const got = nextOccurrences('30 2 * * *', 'America/New_York', new Date('2026-03-07T12:00:00Z'), 3).map((d) => d.toISOString());
    // 02:30 EST on the 7th, 03:30 EDT on the 8th (02:30 does not exist), 02:30 EDT on the 9th.
    expect(got).toEqual(['2026-03-08T07:30:00.000Z', '2026-03-09T06:30:00.000Z', '2026-03-10T06:30:00.000Z']);
  });

  it('fires a repeated 01:30 once in a fall-back, but an hourly schedule on both passes', () => {
    const daily = nextOccurrences('30 1 * * *', 'America/New_York', new Date('2026-11-01T00:00:00Z'), 2).map((d) => d.toISOString());
    expect(daily).toEqual(['2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z']);
    const hourly = nextOccurrences('30 * * * *', 'America/New_York', new Date('2026-11-01T04:00:00Z'), 4).map((d) => d.toISOString());
    // 00:30 EDT, 01:30 EDT, 01:30 EST, 02:30 EST: real hourly cadence.
    expect(hourly).toEqual([
      '2026-11-01T04:30:00.000Z',
      '2026-11-01T05:30:00.000Z',
      '2026-11-01T06:30:00.000Z',
      '2026-11-01T07:30:00.000Z',
    ]);
  });

  it('reads day-of-month with day-of-week per crontab: 0 0 */2 * 1 fires on odd-dated Mondays only', () => {
    const got = nextOccurrences('0 0 */2 * 1', 'UTC', new Date('2026-01-01T00:00:00Z'), 6);
    for (const d of got) {
      expect(d.getUTCDay()).toBe(1);
      expect(d.getUTCDate() % 2).toBe(1);
    }
    // Either-matches when neither field starts with '*': the 1st and 15th, and every Friday.
    const either = nextOccurrences('0 12 1,15 * 5', 'UTC', new Date('2026-05-01T00:00:00Z'), 5).map((d) => d.toISOString().slice(0, 10));
    expect(either).toEqual(['2026-05-01', '2026-05-08', '2026-05-15', '2026-05-22', '2026-05-29']);
  });

  it('finds rare occurrences (29 February) and refuses dates that never exist', () => {
    expect(nextOccurrences('0 0 29 2 *', 'UTC', new Date('2026-01-01T00:00:00Z'), 1).map((d) => d.toISOString())).toEqual([
      '2028-02-29T00:00:00.000Z',
    ]);
    expect(() => normalizeCron('0 0 30 2 *')).toThrow(/never fires/);
  });

  it('refuses the non-standard L, W, # and ? with the field named', () => {
    expect(() => normalizeCron('0 0 L * *')).toThrow(/day-of-month field "L": L, W, # and \? are not supported/);
    expect(() => normalizeCron('0 0 * * 5#2')).toThrow(/day-of-week field "5#2"/);
  });
});
