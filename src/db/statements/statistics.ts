/**
 * Planner statistics of the tables the claim reads, kept up with a queue's growth.
 *
 * The engine's statements are prepared once per connection, and Postgres caches their generic
 * plans (claim.ts), made with the tables' sizes as the statistics gave them then. It plans again
 * only when a table is analyzed. A queue's tables can grow a hundredfold in seconds (a quiet
 * installation, then a burst of jobs), and autovacuum analyzes them at its next round
 * (autovacuum_naptime, a minute by default, if it is not busy elsewhere). Until then a claim
 * planned for a few hundred rows runs over tens of thousands: measured with 200 jobs analyzed,
 * then 20,000 more, a claim of 50 took 65-140 ms (it read the whole jobs table once per candidate)
 * instead of 5-10 ms, and one worker drained 400-600 executions a second instead of 3,400. The
 * claim reads no job since (executions.job_held, migration 000055); the other statements that
 * read these tables still plan by their statistics.
 *
 * So each worker looks every few seconds, and analyzes a table whose live rows are past twice what
 * its statistics say, plus GROWTH_FLOOR (a table never analyzed counts as empty). Growth by a factor
 * of two at least between analyzes makes it a handful of analyzes over a table's life; each reads
 * a sample (30,000 rows at the default statistics target), whatever the table's size. One worker
 * at a time (a transaction-scoped advisory lock); the others find the statistics current after it.
 */
import { LOCK_KEY } from '../advisory-locks.js';
import type pg from 'pg';
import { transactionOn } from '../transaction.js';

/** What the claim reads (executions, their jobs, their endpoints). */
const TABLES = ['executions', 'jobs', 'endpoints'] as const;

/** Rows a table may grow by before its size counts (small tables plan well whatever their statistics). */
export const GROWTH_FLOOR = 1_000;

// n_live_tup is the statistics system's running count, current to within a second; reltuples is
// what the last ANALYZE (or VACUUM) found, -1 before the first.
const GROWN = `
select t.name
from unnest($1::text[]) as t(name)
join pg_class c on c.oid = to_regclass(t.name)
join pg_stat_user_tables s on s.relid = c.oid
where s.n_live_tup > 2 * greatest(c.reltuples, 0) + $2`;

/** One statistics keeper at a time. */
const KEEPER_LOCK = LOCK_KEY.statisticsKeeper;

/**
 * Analyzes the claim's tables that have grown past their statistics (see above); returns the
 * names analyzed, none when another worker holds the keeper's lock. A table that jobgate's role
 * does not own is skipped by Postgres with a warning: its statistics are then autovacuum's alone.
 */
export async function analyzeGrownTables(pool: pg.Pool): Promise<string[]> {
  const grown = (await pool.query<{ name: string }>(GROWN, [TABLES, GROWTH_FLOOR])).rows.map((r) => r.name);
  if (grown.length === 0) return [];
  const client = await pool.connect();
  let failed: Error | undefined;
  try {
    return await transactionOn(client, async () => {
      const { rows } = await client.query<{ locked: boolean }>('select pg_try_advisory_xact_lock($1) as locked', [KEEPER_LOCK]);
      if (!rows[0]!.locked) return [];
      // Names from TABLES only, never from input.
      await client.query(`analyze ${grown.filter((name) => (TABLES as readonly string[]).includes(name)).join(', ')}`);
      return grown;
    });
  } catch (error) {
    failed = error as Error;
    throw error;
  } finally {
    client.release(failed);
  }
}
