/**
 * src/db/schema.generated.ts is generated from the migrated schema (scripts/db-types.ts,
 * `npm run db:types`): the checked-in file is what the migrations generate on this server too,
 * a schema change makes it stale (what `npm run db:types:check` reports), and the generation
 * reads what kysely-codegen alone would not (a CHECK's list of values, GENERATED ALWAYS).
 */
import fs from 'node:fs';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { DB_TYPES, generateDbTypes, listedValues, staleness } from '../../scripts/db-types.js';
import { migrate } from '../../src/db/migrate.js';
import { createEmptyDatabase } from '../support/db.js';

async function onFreshlyMigrated<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const empty = await createEmptyDatabase();
  try {
    await migrate(empty.url);
    return await fn(empty.url);
  } finally {
    await empty.drop();
  }
}

async function queryOn(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

describe('the generated database types', () => {
  it('the checked-in file is what the migrations generate (else: npm run db:types, and commit it)', async () => {
    const generated = await onFreshlyMigrated((url) => generateDbTypes(url));
    expect(generated, 'src/db/schema.generated.ts is stale: run `npm run db:types` and commit it').toBe(fs.readFileSync(DB_TYPES, 'utf8'));
  });

  it('a schema change (a new column) makes the checked-in file stale, and the report shows the new line', async () => {
    const generated = await onFreshlyMigrated(async (url) => {
      await queryOn(url, 'alter table workspaces add column motto text');
      return generateDbTypes(url);
    });
    const checkedIn = fs.readFileSync(DB_TYPES, 'utf8');
    expect(generated).not.toBe(checkedIn);
    expect(staleness(checkedIn, generated)).toMatch(/^\+ +motto: string \| null;$/m);
    expect(staleness(checkedIn, checkedIn)).toBeUndefined();
  });

  it('a text column whose CHECK lists its values is that union, with its nullability and default', async () => {
    const generated = await onFreshlyMigrated(async (url) => {
      await queryOn(
        url,
        `create table probe (
           id bigint generated always as identity,
           plain text not null check (plain in ('A', 'B')),
           optional text check (optional = any (array['A', 'it''s'])),
           defaulted text not null default 'A' check (defaulted in ('A', 'B')),
           bounded text check (length(bounded) < 10)
         )`,
      );
      return generateDbTypes(url);
    });
    const probe = /export interface Probe \{[^}]*\}/.exec(generated)?.[0];
    expect(probe).toContain('id: GeneratedAlways<number>;');
    expect(probe).toContain("plain: 'A' | 'B';");
    expect(probe).toContain(`optional: 'A' | "it's" | null;`);
    expect(probe).toContain("defaulted: Generated<'A' | 'B'>;");
    expect(probe).toContain('bounded: string | null;');
  });

  it('reads values only from a CHECK that lists them for its own column', () => {
    expect(listedValues("CHECK ((kind = ANY (ARRAY['HTTP'::text, 'HANDLER'::text])))", 'kind')).toEqual(['HTTP', 'HANDLER']);
    expect(listedValues("CHECK ((kind = ANY (ARRAY['it''s'::text])))", 'kind')).toEqual(["it's"]);
    expect(listedValues("CHECK ((kind = ANY (ARRAY['HTTP'::text])))", 'other')).toBeUndefined();
    expect(listedValues('CHECK ((length(name) >= 1))', 'name')).toBeUndefined();
    expect(listedValues("CHECK (((kind = 'HTTP'::text) OR (url IS NULL)))", 'kind')).toBeUndefined();
  });
});
