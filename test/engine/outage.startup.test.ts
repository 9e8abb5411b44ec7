/**
 * Workers started while their database cannot be reached: `jobgate worker`, `jobgate start` and a
 * library-mode worker, each a real process, started while the test database refuses connections
 * (ALLOW_CONNECTIONS false). They wait, say so once, and come up when it opens; a fault no wait
 * cures (a database or a user that does not exist) ends them at once, non-zero, with one line.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminQuery, createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';
import { childProgram, JOBGATE_BIN } from '../support/children.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
let t: TestDb;
let target: HttpTarget;
const children = new Set<ChildProcess>();

interface Proc {
  name: string;
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

function spawnProc(name: string, args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: t.url, JOBGATE_LOG_LEVEL: 'info', JOBGATE_OUTBOUND_ALLOW: '127.0.0.0/8', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { name, child, output: () => out, exited };
}

function expectAlive(p: Proc) {
  expect({ name: p.name, exitCode: p.child.exitCode, signal: p.child.signalCode }).toEqual({ name: p.name, exitCode: null, signal: null });
}

beforeAll(async () => {
  t = await createTestDb();
  target = await startHttpTarget();
  // The reaper and other internal work stay out of the way: only the test's executions run.
  await t.query(`update jobs set status = 'PAUSED', next_fire_at = null where name = 'reaper'`);
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await adminQuery(`alter database ${t.name} allow_connections true`);
  await target?.close();
  await t?.close();
});

describe('a worker started while its database cannot be reached', { timeout: 120_000 }, () => {
  it('waits, says so once, and comes up and runs work when the database opens (CLI worker, jobgate start, library worker)', async () => {
    await adminQuery(`alter database ${t.name} allow_connections false`);
    const since = (await adminQuery<{ at: string }>(`select now()::text as at`)).rows[0]!.at;
    // Concurrency 1 each: the three requests below meet only if all three processes claim one.
    const procs = [
      spawnProc('jobgate worker', [JOBGATE_BIN, 'worker'], { JOBGATE_WORKER_CONCURRENCY: '1' }),
      spawnProc('jobgate start', [JOBGATE_BIN, 'start'], { JOBGATE_WORKER_CONCURRENCY: '1' }),
      spawnProc('library worker', [childProgram('library-worker-process')], { CONCURRENCY: '1' }),
    ];
    const alive = async <T>(fn: () => Promise<T | undefined | null | false>, what: string) =>
      eventually(
        async () => {
          for (const p of procs) expectAlive(p);
          return fn();
        },
        60_000,
        what,
      );
    await alive(
      async () => procs.every((p) => /the database is unreachable \(.*\); waiting for it/.test(p.output())),
      'every process to say it is waiting',
    );
    // Some retries later (on the database's clock), still waiting, still quiet.
    await alive(
      async () => (await adminQuery(`select now() > $1::timestamptz + interval '3 seconds' as past`, [since])).rows[0]!.past,
      'a few retries',
    );
    for (const p of procs) {
      expectAlive(p);
      expect(p.output().match(/the database is unreachable/g)).toHaveLength(1);
      expect(p.output()).not.toMatch(/started|^ready$/m);
    }
    await adminQuery(`alter database ${t.name} allow_connections true`);
    await alive(
      async () => procs.every((p) => /the database answers again after/.test(p.output())),
      'every process to say the database is back',
    );
    await alive(
      async () =>
        /worker \S+: started/.test(procs[0]!.output()) &&
        /gateway: GraphQL/.test(procs[1]!.output()) &&
        /^ready$/m.test(procs[2]!.output()),
      'every process to be up',
    );

    // Work: three requests held until all three are in flight at once, one per process.
    const held: ServerResponse[] = [];
    target.route('/meet', (_req, res) => {
      held.push(res);
      if (held.length >= 3) for (const r of held.splice(0)) r.writeHead(200).end('ok');
    });
    const endpoint = await t.service.registerEndpoint(t.actor, { name: 'startup.meet', kind: 'HTTP', url: `${target.url}/meet` });
    const jobs = await Promise.all([1, 2, 3].map(() => t.service.createJob(t.actor, { endpointName: endpoint.name, kind: 'IMMEDIATE' })));
    const ids = jobs.map((j) => j.job.id);
    await alive(
      async () =>
        Number((await t.query(`select count(*) from executions where job_id = any($1) and status = 'SUCCEEDED'`, [ids])).rows[0].count) ===
        3,
      'the three executions to succeed',
    );
    const workers = (
      await t.query(`select worker_id from attempts a join executions e on e.id = a.execution_id where e.job_id = any($1)`, [ids])
    ).rows.map((r) => r.worker_id as string);
    for (const p of procs) expect(workers.some((w) => w.includes(`:${p.child.pid}:`) || w === `library-${p.child.pid}`)).toBe(true);
    for (const p of procs) expectAlive(p);
  });

  it('stops with code 0 when told (SIGTERM) while it waits', async () => {
    await adminQuery(`alter database ${t.name} allow_connections false`);
    try {
      const p = spawnProc('jobgate worker', [JOBGATE_BIN, 'worker'], {});
      await eventually(
        async () => {
          expectAlive(p);
          return /the database is unreachable/.test(p.output());
        },
        60_000,
        'the worker to say it is waiting',
      );
      p.child.kill('SIGTERM');
      expect(await p.exited).toBe(0);
      expect(p.output()).toMatch(/stopped while starting \(SIGTERM\)/);
    } finally {
      await adminQuery(`alter database ${t.name} allow_connections true`);
    }
  });

  it.each([
    [
      'a database that does not exist',
      (url: URL) => void (url.pathname = '/jobgate_no_such_database'),
      /jobgate: the database does not exist.*\(3D000: database "jobgate_no_such_database" does not exist\)/,
    ],
    [
      'a user that does not exist',
      (url: URL) => void (url.username = 'jobgate_no_such_user'),
      // Under trust auth (a local server) Postgres says the role does not exist (28000); under
      // password auth (the embedded one) it will not say, and answers 28P01 for any unknown user.
      /jobgate: the database refused the (user.*\(28000: role "jobgate_no_such_user" does not exist\)|password.*\(28P01: password authentication failed for user "jobgate_no_such_user"\))/,
    ],
  ])('exits non-zero at once, with one line saying what to fix, on %s', async (_what, change, message) => {
    const url = new URL(t.url);
    change(url);
    const p = spawnProc('jobgate worker', [JOBGATE_BIN, 'worker'], { DATABASE_URL: url.toString() });
    expect(await p.exited).toBe(1);
    const last = p.output().trim().split('\n').pop()!;
    expect(last).toMatch(message);
    expect(p.output()).not.toMatch(/waiting for it/);
  });

  it('exits non-zero at once, with one line, on a database whose applied migration no longer matches its file', async () => {
    const { rows } = await t.query(`select version, checksum from jobgate_migrations order by version limit 1`);
    await t.query(`update jobgate_migrations set checksum = 'tampered' where version = $1`, [rows[0].version]);
    try {
      const p = spawnProc('jobgate worker', [JOBGATE_BIN, 'worker'], {});
      expect(await p.exited).toBe(1);
      expect(p.output().trim().split('\n').pop()).toMatch(
        /^jobgate: migration 0+1_\S+ was changed after it was applied .*put the change in a new migration file$/,
      );
      expect(p.output()).not.toMatch(/waiting for it/);
    } finally {
      await t.query(`update jobgate_migrations set checksum = $2 where version = $1`, [rows[0].version, rows[0].checksum]);
    }
  });

  it('a library worker on a database that does not exist rejects at createJobgate, non-zero, saying so', async () => {
    const url = new URL(t.url);
    url.pathname = '/jobgate_no_such_database';
    const p = spawnProc('library worker', [childProgram('library-worker-process')], { DATABASE_URL: url.toString() });
    expect(await p.exited).not.toBe(0);
    expect(p.output()).toMatch(/DatabaseFaultError: the database does not exist/);
    expect(p.output()).not.toMatch(/waiting for it/);
  });
});
