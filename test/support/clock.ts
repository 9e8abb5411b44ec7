/**
 * Time in tests is the database's, as it is in jobgate: a due time, a rate-limit window or a
 * lease is measured by `now()` in Postgres, so a test that sets one or waits one out reads the
 * same clock. The host's clock may differ from the server's (another machine, a container),
 * and an assertion comparing the two would pass or fail by that difference.
 */
import type { TestDb } from './db.js';
import { eventually, type EventuallyOptions } from './eventually.js';

type Queryable = Pick<TestDb, 'query'>;

/** The database's `now()`, read outside any transaction. */
export async function databaseNow(t: Queryable): Promise<Date> {
  return (await t.query<{ now: Date }>('select clock_timestamp() as now')).rows[0]!.now;
}

/** The instant `ms` from now on the database's clock (a `runAt` due shortly, say). */
export async function databaseTimeIn(t: Queryable, ms: number): Promise<Date> {
  return new Date((await databaseNow(t)).getTime() + ms);
}

/** Waits until the database's clock is past `instant`. */
export async function untilDatabaseTimePasses(t: Queryable, instant: Date, options: EventuallyOptions = {}): Promise<void> {
  await eventually(async () => (await t.query<{ past: boolean }>('select clock_timestamp() > $1 as past', [instant])).rows[0]!.past, {
    what: `the database's clock to pass ${instant.toISOString()}`,
    ...options,
  });
}
