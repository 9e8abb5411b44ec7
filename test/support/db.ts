/**
 * A database of its own for one test file, cloned from the migrated template.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { retryConflicts } from '../../src/db/conflicts.js';
import { createDatabase, type Database } from '../../src/db/pool.js';
import { findWorkspaceBySlug, ensureWorkspace } from '../../src/db/repositories/workspaces.js';
import type { Actor } from '../../src/service/kernel/actor.js';
import { createJobService, type JobService, type ServiceDeps } from '../../src/service/index.js';
import { SecretBox } from '../../src/service/kernel/secrets.js';
import { track, untrack } from './tracked.js';

/** The test run's key for secrets at rest. */
export const TEST_SECRETS = new SecretBox(Buffer.alloc(32, 7));

export function serverUrl(): string {
  return inject('pgServerUrl');
}

export function urlFor(database: string): string {
  const u = new URL(serverUrl());
  u.pathname = `/${database}`;
  return u.toString();
}

export async function adminQuery<T extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[] = []) {
  const client = new pg.Client({ connectionString: serverUrl() });
  await client.connect();
  try {
    return await client.query<T>(text, values);
  } finally {
    await client.end();
  }
}

/** A fresh, empty (unmigrated) database; dropped by `drop()`. */
export async function createEmptyDatabase(): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `jobgate_t_${randomBytes(5).toString('hex')}`;
  await adminQuery(`create database ${name}`);
  return { name, url: urlFor(name), drop: async () => void (await adminQuery(`drop database if exists ${name} with (force)`)) };
}

export interface TestDb {
  name: string;
  url: string;
  database: Database;
  db: Database['db'];
  /** Raw SQL on the test database. */
  query<T extends pg.QueryResultRow = any>(text: string, values?: unknown[]): Promise<pg.QueryResult<T>>;
  service: JobService;
  /** A user actor in the default workspace. */
  actor: Actor;
  /** A user actor in a second workspace, "other". */
  otherActor: Actor;
  /** jobgate itself, in the default workspace. */
  systemActor: Actor;
  /**
   * Back to what the database held when it was made, in place, for a file whose tests each need
   * a fresh one: every table emptied and its first rows put back, sequences where they were,
   * tables, triggers and functions a test created dropped, and a new `service` (no cache of an earlier test's). What
   * runs on it must be stopped first. A clone per test costs over a second on a server that
   * fsyncs; this, tens of milliseconds.
   */
  reset(): Promise<void>;
  close(): Promise<void>;
}

/** What a new test database holds, to put back on reset(). */
interface Snapshot {
  tables: { name: string; columns: string; partition: boolean; rows: unknown[] }[];
  sequences: { name: string; last: string | null }[];
  /** Triggers (`name on table`) and functions (`name(args)`) there were. */
  triggers: string[];
  functions: string[];
}

const TRIGGERS = `select format('%I on public.%I', t.tgname, c.relname) as name from pg_trigger t
  join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
  where n.nspname = 'public' and not t.tgisinternal`;
const FUNCTIONS = `select p.oid::regprocedure::text as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
  where n.nspname = 'public'`;

const quoted = (name: string) => `"${name.replace(/"/g, '""')}"`;

async function snapshot(pool: pg.Pool): Promise<Snapshot> {
  // A partition's rows are read, and put back, through its parent (the live events' generations).
  const { rows: tables } = await pool.query<{ name: string; columns: string; partition: boolean }>(`
    select c.relname as name, string_agg(quote_ident(a.attname), ', ' order by a.attnum) as columns, c.relispartition as partition
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped and a.attgenerated = ''
    where n.nspname = 'public' and c.relkind in ('r', 'p') and c.relname <> 'jobgate_migrations'
    group by c.relname, c.relispartition order by c.relname`);
  const withRows = await Promise.all(
    tables.map(async (table) => {
      if (table.partition) return { ...table, rows: [] };
      const { rows } = await pool.query<{ rows: unknown[] }>(
        `select coalesce(json_agg(t), '[]') as rows from public.${quoted(table.name)} t`,
      );
      return { ...table, rows: rows[0]!.rows };
    }),
  );
  const { rows: sequences } = await pool.query<{ name: string; last: string | null }>(
    `select sequencename as name, last_value::text as last from pg_sequences where schemaname = 'public'`,
  );
  const names = async (sql: string) => (await pool.query<{ name: string }>(sql)).rows.map((r) => r.name);
  return { tables: withRows, sequences, triggers: await names(TRIGGERS), functions: await names(FUNCTIONS) };
}

async function restore(pool: pg.Pool, to: Snapshot): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    // Tables a test made (and what hangs on them) go; the rest are emptied.
    const known = to.tables.map((t) => t.name);
    const { rows: extra } = await client.query<{ name: string }>(
      `select tablename as name from pg_tables where schemaname = 'public' and tablename <> 'jobgate_migrations' and not (tablename = any($1))`,
      [known],
    );
    for (const { name } of extra) await client.query(`drop table public.${quoted(name)} cascade`);
    const names = async (sql: string) => (await client.query<{ name: string }>(sql)).rows.map((r) => r.name);
    for (const name of await names(TRIGGERS)) if (!to.triggers.includes(name)) await client.query(`drop trigger ${name}`);
    for (const name of await names(FUNCTIONS)) if (!to.functions.includes(name)) await client.query(`drop function ${name} cascade`);
    // A partition is emptied through its parent (one a test dropped is not named).
    const parents = to.tables.filter((t) => !t.partition).map((t) => t.name);
    await client.query(`truncate ${parents.map((n) => `public.${quoted(n)}`).join(', ')} restart identity`);
    // The rows as they were: no trigger fires (no event, no notification), no foreign key is
    // checked (they held when the rows were read).
    await client.query(`set local session_replication_role = replica`);
    for (const table of to.tables.filter((t) => t.rows.length > 0)) {
      await client.query(
        `insert into public.${quoted(table.name)} (${table.columns}) overriding system value
         select ${table.columns} from json_populate_recordset(null::public.${quoted(table.name)}, $1)`,
        [JSON.stringify(table.rows)],
      );
    }
    for (const seq of to.sequences) {
      if (seq.last === null) await client.query(`alter sequence public.${quoted(seq.name)} restart`);
      else await client.query(`select setval($1, $2::bigint, true)`, [`public.${quoted(seq.name)}`, seq.last]);
    }
    await client.query('commit');
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/**
 * A database of the test's own, cloned from the template. `resettable`: for a whole file whose
 * tests each need a fresh one, `reset()` in beforeEach (what it held now is noted, to put back).
 */
