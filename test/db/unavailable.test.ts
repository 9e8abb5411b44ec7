/**
 * The one list of "the database is unavailable, retry": code by code, then the errors a real
 * server and a real network give.
 */
import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isConnectionError, isSaturation } from '../../src/db/unavailable.js';
import { createLogger } from '../../src/log.js';
import { createAvailability } from '../../src/service/engine/runtime/availability.js';
import { adminQuery, createEmptyDatabase } from '../support/db.js';
import { ownPool } from '../support/own-pool.js';

const coded = (code: string, fields: Record<string, unknown> = {}) => Object.assign(new Error(`error ${code}`), { code, ...fields });

describe('isConnectionError, code by code', () => {
  it.each([
    ['57P01', 'admin shutdown (pg_terminate_backend, fast shutdown)'],
    ['57P02', 'crash shutdown'],
    ['57P03', 'cannot connect now (starting up, shutting down)'],
    ['53300', 'too many connections'],
    ['08000', 'connection exception'],
    ['08003', 'connection does not exist'],
    ['08006', 'connection failure'],
    ['08001', 'unable to establish a connection'],
    ['08004', 'server rejected the connection'],
    ['08P01', 'protocol violation'],
  ])('SQLSTATE %s (%s) is unavailability', (code) => {
    expect(isConnectionError(coded(code))).toBe(true);
  });

  it.each([
    'ECONNREFUSED',
    'ECONNRESET',
    'ECONNABORTED',
    'EPIPE',
    'ETIMEDOUT',
    'EHOSTUNREACH',
    'EHOSTDOWN',
    'ENETUNREACH',
    'ENETDOWN',
    'ENOTFOUND',
    'EAI_AGAIN',
  ])('network error %s is unavailability', (code) => {
    expect(isConnectionError(coded(code))).toBe(true);
  });

  it('55000 is unavailability only as the FATAL refusal of a connection (ALLOW_CONNECTIONS false)', () => {
    expect(isConnectionError(coded('55000', { severity: 'FATAL', routine: 'CheckMyDatabase' }))).toBe(true);
    expect(isConnectionError(coded('55000', { severity: 'ERROR', routine: 'lastval' }))).toBe(false);
  });

  it.each([
    'Connection terminated unexpectedly',
    'Connection terminated due to connection timeout',
    'timeout exceeded when trying to connect',
    'Client has encountered a connection error and is not queryable',
  ])('pg and pg-pool\'s uncoded "%s" is unavailability', (message) => {
    expect(isConnectionError(new Error(message))).toBe(true);
  });

  it('an AggregateError of failed connection attempts, and a wrapped cause, are unavailability', () => {
    expect(isConnectionError(new AggregateError([coded('ECONNREFUSED'), coded('ECONNREFUSED')], 'connect failed'))).toBe(true);
    expect(isConnectionError(new Error('query failed', { cause: coded('57P01') }))).toBe(true);
    expect(isConnectionError(new AggregateError([coded('ECONNREFUSED'), coded('23505')]))).toBe(false);
  });

  it.each(['23505', '23503', '40001', '42601', '42P01', '22P02', '28P01', '3D000', 'ERR_INVALID_ARG_TYPE'])('%s is not', (code) => {
    expect(isConnectionError(coded(code))).toBe(false);
  });

  it('nothing that is not an error with a code or a known message is', () => {
    for (const value of [undefined, null, 'ECONNRESET', 42, {}, new Error('syntax error at or near "x"')])
      expect(isConnectionError(value)).toBe(false);
  });
});

