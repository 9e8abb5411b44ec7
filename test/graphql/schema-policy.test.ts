/**
 * The change policy: a client of the last release keeps working. Removing or changing what it
 * may use is refused unless the release deprecated it first.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { checkSchemaChange } from '../../scripts/schema-policy.js';
import { printSdl } from '../../src/schema/index.js';

const base = `
type Query {
  """A job."""
  job(id: ID!, includeRetired: Boolean @deprecated(reason: "always included")): Job
  jobs: [Job!]!
  old: String @deprecated(reason: "use jobs")
  legacy: Legacy @deprecated(reason: "gone soon")
}
type Job { id: ID! status: Status! host: String! }
type Legacy { x: Int }
enum Status { ACTIVE RETIRED GONE @deprecated(reason: "never set") }
input JobInput { name: String kind: String @deprecated(reason: "ignored") }
type Mutation { create(input: JobInput): Job }
`;

const edit = (from: string, to: string) => {
  expect(base).toContain(from);
  return base.replace(from, to);
};

describe('the schema change policy', () => {
  it('refuses removing a field the last release did not deprecate', () => {
    const report = checkSchemaChange(base, edit('  jobs: [Job!]!\n', ''));
    expect(report.refused).toEqual([expect.stringContaining('Query.jobs was removed')]);
  });

  it('allows removing what the last release deprecated: a field, an argument, an enum value, an input field, and a type left unused', () => {
    let next = edit('  old: String @deprecated(reason: "use jobs")\n', '');
    next = next.replace(', includeRetired: Boolean @deprecated(reason: "always included")', '');
    next = next.replace(' GONE @deprecated(reason: "never set")', '');
    next = next.replace(' kind: String @deprecated(reason: "ignored")', '');
    next = next.replace('  legacy: Legacy @deprecated(reason: "gone soon")\n', '').replace('type Legacy { x: Int }\n', '');
    const report = checkSchemaChange(base, next);
    expect(report.refused).toEqual([]);
    expect(report.allowed).toHaveLength(7); // with Int, which only Legacy.x used
  });

  it('refuses making an output field nullable, changing its type, or removing an enum value in use', () => {
    expect(checkSchemaChange(base, edit('host: String!', 'host: String')).refused).toEqual([
      expect.stringContaining('Job.host changed type from String! to String'),
    ]);
    expect(checkSchemaChange(base, edit('host: String!', 'host: Int!')).refused).toHaveLength(1);
    expect(checkSchemaChange(base, edit('ACTIVE RETIRED', 'ACTIVE')).refused).toEqual([
      expect.stringContaining('RETIRED was removed from enum type Status'),
    ]);
  });

  it('refuses a new required argument or input field', () => {
    expect(checkSchemaChange(base, edit('  jobs: [Job!]!', '  jobs(first: Int!): [Job!]!')).refused).toHaveLength(1);
    expect(checkSchemaChange(base, edit('input JobInput { name: String', 'input JobInput { name: String! ')).refused).toHaveLength(1);
  });

  it('notes, without refusing, a new enum value', () => {
    const report = checkSchemaChange(base, edit('ACTIVE RETIRED', 'ACTIVE PAUSED RETIRED'));
    expect(report.refused).toEqual([]);
    expect(report.dangerous).toEqual([expect.stringContaining('PAUSED was added to enum type Status')]);
  });

  it('holds for the schema as it is against the last release (schema.released.graphql)', () => {
    const released = readFileSync(new URL('../../schema.released.graphql', import.meta.url), 'utf8');
    expect(checkSchemaChange(released, printSdl()).refused).toEqual([]);
  });
});