export async function createTestDb(deps: Partial<ServiceDeps> = {}, options: { resettable?: boolean } = {}): Promise<TestDb> {
  const name = `jobgate_t_${randomBytes(5).toString('hex')}`;
  await adminQuery(`create database ${name} template ${inject('pgTemplate')}`);
  const url = urlFor(name);
  const database = createDatabase({ connectionString: url, max: 10 });
  // Test targets listen on loopback: the door lets them in, as JOBGATE_OUTBOUND_ALLOW=127.0.0.0/8
  // would; a worker's own policy (the authority) is set by each test.
  const newService = () =>
    createJobService({
      db: database.db,
      pool: database.pool,
      defaultMaxAttempts: 5,
      secrets: TEST_SECRETS,
      outboundAllow: ['127.0.0.0/8', '::1/128'],
      ...deps,
    });
  const ws = (await findWorkspaceBySlug(database.db, 'default'))!;
  const other = await ensureWorkspace(database.db, 'other', 'Other workspace');
  const made = options.resettable ? await snapshot(database.pool) : undefined;
  const t: TestDb = {
    name,
    url,
    database,
    db: database.db,
    query: (text, values = []) => database.pool.query(text, values),
    service: newService(),
    actor: { workspaceId: ws.id, kind: 'user', role: 'ADMIN' },
    otherActor: { workspaceId: other.id, kind: 'user', role: 'ADMIN' },
    systemActor: { workspaceId: ws.id, kind: 'system', role: 'ADMIN' },
    async reset() {
      if (!made) throw new Error('reset() needs createTestDb(deps, { resettable: true })');
      // The previous test's worker processes were killed, but a backend of theirs runs on to the
      // end of its statement (a killed client is noticed only at the next read): one that holds
      // a table and waits for another can deadlock with the truncate, which Postgres then aborts.
      // Tried again (the engine's conflict retry, with waits long enough for the orphan to finish).
      await retryConflicts(
        () => restore(database.pool, made),
        () => {},
        { tries: 5, baseMs: 200, maxMs: 1000 },
      );
      t.service = newService();
    },
    async close() {
      await database.close();
      await adminQuery(`drop database if exists ${name} with (force)`);
      untrack(t);
    },
  };
  track(t, `test database ${name} (its pool open: close() it)`);
  return t;
}

/** Runs `fn` and returns the domain error code it threw; fails the test if it did not throw. */
export async function codeOf(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (typeof code === 'string') return code;
    throw error;
  }
  throw new Error('expected an error, but the call succeeded');
}

/**
 * Cuts a statement's connection while it runs: holds a row lock (`lockSql` with `values`, in a
 * transaction of its own), runs `start` (which sets off the statement), waits for a backend of
 * `t` blocked on that lock running a query that matches `queryLike`, terminates it, then
 * `whileCut()` runs before the lock is let go.
 */
export async function cutWhileBlocked(
  t: TestDb,
  lock: { sql: string; values: unknown[] },
  queryLike: string,
  start: () => void,
  whileCut: () => Promise<unknown> = async () => {},
): Promise<void> {
  const holder = await t.database.pool.connect();
  try {
    await holder.query('begin');
    await holder.query(lock.sql, lock.values);
    start();
    let pid: number | undefined;
    for (const until = Date.now() + 5000; pid === undefined;) {
      pid = (
        await adminQuery<{ pid: number }>(
          `select pid from pg_stat_activity where datname = $1 and wait_event_type = 'Lock' and query like $2`,
          [t.name, queryLike],
        )
      ).rows[0]?.pid;
      if (pid === undefined && Date.now() > until) throw new Error(`no statement like ${queryLike} waited on the lock`);
      if (pid === undefined) await new Promise((r) => setTimeout(r, 25));
    }
    await adminQuery('select pg_terminate_backend($1)', [pid]);
    await whileCut();
  } finally {
    await holder.query('rollback');
    holder.release();
  }
}

/**
 * `pool` with a hook run before every statement it sends (the statement's text, trimmed): the
 * hook may throw (a lost connection, say) or wait, before the statement reaches the server.
 */
export function hookedPool(pool: pg.Pool, before: (sql: string) => Promise<void> | void): pg.Pool {
  return new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop !== 'query') return Reflect.get(target, prop, receiver);
      return async (text: string | pg.QueryConfig, values?: unknown[]) => {
        await before(typeof text === 'string' ? text.trim() : text.text.trim());
        return target.query(text as string, values);
      };
    },
  });
}

/**
 * A `hookedPool` hook that, once armed, holds the next statement starting with `prefix` until
 * released: a statement in flight at a moment of the test's choosing.
 */
export function holdNext(prefix: string) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let armed = false;
  let holding = false;
  return {
    hook: async (sql: string) => {
      if (!armed || !sql.startsWith(prefix)) return;
      armed = false;
      holding = true;
      await gate;
    },
    arm: () => void (armed = true),
    holding: () => holding,
    release: () => release(),
  };
}
