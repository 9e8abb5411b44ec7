/**
 * Interval handlers, beyond their cadence: on-demand handlers (run only when triggered), ticks
 * skipped while a tick ran, and triggerHandler waiting for the outcome of the tick it made due.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from '../../src/db/pool.js';
import { createLogger } from '../../src/log.js';
import { HandlerRegistry } from '../../src/service/engine/delivery/handler-registry.js';
import { createEngineHost, type EngineHost } from '../../src/service/engine/runtime/host.js';
import { IntervalRegistry, type IntervalHandler } from '../../src/service/engine/intervals/intervals.js';
import { RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { createWorker } from '../../src/service/engine/worker/worker.js';
import { createJobService, createJobServiceIn } from '../../src/service/index.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let hosts: EngineHost[];
let extra: Database[];

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  hosts = [];
  extra = [];
});
afterEach(async () => {
  await Promise.all(hosts.map((h) => h.stop({ graceMs: 1000 })));
  await Promise.all(extra.map((d) => d.close()));
});
afterAll(() => t?.close());

/** What the workers logged (each line as written: JSON). */
const logged: string[] = [];

async function worker(...handlers: IntervalHandler[]): Promise<EngineHost> {
  const intervals = new IntervalRegistry();
  for (const h of handlers) intervals.register(h);
  const host = createEngineHost({
    pool: t.database.pool,
    log: createLogger('warn', (line) => logged.push(line), 'json'),
    handlers: new HandlerRegistry(),
    recoverables: new RecoverableRegistry(),
    intervals,
    triggerRun: t.service.triggerRun,
    staleMs: 2000,
    pollMs: 50,
  });
  await host.start();
  hosts.push(host);
  return host;
}

const stateOf = async (name: string) =>
  (await t.query(`select *, next_due_at = 'infinity' as never_due from interval_handlers where name = $1`, [name])).rows[0];
const installationAdmin = () => ({ ...t.actor, installationAdmin: true });
const entry = async (name: string) => (await t.service.handlers(installationAdmin(), { kind: 'INTERVAL', name }))[0]!;
/** A promise and the function that resolves it. */
function latch() {
  let open: () => void = () => {};
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}
/** Resolves when the signal aborts (the worker stopping), so a parked tick lets the test end. */
const untilAborted = (signal: AbortSignal) =>
  new Promise<void>((r) => (signal.aborted ? r() : signal.addEventListener('abort', () => r())));

