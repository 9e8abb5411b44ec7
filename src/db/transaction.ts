/**
 * One transaction on one pooled connection: BEGIN, `fn`, COMMIT; ROLLBACK when `fn` (or the
 * commit) throws, and the error is rethrown. A connection whose rollback failed is in an unknown
 * state and is dropped by the pool rather than handed to the next caller.
 */
import type pg from 'pg';

export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('begin');
    const result = await fn(client);
    await client.query('commit');
    return result;
  } catch (error) {
    await client.query('rollback').catch((e: Error) => (broken = e));
    throw error;
  } finally {
    client.release(broken);
  }
}