describe('isConnectionError on what a real server and network answer', { timeout: 30_000 }, () => {
  let empty: Awaited<ReturnType<typeof createEmptyDatabase>>;
  beforeAll(async () => {
    empty = await createEmptyDatabase();
  });
  afterAll(async () => {
    await adminQuery(`alter database ${empty.name} allow_connections true`).catch(() => {});
    await empty.drop();
  });

  const failureOf = async (fn: () => Promise<unknown>): Promise<unknown> => {
    try {
      await fn();
    } catch (error) {
      return error;
    }
    throw new Error('expected a failure');
  };

  it('a closed port (ECONNREFUSED)', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const client = new pg.Client({ connectionString: `postgres://x:y@127.0.0.1:${port}/x` });
    const error = await failureOf(() => client.connect());
    expect((error as { code?: string }).code).toBe('ECONNREFUSED');
    expect(isConnectionError(error)).toBe(true);
  });

  it('a terminated backend (57P01), and the query after it on the dead client', async () => {
    const client = new pg.Client({ connectionString: empty.url });
    client.on('error', () => {});
    await client.connect();
    const pid = (await client.query('select pg_backend_pid() as pid')).rows[0].pid;
    const running = failureOf(() => client.query('select pg_sleep(30)'));
    await adminQuery(`select pg_terminate_backend($1)`, [pid]);
    const error = await running;
    expect((error as { code?: string }).code).toBe('57P01');
    expect(isConnectionError(error)).toBe(true);
    expect(isConnectionError(await failureOf(() => client.query('select 1')))).toBe(true);
  });

  it('a database that refuses connections (55000, ALLOW_CONNECTIONS false)', async () => {
    await adminQuery(`alter database ${empty.name} allow_connections false`);
    try {
      const client = new pg.Client({ connectionString: empty.url });
      const error = await failureOf(() => client.connect());
      expect((error as { code?: string }).code).toBe('55000');
      expect(isConnectionError(error)).toBe(true);
    } finally {
      await adminQuery(`alter database ${empty.name} allow_connections true`);
    }
  });

  it('but not a 55000 that no wait cures (lastval before nextval)', async () => {
    const client = new pg.Client({ connectionString: empty.url });
    await client.connect();
    try {
      const error = await failureOf(() => client.query('select lastval()'));
      expect((error as { code?: string }).code).toBe('55000');
      expect(isConnectionError(error)).toBe(false);
    } finally {
      await client.end();
    }
  });

  it("a pool's wait for a connection that runs out", async () => {
    // The held connection may take longer than the wait under test to open on a loaded machine
    // (CI: over 100 ms): opened without a limit, then the pool's wait is cut to 100 ms (pg-pool
    // reads the setting at each connect).
    const pool = ownPool({ connectionString: empty.url, max: 1 });
    const held = await pool.connect();
    pool.options.connectionTimeoutMillis = 100;
    try {
      const error = await failureOf(() => pool.query('select 1'));
      expect(isConnectionError(error)).toBe(true);
      // Retried, but the database answers: a full pool is no outage.
      expect(isSaturation(error)).toBe(true);
      const availability = createAvailability(createLogger('silent'));
      expect(availability.unreachable(error, 'test')).toBe(true);
      expect(availability.down).toBe(false);
    } finally {
      held.release();
      await pool.end();
    }
  });
});

describe('isSaturation', () => {
  it('is too many connections (53300), not a lost connection or a refused one', () => {
    expect(isSaturation(coded('53300'))).toBe(true);
    expect(isSaturation(coded('57P01'))).toBe(false);
    expect(isSaturation(coded('ECONNREFUSED'))).toBe(false);
    expect(isSaturation(new Error('Connection terminated due to connection timeout'))).toBe(false);
  });

  it('leaves an outage that a restart began in place, and starts none', () => {
    const availability = createAvailability(createLogger('silent'));
    expect(availability.unreachable(coded('53300'), 'test')).toBe(true);
    expect(availability.down).toBe(false);
    expect(availability.unreachable(coded('57P01'), 'test')).toBe(true);
    expect(availability.down).toBe(true);
    expect(availability.unreachable(coded('53300'), 'test')).toBe(true);
    expect(availability.down).toBe(true);
  });
});
