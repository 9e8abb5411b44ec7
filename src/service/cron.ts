/**
 * Cron expressions: five fields (minute hour day-of-month month day-of-week), or one of the
 * `@hourly`-style nicknames, evaluated in an IANA time zone. Seconds are not supported: a
 * six-field expression is refused.
 *
 * Validation names the offending cron field, so a frontend can point at it. Occurrences are
 * computed by walking forward with cron-parser's `next()` (never `prev()`, which disagrees
 * with `next()` around DST transitions).
 */
import { CronExpressionParser } from 'cron-parser';
import { ValidationError } from './errors.js';

const FIELD_NAMES = ['minute', 'hour', 'day-of-month', 'month', 'day-of-week'] as const;

const NICKNAMES: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

/**
 * Returns the expression in five-field form, or throws a ValidationError at `path` whose
 * message names the cron field at fault.
 */
export function normalizeCron(expression: string, path: (string | number)[] = ['expression']): string {
  const trimmed = expression.trim();
  const nick = NICKNAMES[trimmed.toLowerCase()];
  if (nick) return nick;
  const fields = trimmed.split(/\s+/);
  if (fields.length !== 5) {
    throw ValidationError.at(
      path,
      `must have 5 fields (minute hour day-of-month month day-of-week), got ${fields.length}` +
        (fields.length === 6 ? '; seconds are not supported' : ''),
    );
  }
  // Probe each field alone, the others '*', so the error names the field that is wrong.
  fields.forEach((field, i) => {
    const probe = FIELD_NAMES.map((_, j) => (j === i ? field : '*')).join(' ');
    try {
      CronExpressionParser.parse(probe, { tz: 'UTC' });
    } catch (error) {
      throw ValidationError.at(path, `${FIELD_NAMES[i]} field "${field}": ${(error as Error).message}`);
    }
  });
  const normalized = fields.join(' ');
  try {
    CronExpressionParser.parse(normalized, { tz: 'UTC' });
  } catch (error) {
    throw ValidationError.at(path, (error as Error).message);
  }
  return normalized;
}

/**
 * The next `count` occurrences strictly after `after`, bounded by `endsAt`. Stops early (with
 * fewer results) when the expression has no further occurrence.
 */
export function nextOccurrences(
  expression: string,
  timezone: string,
  after: Date,
  count: number,
  endsAt?: Date | null,
): Date[] {
  const it = CronExpressionParser.parse(expression, {
    currentDate: after,
    tz: timezone,
    ...(endsAt ? { endDate: endsAt } : {}),
  });
  const out: Date[] = [];
  while (out.length < count) {
    let next: Date;
    try {
      next = it.next().toDate();
    } catch {
      break; // past endDate, or no further occurrence
    }
    if (next.getTime() <= after.getTime()) continue;
    if (endsAt && next.getTime() >= endsAt.getTime()) break;
    out.push(next);
  }
  return out;
}

/** The first occurrence at or after max(now, startsAt), or null when the schedule has ended. */
export function firstFireAt(
  expression: string,
  timezone: string,
  now: Date,
  startsAt?: Date | null,
  endsAt?: Date | null,
): Date | null {
  const from = startsAt && startsAt > now ? new Date(startsAt.getTime() - 1) : now;
  return nextOccurrences(expression, timezone, from, 1, endsAt)[0] ?? null;
}
