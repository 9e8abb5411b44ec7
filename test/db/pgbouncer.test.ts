/**
 * jobgate through a real PgBouncer in transaction pooling mode, the pooler most installations put
 * in front of Postgres: each transaction gets whichever server connection is free, so nothing of a
 * session (named statements, session locks, LISTEN) survives from one transaction to the next.
 * With `JOBGATE_DATABASE_POOLER=transaction` jobgate migrates, claims, records outcomes and serves
 * through it; LISTEN goes to `JOBGATE_LISTEN_DATABASE_URL`, and without one workers and the live
 * hub poll.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import pg from 'pg';
import { startApp, type RunningApp } from '../../src/app.js';
import { MIGRATION_LOCK_KEY, migrate } from '../../src/db/migrate.js';
import { createDatabase } from '../../src/db/pool.js';
import { parseConfig } from '../../src/environment.js';
import { createLogger } from '../../src/log.js';
import { createJobService } from '../../src/service/index.js';
import { createEmptyDatabase, serverUrl } from '../support/db.js';
import { eventually } from '../support/eventually.js';
import { postGraphql } from '../support/graphql.js';
import { collect } from '../support/live.js';
import { startPgBouncer, type PgBouncer } from '../support/pgbouncer.js';

let bouncer: PgBouncer;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  bouncer = await startPgBouncer(serverUrl(), { poolSize: 2 });
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});
afterAll(async () => {
  await bouncer?.stop();
});

describe('named statements through a transaction pooler', () => {
  it('collide on a shared server connection, and the pool for a pooler sends them unnamed', async () => {
    // One server connection: two clients of the pool land on it, one after the other.
    const single = await startPgBouncer(serverUrl(), { poolSize: 1 });
    closers.push(() => single.stop());
    const db = await createEmptyDatabase();
    closers.push(() => db.drop());
    const statement = { name: 'jobgate.test-statement', text: 'select 1 as one' };

    const named = createDatabase({ connectionString: single.url(db.name), max: 2 });
    closers.push(() => named.close());
    const [a, b] = [await named.pool.connect(), await named.pool.connect()];
    await a.query(statement);
    // b never prepared it, so it sends the Parse again, to the server connection a prepared it on.
    const collided = await b.query(statement).then(
      () => 'no error',
      (e: Error) => e.message,
    );
    a.release();
    b.release(true);
    expect(collided).toMatch(/prepared statement "jobgate.test-statement" already exists/);

    const unnamed = createDatabase({ connectionString: single.url(db.name), max: 2, preparedStatements: false });
    closers.push(() => unnamed.close());
    const [c, d] = [await unnamed.pool.connect(), await unnamed.pool.connect()];
    try {
      expect((await c.query(statement)).rows).toEqual([{ one: 1 }]);
      expect((await d.query(statement)).rows).toEqual([{ one: 1 }]);
      expect((await d.query(statement)).rows).toEqual([{ one: 1 }]);
    } finally {
      c.release();
      d.release();
    }
  });
});

const EXECUTIONS = `subscription($endpointId: ID) { executionUpdates(endpointId: $endpointId) { executionId status } }`;
const JOBS = 120;

/**
 * `jobgate start` (gateway and worker) on a fresh database through the pooler: it migrates through
 * it, serves createJobs over HTTP, runs every execution once, and streams each one's end to a
 * graphql-ws subscriber.
 */
async function startThroughPooler(listen: 'direct' | 'none') {
  const db = await createEmptyDatabase();
  closers.push(() => db.drop());
  const logs: string[] = [];
  const config = parseConfig({
    DATABASE_URL: bouncer.url(db.name),
    JOBGATE_DATABASE_POOLER: 'transaction',
    ...(listen === 'direct' ? { JOBGATE_LISTEN_DATABASE_URL: db.url } : {}),
    JOBGATE_DEMO_HANDLERS: 'on',
    JOBGATE_WORKER_CONCURRENCY: '16',
    PORT: '0',
  });
  const app: RunningApp = await startApp({ config, log: createLogger('info', (line) => logs.push(line)) });
  closers.push(() => app.stop());

  // An ADMIN key, made directly on the database.
  const direct = createDatabase({ connectionString: db.url, max: 2 });
  closers.push(() => direct.close());
  const { key } = await createJobService({ db: direct.db, pool: direct.pool, defaultMaxAttempts: 1 }).bootstrapKey(
    'default',
    'ADMIN',
    'pooler test',
  );
  const gql = (query: string, variables: Record<string, unknown> = {}) => postGraphql(app.url, key, query, variables);
  const { registerEndpoint } = await gql(
    `mutation { registerEndpoint(input: { name: "echo", kind: HANDLER, handlerName: "demo.echo", maxAttempts: 1 }) { id } }`,
  );
  const ws = createClient({
    url: app.url.replace(/^http/, 'ws'),
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    connectionParams: { authorization: `Bearer ${key}` },
  });
  closers.push(async () => ws.dispose());
  const updates = collect<{ executionId: string; status: string }>(ws, EXECUTIONS, { endpointId: registerEndpoint.id });
  // The subscription is live once it delivers; wait for that before creating what it must see.
  await eventually(async () => (await gql('{ __typename }')).__typename === 'Query');

  const jobs = Array.from({ length: JOBS }, (_, i) => ({ kind: 'IMMEDIATE', endpointName: 'echo', input: { i } }));
  await gql(`mutation($jobs: [CreateJobInput!]!) { createJobs(input: { jobs: $jobs }) { results { job { id } } } }`, { jobs });
  return { db, app, logs, updates, gql };
}

