/**
 * The connection pool when the server ends a connection: a checked-out client (a transaction
 * in progress) must not take the process down with it.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase } from '../../src/db/pool.js';
import { adminQuery, createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(() => t.close());

describe('pool', () => {
  it('turns JIT compilation off on its connections, but not through a pooler nor over options the URL sets', async () => {
    const jitOf = async (db: ReturnType<typeof createDatabase>) => {
      try {
        return (await db.pool.query<{ jit: string }>('show jit')).rows[0]!.jit;
      } finally {
        await db.close();
      }
    };
    expect(await jitOf(createDatabase({ connectionString: t.url }))).toBe('off');
    // Through a pooler (no named statements) the startup parameter is not sent: the server's own setting stays.
    const serverDefault = (await adminQuery<{ jit: string }>('show jit')).rows[0]!.jit;
    expect(await jitOf(createDatabase({ connectionString: t.url, preparedStatements: false }))).toBe(serverDefault);
    const withOptions = `${t.url}${t.url.includes('?') ? '&' : '?'}options=${encodeURIComponent('-c jit=on')}`;
    expect(await jitOf(createDatabase({ connectionString: withOptions }))).toBe('on');
  });

  it('survives the server terminating a connection checked out between the statements of a transaction', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      const client = await t.database.pool.connect();
      const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
      await client.query('begin');
      // No query in flight: the server's notice of termination arrives on an idle socket.
      const ended = new Promise((r) => client.once('end', r));
      await adminQuery('select pg_terminate_backend($1)', [rows[0]!.pid]);
      await ended;
      await expect(client.query('select 1')).rejects.toThrow();
      client.release();
      expect(uncaught).toEqual([]);
      // The pool dropped the dead client and serves the next caller.
      expect((await t.database.pool.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });

  it('has closed every connection when close() resolves, so a server stopped right after ends none of them', async () => {
    // The embedded server is stopped right after the pool closes: a connection still open then
    // is ended by the server, and each logged "terminating connection due to administrator
    // command" on every clean shutdown.
    const database = createDatabase({ connectionString: t.url, max: 3 });
    let opened = 0;
    let ended = 0;
    database.pool.on('connect', (client) => {
      opened++;
      client.on('end', () => ended++);
    });
    // Through kysely as the service does (which is what ends the pool), and directly as the engine does.
    await Promise.all([
      sql`select pg_sleep(0.05)`.execute(database.db),
      database.pool.query('select pg_sleep(0.05)'),
      database.pool.query('select pg_sleep(0.05)'),
    ]);
    await database.close();
    expect(opened).toBe(3);
    expect(ended).toBe(3);
  });
});

describe('connection errors in the log', () => {
  it('are said once for an outage that ends every connection, not once per connection and twice each', async () => {
    const lines: string[] = [];
    const database = createDatabase({ connectionString: t.url, max: 5, applicationName: 'jobgate-pool-errors' }, (m) => lines.push(m));
    try {
      // Five connections, idle in the pool.
      await Promise.all(Array.from({ length: 5 }, () => database.pool.query('select pg_sleep(0.05)')));
      expect(database.pool.idleCount).toBe(5);
      await adminQuery(`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'jobgate-pool-errors'`);
      await expect.poll(() => database.pool.totalCount, { timeout: 5000 }).toBe(0);
      expect(lines.filter((l) => l.startsWith('postgres pool:'))).toHaveLength(1);
    } finally {
      await database.close();
    }
  });
});
