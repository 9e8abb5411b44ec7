/**
 * Interval handlers: one execution per tick across workers, outcomes (ok with a count, handler
 * errors, timeouts, crashes), triggering with and without force, and the catalogue over GraphQL.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { HandlerRegistry } from '../../src/service/engine/delivery/handler-registry.js';
import { createEngineHost, type EngineHost } from '../../src/service/engine/runtime/host.js';
import { IntervalRegistry, type IntervalHandler } from '../../src/service/engine/intervals/intervals.js';
import { RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { codeOf, createTestDb, holdNext, hookedPool, type TestDb } from '../support/db.js';
import { QUIET, quietPeriod } from '../support/eventually.js';
import { eventually } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';
import { childProgram } from '../support/children.js';

let t: TestDb;
let hosts: EngineHost[];
const children = new Set<ChildProcess>();
const HOUR = 3_600_000;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  hosts = [];
  await t.query(
    `create table interval_ticks (id serial, name text, worker text, pid int, started_at timestamptz default clock_timestamp(), finished_at timestamptz)`,
  );
});
afterEach(async () => {
  for (const c of children) c.kill('SIGKILL');
  children.clear();
  await Promise.all(hosts.map((h) => h.stop({ graceMs: 1000 })));
});
afterAll(() => t?.close());

/** A worker (its engine host) in this process with these interval handlers. */
async function worker(...handlers: IntervalHandler[]): Promise<EngineHost> {
  return workerOn(t.database.pool, ...handlers);
}

async function workerOn(pool: pg.Pool, ...handlers: IntervalHandler[]): Promise<EngineHost> {
  const intervals = new IntervalRegistry();
  for (const h of handlers) intervals.register(h);
  const host = createEngineHost({
    pool,
    log: createLogger('silent'),
    handlers: new HandlerRegistry(),
    recoverables: new RecoverableRegistry(),
    intervals,
    triggerRun: t.service.triggerRun,
    staleMs: 1000,
    pollMs: 50,
  });
  await host.start();
  hosts.push(host);
  return host;
}

/** Records the tick in interval_ticks (start and end on the database clock). */
function recorded(
  name: string,
  body: (signal: AbortSignal) => Promise<{ count?: number } | void> = async () => ({ count: 1 }),
): IntervalHandler {
  return {
    name,
    everyMs: HOUR,
    async run(ctx) {
      const { rows } = await t.query(`insert into interval_ticks (name, worker) values ($1, $2) returning id`, [name, ctx.workerId]);
      const out = await body(ctx.signal);
      await t.query(`update interval_ticks set finished_at = clock_timestamp() where id = $1`, [rows[0].id]);
      return out;
    },
  };
}

const stateOf = async (name: string) => (await t.query(`select * from interval_handlers where name = $1`, [name])).rows[0];
/** An installation admin sees where workers run and handler error text; tenants' keys do not. */
const installationAdmin = () => ({ ...t.actor, installationAdmin: true });
const entry = async (name: string) => (await t.service.handlers(installationAdmin(), { kind: 'INTERVAL', name }))[0]!;

