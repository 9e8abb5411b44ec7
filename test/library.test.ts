/**
 * The library entry as an embedding application meets it: createJobgate's failures.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createJobgate } from '../src/index.js';
import { adminQuery, createEmptyDatabase } from './support/db.js';
import { eventually } from './support/engine.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

describe('createJobgate', () => {
  it('closes the pool it opened when it fails, leaving no connection behind', async () => {
    // Not migrated, and told not to migrate: looking up the default workspace fails.
    const empty = await createEmptyDatabase();
    cleanups.push(() => empty.drop());
    await expect(createJobgate({ databaseUrl: empty.url, migrate: false })).rejects.toThrow(/workspaces/);
    // The caller has no Jobgate to close(): a pool left open holds the process for its idle timeout (10 s).
    await eventually(
      async () => (await adminQuery<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = $1`, [empty.name])).rows[0]!.n === 0,
      2_000,
    );
  });
});
