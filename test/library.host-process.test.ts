/**
 * The library in its host's process: importing jobgate and running it changes nothing
 * process-wide. pg's own type parsers stay pg's, so the host's connections read int8 as pg reads
 * it (a string), and no process handler is added on import; jobgate's own connections, and its
 * statements on a connection the host lends it, read int8 as numbers, as they always have.
 */
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ownPool } from './support/own-pool.js';

const INT8 = pg.types.builtins.INT8;
const BIG = '9007199254740993'; // 2^53 + 1: a number would lose its last digit
const PROCESS_EVENTS = ['exit', 'beforeExit', 'SIGINT', 'SIGTERM', 'SIGHUP', 'uncaughtException', 'unhandledRejection', 'warning'] as const;

// Taken before any module of jobgate is loaded: they are imported in beforeAll, below.
const pgInt8Parser = pg.types.getTypeParser(INT8);

type Modules = {
  index: typeof import('../src/index.js');
  outer: typeof import('../src/db/outer.js');
  log: typeof import('../src/log.js');
  support: typeof import('./support/db.js');
};
let m: Modules;
let addedOnImport: Record<string, number>;
let t: import('./support/db.js').TestDb;
let gate: import('../src/index.js').Jobgate;
let host: pg.Pool;

beforeAll(async () => {
  const counts = () => Object.fromEntries(PROCESS_EVENTS.map((e) => [e, process.listenerCount(e)]));
  const before = counts();
  m = {
    index: await import('../src/index.js'),
    outer: await import('../src/db/outer.js'),
    log: await import('../src/log.js'),
    support: await import('./support/db.js'),
  };
  const after = counts();
  addedOnImport = Object.fromEntries(PROCESS_EVENTS.map((e) => [e, after[e]! - before[e]!]).filter(([, n]) => n !== 0));
  t = await m.support.createTestDb();
  gate = await m.index.createJobgate({ databaseUrl: t.url, migrate: false, log: m.log.createLogger('silent') });
  host = ownPool({ connectionString: t.url, max: 2 });
});
afterAll(async () => {
  await host?.end();
  await gate?.close();
  await t?.close();
});

describe('jobgate in its host process', () => {
  it('leaves pg process-wide parsers as pg has them, and adds no process handler, when imported', () => {
    expect(pg.types.getTypeParser(INT8)).toBe(pgInt8Parser);
    expect(pgInt8Parser(BIG)).toBe(BIG);
    expect(addedOnImport).toEqual({});
  });

  it("leaves the host's own connections reading int8 as strings while a Jobgate runs on the same database", async () => {
    const { rows } = await host.query(`select ${BIG}::int8 as big, 42::int8 as small, count(*) as n from workspaces`);
    expect(rows[0]).toEqual({ big: BIG, small: '42', n: expect.any(String) });
    expect(pg.types.getTypeParser(INT8)).toBe(pgInt8Parser);
  });

  it('reads int8 as numbers on its own pools, as before', async () => {
    for (const pool of [gate.database.pool, t.database.pool]) {
      const { rows } = await pool.query('select 42::int8 as n, count(*) as c from workspaces');
      expect(rows[0]).toEqual({ n: 42, c: expect.any(Number) });
    }
    const row = await gate.database.db
      .selectFrom('runs')
      .select((eb) => [eb.fn.countAll<number>().as('n'), sql<number>`42::int8`.as('answer')])
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ n: 0, answer: 42 });
  });

  it("reads int8 as numbers in its statements on the host's connection, and the host's own statements there stay strings", async () => {
    const client = await host.connect();
    try {
      await client.query('begin');
      const ours = await m.outer
        .outerExecutor(client)
        .selectNoFrom(sql<number>`42::int8`.as('n'))
        .executeTakeFirstOrThrow();
      expect(ours).toEqual({ n: 42 });
      expect((await client.query('select 42::int8 as n')).rows[0]).toEqual({ n: '42' });
      // A service call through the host's transaction works as it does on jobgate's own pool.
      const { run } = await gate.inTransaction(client).triggerRun({ name: 'host.scan', force: true });
      expect(run.processed).toBe(0);
      await client.query('rollback');
    } finally {
      client.release();
    }
  });
});