describe('on-demand interval handlers', () => {
  it('never tick on their own; a trigger runs exactly one tick, after which they wait for the next trigger', async () => {
    let runs = 0;
    const host = await worker({ name: 'reindex', onDemand: true, run: async () => ({ count: ++runs }) });
    // A periodic handler beside it, due every 50 ms: proof the worker's loop is polling.
    let beats = 0;
    const periodic = await worker({ name: 'beat', everyMs: 50, run: async () => void beats++ });
    await eventually(async () => beats >= 3, 10_000, 'the periodic handler to tick');
    await host.intervals.kick();
    await periodic.intervals.kick();
    expect(runs).toBe(0);
    expect(await stateOf('reindex')).toMatchObject({ every_ms: null, never_due: true, owner: null, epoch: 0 });
    const e = await entry('reindex');
    expect(e.cadence).toBeNull();
    expect(e.interval).toMatchObject({ onDemand: true, nextDueAt: null, running: false, okRuns: 0, skippedTicks: 0 });
    expect((await entry('beat')).interval).toMatchObject({ onDemand: false });

    const triggered = await t.service.triggerHandler(t.actor, { name: 'reindex' });
    expect(triggered.outcome).toBe('DUE_NOW');
    expect(triggered.tick).toBeNull();
    expect(triggered.handler.interval?.nextDueAt).toBeInstanceOf(Date);
    await eventually(async () => Number((await stateOf('reindex')).ok_runs) === 1);
    // Back to never due: no second tick follows.
    expect(await stateOf('reindex')).toMatchObject({ never_due: true, owner: null, last_status: 'OK', last_count: 1 });
    await host.intervals.kick();
    expect(runs).toBe(1);
  });

  it('refuses a registration with neither a period nor onDemand, or with both', () => {
    const registry = new IntervalRegistry();
    expect(() => registry.register({ name: 'vague', run: async () => {} })).toThrow(/everyMs is required \(or onDemand: true/);
    expect(() => registry.register({ name: 'both', everyMs: 1000, onDemand: true, run: async () => {} })).toThrow(
      /everyMs or onDemand, not both/,
    );
    expect(registry.list()).toEqual([]);
  });

  it('turns a periodic handler on-demand when re-registered so: its planned tick is dropped, a due one kept', async () => {
    await t.query(
      `insert into interval_handlers (name, every_ms, next_due_at) values ('later', 60000, now() + interval '1 hour'), ('due', 60000, now() - interval '1 second')`,
    );
    let dueRuns = 0;
    await worker({ name: 'later', onDemand: true, run: async () => {} }, { name: 'due', onDemand: true, run: async () => void dueRuns++ });
    expect(await stateOf('later')).toMatchObject({ every_ms: null, never_due: true });
    // The tick already due (a trigger, or an overdue period) still runs once, then none.
    await eventually(async () => dueRuns === 1);
    // never_due holds from the re-registration on; the tick's outcome is written after it ran.
    await eventually(async () => (await stateOf('due')).ok_runs === 1);
    expect(await stateOf('due')).toMatchObject({ every_ms: null, never_due: true, ok_runs: 1 });
  });
});

describe('triggered ticks and the worker', () => {
  it("start when the worker's listener hears the trigger, not at the interval runner's next poll", async () => {
    const ran: string[] = [];
    const intervals = new IntervalRegistry();
    intervals.register({ name: 'woken', onDemand: true, run: ({ workerId }) => void ran.push(workerId) });
    const log = createLogger('silent');
    const handlers = new HandlerRegistry();
    // Polls once a minute: only the notification can start the tick within the wait below.
    const host = createEngineHost({
      pool: t.database.pool,
      log,
      handlers,
      recoverables: new RecoverableRegistry(),
      intervals,
      triggerRun: t.service.triggerRun,
      staleMs: 2000,
      pollMs: 60_000,
    });
    await host.start();
    hosts.push(host);
    const worker = createWorker({ pool: t.database.pool, connectionString: t.url, handlers, log, pollMs: 60_000 });
    await worker.start();
    try {
      await eventually(async () => worker.listenMode() === 'notify', 5_000, 'the worker to listen');
      await t.service.triggerHandler(installationAdmin(), { name: 'woken' });
      await eventually(async () => ran.length === 1, 5_000, 'the triggered tick to run');
    } finally {
      await worker.stop({ graceMs: 1000 });
    }
  });
});

describe('skipped ticks', () => {
  it('with the QUEUE policy, counts the cadence ticks that came due while a tick ran, all but the one run right after it', async () => {
    const first = latch();
    let calls = 0;
    await worker({
      name: 'slow',
      everyMs: 100,
      overlap: 'QUEUE',
      timeoutMs: 60_000,
      async run(ctx) {
        // The first tick runs until the test releases it; later ones park until shutdown, so
        // no later tick ends (and counts) while the test reads.
        if (++calls === 1) await first.promise;
        else await untilAborted(ctx.signal);
        return { count: calls };
      },
    });
    await eventually(async () => (await stateOf('slow'))?.owner);
    // Let more than four periods pass on the database's clock while the first tick runs.
    await eventually(
      async () =>
        (await t.query(`select run_started_at < now() - interval '450 milliseconds' as long from interval_handlers where name = 'slow'`))
          .rows[0].long,
    );
    expect((await stateOf('slow')).skipped_ticks).toBe(0);
    first.open();
    await eventually(async () => Number((await stateOf('slow')).ok_runs) === 1);
    const row = (
      await t.query(
        `select skipped_ticks::int as skipped,
                floor(extract(epoch from last_finished_at - last_started_at) * 1000 / every_ms)::int - 1 as expected
         from interval_handlers where name = 'slow'`,
      )
    ).rows[0];
    expect(row.skipped).toBeGreaterThanOrEqual(3);
    expect(row.skipped).toBe(row.expected);
    // The coalesced tick ran right after, once.
    await eventually(async () => calls === 2);
    expect(calls).toBe(2);
    const g = createTestGateway(t);
    const res = await g.gql(`{ handlers(kind: INTERVAL, name: "slow") { interval { skippedTicks onDemand } } }`);
    expect(res.data.handlers).toEqual([{ interval: { skippedTicks: row.skipped, onDemand: false } }]);
  });

  it('by default skips every tick that came due while a tick ran: the next is the first period boundary after it, with one warning carrying running_for_ms', async () => {
    const first = latch();
    let calls = 0;
    const PERIOD = 200;
    await worker({
      name: 'lagging',
      everyMs: PERIOD,
      timeoutMs: 60_000,
      async run(ctx) {
        if (++calls === 1) await first.promise;
        else await untilAborted(ctx.signal);
        return { count: calls };
      },
    });
    await eventually(async () => (await stateOf('lagging'))?.owner);
    await eventually(
      async () =>
        (await t.query(`select run_started_at < now() - interval '900 milliseconds' as long from interval_handlers where name = 'lagging'`))
          .rows[0].long,
    );
    const warnedBefore = logged.length;
    first.open();
    await eventually(async () => Number((await stateOf('lagging')).ok_runs) === 1);
    const ended = (
      await t.query(
        `select skipped_ticks::int as skipped, last_started_at, last_finished_at, next_due_at,
                floor(extract(epoch from last_finished_at - last_started_at) * 1000 / every_ms)::int as due_while_running
         from interval_handlers where name = 'lagging'`,
      )
    ).rows[0];
    // All of them skipped (QUEUE would run one of them right after, and skip one fewer).
    expect(ended.skipped).toBeGreaterThanOrEqual(4);
    expect(ended.skipped).toBe(ended.due_while_running);
    // The next tick starts on the first boundary after the run ended, not at once.
    await eventually(async () => calls === 2);
    const second = (await t.query(`select run_started_at from interval_handlers where name = 'lagging'`)).rows[0].run_started_at as Date;
    expect(second.getTime()).toBeGreaterThanOrEqual(ended.last_started_at.getTime() + (ended.skipped + 1) * PERIOD);
    expect(second.getTime()).toBeGreaterThan(ended.last_finished_at.getTime());
    // One structured warning for the skip, with how long the tick had run.
    const warnings = logged
      .slice(warnedBefore)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.handler === 'lagging' && 'running_for_ms' in l);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 'warn', skipped: ended.skipped });
    expect(Number(warnings[0]!.running_for_ms)).toBeGreaterThanOrEqual(900);
  });

  it('a forced trigger while a tick runs still queues one tick right after it under the SKIP policy', async () => {
    const first = latch();
    let calls = 0;
    await worker({
      name: 'forced',
      everyMs: 60_000,
      timeoutMs: 60_000,
      async run(ctx) {
        if (++calls === 1) await first.promise;
        else await untilAborted(ctx.signal);
        return { count: calls };
      },
    });
    await t.service.triggerHandler(t.actor, { name: 'forced' });
    await eventually(async () => (await stateOf('forced'))?.owner);
    expect((await t.service.triggerHandler(t.actor, { name: 'forced', force: true })).outcome).toBe('QUEUED_AFTER_RUNNING');
    first.open();
    await eventually(async () => calls === 2);
    expect(await stateOf('forced')).toMatchObject({ ok_runs: 1, queued_after: false });
  });

  it("with ifRunning: SKIP, a trigger while a tick runs answers ALREADY_RUNNING with the running tick's start, and changes nothing", async () => {
    const first = latch();
    await worker({ name: 'busy', everyMs: 60_000, timeoutMs: 60_000, run: () => first.promise.then(() => ({ count: 1 })) });
    await t.service.triggerHandler(t.actor, { name: 'busy' });
    await eventually(async () => (await stateOf('busy'))?.owner);
    const before = await stateOf('busy');
    const skipped = await t.service.triggerHandler(t.actor, { name: 'busy', ifRunning: 'SKIP', wait: true });
    expect(skipped).toMatchObject({ outcome: 'ALREADY_RUNNING', tick: null });
    expect(skipped.runningSince?.getTime()).toBe(before.run_started_at.getTime());
    expect(await stateOf('busy')).toMatchObject({ epoch: before.epoch, queued_after: false, next_due_at: before.next_due_at });
    // The default is still the refusal; over GraphQL the typed answer too.
    expect(await codeOf(() => t.service.triggerHandler(t.actor, { name: 'busy' }))).toBe('CONFLICT');
    const g = createTestGateway(t);
    const res = await g.gql(
      `mutation { triggerHandler(input: { name: "busy", ifRunning: SKIP }) { outcome runningSince handler { interval { running } } } }`,
    );
    expect(res.errors).toBeUndefined();
    expect(res.data.triggerHandler).toEqual({
      outcome: 'ALREADY_RUNNING',
      runningSince: before.run_started_at.toISOString(),
      handler: { interval: { running: true } },
    });
    first.open();
    await eventually(async () => Number((await stateOf('busy')).ok_runs) === 1);
    // Nothing was queued: no second tick.
    expect((await stateOf('busy')).owner).toBeNull();
  });

  it('counts none while ticks end within their period', async () => {
    let calls = 0;
    await worker({ name: 'quick', everyMs: 300, run: async () => ({ count: ++calls }) });
    await eventually(async () => Number((await stateOf('quick'))?.ok_runs ?? 0) >= 3, 15_000);
    expect((await entry('quick')).interval).toMatchObject({ skippedTicks: 0 });
  });
});

