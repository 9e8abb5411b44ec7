/**
 * Fire times of a cron expression in an IANA time zone, computed by walking local calendar
 * days forward. cron-parser parses the fields; the walk is ours, because cron-parser's own
 * iteration can skip, double or throw around DST transitions in zones with unusual shifts.
 *
 * The rules, in the job's time zone:
 *  - Day of month and day of week (crontab(5)): if either field starts with `*`, both must
 *    match; otherwise a day matching either fires.
 *  - A wall time skipped by a spring-forward gap fires once that day, shifted by the length of
 *    the gap (02:30 becomes 03:30 in New York; 30-minute and 2-hour shifts shift by their own
 *    gap). If the shifted time is also a regular fire time, it fires once.
 *  - A wall time repeated by a fall-back fires once, on its first pass — unless the hour field
 *    covers all 24 hours (`*`, `*\/1`, `0-23`), which keeps its real cadence and fires on both.
 *
 * Offsets come from `Intl.DateTimeFormat`. Each local day is mapped to its UTC offset
 * segments once (transitions found by bisection, cached), so a fire time costs arithmetic.
 */
import { CronExpressionParser } from 'cron-parser';

export interface CronSpec {
  minutes: number[];
  hours: number[];
  doms: Set<number>;
  months: Set<number>;
  dows: Set<number>;
  /** crontab(5): when either day field starts with '*', both must match. */
  bothDaysMustMatch: boolean;
  allHours: boolean;
}

/** Compiles a five-field expression (already validated by `normalizeCron`). */
export function compileCron(expression: string): CronSpec {
  const fields = expression.trim().split(/\s+/);
  const parsed = CronExpressionParser.parse(expression, { tz: 'UTC' }).fields;
  const dows = new Set<number>(parsed.dayOfWeek.values.map((v) => Number(v) % 7));
  const hours = [...new Set(parsed.hour.values.map(Number))].sort((a, b) => a - b);
  return {
    minutes: [...new Set(parsed.minute.values.map(Number))].sort((a, b) => a - b),
    hours,
    doms: new Set(parsed.dayOfMonth.values.filter((v) => typeof v === 'number').map(Number)),
    months: new Set(parsed.month.values.map(Number)),
    dows,
    bothDaysMustMatch: fields[2]!.startsWith('*') || fields[4]!.startsWith('*'),
    allHours: hours.length === 24,
  };
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(tz, f);
  }
  return f;
}

/** The zone's UTC offset at instant `t`, in milliseconds (local = t + offset). */
export function offsetAt(tz: string, t: number): number {
  const parts = formatter(tz).formatToParts(new Date(t));
  const get = (type: string) => Number(parts.find((p) => p.type === type)!.value);
  const asUtc = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
  return asUtc - Math.floor(t / 1000) * 1000;
}

/** Wall-clock fields of instant `t` in the zone. */
export function wallAt(tz: string, t: number): { y: number; mo: number; d: number; h: number; mi: number } {
  const local = new Date(t + offsetAt(tz, t));
  return {
    y: local.getUTCFullYear(),
    mo: local.getUTCMonth() + 1,
    d: local.getUTCDate(),
    h: local.getUTCHours(),
    mi: local.getUTCMinutes(),
  };
}

interface Segment {
  /** First instant with this offset (or -Infinity). */
  from: number;
  /** First instant after it (or Infinity). */
  to: number;
  offset: number;
}

const segmentCache = new Map<string, Segment[]>();

/** The offset segments covering every instant whose local date is (y, mo, d). */
function segmentsOfDay(tz: string, y: number, mo: number, d: number): Segment[] {
  const key = `${tz}|${y}-${mo}-${d}`;
  const cached = segmentCache.get(key);
  if (cached) return cached;
  const wall0 = Date.UTC(y, mo - 1, d);
  // Offsets lie within ±14 h (±15 h to be safe), so the local day is inside this window.
  const a = wall0 - 15 * HOUR;
  const b = wall0 + DAY + 15 * HOUR;
  const segments: Segment[] = [];
  let from = -Infinity;
  let cursor = a;
  let current = offsetAt(tz, a);
  while (cursor < b) {
    const end = offsetAt(tz, b);
    if (end === current) break;
    // Bisect for the first second with a different offset.
    let lo = cursor;
    let hi = b;
    while (hi - lo > 1000) {
      const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
      if (offsetAt(tz, mid) === current) lo = mid;
      else hi = mid;
    }
    segments.push({ from, to: hi, offset: current });
    from = hi;
    cursor = hi;
    current = offsetAt(tz, hi);
  }
  segments.push({ from, to: Infinity, offset: current });
  if (segmentCache.size > 50_000) segmentCache.clear();
  segmentCache.set(key, segments);
  return segments;
}

