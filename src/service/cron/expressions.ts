/**
 * Cron expressions: five fields (minute hour day-of-month month day-of-week), or one of the
 * `@hourly`-style nicknames, evaluated in an IANA time zone. Seconds are not supported: a
 * six-field expression is refused.
 *
 * Validation names the offending cron field, so a frontend can point at it. cron-parser parses;
 * fire times come from the walk in walk.ts (its DST rules are written there), which is
 * what both `cronPreview` and the scheduler use. The non-standard `L`, `W`, `#`, `?` and `H` are
 * refused, and so is an expression no date satisfies.
 */
import { LAST_INSTANT } from '../kernel/instant.js';
import { CronExpressionParser } from 'cron-parser';
import { compileCron, everFires, nextFireAfter, type CronSpec } from './walk.js';
import { ValidationError } from '../kernel/errors.js';

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
    const nonStandard = i === 2 ? /[lw?]/i : i === 4 ? /[l#?]/i : /\?/;
    if (nonStandard.test(field)) {
      throw ValidationError.at(path, `${FIELD_NAMES[i]} field "${field}": L, W, # and ? are not supported (standard crontab syntax only)`);
    }
    // cron-parser reads H as a value drawn at random on each parse: every process, and every
    // preview, would fire at its own time. The lookbehind spares the day name "thu".
    if (/(?<![a-z])h/i.test(field)) {
      throw ValidationError.at(
        path,
        `${FIELD_NAMES[i]} field "${field}": H (a hashed, random value) is not supported (standard crontab syntax only)`,
      );
    }
    const probe = FIELD_NAMES.map((_, j) => (j === i ? field : '*')).join(' ');
    try {
      CronExpressionParser.parse(probe, { tz: 'UTC' });
    } catch (error) {
      throw ValidationError.at(path, `${FIELD_NAMES[i]} field "${field}": ${inOwnWords((error as Error).message)}`);
    }
  });
  const normalized = fields.join(' ');
  const neverFires = () =>
    ValidationError.at(
      path,
      `never fires: no date has day-of-month "${fields[2]}" in month "${fields[3]}" on day-of-week "${fields[4]}"` +
        ' (when either day field starts with "*", both must match)',
    );
  try {
    CronExpressionParser.parse(normalized, { tz: 'UTC' });
  } catch (error) {
    // cron-parser's own test of 30 February (day-of-week '*'): said as the check below says it.
    if (/day of month/i.test((error as Error).message)) throw neverFires();
    throw ValidationError.at(path, inOwnWords((error as Error).message));
  }
  // cron-parser refuses 30 February only when day-of-week is '*'; '*/1' makes the days AND too.
  if (!everFires(specOf(normalized))) throw neverFires();
  return normalized;
}

/** cron-parser's wording of a value out of its field's range, in the API's ("Constraint error, got value 61 expected range 0-59"). */
function inOwnWords(message: string): string {
  const range = /^Constraint error, got value (\S+) expected range (\d+)-(\d+)/.exec(message);
  return range ? `${range[1]} is out of range (${range[2]} to ${range[3]})` : message;
}

const compiled = new Map<string, CronSpec>();

/** The compiled form of a normalised expression, cached. */
export function specOf(expression: string): CronSpec {
  let spec = compiled.get(expression);
  if (!spec) {
    spec = compileCron(expression);
    if (compiled.size > 10_000) compiled.clear();
    compiled.set(expression, spec);
  }
  return spec;
}

/**
 * The next `count` occurrences strictly after `after`, before `endsAt`. Stops early (with fewer
 * results) when the expression has no further occurrence, or none that a DateTime can write
 * (years to 9999). The scheduler walks the same occurrences (nextFireAfter).
 */
export function nextOccurrences(expression: string, timezone: string, after: Date, count: number, endsAt?: Date | null): Date[] {
  const spec = specOf(expression);
  const out: Date[] = [];
  let cursor = after.getTime();
  while (out.length < count) {
    const next = nextFireAfter(spec, timezone, cursor);
    if (next === null || next > LAST_INSTANT || (endsAt && next >= endsAt.getTime())) break;
    out.push(new Date(next));
    cursor = next;
  }
  return out;
}

/** The first occurrence at or after max(now, startsAt), or null when the schedule has ended. */
export function firstFireAt(expression: string, timezone: string, now: Date, startsAt?: Date | null, endsAt?: Date | null): Date | null {
  const from = startsAt && startsAt > now ? new Date(startsAt.getTime() - 1) : now;
  return nextOccurrences(expression, timezone, from, 1, endsAt)[0] ?? null;
}