describe('interval handlers', () => {
  it('runs a due tick exactly once across three workers that all have it, recording ok with its count', async () => {
    const make = () =>
      recorded('sweep', async () => {
        await new Promise((r) => setTimeout(r, 50));
        return { count: 42 };
      });
    await worker(make());
    await worker(make());
    await worker(make());
    for (let i = 1; i <= 4; i++) {
      expect((await t.service.triggerHandler(t.actor, { name: 'sweep' })).outcome).toBe('DUE_NOW');
      void Promise.all(hosts.map((h) => h.intervals.kick())); // all three race for the tick
      await eventually(async () => Number((await stateOf('sweep')).ok_runs) === i);
    }
    // Every worker polled the due row many times; each tick ran once.
    expect((await t.query(`select count(*)::int as n from interval_ticks`)).rows[0].n).toBe(4);
    const e = await entry('sweep');
    expect(e.workers).toHaveLength(3);
    expect(e.cadence).toEqual({ everyMs: HOUR, cron: null, timezone: null });
    expect(e.lastOutcome).toMatchObject({ status: 'OK', count: 42, cause: null, message: null });
    expect(e.interval).toMatchObject({ running: false, okRuns: 4, errorRuns: 0 });
    // The next tick is a period away, not due again at once.
    expect(e.interval!.nextDueAt!.getTime()).toBeGreaterThan(e.lastOutcome!.finishedAt!.getTime() + HOUR / 2);
  });

  it('records a throw as ERROR with cause HANDLER, and the next tick still runs', async () => {
    let calls = 0;
    await worker(
      recorded('flaky', async () => {
        if (++calls === 1) throw new Error('boom');
        return { count: 3 };
      }),
    );
    await t.service.triggerHandler(t.actor, { name: 'flaky' });
    await eventually(async () => Number((await stateOf('flaky')).error_runs) === 1);
    expect((await entry('flaky')).lastOutcome).toMatchObject({ status: 'ERROR', cause: 'HANDLER', message: 'Error: boom', count: null });
    await t.service.triggerHandler(t.actor, { name: 'flaky' });
    await eventually(async () => Number((await stateOf('flaky')).ok_runs) === 1);
    expect((await entry('flaky')).lastOutcome).toMatchObject({ status: 'OK', count: 3, cause: null });
  });

  it('aborts a tick past its timeout, records TIMEOUT, and ignores what it returns later', async () => {
    let aborted = false;
    let lateReturn = false;
    await worker({
      name: 'stuck',
      everyMs: HOUR,
      timeoutMs: 100,
      async run(ctx) {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        aborted = true;
        await new Promise((r) => setTimeout(r, 200));
        lateReturn = true;
        return { count: 99 };
      },
    });
    await t.service.triggerHandler(t.actor, { name: 'stuck' });
    await eventually(async () => (await stateOf('stuck')).last_cause === 'TIMEOUT');
    expect(aborted).toBe(true);
    await eventually(async () => lateReturn);
    // Freed once its handler returned (it stays running until then).
    await eventually(async () => (await stateOf('stuck')).owner === null);
    const e = await entry('stuck');
    expect(e.lastOutcome).toMatchObject({ status: 'ERROR', cause: 'TIMEOUT', message: 'ran past its timeout of 100 ms' });
    expect(e.interval).toMatchObject({ okRuns: 0, errorRuns: 1, running: false, timeoutMs: 100 });
  });

  it('keeps a tick that ignores its signal past its timeout in its slot through its grace: TIMEOUT is recorded, no next tick starts until it returns', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    // Ignores ctx.signal entirely: returns only when the test releases it, well within its grace.
    const deaf = (): IntervalHandler => ({ ...recorded('deaf', () => gate.then(() => ({ count: 1 }))), timeoutMs: 100, graceMs: HOUR });
    await worker(deaf());
    await worker(deaf());
    await t.service.triggerHandler(t.actor, { name: 'deaf' });
    await eventually(async () => (await stateOf('deaf')).last_cause === 'TIMEOUT');
    const held = await stateOf('deaf');
    expect(held.owner).not.toBeNull();
    const e = await entry('deaf');
    expect(e.lastOutcome).toMatchObject({ status: 'ERROR', cause: 'TIMEOUT' });
    expect(e.interval).toMatchObject({ running: true, errorRuns: 1 });
    // Still running: a plain trigger is refused, a forced one queues a tick after it; no worker takes it now.
    expect(await codeOf(() => t.service.triggerHandler(t.actor, { name: 'deaf' }))).toBe('CONFLICT');
    expect((await t.service.triggerHandler(t.actor, { name: 'deaf', force: true })).outcome).toBe('QUEUED_AFTER_RUNNING');
    await Promise.all(hosts.map((h) => h.intervals.kick()));
    expect(await stateOf('deaf')).toMatchObject({ owner: held.owner, epoch: held.epoch });
    expect(hosts.flatMap((h) => h.intervals.active())).toEqual(['deaf']);
    release();
    // Once it returns (its late outcome is not recorded), the queued tick runs, after it.
    await eventually(async () => Number((await stateOf('deaf')).ok_runs) === 1);
    const ticks = (await t.query(`select started_at, finished_at from interval_ticks order by id`)).rows;
    expect(ticks).toHaveLength(2);
    expect(ticks[1].started_at.getTime()).toBeGreaterThanOrEqual(ticks[0].finished_at.getTime());
    expect(await stateOf('deaf')).toMatchObject({ error_runs: 1, ok_runs: 1, overrun: false });
  });

  it('abandons a tick whose handler never settles once its timeout and grace are over: later ticks run, and it shows as abandoned and running', async () => {
    let calls = 0;
    let laterTicks = 0;
    const hung: IntervalHandler = {
      name: 'hung',
      everyMs: HOUR,
      timeoutMs: 100,
      graceMs: 200,
      // The first tick never settles, whatever its signal says; the later ones return at once.
      run: () => (++calls === 1 ? new Promise<never>(() => {}) : { count: ++laterTicks }),
    };
    const host = await worker(hung);
    await t.service.triggerHandler(t.actor, { name: 'hung' });
    await eventually(async () => Number((await stateOf('hung')).abandoned_total) === 1);
    // The slot is free although the handler still runs in this worker.
    expect(await stateOf('hung')).toMatchObject({ owner: null, overrun: false, last_cause: 'TIMEOUT', error_runs: 1 });
    expect(host.intervals.active()).toEqual([]);
    expect(host.intervals.abandoned().map((a) => a.name)).toEqual(['hung']);
    const e = await entry('hung');
    expect(e.interval).toMatchObject({ running: false, abandonedTicks: 1, abandonedRunning: 1 });
    // Later ticks run (a plain trigger is no longer refused), each recorded.
    for (let i = 1; i <= 2; i++) {
      expect((await t.service.triggerHandler(t.actor, { name: 'hung' })).outcome).toBe('DUE_NOW');
      await eventually(async () => Number((await stateOf('hung')).ok_runs) === i);
    }
    expect((await entry('hung')).lastOutcome).toMatchObject({ status: 'OK', count: 2 });
    // Still counted as running: it never settled.
    expect((await entry('hung')).interval).toMatchObject({ abandonedTicks: 1, abandonedRunning: 1 });
    // Its worker gone (stopped: its row deleted), it is running nowhere any more; another worker's sweep forgets it.
    await host.stop({ graceMs: 100 });
    hosts.splice(hosts.indexOf(host), 1);
    const other = await worker({ name: 'hung', everyMs: HOUR, run: () => ({ count: 0 }) });
    // Counted as running no more at once (its worker's row is gone); the sweep then deletes the row.
    // kick only wakes the loop, so the sweep is waited for, not assumed done.
    expect((await entry('hung')).interval).toMatchObject({ abandonedRunning: 0 });
    await other.intervals.kick();
    await eventually(async () => (await t.query(`select count(*)::int as n from interval_abandoned`)).rows[0].n === 0);
  });

  it('counts an abandoned handler that settles at last as running no more, and records nothing it returned', async () => {
    let release: () => void = () => {};
    const late = new Promise<void>((r) => (release = r));
    const host = await worker({
      name: 'slowpoke',
      everyMs: HOUR,
      timeoutMs: 100,
      graceMs: 100,
      run: async () => {
        await late;
        return { count: 77 };
      },
    });
    await t.service.triggerHandler(t.actor, { name: 'slowpoke' });
    await eventually(async () => (await entry('slowpoke')).interval?.abandonedRunning === 1);
    release();
    await eventually(async () => (await entry('slowpoke')).interval?.abandonedRunning === 0);
    expect(host.intervals.abandoned()).toEqual([]);
    expect(await stateOf('slowpoke')).toMatchObject({ ok_runs: 0, error_runs: 1, last_cause: 'TIMEOUT', abandoned_total: 1 });
    expect((await entry('slowpoke')).lastOutcome).toMatchObject({ status: 'ERROR', cause: 'TIMEOUT', count: null });
  });

  it('frees a tick that ran past its timeout when its worker dies, without recording a second outcome', async () => {
    await t.query(
      `insert into workers (id, host, pid, stale_ms, heartbeat_at) values ('ghost', 'h', 1, 1000, now() - interval '1 minute')`,
    );
    await t.query(
      `insert into interval_handlers (name, every_ms, next_due_at, owner, epoch, run_started_at, overrun, last_status, last_cause, last_error, error_runs)
       values ('orphan', $1, now() + interval '1 hour', 'ghost', 3, now() - interval '2 minutes', true, 'ERROR', 'TIMEOUT', 'ran past its timeout of 100 ms', 1)`,
      [HOUR],
    );
    await worker({ name: 'orphan', everyMs: HOUR, run: async () => ({ count: 1 }) });
    expect(await stateOf('orphan')).toMatchObject({
      owner: null,
      run_started_at: null,
      overrun: false,
      last_cause: 'TIMEOUT',
      error_runs: 1,
    });
  });

  it('refuses a trigger while running without force; with force, queues one more tick right after, never two at once', async () => {
    let release: () => void = () => {};
    let gate = new Promise<void>((r) => (release = r));
    await worker(recorded('report', () => gate.then(() => ({ count: 1 }))));
    await worker(recorded('report', () => gate.then(() => ({ count: 1 }))));
    await t.service.triggerHandler(t.actor, { name: 'report' });
    await eventually(async () => (await entry('report')).interval?.running);
    expect(await codeOf(() => t.service.triggerHandler(t.actor, { name: 'report' }))).toBe('CONFLICT');
    const forced = await t.service.triggerHandler(t.actor, { name: 'report', force: true });
    expect(forced.outcome).toBe('QUEUED_AFTER_RUNNING');
    expect(forced.handler.interval?.running).toBe(true);
    // Due now, but running: neither worker (the one running it, or the other) takes the next tick yet.
    const held = await stateOf('report');
    await Promise.all(hosts.map((h) => h.intervals.kick()));
    expect(await stateOf('report')).toMatchObject({ owner: held.owner, epoch: held.epoch });
    expect((await t.query(`select count(*)::int as n from interval_ticks`)).rows[0].n).toBe(1);
    const open = release;
    gate = Promise.resolve();
    open();
    await eventually(async () => Number((await stateOf('report')).ok_runs) === 2);
    const ticks = (await t.query(`select started_at, finished_at from interval_ticks order by id`)).rows;
    expect(ticks).toHaveLength(2);
    expect(ticks[1].started_at.getTime()).toBeGreaterThanOrEqual(ticks[0].finished_at.getTime());
    // Both triggers and the refusal are audited.
    const audit = (await t.query(`select result_code from audit_log where action = 'handler.trigger' order by id`)).rows.map(
      (r) => r.result_code,
    );
    expect(audit).toEqual(['OK', 'CONFLICT', 'OK']);
  });

  it('answers NOT_FOUND for a handler no live worker has (unknown, or only on a dead worker)', async () => {
    expect(await codeOf(() => t.service.triggerHandler(t.actor, { name: 'nowhere' }))).toBe('NOT_FOUND');
    await t.query(
      `insert into workers (id, host, pid, stale_ms, heartbeat_at, handlers) values ('ghost', 'h', 1, 1000, now() - interval '1 minute', '[{"kind":"INTERVAL","name":"haunted","everyMs":1000}]')`,
    );
    await t.query(`insert into interval_handlers (name, every_ms, next_due_at) values ('haunted', 1000, now())`);
    expect(await codeOf(() => t.service.triggerHandler(t.actor, { name: 'haunted' }))).toBe('NOT_FOUND');
    expect(await t.service.handlers(t.actor, { name: 'haunted' })).toEqual([]);
  });

  it('records a tick whose worker was SIGKILLed as CRASHED (found by another worker), then ticks again on a live worker', async () => {
    const child = spawn(process.execPath, [childProgram('interval-process')], {
      cwd: path.resolve(import.meta.dirname, '../..'),
      env: { ...process.env, DATABASE_URL: t.url, STALE_MS: '1000' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.add(child);
    await new Promise<void>((resolve) => child.stdout!.on('data', (c: Buffer) => c.toString().includes('ready') && resolve()));
    await t.service.triggerHandler(t.actor, { name: 'slow' });
    await eventually(
      async () => (await t.query(`select count(*)::int as n from interval_ticks where pid = $1`, [child.pid])).rows[0].n === 1,
      15_000,
    );
    expect((await entry('slow')).interval).toMatchObject({ running: true });
    child.kill('SIGKILL');
    const survivor = await worker({ name: 'slow', everyMs: HOUR, run: async () => ({ count: 7 }) });
    await eventually(async () => (await stateOf('slow')).last_cause === 'CRASHED', 15_000);
    const crashed = await entry('slow');
    expect(crashed.lastOutcome).toMatchObject({ status: 'ERROR', cause: 'CRASHED' });
    expect(crashed.lastOutcome!.message).toMatch(/stopped heartbeating mid-run/);
    // The dead worker is out of the catalogue.
    expect(crashed.workers.map((w) => w.id)).toEqual([survivor.id]);
    await t.service.triggerHandler(t.actor, { name: 'slow' });
    await eventually(async () => Number((await stateOf('slow')).ok_runs) === 1);
    expect((await entry('slow')).lastOutcome).toMatchObject({ status: 'OK', count: 7 });
  });

  it('is reachable over GraphQL: handlers with kind, cadence, workers and last outcome; triggerHandler', async () => {
    const host = await worker(recorded('digest', async () => ({ count: 5 })));
    const g = createTestGateway(t);
    // This file's hosts go stale after 1 s without a heartbeat (to see crashes quickly): on a
    // loaded machine one can read as not live for a moment, and the trigger is NOT_FOUND ("no
    // live worker"). The API is what this checks, so that one refusal is asked again; any other
    // error fails here, with its message.
    let trig: any;
    await eventually(async () => {
      trig = await g.gql(`mutation { triggerHandler(input: { name: "digest" }) { outcome handler { name kind } } }`);
      if (trig.errors?.[0]?.extensions?.code === 'NOT_FOUND') return false;
      expect(trig.errors).toBeUndefined();
      return true;
    }, 10_000);
    expect(trig.data.triggerHandler).toEqual({ outcome: 'DUE_NOW', handler: { name: 'digest', kind: 'INTERVAL' } });
    await eventually(async () => Number((await stateOf('digest')).ok_runs) === 1);
    const res = await g.gql(
      `{ handlers(kind: INTERVAL) { kind name cadence { everyMs cron } workers { id pid } lastOutcome { status count cause finishedAt } interval { running okRuns } } }`,
      {},
      installationAdmin(),
    );
    expect(res.data.handlers).toEqual([
      {
        kind: 'INTERVAL',
        name: 'digest',
        cadence: { everyMs: HOUR, cron: null },
        workers: [{ id: host.id, pid: process.pid }],
        lastOutcome: { status: 'OK', count: 5, cause: null, finishedAt: expect.any(String) },
        interval: { running: false, okRuns: 1 },
      },
    ]);
    const tenant = await g.gql(`{ handlers(kind: INTERVAL) { workers { id host pid } lastOutcome { status message } } }`);
    expect(tenant.data.handlers[0].workers).toEqual([{ id: expect.stringMatching(/^worker-[0-9a-f]{12}$/), host: null, pid: null }]);
    expect(JSON.stringify(tenant)).not.toContain(host.id);
    const missing = await g.gql(`mutation { triggerHandler(input: { name: "nope" }) { outcome } }`);
    expect(missing.errors![0]!.extensions!.code).toBe('NOT_FOUND');
    const bad = await g.gql(`mutation { triggerHandler(input: { name: "no spaces" }) { outcome } }`);
    expect(bad.errors![0]!.extensions!.code).toBe('VALIDATION_FAILED');
  });

  it('ticks again after writing an outcome lost its connection: the outcome is written on a later pass', async () => {
    let cuts = 1;
    const pool = hookedPool(t.database.pool, (sql) => {
      if (
        sql.startsWith('update interval_handlers set owner = null, run_started_at = null, overrun = false,\n  last_status') &&
        cuts-- > 0
      ) {
        throw new Error('Connection terminated unexpectedly');
      }
    });
    await workerOn(
      pool,
      recorded('blip', async () => ({ count: 5 })),
    );
    await t.service.triggerHandler(t.actor, { name: 'blip' });
    // Left owned by a live worker, the tick would hold the handler on every worker for good.
    await eventually(async () => Number((await stateOf('blip')).ok_runs) === 1, 5000, 'the outcome to be written');
    expect(await stateOf('blip')).toMatchObject({ owner: null, last_status: 'OK', last_count: 5 });
    await t.service.triggerHandler(t.actor, { name: 'blip' });
    await eventually(async () => Number((await stateOf('blip')).ok_runs) === 2, 5000, 'the next tick');
  });

  it('records a handler error whose text holds a NUL, and ticks again', async () => {
    let calls = 0;
    await worker(
      recorded('nul-error', async () => {
        if (++calls === 1) throw new Error('bad\u0000byte');
        return { count: 1 };
      }),
    );
    await t.service.triggerHandler(t.actor, { name: 'nul-error' });
    await eventually(async () => Number((await stateOf('nul-error')).error_runs) === 1, 5000, 'the error to be recorded');
    expect(await stateOf('nul-error')).toMatchObject({ owner: null, last_cause: 'HANDLER', last_error: 'Error: bad\ufffdbyte' });
    await t.service.triggerHandler(t.actor, { name: 'nul-error' });
    await eventually(async () => Number((await stateOf('nul-error')).ok_runs) === 1, 5000, 'the next tick');
  });

  it('hands back, uncounted, a tick taken while the worker was stopping', async () => {
    const take = holdNext('with due as materialized');
    const pool = hookedPool(t.database.pool, take.hook);
    const host = await workerOn(pool, {
      name: 'late-take',
      everyMs: HOUR,
      run: (ctx) => new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason))),
    });
    take.arm();
    await t.query(`update interval_handlers set next_due_at = now() where name = 'late-take'`);
    await eventually(async () => take.holding(), 5000, 'a take in flight');
    // stop() marks the host stopping before its first await: the take lands after that (before
    // or after the intervals' own stop is called, it is handed back the same way).
    const stopped = host.stop({ graceMs: 1000 });
    take.release();
    await stopped;
    await quietPeriod(QUIET.afterStop); // time for a take stop() did not wait for to land
    // Handed back (due at once, no outcome), not left running under a worker that is gone.
    const row = await stateOf('late-take');
    expect(row).toMatchObject({ owner: null, last_status: null, error_runs: 0, ok_runs: 0 });
    expect(host.intervals.active()).toEqual([]);
  });
});