/**
 * The instants at which a wall time fires, per the rules above: one normally; the first of two
 * (or both, with `bothPasses`) in a fall-back; the gap-shifted one in a spring-forward.
 */
function instantsOfWall(segments: Segment[], wall: number, bothPasses: boolean): number[] {
  if (segments.length === 1) return [wall - segments[0]!.offset];
  const valid: number[] = [];
  for (const s of segments) {
    const t = wall - s.offset;
    if (t >= s.from && t < s.to) valid.push(t);
  }
  if (valid.length > 0) return bothPasses ? valid : [valid[0]!];
  // In a gap: read the wall time with the offset in force before the gap, which lands it after
  // the transition, shifted by the gap's length.
  for (let i = 0; i < segments.length - 1; i++) {
    const s = segments[i]!;
    const t = wall - s.offset;
    if (t >= s.to && wall - segments[i + 1]!.offset < segments[i + 1]!.from) return [t];
  }
  return [wall - segments.at(-1)!.offset];
}

function dayMatches(spec: CronSpec, y: number, mo: number, d: number): boolean {
  if (!spec.months.has(mo)) return false;
  const dom = spec.doms.has(d);
  const dow = spec.dows.has(new Date(Date.UTC(y, mo - 1, d)).getUTCDay());
  return spec.bothDaysMustMatch ? dom && dow : dom || dow;
}

/**
 * Whether any date matches the day fields. Every matching date fires (a skipped wall time fires
 * shifted), and the Gregorian calendar repeats every 400 years, a whole number of weeks, so one
 * cycle decides it.
 */
export function everFires(spec: CronSpec): boolean {
  for (let day = Date.UTC(2000, 0, 1); day < Date.UTC(2400, 0, 1); day += DAY) {
    const date = new Date(day);
    const y = date.getUTCFullYear();
    const mo = date.getUTCMonth() + 1;
    if (!spec.months.has(mo)) {
      day = Date.UTC(y, mo, 1) - DAY;
      continue;
    }
    if (dayMatches(spec, y, mo, date.getUTCDate())) return true;
  }
  return false;
}

/** Every fire instant of one local day, ascending, without duplicates. */
function firesOfDay(spec: CronSpec, tz: string, y: number, mo: number, d: number): number[] {
  const segments = segmentsOfDay(tz, y, mo, d);
  const out = new Set<number>();
  for (const h of spec.hours) {
    for (const mi of spec.minutes) {
      for (const t of instantsOfWall(segments, Date.UTC(y, mo - 1, d, h, mi), spec.allHours)) out.add(t);
    }
  }
  return [...out].sort((a, b) => a - b);
}

/** How far ahead to look before concluding an expression never fires again (e.g. 30 Feb). */
const HORIZON_DAYS = 366 * 8;

/** The first fire instant strictly after `after` (ms), or null when there is none within 8 years. */
export function nextFireAfter(spec: CronSpec, tz: string, after: number): number | null {
  // Start a day early: a gap-shifted or repeated wall time of the previous local day can land
  // after `after`.
  const start = wallAt(tz, after);
  let day = Date.UTC(start.y, start.mo - 1, start.d) - DAY;
  for (let i = 0; i < HORIZON_DAYS; i++, day += DAY) {
    const date = new Date(day);
    const y = date.getUTCFullYear();
    const mo = date.getUTCMonth() + 1;
    const d = date.getUTCDate();
    if (!spec.months.has(mo)) {
      // Jump to the last day of this month; the loop's step moves to the 1st of the next.
      day = Date.UTC(y, mo, 1) - DAY;
      continue;
    }
    if (!dayMatches(spec, y, mo, d)) continue;
    const segments = segmentsOfDay(tz, y, mo, d);
    if (segments.length === 1) {
      // No transition touches this day: wall order is instant order.
      const offset = segments[0]!.offset;
      for (const h of spec.hours) {
        // Skip whole hours that end at or before `after` (the common case on the first day).
        if (Date.UTC(y, mo - 1, d, h, 59) - offset <= after) continue;
        for (const mi of spec.minutes) {
          const t = Date.UTC(y, mo - 1, d, h, mi) - offset;
          if (t > after) return t;
        }
      }
      continue;
    }
    const fire = firesOfDay(spec, tz, y, mo, d).find((t) => t > after);
    if (fire === undefined) continue;
    // A fall-back just after midnight (00:01 in St John's until 2011) repeats the end of this
    // day after the start of the next: the next day's first fire can come before this one.
    const next = new Date(day + DAY);
    const [ny, nmo, nd] = [next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate()];
    const early = dayMatches(spec, ny, nmo, nd) ? firesOfDay(spec, tz, ny, nmo, nd).find((t) => t > after) : undefined;
    return early !== undefined && early < fire ? early : fire;
  }
  return null;
}
