import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { describeApplied, MIGRATIONS_DIR, MigrationError, migrate, readMigrations } from '../../src/db/migrate.js';
import { createEmptyDatabase } from '../support/db.js';

type EmptyDb = Awaited<ReturnType<typeof createEmptyDatabase>>;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function freshDb(): Promise<EmptyDb> {
  const db = await createEmptyDatabase();
  cleanups.push(() => db.drop());
  return db;
}

/** A temporary migrations folder holding `files` (name -> SQL). */
function migrationsDir(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-migrations-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const [name, sql] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), sql);
  return dir;
}

async function query<T extends pg.QueryResultRow = pg.QueryResultRow>(url: string, text: string, values: unknown[] = []) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

async function tableExists(url: string, table: string): Promise<boolean> {
  const rows = await query<{ t: string | null }>(url, 'select to_regclass($1)::text as t', [`public.${table}`]);
  return rows[0]!.t !== null;
}

async function recorded(url: string) {
  return query<{ version: number; name: string; checksum: string }>(
    url,
    'select version, name, checksum from jobgate_migrations order by version',
  );
}

/** The rejection `promise` settles with, failing the test if it resolves. */
async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected migrate() to be refused, but it succeeded');
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('readMigrations', () => {
  it('reads the .sql files of a folder in version order with their checksums, ignoring other files', async () => {
    const dir = migrationsDir({
      '000002_second.sql': 'select 2;',
      '000001_first.sql': 'select 1;',
      'README.md': 'not a migration',
    });
    const files = await readMigrations(dir);
    expect(files.map((f) => [f.version, f.name])).toEqual([
      [1, '000001_first.sql'],
      [2, '000002_second.sql'],
    ]);
    expect(files[0]!.sql).toBe('select 1;');
    expect(files[0]!.checksum).toBe(sha256('select 1;'));
  });

  it('refuses a file whose name is not NNNNNN_name.sql, naming it', async () => {
    const dir = migrationsDir({ '1_bad.sql': 'select 1;' });
    const error = await rejectionOf(readMigrations(dir));
    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toContain('1_bad.sql');
  });

  it('refuses two files that share a version', async () => {
    const dir = migrationsDir({ '000001_a.sql': 'select 1;', '000001_b.sql': 'select 2;' });
    const error = await rejectionOf(readMigrations(dir));
    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toMatch(/share version 1\b/);
  });
});

