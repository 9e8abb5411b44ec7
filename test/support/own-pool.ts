/**
 * A pool a test opens on its database beside the service's, whose clients' errors are dropped.
 * pg's `pool.end()` resolves once its clients are asked to end, not once they have, so the drop of
 * the test's database (which terminates what is still connected) can reach a client mid-close. A
 * FATAL on a client with no listener is an uncaught exception, which fails the whole run (CI saw
 * it after test/engine/statistics.test.ts passed).
 */
import pg from 'pg';

export function ownPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}
