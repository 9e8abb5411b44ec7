/**
 * The periodic handler contract: what a tick returns (`{ count, extra }`, a bare count, nothing),
 * kept and served over the library and GraphQL; a trigger's `force` reaching the handler, apart
 * from queueing a tick behind a running one (`ifRunning: QUEUE`); and each tick's one structured
 * log line.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { HandlerRegistry } from '../../src/service/engine/delivery/handler-registry.js';
import { createEngineHost, type EngineHost } from '../../src/service/engine/runtime/host.js';
import { IntervalRegistry, type IntervalContext, type IntervalHandler } from '../../src/service/engine/intervals/intervals.js';
import { MAX_EXTRA_BYTES, okOutcome } from '../../src/service/engine/intervals/tick-outcome.js';
import { RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let hosts: EngineHost[];
/** What the workers logged, each line parsed (JSON lines). */
let logged: Record<string, unknown>[];

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  hosts = [];
  logged = [];
});
afterEach(async () => {
  await Promise.all(hosts.map((h) => h.stop({ graceMs: 1000 })));
});
afterAll(() => t?.close());

async function worker(...handlers: IntervalHandler[]): Promise<EngineHost> {
  const intervals = new IntervalRegistry();
  for (const h of handlers) intervals.register(h);
  const host = createEngineHost({
    pool: t.database.pool,
    log: createLogger('info', (line) => logged.push(JSON.parse(line) as Record<string, unknown>), 'json'),
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

const stateOf = async (name: string) => (await t.query(`select * from interval_handlers where name = $1`, [name])).rows[0];
const installationAdmin = () => ({ ...t.actor, installationAdmin: true });
const ticksOf = (name: string) => logged.filter((l) => l.kind === 'interval' && l.handler === name && 'outcome' in l);
function latch() {
  let open: () => void = () => {};
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

describe("a tick's outcome", () => {
  it('keeps the extra JSON a handler returns beside its count, served by the library and over GraphQL (installation admins only)', async () => {
    const extra = { scanned: 12, oldest: '2026-01-01', skipped: ['a', 'b'], nested: { ok: true } };
    await worker({ name: 'report', onDemand: true, run: async () => ({ count: 3, extra }) });
    const done = await t.service.triggerHandler(installationAdmin(), { name: 'report', wait: true });
    expect(done.tick).toMatchObject({ state: 'FINISHED', outcome: { status: 'OK', count: 3, extra } });
    expect((await stateOf('report')).last_extra).toEqual(extra);
    expect((await t.service.handlers(installationAdmin(), { kind: 'INTERVAL', name: 'report' }))[0]!.lastOutcome).toMatchObject({
      count: 3,
      extra,
    });
    // A tenant's key reads the count, not what the installation-wide handler said.
    expect((await t.service.handlers(t.actor, { kind: 'INTERVAL', name: 'report' }))[0]!.lastOutcome).toMatchObject({
      count: 3,
      extra: null,
    });
    const g = createTestGateway(t);
    const query = `{ handlerConnection(kind: INTERVAL, name: "report") { edges { node { lastOutcome { status count extra } } } } }`;
    const admin = await g.gql(query, undefined, installationAdmin());
    expect(admin.errors).toBeUndefined();
    expect(admin.data.handlerConnection.edges[0].node.lastOutcome).toEqual({ status: 'OK', count: 3, extra });
    expect((await g.gql(query)).data.handlerConnection.edges[0].node.lastOutcome).toEqual({ status: 'OK', count: 3, extra: null });
    const waited = await g.gql(
      `mutation { triggerHandler(input: { name: "report", wait: true }) { tick { outcome { count extra } } } }`,
      undefined,
      installationAdmin(),
    );
    expect(waited.data.triggerHandler.tick.outcome).toEqual({ count: 3, extra });
  });

  it('takes a bare number as the count and nothing as an OK with neither; an error clears the last extra', async () => {
    let calls = 0;
    await worker({
      name: 'legacy',
      onDemand: true,
      // Handlers written before `extra`: a number, nothing, then the object form.
      run: async () => {
        calls++;
        if (calls === 1) return 5 as never;
        if (calls === 2) return;
        if (calls === 3) return { count: 1, extra: 'kept' };
        throw new Error('broke');
      },
    });
    const run = async () => (await t.service.triggerHandler(installationAdmin(), { name: 'legacy', wait: true })).tick!.outcome!;
    expect(await run()).toMatchObject({ status: 'OK', count: 5, extra: null });
    expect(await run()).toMatchObject({ status: 'OK', count: null, extra: null });
    expect(await run()).toMatchObject({ status: 'OK', count: 1, extra: 'kept' });
    expect(await run()).toMatchObject({ status: 'ERROR', cause: 'HANDLER', count: null, extra: null });
    expect((await stateOf('legacy')).last_extra).toBeNull();
  });

  it('keeps an extra Postgres cannot hold as is: NULs replaced, a cycle named, an oversized one summarised', () => {
    expect(JSON.parse(okOutcome({ extra: { 'k\u0000': 'v\u0000' } }).extra!)).toEqual({ 'k\ufffd': 'v\ufffd' });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(JSON.parse(okOutcome({ count: 1, extra: cyclic }).extra!)).toHaveProperty('unserializable');
    const big = okOutcome({ extra: 'x'.repeat(MAX_EXTRA_BYTES + 1) });
    expect(JSON.parse(big.extra!)).toEqual({ truncated: true, bytes: MAX_EXTRA_BYTES + 3 });
    expect(okOutcome({ count: -2.5, extra: undefined })).toEqual({ count: 0, extra: null });
  });

  it('stores a NUL-laden extra a real handler returns, and the tick is OK', async () => {
    await worker({ name: 'nul', onDemand: true, run: async () => ({ count: 1, extra: { note: 'a\u0000b' } }) });
    const done = await t.service.triggerHandler(installationAdmin(), { name: 'nul', wait: true });
    expect(done.tick!.outcome).toMatchObject({ status: 'OK', extra: { note: 'a\ufffdb' } });
  });
});

describe("a trigger's force", () => {
  it('reaches the handler as ctx.force for the tick it made due only; cadence and plain triggers run unforced', async () => {
    const seen: boolean[] = [];
    await worker({ name: 'warm', onDemand: true, run: async (ctx: IntervalContext) => void seen.push(ctx.force) });
    await t.service.triggerHandler(t.actor, { name: 'warm', wait: true });
    await t.service.triggerHandler(t.actor, { name: 'warm', force: true, wait: true });
    await t.service.triggerHandler(t.actor, { name: 'warm', wait: true });
    expect(seen).toEqual([false, true, false]);
    expect((await stateOf('warm')).force_next).toBe(false);
  });

  it('is apart from queueing behind a running tick: QUEUE without force queues an unforced tick, force with SKIP or REFUSE queues none', async () => {
    const first = latch();
    const seen: boolean[] = [];
    await worker({
      name: 'sync',
      onDemand: true,
      async run(ctx) {
        seen.push(ctx.force);
        if (seen.length === 1) await first.promise;
      },
    });
    await t.service.triggerHandler(t.actor, { name: 'sync' });
    await eventually(async () => (await stateOf('sync'))?.owner);
    const skipped = await t.service.triggerHandler(t.actor, { name: 'sync', force: true, ifRunning: 'SKIP' });
    expect(skipped.outcome).toBe('ALREADY_RUNNING');
    expect(skipped.runningSince).toBeInstanceOf(Date);
    expect(await codeOf(() => t.service.triggerHandler(t.actor, { name: 'sync', force: true, ifRunning: 'REFUSE' }))).toBe('CONFLICT');
    expect(await stateOf('sync')).toMatchObject({ queued_after: false, force_next: false });
    const queued = await t.service.triggerHandler(t.actor, { name: 'sync', ifRunning: 'QUEUE' });
    expect(queued.outcome).toBe('QUEUED_AFTER_RUNNING');
    first.open();
    await eventually(async () => seen.length === 2 && (await stateOf('sync')).owner === null);
    expect(seen).toEqual([false, false]);
  });

  it('alone, while a tick runs, still queues one more as it always did: that tick runs forced (also over GraphQL)', async () => {
    const first = latch();
    const seen: boolean[] = [];
    await worker({
      name: 'rebuild',
      onDemand: true,
      async run(ctx) {
        seen.push(ctx.force);
        if (seen.length === 1) await first.promise;
      },
    });
    await t.service.triggerHandler(t.actor, { name: 'rebuild' });
    await eventually(async () => (await stateOf('rebuild'))?.owner);
    const g = createTestGateway(t);
    const res = await g.gql(`mutation { triggerHandler(input: { name: "rebuild", force: true }) { outcome runningSince } }`);
    expect(res.errors).toBeUndefined();
    expect(res.data.triggerHandler.outcome).toBe('QUEUED_AFTER_RUNNING');
    expect(await stateOf('rebuild')).toMatchObject({ queued_after: true, force_next: true });
    first.open();
    await eventually(async () => seen.length === 2 && (await stateOf('rebuild')).owner === null);
    expect(seen).toEqual([false, true]);
  });
});

describe("a tick's log line", () => {
  it('says handler, outcome, cause, count, elapsed_ms and extra, once per tick, for OK, a throw and a timeout', async () => {
    let calls = 0;
    await worker({
      name: 'audit',
      onDemand: true,
      timeoutMs: 200,
      graceMs: 60_000,
      async run(ctx) {
        calls++;
        if (calls === 1) return { count: 4, extra: { tables: 2 } };
        if (calls === 2) throw new Error('lock timeout');
        // Stops when its signal fires, as a handler should.
        await new Promise<void>((r) => ctx.signal.addEventListener('abort', () => r()));
      },
    });
    await t.service.triggerHandler(t.actor, { name: 'audit', wait: true });
    await t.service.triggerHandler(t.actor, { name: 'audit', wait: true });
    await t.service.triggerHandler(t.actor, { name: 'audit', wait: true });
    await eventually(async () => (await stateOf('audit')).owner === null);
    const lines = ticksOf('audit');
    expect(lines.map((l) => [l.level, l.outcome, l.cause, l.count, l.extra])).toEqual([
      ['info', 'OK', null, 4, { tables: 2 }],
      ['warn', 'ERROR', 'HANDLER', null, null],
      ['warn', 'ERROR', 'TIMEOUT', null, null],
    ]);
    for (const l of lines) expect(typeof l.elapsed_ms).toBe('number');
    expect(lines[2]!.elapsed_ms as number).toBeGreaterThanOrEqual(200);
    expect(String(lines[1]!.msg)).toContain('lock timeout');
  });
});