async function expectEachRanOnce(url: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await eventually(
      async () =>
        (
          await client.query(
            `select count(*)::int as n from executions e join endpoints en on en.id = e.endpoint_id where en.name = 'echo' and e.status = 'SUCCEEDED'`,
          )
        ).rows[0].n === JOBS,
      30_000,
      `all ${JOBS} executions to succeed`,
    );
    const { rows } = await client.query(
      `select count(*)::int as executions, sum(e.attempt_count)::int as counted,
              (select count(*)::int from attempts a where a.execution_id = any(array_agg(e.id))) as attempts
       from executions e join endpoints en on en.id = e.endpoint_id where en.name = 'echo'`,
    );
    // Each ran once: one attempt counted and one recorded per execution, none lost or repeated.
    expect(rows[0]).toEqual({ executions: JOBS, counted: JOBS, attempts: JOBS });
  } finally {
    await client.end();
  }
}

async function readiness(app: RunningApp): Promise<{ status: number; body: string }> {
  const res = await fetch(new URL('/readyz', app.url));
  return { status: res.status, body: await res.text() };
}

describe('jobgate start through PgBouncer (pool_mode=transaction)', () => {
  it('with a LISTEN URL: migrates through it, runs every execution once, streams each end live, and is ready', async () => {
    const { db, app, logs, updates } = await startThroughPooler('direct');
    // The migration lock is taken per transaction: none is left held on a pooled server connection,
    // and migrating again through the pooler finds everything applied.
    expect(await migrate(bouncer.url(db.name))).toEqual({ applied: [] });
    const held = new pg.Client({ connectionString: db.url });
    await held.connect();
    const { rows } = await held.query(
      `select count(*)::int as n from pg_locks where locktype = 'advisory' and classid = ($1::bigint >> 32)::oid and objid = ($1::bigint & 4294967295)::oid`,
      [MIGRATION_LOCK_KEY],
    );
    await held.end();
    expect(rows[0].n).toBe(0);
    await expectEachRanOnce(db.url);
    await updates.until((items) => new Set(items.filter((u) => u.status === 'SUCCEEDED').map((u) => u.executionId)).size === JOBS);
    expect(await readiness(app)).toMatchObject({ status: 200 });
    // LISTEN worked on the direct connection: no fallback to polling was needed.
    expect(logs.join('\n')).not.toMatch(/receives nothing|no connection to LISTEN on/);
    expect(logs.join('\n')).not.toMatch(/prepared statement/);
  });

  it('without one: workers and the live hub poll, every execution still runs once and is streamed, and it is ready', async () => {
    const { db, app, logs, updates } = await startThroughPooler('none');
    await expectEachRanOnce(db.url);
    await updates.until((items) => new Set(items.filter((u) => u.status === 'SUCCEEDED').map((u) => u.executionId)).size === JOBS);
    // Polling by design is not a fault: /readyz does not wait for a listener that was never asked for.
    expect(await readiness(app)).toMatchObject({ status: 200 });
    expect(logs.join('\n')).toMatch(/no connection to LISTEN on/);
    expect(logs.join('\n')).not.toMatch(/prepared statement/);
  });
});

describe('a PgBouncer with its default ignore_startup_parameters (extra_float_digits only)', () => {
  let plain: PgBouncer;
  beforeAll(async () => {
    plain = await startPgBouncer(serverUrl(), { poolSize: 2, ignoreStartupParameters: 'extra_float_digits' });
  });
  afterAll(async () => {
    await plain?.stop();
  });
  /** `what`, or a rejection after `ms`: a start that waits for ever fails the test instead of hanging it. */
  async function within<T>(ms: number, what: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        what,
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms))),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  it('serves through it with JOBGATE_DATABASE_POOLER=transaction, prepared statements on: nothing is sent at connect', async () => {
    const db = await createEmptyDatabase();
    closers.push(() => db.drop());
    const config = parseConfig({
      DATABASE_URL: plain.url(db.name),
      JOBGATE_DATABASE_POOLER: 'transaction',
      JOBGATE_PREPARED_STATEMENTS: 'on',
      JOBGATE_LISTEN_DATABASE_URL: db.url,
      PORT: '0',
    });
    const app = await within(60_000, startApp({ config, log: createLogger('silent') }));
    closers.push(() => app.stop());
    expect(await readiness(app)).toMatchObject({ status: 200 });
  });

  it('stops at start with what to fix when it is not said to be a pooler, rather than waiting for ever', async () => {
    const db = await createEmptyDatabase();
    closers.push(() => db.drop());
    const config = parseConfig({ DATABASE_URL: plain.url(db.name), JOBGATE_LISTEN_DATABASE_URL: db.url, PORT: '0' });
    const started = startApp({ config, log: createLogger('silent') });
    started.then((app) => closers.push(() => app.stop())).catch(() => {});
    await expect(within(60_000, started)).rejects.toThrow(/refused a startup parameter.*JOBGATE_DATABASE_POOLER=transaction/);
  });
});
