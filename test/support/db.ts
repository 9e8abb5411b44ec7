/**
 * A database of its own for one test file, cloned from the migrated template.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { createDatabase, type Database } from '../../src/db/pool.js';
import { findWorkspaceBySlug, ensureWorkspace } from '../../src/db/repositories/workspaces.js';
import type { Actor } from '../../src/service/kernel/actor.js';
import { createJobService, type JobService, type ServiceDeps } from '../../src/service/index.js';
import { SecretBox } from '../../src/service/kernel/secrets.js';

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
  close(): Promise<void>;
}

export async function createTestDb(deps: Partial<ServiceDeps> = {}): Promise<TestDb> {
  const name = `jobgate_t_${randomBytes(5).toString('hex')}`;
  await adminQuery(`create database ${name} template ${inject('pgTemplate')}`);
  const url = urlFor(name);
  const database = createDatabase({ connectionString: url, max: 10 });
  // Test targets listen on loopback: the door lets them in, as JOBGATE_OUTBOUND_ALLOW=127.0.0.0/8
  // would; a worker's own policy (the authority) is set by each test.
  const service = createJobService({
    db: database.db,
    pool: database.pool,
    defaultMaxAttempts: 5,
    secrets: TEST_SECRETS,
    outboundAllow: ['127.0.0.0/8', '::1/128'],
    ...deps,
  });
  const ws = (await findWorkspaceBySlug(database.db, 'default'))!;
  const other = await ensureWorkspace(database.db, 'other', 'Other workspace');
  return {
    name,
    url,
    database,
    db: database.db,
    query: (text, values = []) => database.pool.query(text, values),
    service,
    actor: { workspaceId: ws.id, kind: 'user', role: 'ADMIN' },
    otherActor: { workspaceId: other.id, kind: 'user', role: 'ADMIN' },
    systemActor: { workspaceId: ws.id, kind: 'system', role: 'ADMIN' },
    async close() {
      await database.close();
      await adminQuery(`drop database if exists ${name} with (force)`);
    },
  };
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
