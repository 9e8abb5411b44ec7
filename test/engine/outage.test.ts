/**
 * Workers through database outages, as an operator meets them: a CLI worker (`jobgate worker`)
 * and a library-mode worker, each a real process, on a Postgres cluster of this file's own that
 * the test terminates, restarts and closes to connections. Afterwards the same processes are
 * alive, every execution succeeded on its first attempt (the outage spent none), and work added
 * after the outage runs on both.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workChannel } from '../../src/db/channels.js';
import { ensureDatabase } from '../../src/db/connect.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.js';
import { migrate } from '../../src/db/migrate.js';
import { reconcileExpiredLeases } from '../../src/db/statements/lease.js';
import { isConnectionError } from '../../src/db/unavailable.js';
import { createDatabase, type Database } from '../../src/db/pool.js';
import { createLogger } from '../../src/log.js';
import type { Actor } from '../../src/service/kernel/actor.js';
import { HandlerRegistry } from '../../src/service/engine/delivery/handler-registry.js';
import { createWorker } from '../../src/service/engine/worker/worker.js';
import { createJobService } from '../../src/service/index.js';
import { eventually } from '../support/engine.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';
import { childProgram, JOBGATE_BIN } from '../support/children.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const LEASE_MS = 3000;
const CONCURRENCY = 4;
const DB = 'jobgate';

interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  stderr(): string;
}

let dataDir: string;
let port: number;
let server: EmbeddedPostgres;
let url: string;
let database: Database;
let target: HttpTarget;
let workspaceId: string;
const endpointIds: Record<string, string> = {};
const procs: Proc[] = [];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

const startCluster = () => startEmbeddedPostgres({ dataDir, port, log: createLogger('warn'), ephemeral: true });

/** SQL on the cluster's `postgres` database, which stays open while `jobgate` refuses connections. */
async function admin<T extends pg.QueryResultRow = any>(text: string, values: unknown[] = []) {
  const client = new pg.Client({ connectionString: server.connectionString });
  client.on('error', () => {});
  await client.connect();
  try {
    return await client.query<T>(text, values);
  } finally {
    await client.end();
  }
}

/**
 * The test's own statements. Killing every backend of the database kills the test pool's idle
 * connections too, and the next statement may be handed one of them: retried, as a worker's
 * statements are (this is the test's connection, not what the test is about).
 */
