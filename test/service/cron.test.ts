import { describe, expect, it } from 'vitest';
import { nextOccurrences, normalizeCron } from '../../src/service/cron/expressions.js';
import { ValidationError } from '../../src/service/kernel/errors.js';

const messageOf = (expr: string) => {
  try {
    normalizeCron(expr);
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return (error as ValidationError).issues[0]!.message;
  }
  throw new Error(`"${expr}" was accepted`);
};

describe('cron expressions', () => {
  it('names the field at fault', () => {
    expect(messageOf('61 * * * *')).toBe('minute field "61": 61 is out of range (0 to 59)');
    expect(messageOf('* 24 * * *')).toMatch(/^hour field "24"/);
    expect(messageOf('* * 0 * *')).toMatch(/^day-of-month field "0"/);
    expect(messageOf('* * * 13 *')).toMatch(/^month field "13"/);
    expect(messageOf('* * * * 9')).toMatch(/^day-of-week field "9"/);
    expect(messageOf('* * * *')).toMatch(/5 fields/);
  });

  it('refuses the random H of Jenkins-style crontabs, which would pick a different time in every process', () => {
    expect(messageOf('H * * * *')).toMatch(/^minute field "H": .*not supported/);
    expect(messageOf('0 H(0-5) * * *')).toMatch(/^hour field "H\(0-5\)"/);
    expect(messageOf('0 0 H * *')).toMatch(/^day-of-month field "H"/);
    expect(messageOf('0 0 * H *')).toMatch(/^month field "H"/);
    expect(messageOf('H/5 * * * thu')).toMatch(/^minute field "H\/5"/);
    expect(messageOf('0 0 * * H')).toMatch(/^day-of-week field "H"/);
    // Day names are not H.
    expect(normalizeCron('0 9 * * thu')).toBe('0 9 * * thu');
  });

  it('refuses an expression that never fires, naming the fields that cannot meet', () => {
    // Day-of-week "*/1" starts with '*', so both day fields must match: 30 February never comes.
    expect(messageOf('0 0 30 2 */1')).toMatch(/never fires/);
    // cron-parser refuses it itself when day-of-week is '*': said the same way.
    expect(messageOf('0 0 30 2 *')).toMatch(/^never fires: no date has day-of-month "30" in month "2"/);
    expect(messageOf('0 0 31 4,6 */2')).toMatch(/never fires/);
    // A restricted day of week rescues it (either field matching fires).
    expect(normalizeCron('0 0 30 2 1')).toBe('0 0 30 2 1');
    expect(nextOccurrences('0 0 30 2 1', 'UTC', new Date('2026-01-01T00:00:00Z'), 1)[0]!.toISOString()).toBe('2026-02-02T00:00:00.000Z');
  });

  it('accepts nicknames and normalises whitespace', () => {
    expect(normalizeCron('@daily')).toBe('0 0 * * *');
    expect(normalizeCron('  */5   *  * * *  ')).toBe('*/5 * * * *');
  });

  it('walks occurrences forward in the time zone, strictly after the start', () => {
    const from = new Date('2026-06-01T00:00:00Z');
    expect(nextOccurrences('0 9 * * *', 'Europe/Paris', from, 2).map((d) => d.toISOString())).toEqual([
      '2026-06-01T07:00:00.000Z',
      '2026-06-02T07:00:00.000Z',
    ]);
    const exact = new Date('2026-06-01T07:00:00Z');
    expect(nextOccurrences('0 9 * * *', 'Europe/Paris', exact, 1)[0]!.toISOString()).toBe('2026-06-02T07:00:00.000Z');
  });

  it('stops at endsAt', () => {
    const from = new Date('2026-06-01T00:00:00Z');
    const endsAt = new Date('2026-06-01T03:00:00Z');
    expect(nextOccurrences('0 * * * *', 'UTC', from, 10, endsAt)).toHaveLength(2);
  });
});
