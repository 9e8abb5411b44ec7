/** The database's clock: time is the database's (a transaction's now(), fixed for its length). */
import type pg from 'pg';

export async function databaseNow(ex: pg.Pool | pg.PoolClient): Promise<Date> {
  return (await ex.query<{ now: Date }>('select now() as now')).rows[0]!.now;
}
