/**
 * The connection pool when the server ends a connection: a checked-out client (a transaction
 * in progress) must not take the process down with it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminQuery, createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(() => t.close());

describe('pool', () => {
  it('survives the server terminating a connection checked out between the statements of a transaction', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      const client = await t.database.pool.connect();
      const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
      await client.query('begin');
      // No query in flight: the server's notice of termination arrives on an idle socket.
      await adminQuery('select pg_terminate_backend($1)', [rows[0]!.pid]);
      await new Promise((r) => setTimeout(r, 300));
      await expect(client.query('select 1')).rejects.toThrow();
      client.release();
      expect(uncaught).toEqual([]);
      // The pool dropped the dead client and serves the next caller.
      expect((await t.database.pool.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });
});