describe('triggerHandler with wait', () => {
  it("answers with the triggered tick's outcome: status, count, duration; an error's message for installation admins only", async () => {
    let calls = 0;
    await worker({
      name: 'rebuild',
      onDemand: true,
      async run() {
        if (++calls === 2) throw new Error('index locked');
        return { count: 7 };
      },
    });
    const ok = await t.service.triggerHandler(installationAdmin(), { name: 'rebuild', wait: true });
    expect(ok.tick).toMatchObject({ state: 'FINISHED', outcome: { status: 'OK', count: 7, cause: null, message: null } });
    expect(ok.tick!.durationMs).toBe(ok.tick!.outcome!.finishedAt!.getTime() - ok.tick!.outcome!.startedAt!.getTime());
    expect(ok.tick!.outcome!.startedAt!.getTime()).toBeGreaterThanOrEqual(ok.handler.interval!.nextDueAt!.getTime());

    const failed = await t.service.triggerHandler(installationAdmin(), { name: 'rebuild', wait: true });
    expect(failed.tick).toMatchObject({
      state: 'FINISHED',
      outcome: { status: 'ERROR', cause: 'HANDLER', message: 'Error: index locked', count: null },
    });
    // A tenant's ADMIN key gets the outcome without the handler's error text.
    calls = 1;
    const tenant = await t.service.triggerHandler(t.actor, { name: 'rebuild', wait: true });
    expect(tenant.tick).toMatchObject({ state: 'FINISHED', outcome: { status: 'ERROR', cause: 'HANDLER', message: null } });
    expect(calls).toBe(2);
  });

  it('waits for the tick queued behind a running one (force), not for the running one', async () => {
    const first = latch();
    let calls = 0;
    await worker({
      name: 'export',
      onDemand: true,
      async run() {
        const n = ++calls;
        if (n === 1) await first.promise;
        return { count: n };
      },
    });
    await t.service.triggerHandler(t.actor, { name: 'export' });
    await eventually(async () => (await stateOf('export')).owner);
    // While the first runs, the queued one is not taken: a short wait answers PENDING.
    const pending = await t.service.triggerHandler(t.actor, { name: 'export', force: true, wait: true, waitTimeoutMs: 300 });
    expect(pending).toMatchObject({ outcome: 'QUEUED_AFTER_RUNNING', tick: { state: 'PENDING', outcome: null, durationMs: null } });
    // Wait again, and let the first tick end once this trigger is committed: the answer is the
    // queued tick's outcome (count 2), not the first's.
    const waiting = t.service.triggerHandler(t.actor, { name: 'export', force: true, wait: true, waitTimeoutMs: 60_000 });
    await eventually(
      async () => (await t.query(`select count(*)::int as n from audit_log where action = 'handler.trigger'`)).rows[0].n === 3,
    );
    first.open();
    expect(await waiting).toMatchObject({
      outcome: 'QUEUED_AFTER_RUNNING',
      tick: { state: 'FINISHED', outcome: { status: 'OK', count: 2 } },
    });
    expect(calls).toBe(2);
  });

  it('answers RUNNING when the wait runs out while its tick runs; the tick goes on and records its outcome', async () => {
    const gate = latch();
    await worker({ name: 'compact', onDemand: true, run: () => gate.promise.then(() => ({ count: 5 })) });
    const waited = await t.service.triggerHandler(t.actor, { name: 'compact', wait: true, waitTimeoutMs: 2000 });
    expect(waited.tick).toEqual({ state: 'RUNNING', outcome: null, durationMs: null });
    gate.open();
    await eventually(async () => (await stateOf('compact')).last_status === 'OK');
    expect((await entry('compact')).lastOutcome).toMatchObject({ status: 'OK', count: 5 });
  });

  it('holds no connection while it waits: another caller on a one-connection pool gets through meanwhile', async () => {
    const small = createDatabase({ connectionString: t.url, max: 1, applicationName: 'jobgate-one-connection' });
    extra.push(small);
    const service = createJobService({ db: small.db, pool: small.pool, defaultMaxAttempts: 5 });
    const gate = latch();
    await worker({ name: 'vacuum', onDemand: true, run: () => gate.promise.then(() => ({ count: 1 })) });
    const waiting = service.triggerHandler(t.actor, { name: 'vacuum', wait: true, waitTimeoutMs: 60_000 });
    await eventually(async () => (await stateOf('vacuum')).owner);
    // If the wait held the pool's only connection (or a transaction on it), this would queue
    // behind it until the wait ended, and the tick below would never be released in time.
    const seen = await service.handlers(t.actor, { name: 'vacuum' });
    expect(seen[0]!.interval!.running).toBe(true);
    const open = await t.query(
      `select count(*)::int as n from pg_stat_activity where application_name = 'jobgate-one-connection' and state like 'idle in transaction%'`,
    );
    expect(open.rows[0].n).toBe(0);
    gate.open();
    expect((await waiting).tick).toMatchObject({ state: 'FINISHED', outcome: { status: 'OK', count: 1 } });
  });

  it("refuses to wait inside the caller's transaction (the trigger takes effect only at its commit), leaving it usable", async () => {
    await worker({ name: 'tidy', onDemand: true, run: async () => ({ count: 1 }) });
    const client = await t.database.pool.connect();
    try {
      await client.query('begin');
      const inTx = createJobServiceIn({ defaultMaxAttempts: 5 }, client);
      const error = await inTx.triggerHandler(t.actor, { name: 'tidy', wait: true }).catch((e) => e);
      expect(error).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['wait'] }] });
      expect((await inTx.triggerHandler(t.actor, { name: 'tidy' })).outcome).toBe('DUE_NOW');
      await client.query('commit');
    } finally {
      client.release();
    }
    await eventually(async () => Number((await stateOf('tidy')).ok_runs) === 1);
  });

  it('is reachable over GraphQL, with its bounds checked', async () => {
    await worker({ name: 'digest', onDemand: true, run: async () => ({ count: 3 }) });
    const g = createTestGateway(t);
    const res = await g.gql(
      `mutation { triggerHandler(input: { name: "digest", wait: true, waitTimeoutMs: 60000 }) {
         outcome tick { state durationMs outcome { status count cause } } handler { cadence { everyMs } interval { onDemand } } } }`,
    );
    expect(res.errors).toBeUndefined();
    expect(res.data.triggerHandler).toMatchObject({
      outcome: 'DUE_NOW',
      tick: { state: 'FINISHED', outcome: { status: 'OK', count: 3, cause: null } },
      handler: { cadence: null, interval: { onDemand: true } },
    });
    expect(typeof res.data.triggerHandler.tick.durationMs).toBe('number');
    const plain = await g.gql(`mutation { triggerHandler(input: { name: "digest" }) { outcome tick { state } } }`);
    expect(plain.data.triggerHandler).toEqual({ outcome: 'DUE_NOW', tick: null });
    const tooLong = await g.gql(`mutation { triggerHandler(input: { name: "digest", wait: true, waitTimeoutMs: 600000 }) { outcome } }`);
    expect(tooLong.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(await codeOf(() => t.service.triggerHandler(t.actor, { name: 'digest', wait: true, waitTimeoutMs: 0 }))).toBe(
      'VALIDATION_FAILED',
    );
  });
});
