/**
 * schema.sql, the checked-in pg_dump --schema-only of a freshly migrated database, matches the
 * migrations. Two checks:
 *
 * - on any server the suite runs on (the embedded PostgreSQL 18 included, which no machine's
 *   pg_dump 15 can dump): schema.sql is loaded into an empty database, and that database's
 *   catalog, as the server itself prints it (pg_get_*def: columns, constraints, indexes,
 *   triggers, functions, sequences, comments, storage options), must equal a freshly migrated
 *   one's. Both are printed by the same server, so no version's formatting can differ; a
 *   migration that schema.sql does not reflect can.
 * - to the character, where pg_dump and the server are of the major version the file names
 *   (pg_dump's text differs between versions; CI's server): elsewhere skipped, saying why.
 */
import fs from 'node:fs';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { dumpedOnMajor, dumpSchema, normalise, SCHEMA_DUMP } from '../../scripts/schema-dump.js';
import { createEmptyDatabase } from '../support/db.js';

/**
 * The schema of the database at `url` as its server prints it, one sorted line per column,
 * constraint, index, trigger, function, view, sequence, type, comment and table option: what
 * `pg_dump --schema-only` covers, in a form that does not depend on pg_dump's version.
 */
async function catalogOf(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ line: string }>(`
      with rel as (
        select c.oid, c.relname, c.relkind from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public'
      )
      select 'relation ' || relname || ' kind ' || relkind::text || ' ' || relpersistence::text || ' rls ' || relrowsecurity
          || coalesce(' with ' || array_to_string(reloptions, ','), '') as line
        from pg_class where oid in (select oid from rel)
      union all
      select 'column ' || r.relname || ' #' || row_number() over (partition by r.oid order by a.attnum) || ' ' || a.attname
          || ' ' || format_type(a.atttypid, a.atttypmod) || case when a.attnotnull then ' not null' else '' end
          || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') || ' identity ' || a.attidentity::text
          || ' generated ' || a.attgenerated::text || ' storage ' || a.attstorage::text || ' collation ' || a.attcollation
        from rel r join pg_attribute a on a.attrelid = r.oid
        left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        where a.attnum > 0 and not a.attisdropped
      union all
      -- PostgreSQL 18 keeps NOT NULL as constraints too (named after the table when they were
      -- made, so a renamed table's keep the old name): not null is in the column lines.
      select 'constraint ' || coalesce(r.relname, t.typname) || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
        from pg_constraint c left join rel r on r.oid = c.conrelid left join pg_type t on t.oid = c.contypid
        join pg_namespace n on n.oid = c.connamespace
        where n.nspname = 'public' and c.contype <> 'n'
      union all
      select 'index ' || pg_get_indexdef(i.indexrelid) from pg_index i where i.indrelid in (select oid from rel)
      union all
      select 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text
        from pg_trigger t where t.tgrelid in (select oid from rel) and not t.tgisinternal
      union all
      select 'function ' || pg_get_functiondef(p.oid)
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'public' and p.prokind in ('f', 'p')
      union all
      select 'view ' || relname || ' ' || pg_get_viewdef(oid) from rel where relkind in ('v', 'm')
      union all
      select 'sequence ' || sequencename || ' ' || data_type::text || ' ' || start_value || ' ' || min_value || ' ' || max_value
          || ' ' || increment_by || ' ' || cycle || ' ' || cache_size
        from pg_sequences where schemaname = 'public'
      union all
      select 'type ' || t.typname || ' ' || t.typtype::text || ' ' || coalesce(format_type(nullif(t.typbasetype, 0), t.typtypmod), '')
          || coalesce(' ' || (select string_agg(e.enumlabel, ',' order by e.enumsortorder) from pg_enum e where e.enumtypid = t.oid), '')
        from pg_type t join pg_namespace n on n.oid = t.typnamespace
        where n.nspname = 'public' and t.typtype in ('e', 'd')
      union all
      select 'policy ' || tablename || ' ' || policyname || ' ' || permissive || ' ' || cmd || ' ' || coalesce(qual, '') || ' ' || coalesce(with_check, '')
        from pg_policies where schemaname = 'public'
      union all
      select 'extension ' || extname from pg_extension
      union all
      -- Objects made after initdb only (the rest comes from template1 in both).
      select 'comment ' || pg_describe_object(classoid, objoid, objsubid) || ': ' || description from pg_description where objoid >= 16384
    `);
    return rows.map((r) => r.line).sort();
  } finally {
    await client.end();
  }
}

describe('the schema dump', () => {
  it('schema.sql builds the schema the migrations build, on any server (else: npm run schema:dump, and commit it)', async () => {
    const checkedIn = fs.readFileSync(SCHEMA_DUMP, 'utf8');
    const last = fs
      .readdirSync(new URL('../../migrations/', import.meta.url))
      .filter((f) => f.endsWith('.sql'))
      .sort()
      .at(-1);
    expect(checkedIn.split('\n', 1)[0], 'schema.sql names the last migration').toContain(`migrations/${last}:`);
    const migrated = await createEmptyDatabase();
    const loaded = await createEmptyDatabase();
    try {
      await migrate(migrated.url);
      const client = new pg.Client({ connectionString: loaded.url });
      await client.connect();
      try {
        // As pg_restore does: a function may name a table that the file creates further down.
        await client.query('set check_function_bodies = false');
        await client.query(checkedIn);
      } finally {
        await client.end();
      }
      const [fromMigrations, fromFile] = await Promise.all([catalogOf(migrated.url), catalogOf(loaded.url)]);
      expect(fromMigrations.length).toBeGreaterThan(100);
      expect(
        fromFile,
        'schema.sql is stale: run `npm run schema:dump` (TEST_DATABASE_URL at a server of the version its header names), and commit it',
      ).toEqual(fromMigrations);
    } finally {
      await Promise.all([migrated.drop(), loaded.drop()]);
    }
  });

  it('schema.sql is, to the character, what pg_dump prints of the migrated schema (on the PostgreSQL version it names)', async (ctx) => {
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
