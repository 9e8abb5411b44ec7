import { describe, expect, it } from 'vitest';
import { nextOccurrences, normalizeCron } from '../../src/service/cron.js';
import { ValidationError } from '../../src/service/errors.js';

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
    expect(messageOf('61 * * * *')).toMatch(/^minute field "61"/);
    expect(messageOf('* 24 * * *')).toMatch(/^hour field "24"/);
    expect(messageOf('* * 0 * *')).toMatch(/^day-of-month field "0"/);
    expect(messageOf('* * * 13 *')).toMatch(/^month field "13"/);
    expect(messageOf('* * * * 9')).toMatch(/^day-of-week field "9"/);
    expect(messageOf('* * * *')).toMatch(/5 fields/);
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
