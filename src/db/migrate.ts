/**
 * Ordered SQL migrations from `migrations/`, applied under a session advisory lock so any
 * number of processes starting together apply each file once. Applied versions are recorded
 * with a checksum; a file changed after it was applied is refused, never re-run.
 */
import { LOCK_KEY } from './advisory-locks.js';
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pgTypes } from './pg-types.js';

/** The same in every jobgate process (src/db/advisory-locks.ts). */
export const MIGRATION_LOCK_KEY = LOCK_KEY.migrations;

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

export class MigrationError extends Error {
  override name = 'MigrationError';
}

export interface MigrationFile {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<MigrationFile[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const out: MigrationFile[] = [];
  for (const file of files) {
    const match = /^(\d{6})_[a-z0-9_]+\.sql$/.exec(file);
    if (!match) throw new MigrationError(`migration file name "${file}" is not NNNNNN_name.sql`);
    const sql = await readFile(`${dir}/${file}`, 'utf8');
    out.push({
      version: Number(match[1]),
      name: file,
      sql,
      checksum: createHash('sha256').update(sql).digest('hex'),
    });
  }
  out.forEach((m, i) => {
    if (i > 0 && m.version === out[i - 1]!.version) {
      throw new MigrationError(`two migrations share version ${m.version}`);
    }
  });
  return out;
}

export interface MigrateResult {
  applied: string[];
}

interface AppliedMigration {
  version: number;
  name: string;
  checksum: string;
}

/** Refuses a database migrated by a newer jobgate, or one whose applied files were changed since. */
function checkApplied(rows: AppliedMigration[], files: MigrationFile[]): void {
  const known = new Map(files.map((f) => [f.version, f]));
  for (const row of rows) {
    const file = known.get(row.version);
    if (!file) {
      throw new MigrationError(
        `the database has migration ${row.name}, which this version of jobgate does not know; ` + 'it was migrated by a newer jobgate',
      );
    }
    if (file.checksum !== row.checksum) {
      throw new MigrationError(
        `migration ${file.name} was changed after it was applied ` +
          `(applied checksum ${row.checksum.slice(0, 12)}, file now ${file.checksum.slice(0, 12)}); ` +
          'applied migrations are frozen: put the change in a new migration file',
      );
    }
  }
}

/**
 * Checks, without changing anything, that the database has every migration of this version and
 * nothing else (for a process told not to migrate): throws MigrationError naming what is missing
 * or refused.
 */
export async function verifyMigrated(connectionString: string, options: { dir?: string } = {}): Promise<void> {
  const files = await readMigrations(options.dir);
  const client = new pg.Client({ connectionString, application_name: 'jobgate-migrate', connectionTimeoutMillis: 10_000, types: pgTypes });
  client.on('error', () => {}); // the query in flight fails with it
  await client.connect();
  try {
    const { rows: exists } = await client.query(`select to_regclass('jobgate_migrations') is not null as present`);
    const rows = exists[0].present
      ? (await client.query<AppliedMigration>('select version, name, checksum from jobgate_migrations order by version')).rows
      : [];
    checkApplied(rows, files);
    const done = new Set(rows.map((r) => r.version));
    const pending = files.filter((f) => !done.has(f.version));
    if (pending.length > 0) {
      const names = pending.map((f) => f.name);
      throw new MigrationError(
        `the database lacks ${pending.length} migration(s) of this version of jobgate (${names.slice(0, 3).join(', ')}${names.length > 3 ? ', ...' : ''}); ` +
          'run `jobgate migrate` (or createJobgate with migrate: true)',
      );
    }
  } finally {
    await client.end().catch(() => {});
  }
}

/** Applies pending migrations. Safe to call concurrently from many processes. */
export async function migrate(
  connectionString: string,
  options: { dir?: string; log?: (msg: string) => void } = {},
): Promise<MigrateResult> {
  const log = options.log ?? (() => {});
  const files = await readMigrations(options.dir);
  const client = new pg.Client({
    connectionString,
    application_name: 'jobgate-migrate',
    keepAlive: true,
    connectionTimeoutMillis: 10_000,
    types: pgTypes,
  });
  // A connection lost mid-migration fails the query in flight (and the transaction); the
  // 'error' event pg also emits must not become an uncaught exception in the host process.
  client.on('error', (error) => log(`migrate: connection error: ${error.message}`));
  await client.connect();
  // The lock is taken inside each migration's transaction, not for the session: through a
  // transaction-mode pooler (PgBouncer) consecutive transactions may run on different server
  // connections, so a session lock would be taken on one and its unlock sent to another, and stay
  // held on the first for as long as the pooler keeps it. Each transaction reads what is applied
  // after taking the lock, so concurrent migrators still apply each file once, in order.
  const locked = async <T>(work: () => Promise<T>): Promise<T> => {
    await client.query('begin');
    try {
      await client.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      const result = await work();
      await client.query('commit');
      return result;
    } catch (error) {
      await client.query('rollback').catch(() => {});
      throw error;
    }
  };
  const appliedRows = async () => {
    const { rows } = await client.query<AppliedMigration>('select version, name, checksum from jobgate_migrations order by version');
    checkApplied(rows, files);
    return new Set(rows.map((r) => r.version));
  };
  try {
    await locked(() =>
      client.query(`
        create table if not exists jobgate_migrations (
          version     integer primary key,
          name        text not null,
          checksum    text not null,
          applied_at  timestamptz not null default now()
        )`),
    );
    // Read once without the lock, so a database already up to date costs one read: a version
    // once applied stays applied, so only the files missing here need the lock and a re-read.
    const seen = await appliedRows();
    const applied: string[] = [];
    for (const file of files) {
      if (seen.has(file.version)) continue;
      const ran = await locked(async () => {
        if ((await appliedRows()).has(file.version)) return false;
        try {
          await client.query(file.sql);
        } catch (error) {
          throw new MigrationError(`migration ${file.name} failed: ${(error as Error).message}`, { cause: error });
        }
        await client.query('insert into jobgate_migrations (version, name, checksum) values ($1, $2, $3)', [
          file.version,
          file.name,
          file.checksum,
        ]);
        return true;
      });
      if (!ran) continue;
      applied.push(file.name);
      log(`migrations: applied ${file.name}`);
    }
    return { applied };
  } finally {
    await client.end();
  }
}

/**
 * One line for what a run applied: the files' names when there are a few (an upgrade), else their
 * count and range (a first start applies every file, and a line each was sixty lines of noise).
 */
export function describeApplied(applied: readonly string[]): string {
  if (applied.length === 0) return 'migrations: up to date';
  if (applied.length <= 5) return `migrations: applied ${applied.join(', ')}`;
  return `migrations: applied ${applied.length}, ${applied[0]} to ${applied[applied.length - 1]}`;
}
