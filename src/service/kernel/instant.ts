/**
 * Instants written as strings, as RFC 3339 writes them: a calendar date, a time and an offset
 * (`Z` or `±hh:mm`), years 0001-9999. The one reading of a date-time string, for the GraphQL
 * DateTime scalar and for library callers who pass a string (inputs.ts).
 *
 * Not `new Date(string)`: it reads a string without an offset in the process's own time zone, so
 * two gateways in different zones would run the same job hours apart; it rolls an impossible date
 * forward (February 30 became March 2); and it accepts other shapes besides.
 */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|([+-])(\d{2}):(\d{2}))$/;

/** What is wrong with a date-time string that is refused. */
export interface InstantProblem {
  problem: string;
}

export const INSTANT_EXAMPLE = 'e.g. "2026-12-01T09:30:00Z" or "2026-12-01T10:30:00+01:00"';

const leap = (year: number) => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** The instant `value` names, or why it names none. */
export function parseInstant(value: string): Date | InstantProblem {
  const m = RFC3339.exec(value);
  if (!m) return { problem: `needs a date, a time and a time zone offset, ${INSTANT_EXAMPLE}` };
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (year < 1) return { problem: 'has year 0000; years run from 0001 to 9999' };
  if (month < 1 || month > 12) return { problem: `has no month ${m[2]}` };
  const days = month === 2 && leap(year) ? 29 : DAYS[month - 1]!;
  if (day < 1 || day > days) return { problem: `names a day that does not exist (${m[1]}-${m[2]} has ${days} days)` };
  if (hour > 23 || minute > 59 || second > 59) return { problem: 'names a time of day that does not exist' };
  let offsetMinutes = 0;
  if (m[9]) {
    const [hours, minutes] = [Number(m[10]), Number(m[11])];
    if (hours > 23 || minutes > 59) return { problem: 'has an offset that does not exist' };
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (hours * 60 + minutes);
  }
  // Date.UTC would read years 0-99 as 1900-1999.
  const utc = new Date(0);
  utc.setUTCFullYear(year, month - 1, day);
  utc.setUTCHours(hour, minute, second, m[7] ? Math.floor(Number(`0${m[7]}`) * 1000) : 0);
  const instant = new Date(utc.getTime() - offsetMinutes * 60_000);
  // An offset can carry a time at either end past them ("9999-12-31T23:59:59-23:59"): the instant
  // would be written back with a year this reading refuses.
  if (instant.getTime() < FIRST_INSTANT || instant.getTime() > LAST_INSTANT)
    return { problem: 'names an instant outside the years 0001 to 9999 (UTC)' };
  return instant;
}

/** The first and last instants a four-digit year can write (Date.UTC would read year 1 as 1901). */
const FIRST_INSTANT = new Date(0).setUTCFullYear(1, 0, 1);
export const LAST_INSTANT = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

export const isInstantProblem = (value: Date | InstantProblem): value is InstantProblem => !(value instanceof Date);