async function q<T extends pg.QueryResultRow = any>(text: string, values: unknown[] = []): Promise<pg.QueryResult<T>> {
  for (let tries = 0; ; tries++) {
    try {
      return await database.pool.query<T>(text, values);
    } catch (error) {
      if (tries >= 20 || !isConnectionError(error)) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

function spawnProc(name: string, args: string[], env: Record<string, string>, ready: RegExp): Promise<Proc> {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: url,
      JOBGATE_LOG_LEVEL: 'info',
      JOBGATE_OUTBOUND_ALLOW: '127.0.0.0/8',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const proc: Proc = { name, child, pid: child.pid!, stderr: () => err };
  procs.push(proc);
  return new Promise((resolve, reject) => {
    const check = () => ready.test(out + err) && resolve(proc);
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.once('exit', (code, signal) => reject(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${err}`)));
  });
}

/** The same process, still running: never exited, answers signal 0. */
function expectAlive(p: Proc) {
  expect({ name: p.name, exitCode: p.child.exitCode, signal: p.child.signalCode }).toEqual({ name: p.name, exitCode: null, signal: null });
  expect(() => process.kill(p.pid, 0)).not.toThrow();
}

/** `eventually`, failing at once (and saying so) if a worker process exits meanwhile. */
function whileAlive<T>(fn: () => Promise<T | undefined | null | false>, ms: number, what: string): Promise<T> {
  return eventually(
    async () => {
      for (const p of procs) expectAlive(p);
      return fn();
    },
    ms,
    what,
  );
}

/** Waits until every process has logged a line matching `pattern` after its stderr offset in `marks`. */
async function logged(marks: number[], pattern: RegExp, what: string) {
  await whileAlive(async () => procs.every((p, i) => pattern.test(p.stderr().slice(marks[i]))), 30_000, `every worker to log ${what}`);
}

/** `n` executions due now, alternating between the handler endpoint and the HTTP one. */
async function createWork(n: number, input: object = { ms: 30 }): Promise<string[]> {
  const { rows } = await q<{ id: string }>(
    `with j as (
       insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts)
       select $1, case when i % 2 = 0 then $2::uuid else $3::uuid end, 'IMMEDIATE', $4, 5 from generate_series(1, $5) i
       returning id, workspace_id, endpoint_id)
     insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
     select workspace_id, id, endpoint_id, now(), now(), 5 from j returning id`,
    [workspaceId, endpointIds['outage.handler'], endpointIds['outage.http'], JSON.stringify(input), n],
  );
  await q('select pg_notify($1, $2)', [workChannel.name, workChannel.encode({ kind: 'work' })]);
  return rows.map((r) => r.id);
}

const succeeded = async (ids: string[]) =>
  Number((await q(`select count(*) from executions where id = any($1) and status = 'SUCCEEDED'`, [ids])).rows[0].count);

/** Every execution SUCCEEDED on its first attempt, one attempt row each: the outage cost none. */
async function expectNoAttemptSpent(ids: string[]) {
  const { rows } = await q(
    `select e.status, e.attempt_count, array_agg(a.outcome order by a.attempt_number) filter (where a.outcome is not null) as outcomes
     from executions e left join attempts a on a.execution_id = e.id where e.id = any($1) group by e.id`,
    [ids],
  );
  expect(rows).toHaveLength(ids.length);
  const spent = rows.filter((r) => r.status !== 'SUCCEEDED' || r.attempt_count !== 1 || JSON.stringify(r.outcomes) !== '["SUCCEEDED"]');
  expect(spent).toEqual([]);
}

/**
 * Requests to /hold/<key> are held until the test releases them: an attempt in flight for as long
 * as the test likes. `aborted` lists the keys whose request the worker dropped before its answer.
 */
const holding = new Map<string, ServerResponse[]>();
const aborted: string[] = [];
function holdRoute(req: IncomingMessage, res: ServerResponse) {
  const key = new URL(req.url ?? '/', 'http://x').pathname.split('/').pop()!;
  holding.set(key, [...(holding.get(key) ?? []), res]);
  res.on('close', () => {
    if (!res.writableFinished) aborted.push(key);
  });
}
const heldCount = () => [...holding.values()].reduce((n, l) => n + l.filter((r) => !r.writableFinished && !r.destroyed).length, 0);

/** `keys.length` executions of the /hold endpoint, each with its own key (its request's path). */
async function createHeld(keys: string[]): Promise<Map<string, string>> {
  for (const key of keys) target.route(`/hold/${key}`, holdRoute);
  const { rows } = await q<{ id: string; key: string }>(
    `with j as (
       insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts)
       select $1, $2, 'IMMEDIATE', jsonb_build_object('key', k), 5 from unnest($3::text[]) k
       returning id, workspace_id, endpoint_id, input)
     insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, input)
     select workspace_id, id, endpoint_id, now(), now(), 5, input from j returning id, input->>'key' as key`,
    [workspaceId, endpointIds['outage.hold'], keys],
  );
  await q('select pg_notify($1, $2)', [workChannel.name, workChannel.encode({ kind: 'work' })]);
  return new Map(rows.map((r) => [r.key, r.id]));
}

// Requests to /meet are held until MEET of them are in flight at once: more than one worker's
// concurrency, so the meeting happens only if both processes are claiming.
const MEET = CONCURRENCY + 2;
let held: ServerResponse[] = [];
let met = false;

/** Work added now runs, on both processes. */
async function expectThroughputBack() {
  held = [];
  met = false;
  const { rows } = await q<{ id: string }>(
    `with j as (
       insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts)
       select $1, $2, 'IMMEDIATE', '{}', 5 from generate_series(1, $3) returning id, workspace_id, endpoint_id)
     insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
     select workspace_id, id, endpoint_id, now(), now(), 5 from j returning id`,
    [workspaceId, endpointIds['outage.meet'], 2 * CONCURRENCY],
  );
  await q('select pg_notify($1, $2)', [workChannel.name, workChannel.encode({ kind: 'work' })]);
  const ids = rows.map((r) => r.id);
  await whileAlive(async () => (await succeeded(ids)) === ids.length, 30_000, 'the work added after the outage to succeed');
  expect(met).toBe(true);
  const workers = (await q(`select distinct worker_id from attempts where execution_id = any($1)`, [ids])).rows.map((r) => r.worker_id);
  expect(workers.some((w: string) => w.includes(`:${procs[0]!.pid}:`))).toBe(true);
  expect(workers).toContain(`library-${procs[1]!.pid}`);
  await expectNoAttemptSpent(ids);
}

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-outage-'));
  fs.chmodSync(dataDir, 0o755);
  // A fixed port, so the cluster comes back where the workers look for it.
  port = await freePort();
  server = await startCluster();
  await ensureDatabase(server.connectionString, DB);
  url = server.urlFor(DB);
  await migrate(url);
  database = createDatabase({ connectionString: url, max: 4 });
  target = await startHttpTarget();
  target.route('/ok', (_req, res) => void setTimeout(() => res.writeHead(200).end('ok'), 30));
  target.route('/meet', (_req, res) => {
    if (met) return void res.writeHead(200).end('ok');
    held.push(res);
    if (held.length >= MEET) {
      met = true;
      for (const r of held.splice(0)) r.writeHead(200).end('ok');
    }
  });
  workspaceId = (await q(`select id from workspaces where slug = 'default'`)).rows[0].id;
  // The workers run the scheduler too; keep the reaper out of these counts.
  await q(`update jobs set status = 'PAUSED', next_fire_at = null where name = 'reaper'`);
  const service = createJobService({ db: database.db, pool: database.pool, defaultMaxAttempts: 5, outboundAllow: ['127.0.0.0/8'] });
  const actor: Actor = { workspaceId, kind: 'user', role: 'ADMIN' };
  const endpoint = async (name: string, kind: 'HTTP' | 'HANDLER', where: string, timeoutMs?: number) => {
    const target = kind === 'HTTP' ? { url: where } : { handlerName: where };
    const created = await service.registerEndpoint(actor, {
      name,
      kind,
      ...target,
      backoffBaseMs: 10,
      backoffMaxMs: 10,
      jitter: false,
      timeoutMs,
    });
    endpointIds[name] = created.id;
  };
  await endpoint('outage.handler', 'HANDLER', 'sleep');
  await endpoint('outage.http', 'HTTP', `${target.url}/ok`);
  await endpoint('outage.meet', 'HTTP', `${target.url}/meet`);
  await endpoint('outage.hold', 'HTTP', `${target.url}/hold/{{input.key}}`, 120_000);
  await endpoint('outage.wake', 'HANDLER', 'wake');
  const lease = { JOBGATE_LEASE_MS: String(LEASE_MS), JOBGATE_HEARTBEAT_MS: '1000', JOBGATE_WORKER_CONCURRENCY: String(CONCURRENCY) };
  await Promise.all([
    spawnProc('jobgate worker', [JOBGATE_BIN, 'worker'], lease, /worker \S+: started/),
    spawnProc(
      'library worker',
      [childProgram('library-worker-process')],
      { LEASE_MS: String(LEASE_MS), HEARTBEAT_MS: '1000', CONCURRENCY: String(CONCURRENCY) },
      /^ready$/m,
    ),
  ]);
  // Fixed order for the assertions: the CLI first.
  procs.sort((a, b) => (a.name === 'jobgate worker' ? -1 : b.name === 'jobgate worker' ? 1 : 0));
}, 120_000);

afterAll(async () => {
  for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await database?.close().catch(() => {});
  await target?.close();
  await server?.stop();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
}, 60_000);

const terminateBackends = () =>
  admin(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [DB]);
const marks = () => procs.map((p) => p.stderr().length);

describe('workers through a database outage', { timeout: 120_000 }, () => {
  it('an idle worker survives pg_terminate_backend of all its connections, and runs the work added after', async () => {
    const before = marks();
    await terminateBackends();
    await logged(before, /listening connection lost/, 'that its listening connection was cut');
    for (const p of procs) expectAlive(p);
    const ids = await createWork(20);
    await whileAlive(async () => (await succeeded(ids)) === ids.length, 30_000, 'the new work to succeed');
    await expectNoAttemptSpent(ids);
    for (const p of procs) expectAlive(p);
  });

  it('a postmaster restart under running workers: they wait, say so once, resume, and the outage costs no attempt', async () => {
    const ids = await createWork(300);
    await whileAlive(async () => (await succeeded(ids)) >= 40, 30_000, 'work to be under way');
    const before = marks();
    await server.stop();
    await logged(before, /the database is unreachable/, 'that it is waiting for the database');
    server = await startCluster();
    await whileAlive(async () => (await succeeded(ids)) === ids.length, 60_000, 'all the work to succeed');
    await expectNoAttemptSpent(ids);
    await logged(before, /the database answers again after/, 'that the database is back');
    for (const p of procs) {
      expectAlive(p);
      // Once per outage, not once per retry.
      expect(
        p
          .stderr()
          .slice(before[procs.indexOf(p)])
          .match(/the database is unreachable/g),
      ).toHaveLength(1);
    }
    await expectThroughputBack();
  });

  it('a database refusing connections for longer than the lease: the leases are not lost, the outcomes are recorded', async () => {
    const ids = await createWork(300);
    await whileAlive(async () => (await succeeded(ids)) >= 40, 30_000, 'work to be under way');
    const before = marks();
    await admin(`alter database ${DB} allow_connections false`);
    const since = (await admin<{ at: string }>(`select now()::text as at`)).rows[0]!.at;
    try {
      // Until none is left: a connection that was being opened when the database was closed to
      // new ones gets through, and is terminated on a later round.
      await eventually(async () => Number((await terminateBackends()).rowCount) === 0, 10_000, 'every backend of the database to be gone');
      await logged(before, /the database is unreachable/, 'that it is waiting for the database');
      // Longer than a lease, on the database's clock (the one leases expire on).
      await whileAlive(
        async () =>
          (await admin(`select now() > $1::timestamptz + make_interval(secs => $2) as past`, [since, (1.5 * LEASE_MS) / 1000])).rows[0]
            .past,
        30_000,
        'the outage to outlast the lease',
      );
      for (const p of procs) expectAlive(p);
    } finally {
      await admin(`alter database ${DB} allow_connections true`);
    }
    await whileAlive(async () => (await succeeded(ids)) === ids.length, 60_000, 'all the work to succeed');
    await expectNoAttemptSpent(ids);
    await logged(before, /the database answers again after/, 'that the database is back');
    for (const p of procs) {
      expectAlive(p);
      // Once per outage each way, not once per retry (a retry a second for 1.5 leases). A process
      // whose connection slipped in before the database closed (see above) really was answered
      // until that connection was terminated: then it says so, and says the outage again.
      const said = p.stderr().slice(before[procs.indexOf(p)]);
      const lost = said.match(/the database is unreachable/g) ?? [];
      expect(lost.length).toBeGreaterThanOrEqual(1);
      expect(lost.length).toBeLessThanOrEqual(2);
      expect(said.match(/the database answers again after/g)).toHaveLength(lost.length);
    }
    await expectThroughputBack();
  });

  it('an attempt running through an outage longer than the lease is not aborted and costs no attempt; one taken over meanwhile is aborted', async () => {
    // More attempts than one process has slots, so both processes hold some.
    const keys = Array.from({ length: CONCURRENCY + 2 }, (_, i) => `run-${i}`);
    const ids = await createHeld(keys);
    await whileAlive(async () => heldCount() === keys.length, 30_000, 'every attempt to be in flight');
    const owners = (await q(`select lease_owner from executions where id = any($1)`, [[...ids.values()]])).rows.map(
      (r) => r.lease_owner as string,
    );
    expect(procs.map((p) => owners.some((o) => o.includes(`:${p.pid}:`) || o === `library-${p.pid}`))).toEqual([true, true]);
    const taken = ids.get(keys[0]!)!;
    const others = [...ids.values()].filter((id) => id !== taken);
    // A connection of the test's own that the outage leaves open: through it one execution is
    // taken over meanwhile, as a worker that could still reach the database would.
    const keeper = new pg.Client({ connectionString: url });
    keeper.on('error', () => {});
    await keeper.connect();
    const keeperPid = (await keeper.query('select pg_backend_pid() as pid')).rows[0].pid;
    const before = marks();
    await admin(`alter database ${DB} allow_connections false`);
    try {
      const since = (await admin<{ at: string }>(`select now()::text as at`)).rows[0]!.at;
      await eventually(
        async () =>
          Number(
            (await admin(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> $2`, [DB, keeperPid]))
              .rowCount,
          ) === 0,
        10_000,
        'every backend of the workers to be gone',
      );
      await logged(before, /the database is unreachable/, 'that it is waiting for the database');
      await keeper.query(`update executions set lease_expires_at = now() - interval '1 hour' where id = $1`, [taken]);
      expect(await reconcileExpiredLeases(keeper as unknown as pg.Pool, 1)).toEqual([{ id: taken, status: 'PENDING' }]);
      // Past the self-fence (two thirds of a lease) and past the lease, on the database's clock.
      await whileAlive(
        async () =>
          (await admin(`select now() > $1::timestamptz + make_interval(secs => $2) as past`, [since, (1.5 * LEASE_MS) / 1000])).rows[0]
            .past,
        30_000,
        'the outage to outlast the lease',
      );
      // Every attempt still in flight: none was aborted for a lease it could not renew.
      expect(aborted).toEqual([]);
      expect(heldCount()).toBe(keys.length);
      await logged(before, /attempt\(s\) keep running although their leases cannot be renewed/, 'that its attempts keep running');
    } finally {
      await admin(`alter database ${DB} allow_connections true`);
      await keeper.end().catch(() => {});
    }
    // Back: the leases that ran out and that nobody took are renewed by their owners...
    await whileAlive(
      async () =>
        Number(
          (await q(`select count(*) from executions where id = any($1) and status = 'RUNNING' and lease_expires_at > now()`, [others]))
            .rows[0].count,
        ) === others.length,
      30_000,
      'the expired leases to be renewed',
    );
    // ...and the one taken over is found gone: its attempt is aborted (its request dropped), and
    // its retry is in flight.
    await whileAlive(
      async () => aborted.length === 1 && holding.get(keys[0]!)?.length === 2,
      30_000,
      'the taken-over attempt to be aborted and retried',
    );
    expect(aborted).toEqual([keys[0]]);
    for (const list of holding.values()) for (const res of list) if (!res.writableFinished && !res.destroyed) res.writeHead(200).end('ok');
    await whileAlive(async () => (await succeeded([...ids.values()])) === ids.size, 30_000, 'all of it to succeed');
    await expectNoAttemptSpent(others);
    const outcomes = (await q(`select array_agg(outcome order by attempt_number) as o from attempts where execution_id = $1`, [taken]))
      .rows[0].o;
    expect(outcomes).toEqual(['LEASE_EXPIRED', 'SUCCEEDED']);
    expect(aborted).toEqual([keys[0]]);
    for (const p of procs) expectAlive(p);
  });

  it('the listening connection retries at most a second apart through a postmaster restart, and a notification alone wakes a worker after it', async () => {
    const HOUR = 3_600_000;
    const lines: string[] = [];
    const ran: string[] = [];
    const handlers = new HandlerRegistry();
    handlers.register('wake', undefined, async (_input, ctx) => void ran.push(ctx.executionId));
    const own = createDatabase({ connectionString: url, max: 2 });
    // No poll and no reconciler in the test's time: a notification is what wakes it.
    const worker = createWorker({
      pool: own.pool,
      connectionString: url,
      handlers,
      log: createLogger('debug', (l) => lines.push(l)),
      workerId: 'listening',
      pollMs: HOUR,
      reconcileMs: HOUR,
    });
    const wake = async () => {
      const { rows } = await q<{ id: string }>(
        `with j as (insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts) values ($1, $2, 'IMMEDIATE', '{}', 5) returning id, workspace_id, endpoint_id)
         insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
         select workspace_id, id, endpoint_id, now(), now(), 5 from j returning id`,
        [workspaceId, endpointIds['outage.wake']],
      );
      await q('select pg_notify($1, $2)', [workChannel.name, workChannel.encode({ kind: 'work' })]);
      return rows[0]!.id;
    };
    try {
      await worker.start();
      const first = await wake();
      await eventually(async () => ran.includes(first), 30_000, 'a notification to wake the worker');
      const mark = lines.length;
      const delays = () => lines.slice(mark).flatMap((l) => /reconnecting in (\d+) ms/.exec(l)?.slice(1).map(Number) ?? []);
      await server.stop();
      // Long enough for a backoff doubling from 100 ms to pass a second several times over.
      await eventually(async () => delays().length >= 8, 60_000, 'eight reconnections of the listening connection');
      server = await startCluster();
      const startedAt = Date.now();
      await eventually(async () => lines.slice(mark).some((l) => l.includes('listening again')), 30_000, 'the worker to listen again');
      console.log(
        `listening again ${Date.now() - startedAt} ms after the restarted cluster accepted connections; reconnection delays: ${delays().join(', ')} ms`,
      );
      // Twice: the first may meet the claim the return itself set off; the second has nothing but
      // its notification to wake the worker (its poll is an hour away, nothing else is due).
      for (let i = 0; i < 2; i++) {
        const id = await wake();
        await eventually(async () => ran.includes(id), 30_000, 'a notification to wake the worker after the restart');
      }
      expect(delays().filter((ms) => ms > 1000)).toEqual([]);
      for (const p of procs) expectAlive(p);
    } finally {
      await worker.stop({ graceMs: 1000 });
      await own.close();
    }
  });

  it('exits when told: SIGTERM stops each worker with code 0', async () => {
    for (const p of procs) expectAlive(p);
    const exits = procs.map((p) => new Promise<number | null>((r) => p.child.once('exit', (code) => r(code))));
    for (const p of procs) p.child.kill('SIGTERM');
    expect(await Promise.all(exits)).toEqual([0, 0]);
  });
});
