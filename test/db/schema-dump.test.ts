/**
 * schema.sql, the checked-in pg_dump --schema-only of a freshly migrated database, matches the
 * migrations. A dump is compared only with one made on the PostgreSQL major version the file
 * names (pg_dump's text differs between versions); on another server, or with no pg_dump at
 * least as new as the server, the comparison is skipped and says why.
 */
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { dumpedOnMajor, dumpSchema, normalise, SCHEMA_DUMP } from '../../scripts/schema-dump.js';
import { createEmptyDatabase } from '../support/db.js';

describe('the schema dump', () => {
  it('schema.sql is what the migrations produce (else: npm run schema:dump, and commit it)', async (ctx) => {
    const checkedIn = fs.readFileSync(SCHEMA_DUMP, 'utf8');
    const empty = await createEmptyDatabase();
    try {
      await migrate(empty.url);
      const result = await dumpSchema(empty.url);
      const skip = (why: string) => {
        process.stderr.write(`schema dump comparison skipped: ${why}\n`);
        ctx.skip(why);
      };
      if ('skipped' in result) return skip(result.skipped);
      if (dumpedOnMajor(checkedIn) !== result.serverMajor) {
        return skip(
          `schema.sql was made on PostgreSQL ${dumpedOnMajor(checkedIn)}; this server is ${result.serverMajor} (CI compares on its PostgreSQL ${dumpedOnMajor(checkedIn)} server)`,
        );
      }
      expect(result.text, 'schema.sql is stale: run `npm run schema:dump` with TEST_DATABASE_URL set, and commit it').toBe(checkedIn);
    } finally {
      await empty.drop();
    }
  });

  it('normalising keeps the statements and drops what varies between runs and users', () => {
    const raw = [
      '--',
      '-- PostgreSQL database dump',
      '\\restrict abc123',
      'SET statement_timeout = 0;',
      "SELECT pg_catalog.set_config('search_path', '', false);",
      '-- Name: jobs; Type: TABLE; Schema: public; Owner: someone',
      '',
      '',
      '',
      'CREATE TABLE public.jobs (',
      '    id uuid NOT NULL   ',
      ');',
      '\\unrestrict abc123',
    ].join('\n');
    expect(normalise(raw)).toBe('CREATE TABLE public.jobs (\n    id uuid NOT NULL\n);\n');
  });

  it('the checked-in dump names the server version it was made on and covers every table', () => {
    const text = fs.readFileSync(SCHEMA_DUMP, 'utf8');
    expect(dumpedOnMajor(text)).toBeGreaterThanOrEqual(15);
    for (const table of ['jobs', 'executions', 'attempts', 'endpoints', 'runs', 'events', 'jobgate_migrations']) {
      expect(text).toContain(`CREATE TABLE public.${table} (`);
    }
  });
});