describe('migrate', () => {
  it('applies every file in migrations/ to a fresh database and records each with its checksum; a second run applies nothing', async () => {
    const db = await freshDb();
    const files = await readMigrations();
    expect(files.length).toBeGreaterThan(0);
    expect(
      fs
        .readdirSync(MIGRATIONS_DIR)
        .filter((f) => f.endsWith('.sql'))
        .sort(),
    ).toEqual(files.map((f) => f.name));

    const logged: string[] = [];
    const first = await migrate(db.url, { log: (m) => logged.push(m) });
    expect(first.applied).toEqual(files.map((f) => f.name));
    expect(logged).toEqual(files.map((f) => `migrations: applied ${f.name}`));
    // What a start says at info: the names of a few, else their count and range.
    expect(describeApplied(files.map((f) => f.name))).toBe(
      `migrations: applied ${files.length}, ${files[0]!.name} to ${files[files.length - 1]!.name}`,
    );
    expect(describeApplied(['000064_a.sql', '000065_b.sql'])).toBe('migrations: applied 000064_a.sql, 000065_b.sql');
    expect(describeApplied([])).toBe('migrations: up to date');
    expect(await recorded(db.url)).toEqual(
      files.map((f) => ({
        version: f.version,
        name: f.name,
        checksum: sha256(fs.readFileSync(path.join(MIGRATIONS_DIR, f.name), 'utf8')),
      })),
    );
    expect(await query(db.url, `select slug from workspaces`)).toEqual([{ slug: 'default' }]);

    const second = await migrate(db.url);
    expect(second.applied).toEqual([]);
    expect(await recorded(db.url)).toHaveLength(files.length);
    expect(await query(db.url, `select slug from workspaces`)).toEqual([{ slug: 'default' }]);
  });

  it('applies pending files only, after the ones already applied', async () => {
    const db = await freshDb();
    const dir = migrationsDir({ '000001_one.sql': 'create table one (id int);' });
    expect((await migrate(db.url, { dir })).applied).toEqual(['000001_one.sql']);
    fs.writeFileSync(path.join(dir, '000002_two.sql'), 'create table two (id int);');
    expect((await migrate(db.url, { dir })).applied).toEqual(['000002_two.sql']);
    expect((await recorded(db.url)).map((r) => r.version)).toEqual([1, 2]);
  });

  it('applies each of the real migrations exactly once when four processes migrate a fresh database together', async () => {
    const db = await freshDb();
    const files = await readMigrations();
    const results = await Promise.all([1, 2, 3, 4].map(() => migrate(db.url)));
    // Each file was applied by exactly one caller (the lock is taken per file, so the callers may
    // share the work), and in order: the versions recorded ascend with the time they were applied.
    const applied = results.flatMap((r) => r.applied);
    expect([...applied].sort()).toEqual(files.map((f) => f.name));
    const rows = await query(db.url, `select version from jobgate_migrations order by applied_at, version`);
    expect(rows.map((r) => r.version)).toEqual(files.map((f) => f.version));
    expect(await query(db.url, `select count(*)::int as n from workspaces where slug = 'default'`)).toEqual([{ n: 1 }]);
  });

  it('serialises concurrent runs of a slow, non-idempotent migration so it runs once and every caller succeeds', async () => {
    const db = await freshDb();
    // Without the advisory lock both callers would see version 1 as pending; the second
    // `create table` would then fail (or the seed row would be inserted twice).
    const dir = migrationsDir({
      '000001_slow.sql': `
        create table slow_things (id int primary key, label text not null);
        insert into slow_things values (1, 'seed');
        select pg_sleep(0.3);
      `,
      '000002_after.sql': `insert into slow_things values (2, 'after');`,
    });
    const results = await Promise.all([1, 2, 3, 4].map(() => migrate(db.url, { dir })));
    // Each file applied by one caller only (which one may differ per file: the lock is per file).
    expect(results.flatMap((r) => r.applied).sort()).toEqual(['000001_slow.sql', '000002_after.sql']);
    expect((await recorded(db.url)).map((r) => r.version)).toEqual([1, 2]);
    expect(await query(db.url, 'select id, label from slow_things order by id')).toEqual([
      { id: 1, label: 'seed' },
      { id: 2, label: 'after' },
    ]);
  });

  it('refuses a migration file changed after it was applied, naming the file, and applies nothing further', async () => {
    const db = await freshDb();
    const dir = migrationsDir({
      '000001_base.sql': 'create table base (id int);',
      '000002_extra.sql': 'create table extra (id int);',
    });
    await migrate(db.url, { dir });
    const before = await recorded(db.url);

    fs.writeFileSync(path.join(dir, '000002_extra.sql'), 'create table extra (id int, note text);');
    fs.writeFileSync(path.join(dir, '000003_later.sql'), 'create table later (id int);');
    const error = await rejectionOf(migrate(db.url, { dir }));
    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toContain('000002_extra.sql');
    expect(error.message).toMatch(/changed/);
    expect(error.message).not.toContain('000001_base.sql');

    expect(await recorded(db.url)).toEqual(before);
    expect(await tableExists(db.url, 'later')).toBe(false);
    const columns = await query(db.url, `select column_name from information_schema.columns where table_name = 'extra'`);
    expect(columns).toEqual([{ column_name: 'id' }]);
  });

  it('refuses a database that has a migration version unknown to the files, naming it, and applies nothing', async () => {
    const db = await freshDb();
    const newer = migrationsDir({
      '000001_base.sql': 'create table base (id int);',
      '000002_newer.sql': 'create table newer (id int);',
    });
    await migrate(db.url, { dir: newer });

    // An older jobgate: it knows 000001 and has its own pending 000003, but not 000002.
    const older = migrationsDir({
      '000001_base.sql': 'create table base (id int);',
      '000003_other.sql': 'create table other (id int);',
    });
    const error = await rejectionOf(migrate(db.url, { dir: older }));
    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toContain('000002_newer.sql');
    expect(error.message).toMatch(/does not know/);
    expect((await recorded(db.url)).map((r) => r.version)).toEqual([1, 2]);
    expect(await tableExists(db.url, 'other')).toBe(false);
  });

  it('rolls a failing migration back entirely, does not record it, and reports it by file name', async () => {
    const db = await freshDb();
    const dir = migrationsDir({
      '000001_good.sql': 'create table good (id int);',
      '000002_broken.sql': `
        create table half_done (id int);
        insert into half_done values (1);
        alter table no_such_table add column y int;
      `,
      '000003_never.sql': 'create table never (id int);',
    });
    const error = await rejectionOf(migrate(db.url, { dir }));
    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toContain('000002_broken.sql');
    expect(error.message).toContain('no_such_table');
    expect((error.cause as { code?: string }).code).toBe('42P01');

    // The earlier migration stays applied; the failing one left nothing; the later one never ran.
    expect((await recorded(db.url)).map((r) => r.name)).toEqual(['000001_good.sql']);
    expect(await tableExists(db.url, 'good')).toBe(true);
    expect(await tableExists(db.url, 'half_done')).toBe(false);
    expect(await tableExists(db.url, 'never')).toBe(false);

    // A failed migration was never recorded, so fixing the file lets the next run apply it.
    fs.writeFileSync(path.join(dir, '000002_broken.sql'), 'create table half_done (id int);');
    expect((await migrate(db.url, { dir })).applied).toEqual(['000002_broken.sql', '000003_never.sql']);
  });

  it('releases the lock after a failure, so the next run is not blocked', async () => {
    const db = await freshDb();
    const dir = migrationsDir({ '000001_broken.sql': 'select * from no_such_table;' });
    await rejectionOf(migrate(db.url, { dir }));
    await rejectionOf(migrate(db.url, { dir }));
    const locks = await query(
      db.url,
      `select 1 from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())`,
    );
    expect(locks).toEqual([]);
  });
});
