/**
 * The library entry as an embedding application meets it: createJobgate's failures.
 */
import { afterEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import { createJobgate, migrate, MigrationError } from '../src/index.js';
import { adminQuery, createEmptyDatabase } from './support/db.js';
import { eventually } from './support/engine.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

describe('createJobgate', () => {
  it('refuses a database that lacks migrations when told not to migrate, naming them', async () => {
    const empty = await createEmptyDatabase();
    cleanups.push(() => empty.drop());
    const error = await createJobgate({ databaseUrl: empty.url, migrate: false }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toMatch(
      /the database lacks \d+ migration\(s\) of this version of jobgate \(000001_.*run `jobgate migrate`/,
    );
  });

  it('closes the pool it opened when it fails, leaving no connection behind', async () => {
    // Migrated, but its default workspace is gone: looking it up fails once the pool is open.
    const empty = await createEmptyDatabase();
    cleanups.push(() => empty.drop());
    await migrate(empty.url);
    const client = new pg.Client({ connectionString: empty.url });
    await client.connect();
    await client.query(`update workspaces set slug = 'renamed' where slug = 'default'`);
    await client.end();
    await expect(createJobgate({ databaseUrl: empty.url, migrate: false })).rejects.toThrow(/Workspace "default" not found/);
    // The caller has no Jobgate to close(): a pool left open holds the process for its idle timeout (10 s).
    await eventually(
      async () =>
        // Client connections: an autovacuum worker on the new database is not the pool's.
        (
          await adminQuery<{ n: number }>(
            `select count(*)::int as n from pg_stat_activity where datname = $1 and backend_type = 'client backend'`,
            [empty.name],
          )
        ).rows[0]!.n === 0,
      2_000,
    );
  });
});
