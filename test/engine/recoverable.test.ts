/**
 * Recoverable runs: checkpoints, pause/resume, cancellation, failures, concurrent triggers, and a
 * runner process killed mid-scan.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLogger } from '../../src/log.js';
import { outcome, RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { createRunner, type Runner } from '../../src/service/engine/runs/runner.js';
import { createTestDb, cutWhileBlocked, holdNext, hookedPool, type TestDb } from '../support/db.js';
import { QUIET, quietPeriod } from '../support/eventually.js';
import { eventually } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';
import { childProgram } from '../support/children.js';

let t: TestDb;
let registry: RecoverableRegistry;
let runners: Runner[];
const children = new Set<ChildProcess>();
let gate: Promise<void> = Promise.resolve();
let openGate: () => void = () => {};
/** Batches that have reached the gate. */
let atGate = 0;

const status = async (id: string) => (await t.service.run(t.actor, id)).status;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
  registry = new RecoverableRegistry();
  runners = [];
  atGate = 0;
  // Walks 0..n-1 in batches; after each batch waits on the test's gate (open by default).
  registry.register({
    name: 'walk',
    params: z.object({ n: z.number().int(), batch: z.number().int() }),
    async run(store, params) {
      let cursor = ((await store.loadCursor()) as { next: number } | null)?.next ?? 0;
      while (cursor < params.n) {
        if ((await store.status()) === 'CANCEL_REQUESTED') return outcome.paused({ next: cursor });
        const end = Math.min(params.n, cursor + params.batch);
        for (let id = cursor; id < end; id++)
          if (id % 5 === 0)
            await store.recordFinding({ kind: 'fifth', severity: id % 10 === 0 ? 'WARNING' : 'INFO', resourceId: String(id) });
        atGate++;
        await gate;
        await store.checkpoint({ next: end }, { processed: end - cursor, total: params.n, stats: { batches: 1, last: `#${end}` } });
        cursor = end;
      }
      return outcome.completed();
    },
  });
  registry.register({
    name: 'broken',
    // Fails at once: retries after a throw are recoverable.retry.test.ts's.
    retry: { budget: 0 },
    async run(store) {
      await store.checkpoint(Buffer.from([1, 2, 3]), { processed: 1 });
      throw new Error('disk on fire');
    },
  });
  await t.query(`create table scan_batches (run_id uuid, start_id int, pid int, at timestamptz default clock_timestamp())`);
  await t.query(`create table finding_news (run_id uuid, resource_id text, pid int)`);
});
afterEach(async () => {
  openGate();
  for (const c of children) c.kill('SIGKILL');
  await Promise.all(runners.map((r) => r.stop({ graceMs: 2000 })));
});
afterAll(() => t?.close());

/**
 * The test database's pool, with chosen statements failing the way a lost connection fails them:
 * before they reach the server, or after they committed (the answer lost on the way back).
 */
function faultyPool(failure: (sql: string) => 'before' | 'after' | undefined): pg.Pool {
  const lost = () => new Error('Connection terminated unexpectedly');
  return new Proxy(t.database.pool, {
    get(target, prop, receiver) {
      if (prop !== 'query') return Reflect.get(target, prop, receiver);
      return async (text: string | pg.QueryConfig, values?: unknown[]) => {
        const when = failure(typeof text === 'string' ? text.trim() : text.text.trim());
        if (when === 'before') throw lost();
        const result = await target.query(text as string, values);
        if (when === 'after') throw lost();
        return result;
      };
    },
  });
}

async function runner(): Promise<Runner> {
  const r = createRunner({ pool: t.database.pool, registry, log: createLogger('silent'), heartbeatMs: 100, pollMs: 50, staleMs: 1000 });
  await r.start();
  runners.push(r);
  return r;
}

describe('recoverable runs', () => {
  it('pauses on cancel and resumes from its cursor, with stats accumulating across the pause', async () => {
    gate = new Promise((r) => (openGate = r));
    await runner();
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'walk', params: { n: 100, batch: 10 } });
    await eventually(async () => atGate === 1); // in its first batch
    await t.service.cancelRun(t.actor, run.id);
    openGate();
    await eventually(async () => (await status(run.id)) === 'PAUSED');
    const paused = await t.service.run(t.actor, run.id);
    expect(paused).toMatchObject({ pauseReason: 'cancelled by an operator', pauseKind: 'CANCELLED' });
    expect(paused.processed).toBeGreaterThan(0);
    expect(paused.processed).toBeLessThan(100);
    const resumed = await t.service.triggerRun(t.actor, { force: true, name: 'walk' });
    expect(resumed).toMatchObject({ outcome: 'RESUMED', run: { id: run.id } });
    await eventually(async () => (await status(run.id)) === 'COMPLETED');
    const done = await t.service.run(t.actor, run.id);
    expect(done).toMatchObject({ processed: 100, total: 100, progress: 1, stats: { batches: 10, last: '#100' } });
    expect(done.startedAt).toEqual(run.startedAt);
    expect(JSON.parse(Buffer.from(done.cursorBase64!, 'base64').toString())).toEqual({ next: 100 });
    const { findings, counts } = await t.service.findings(t.actor, run.id);
    expect(findings).toHaveLength(20);
    expect(counts).toEqual([
      { kind: 'fifth', severity: 'INFO', count: 10 },
      { kind: 'fifth', severity: 'WARNING', count: 10 },
    ]);
  });

  it('converges concurrent triggers on one run', async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, () => t.service.triggerRun(t.actor, { force: true, name: 'walk', params: { n: 10, batch: 5 } })),
    );
    expect(new Set(results.map((r) => r.run.id)).size).toBe(1);
    expect(results.filter((r) => r.outcome === 'STARTED')).toHaveLength(1);
    expect((await t.query(`select count(*)::int as n from runs where name = 'walk'`)).rows[0].n).toBe(1);
  });

  it('completes when the cancel arrives during the last batch (nothing is left to pause)', async () => {
    gate = new Promise((r) => (openGate = r));
    await runner();
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'walk', params: { n: 10, batch: 10 } });
    await eventually(async () => atGate === 1); // in its last (and only) batch
    await t.service.cancelRun(t.actor, run.id);
    openGate();
    await eventually(async () => ['COMPLETED', 'PAUSED'].includes(await status(run.id)));
    expect(await t.service.run(t.actor, run.id)).toMatchObject({ status: 'COMPLETED', processed: 10 });
  });

  it('records a thrown error as FAILED with its cause, keeping its last checkpoint', async () => {
    await runner();
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'broken' });
    await eventually(async () => (await status(run.id)) === 'FAILED');
    const failed = await t.service.run(t.actor, run.id);
    expect(failed.error).toBe('Error: disk on fire');
    expect(failed.cursorBase64).toBe(Buffer.from([1, 2, 3]).toString('base64'));
    // A finished run is not resumed: a new trigger starts afresh.
    expect((await t.service.triggerRun(t.actor, { force: true, name: 'broken' })).outcome).toBe('STARTED');
  });

  it('fails a run whose params its handler refuses', async () => {
    await runner();
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'walk', params: { n: 'many' } });
    await eventually(async () => (await status(run.id)) === 'FAILED');
    expect((await t.service.run(t.actor, run.id)).error).toMatch(/params rejected: n:/);
  });

  // Two runner processes start (a second or more each on a loaded machine), then
  // up to 45 s of waits: the budget is theirs, so a slow start cannot time the test out half-way.
  it(
    'survives a SIGKILLed runner: paused as crashed, resumed from the last checkpoint, at most one batch replayed, no finding twice',
    { timeout: 120_000 },
    async () => {
      const child = spawn(process.execPath, [childProgram('runner-process')], {
        cwd: path.resolve(import.meta.dirname, '../..'),
        env: { ...process.env, DATABASE_URL: t.url, STALE_MS: '1000' },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      children.add(child);
      await new Promise<void>((resolve) => child.stdout!.on('data', (c: Buffer) => c.toString().includes('ready') && resolve()));
      const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'scan', params: { n: 400, batch: 20, ms: 40 } });
      await eventually(async () => (await t.service.run(t.actor, run.id)).processed >= 100, 15_000);
      child.kill('SIGKILL');
      const atKill = (await t.service.run(t.actor, run.id)).processed;
      // The sweep (any runner's: here one in this process) finds it stale and pauses it with the reason.
      await runner();
      await eventually(async () => (await status(run.id)) === 'PAUSED', 10_000);
      expect((await t.service.run(t.actor, run.id)).pauseReason).toMatch(/stopped heartbeating/);
      const crashed = await t.service.run(t.actor, run.id);
      expect(crashed.pauseKind).toBe('CRASHED');
      // The last checkpoint the killed process made: where the resumed scan must start.
      const checkpoint = (JSON.parse(Buffer.from(crashed.cursorBase64!, 'base64').toString()) as { next: number }).next;
      expect(checkpoint).toBe(crashed.processed);
      await Promise.all(runners.splice(0).map((r) => r.stop()));
      // Resume on a fresh runner process.
      const second = spawn(process.execPath, [childProgram('runner-process')], {
        cwd: path.resolve(import.meta.dirname, '../..'),
        env: { ...process.env, DATABASE_URL: t.url },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      children.add(second);
      await new Promise<void>((resolve) => second.stdout!.on('data', (c: Buffer) => c.toString().includes('ready') && resolve()));
      expect((await t.service.triggerRun(t.actor, { force: true, name: 'scan' })).outcome).toBe('RESUMED');
      await eventually(async () => (await status(run.id)) === 'COMPLETED', 20_000);
      const done = await t.service.run(t.actor, run.id);
      expect(done.processed).toBe(400);
      // The resumed process starts exactly at the last checkpoint and walks on batch by batch.
      const startsOf = async (pid: number) =>
        (await t.query('select start_id from scan_batches where run_id = $1 and pid = $2 order by at', [run.id, pid])).rows.map(
          (r) => r.start_id as number,
        );
      const before = await startsOf(child.pid!);
      const after = await startsOf(second.pid!);
      expect(after).toEqual(Array.from({ length: (400 - checkpoint) / 20 }, (_, i) => checkpoint + i * 20));
      // The killed process got at most one batch past its last checkpoint: at most one batch is replayed.
      const replayed = before.filter((s) => after.includes(s));
      expect(replayed.length).toBeLessThanOrEqual(1);
      expect(before.filter((s) => s >= checkpoint)).toEqual(replayed);
      expect(checkpoint).toBeGreaterThanOrEqual(atKill);
      // Across both processes, recordFinding answered "new" at most once per resource, replay included.
      const news = (
        await t.query(`select resource_id, count(*)::int as n from finding_news where run_id = $1 group by resource_id`, [run.id])
      ).rows;
      expect(news.filter((r) => r.n !== 1)).toEqual([]);
      // Every multiple of 7 was found. One the killed process recorded just before dying (its note in
      // finding_news lost with it) was answered "not new" on replay: only the replayed batch can lack a note.
      const multiples = Array.from({ length: 400 }, (_, i) => i).filter((i) => i % 7 === 0);
      const found = (await t.query(`select resource_id from findings where run_id = $1`, [run.id])).rows.map((r) => Number(r.resource_id));
      expect(found.sort((a, b) => a - b)).toEqual(multiples);
      const noted = new Set(news.map((r) => Number(r.resource_id)));
      expect(multiples.filter((m) => !noted.has(m) && !(m >= checkpoint && m < checkpoint + 20))).toEqual([]);
    },
  );

  it("judges a run's staleness by its owner's window, not by the sweeping runner's", async () => {
    gate = new Promise((r) => (openGate = r));
    // The owner heartbeats rarely and has a long window; the sweeper has a short one.
    const owner = createRunner({
      pool: t.database.pool,
      registry,
      log: createLogger('silent'),
      heartbeatMs: 60_000,
      pollMs: 50,
      staleMs: 300_000,
    });
    await owner.start();
    runners.push(owner);
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'walk', params: { n: 20, batch: 10 } });
    await eventually(async () => atGate === 1);
    // Silent for 5 s: past the sweeper's 1 s window, well inside its owner's 300 s.
    await t.query(`update runs set heartbeat_at = now() - interval '5 seconds' where id = $1`, [run.id]);
    await runner(); // staleMs 1000; its start runs the sweep once before it resolves
    expect(await status(run.id)).toBe('RUNNING');
    // Past the owner's own window, any runner's sweep declares it crashed.
    await t.query(`update runs set heartbeat_at = now() - interval '301 seconds' where id = $1`, [run.id]);
    runners[1]!.kick();
    await eventually(async () => (await status(run.id)) === 'PAUSED');
    expect((await t.service.run(t.actor, run.id)).pauseReason).toMatch(/stopped heartbeating/);
  });

  it("answers CANCEL_REQUESTED from status() once the run is no longer this runner's (taken over, or paused)", async () => {
    const seen: string[] = [];
    registry.register({
      name: 'poller',
      async run(store) {
        seen.push(await store.status());
        atGate++;
        await gate;
        seen.push(await store.status());
        return outcome.completed();
      },
    });
    gate = new Promise((r) => (openGate = r));
    await runner();
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'poller' });
    await eventually(async () => atGate === 1);
    // What a sweep, a resume and a take by another runner leave: RUNNING again, under a new owner and epoch.
    await t.query(`update runs set owner = 'another-runner', epoch = epoch + 1 where id = $1`, [run.id]);
    openGate();
    await eventually(async () => seen.length === 2);
    expect(seen).toEqual(['RUNNING', 'CANCEL_REQUESTED']);
    // The old runner recorded nothing over the new owner's run.
    expect((await t.query(`select status, owner from runs where id = $1`, [run.id])).rows[0]).toEqual({
      status: 'RUNNING',
      owner: 'another-runner',
    });

    // Swept and not resumed: PAUSED, unowned. The handler is told to stop, not shown PAUSED.
    seen.length = 0;
    atGate = 0;
    gate = new Promise((r) => (openGate = r));
    await t.query(`update runs set status = 'COMPLETED', owner = null, finished_at = now() where id = $1`, [run.id]);
    const second = await t.service.triggerRun(t.actor, { force: true, name: 'poller' });
    await eventually(async () => atGate === 1);
    await t.query(
      `update runs set status = 'PAUSED', owner = null, pause_kind = 'CRASHED', pause_reason = 'its worker stopped heartbeating' where id = $1`,
      [second.run.id],
    );
    openGate();
    await eventually(async () => seen.length === 2);
    expect(seen).toEqual(['RUNNING', 'CANCEL_REQUESTED']);
    // Its "completed" is not recorded over the pause.
    await eventually(async () => runners[0]!.active() === 0);
    expect(await status(second.run.id)).toBe('PAUSED');
  });

  it("records no finding once the run is no longer this runner's, and tells the handler so", async () => {
    const thrown: string[] = [];
    registry.register({
      name: 'late-finder',
      async run(store) {
        await store.recordFinding({ kind: 'k', severity: 'INFO', resourceId: 'before' });
        atGate++;
        await gate;
        try {
          await store.recordFinding({ kind: 'k', severity: 'INFO', resourceId: 'after' });
        } catch (error) {
          thrown.push((error as Error).name);
          throw error;
        }
        return outcome.completed();
      },
    });
    gate = new Promise((r) => (openGate = r));
    await runner();
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'late-finder' });
    await eventually(async () => atGate === 1);
    await t.query(`update runs set owner = 'another-runner', epoch = epoch + 1 where id = $1`, [run.id]);
    openGate();
    await eventually(async () => thrown.length === 1);
    expect(thrown).toEqual(['RunLostError']);
    expect((await t.query(`select resource_id from findings where run_id = $1 order by resource_id`, [run.id])).rows).toEqual([
      { resource_id: 'before' },
    ]);
    await eventually(async () => runners[0]!.active() === 0);
    expect((await t.query(`select status, owner from runs where id = $1`, [run.id])).rows[0]).toEqual({
      status: 'RUNNING',
      owner: 'another-runner',
    });
  });

  it('hands a run back, to resume from its last checkpoint, when a checkpoint loses its database connection (not FAILED)', async () => {
    const starts: number[] = [];
    registry.register({
      name: 'db-blip',
      async run(store) {
        let next = ((await store.loadCursor()) as { next: number } | null)?.next ?? 0;
        starts.push(next);
        for (; next < 3; next++) {
          atGate++;
          await gate;
          await store.checkpoint({ next: next + 1 }, { processed: 1, total: 3 });
        }
        return outcome.completed();
      },
    });
    const logs: string[] = [];
    const r = createRunner({
      pool: t.database.pool,
      registry,
      log: createLogger('debug', (l) => logs.push(l)),
      heartbeatMs: 100,
      pollMs: 50,
      staleMs: 1000,
    });
    await r.start();
    runners.push(r);
    gate = new Promise((res) => (openGate = res));
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'db-blip' });
    await eventually(async () => atGate === 1);
    // The first checkpoint waits behind a lock on the run's row, and its connection is cut.
    await cutWhileBlocked(t, { sql: 'select 1 from runs where id = $1 for update', values: [run.id] }, 'update runs set cursor%', openGate);
    await eventually(async () => (await status(run.id)) === 'COMPLETED', 10_000, 'the run to complete after its hand-back');
    expect(starts).toEqual([0, 0]); // taken again from its last checkpoint (none had committed)
    expect(logs.some((l) => l.includes('lost its database mid-run'))).toBe(true);
    expect((await t.query(`select error, processed from runs where id = $1`, [run.id])).rows[0]).toEqual({ error: null, processed: 3 });
  });

  it('writes the hand-back once the database answers again, when its first tries meet the same outage (not left to be swept as crashed)', async () => {
    const starts: number[] = [];
    registry.register({
      name: 'outage-end',
      async run(store) {
        const next = ((await store.loadCursor()) as { next: number } | null)?.next ?? 0;
        starts.push(next);
        await store.checkpoint({ next: 1 }, { processed: 1, total: 1 });
        return outcome.completed();
      },
    });
    // The first checkpoint meets an outage, and so do the first three tries of the hand-back.
    let checkpoints = 0;
    let handBacks = 0;
    const cut = faultyPool((sql) => {
      if (sql.startsWith('update runs set cursor') && checkpoints++ === 0) return 'before';
      if (sql.startsWith('update runs set owner = null') && handBacks++ < 3) return 'before';
      return undefined;
    });
    const logs: string[] = [];
    // A sweep long after the test: only the hand-back can give the run back in time.
    const r = createRunner({
      pool: cut,
      registry,
      log: createLogger('debug', (l) => logs.push(l)),
      heartbeatMs: 100,
      pollMs: 50,
      staleMs: 60_000,
    });
    await r.start();
    runners.push(r);
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'outage-end' });
    await eventually(async () => (await status(run.id)) === 'COMPLETED', 15_000, 'the run to complete after its hand-back');
    expect(handBacks).toBe(4);
    expect(starts).toEqual([0, 0]); // taken again from its last checkpoint (none had committed)
    expect((await t.query(`select pause_kind, error, processed from runs where id = $1`, [run.id])).rows[0]).toEqual({
      pause_kind: null,
      error: null,
      processed: 1,
    });
    expect(logs.filter((l) => l.includes('recording the outcome of run'))).toEqual([]);
  });

  it('backs off between takes of a run whose checkpoints keep losing the database (no loop of takes)', async () => {
    const takes: number[] = [];
    registry.register({
      name: 'always-cut',
      async run(store) {
        takes.push(Date.now());
        await store.checkpoint({ next: 1 }, { processed: 1 });
        return outcome.completed();
      },
    });
    const cut = faultyPool((sql) => (sql.startsWith('update runs set cursor') ? 'before' : undefined));
    const r = createRunner({ pool: cut, registry, log: createLogger('silent'), heartbeatMs: 100, pollMs: 20, staleMs: 10_000 });
    await r.start();
    runners.push(r);
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'always-cut' });
    await eventually(async () => takes.length >= 3, 15_000, 'a third take');
    // Taken at once, then no sooner than 1 s after its hand-back, then no sooner than 2 s after
    // the next: each hand-back comes after its take started, so a gap between two takes' starts
    // is never shorter than the backoff, however slow the machine (a loop of takes would be ms).
    expect(takes[1]! - takes[0]!).toBeGreaterThanOrEqual(1000);
    expect(takes[2]! - takes[1]!).toBeGreaterThanOrEqual(2000);
    const row = (await t.query(`select status, error, outage_hand_backs, processed from runs where id = $1`, [run.id])).rows[0];
    expect(row).toMatchObject({ status: 'RUNNING', error: null, processed: 0 });
    expect(row.outage_hand_backs).toBeGreaterThanOrEqual(2);
  });

  it('keeps the cursor a checkpoint committed even when its answer was lost: resumed past it, nothing counted twice', async () => {
    const starts: number[] = [];
    registry.register({
      name: 'lost-answer',
      async run(store) {
        let next = ((await store.loadCursor()) as { next: number } | null)?.next ?? 0;
        starts.push(next);
        for (; next < 3; next++) await store.checkpoint({ next: next + 1 }, { processed: 1, total: 3, stats: { batches: 1 } });
        return outcome.completed();
      },
    });
    let checkpoints = 0;
    // The second checkpoint commits, and its answer is lost.
    const cut = faultyPool((sql) => (sql.startsWith('update runs set cursor') && ++checkpoints === 2 ? 'after' : undefined));
    const r = createRunner({ pool: cut, registry, log: createLogger('silent'), heartbeatMs: 100, pollMs: 20, staleMs: 10_000 });
    await r.start();
    runners.push(r);
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'lost-answer' });
    await eventually(async () => (await status(run.id)) === 'COMPLETED', 10_000, 'the run to complete');
    expect(starts).toEqual([0, 2]);
    expect((await t.query(`select processed, total, stats from runs where id = $1`, [run.id])).rows[0]).toEqual({
      processed: 3,
      total: 3,
      stats: { batches: 3 },
    });
  });

  it("cancelRun on a run paused by a crash makes it an operator's pause (CANCELLED), which an operator trigger still resumes", async () => {
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'walk', params: { n: 10, batch: 10 } });
    await t.query(
      `update runs set status = 'PAUSED', pause_kind = 'CRASHED', pause_reason = 'its worker stopped heartbeating at x' where id = $1`,
      [run.id],
    );
    const cancelled = await t.service.cancelRun(t.actor, run.id);
    expect(cancelled).toMatchObject({
      status: 'PAUSED',
      pauseKind: 'CANCELLED',
      pauseReason: 'cancelled by an operator (was: its worker stopped heartbeating at x)',
    });
    expect((await t.service.triggerRun(t.actor, { force: true, name: 'walk' }, { resumeCancelled: false })).outcome).toBe('HELD');
    expect(await t.service.triggerRun(t.actor, { force: true, name: 'walk' })).toMatchObject({
      outcome: 'RESUMED',
      run: { status: 'RUNNING', pauseKind: null },
    });
  });

  it('is reachable over GraphQL: triggerRun, run with cursor, progress and findings, cancelRun', async () => {
    const g = createTestGateway(t);
    const trig = await g.gql(
      `mutation { triggerRun(input: { name: "walk", force: true, params: { n: 20, batch: 10 } }) { outcome run { id status } } }`,
    );
    expect(trig.data.triggerRun.outcome).toBe('STARTED');
    await runner();
    const id = trig.data.triggerRun.run.id;
    await eventually(async () => (await status(id)) === 'COMPLETED');
    const res = await g.gql(
      `query ($id: ID!) { run(id: $id) { status processed total progress cursor stats findings(severity: WARNING) { nodes { resourceId } counts { severity count } } } }`,
      { id },
    );
    expect(res.data.run).toMatchObject({ status: 'COMPLETED', processed: 20, total: 20, progress: 1, stats: { batches: 2 } });
    expect(res.data.run.findings.nodes.map((n: { resourceId: string }) => n.resourceId)).toEqual(['0', '10']);
    const cancel = await g.gql(`mutation ($id: ID!) { cancelRun(id: $id) { id } }`, { id });
    expect(cancel.errors![0]!.extensions!.code).toBe('CONFLICT');
  });

  it('ends at once as FAILED, saying why, a run whose outcome cannot be stored (not left to be swept as crashed)', async () => {
    registry.register({ name: 'no-outcome', run: async () => undefined as never });
    registry.register({
      name: 'cyclic-pause',
      async run(store) {
        await store.checkpoint({ next: 1 }, { processed: 1 });
        const cursor: Record<string, unknown> = {};
        cursor.self = cursor;
        return outcome.paused(cursor);
      },
    });
    registry.register({
      name: 'nul-error',
      retry: { budget: 0 },
      async run() {
        throw new Error('bad\u0000byte');
      },
    });
    await runner();
    const ids = await Promise.all(
      ['no-outcome', 'cyclic-pause', 'nul-error'].map(async (name) => (await t.service.triggerRun(t.actor, { name, force: true })).run.id),
    );
    // Left owned with no heartbeat, each would be swept a second later, PAUSED as CRASHED.
    const ended = await Promise.all(
      ids.map((id) => eventually(async () => (['FAILED', 'PAUSED'].includes(await status(id)) ? t.service.run(t.actor, id) : null), 5000)),
    );
    expect(ended.map((r) => r.status)).toEqual(['FAILED', 'FAILED', 'FAILED']);
    expect(ended[0]!.error).toMatch(/returned undefined, not an outcome/);
    expect(ended[1]!.error).toMatch(/^ValidationError: cursor: cannot be stored as JSON \(Converting circular structure/);
    // Its last good checkpoint is kept.
    expect(JSON.parse(Buffer.from(ended[1]!.cursorBase64!, 'base64').toString())).toEqual({ next: 1 });
    expect(ended[2]!.error).toBe('Error: bad\ufffdbyte');
  });

  it('refuses a checkpoint it cannot store (no cursor, a NUL in stats, a count that is not a number) with VALIDATION_FAILED, keeping the last good one', async () => {
    const refused: { code?: string; issues?: { path: unknown[] }[] }[] = [];
    registry.register({
      name: 'bad-checkpoint',
      async run(store) {
        await store.checkpoint({ next: 1 }, { processed: 1, stats: { seen: 1 } });
        const bad: [unknown, { processed: number; stats?: Record<string, unknown> }][] = [
          [undefined, { processed: 1, stats: { seen: 1 } }],
          [{ next: 2 }, { processed: 1, stats: { note: 'a\u0000b' } }],
          [{ next: 2 }, { processed: Number.NaN }],
        ];
        for (const [cursor, progress] of bad) await store.checkpoint(cursor, progress).catch((error) => refused.push(error));
        return outcome.paused();
      },
    });
    await runner();
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'bad-checkpoint' });
    await eventually(async () => (await status(run.id)) === 'PAUSED');
    expect(refused.map((e) => [e.code, e.issues?.[0]?.path])).toEqual([
      ['VALIDATION_FAILED', ['cursor']],
      ['VALIDATION_FAILED', ['stats', 'note']],
      ['VALIDATION_FAILED', ['processed']],
    ]);
    const paused = await t.service.run(t.actor, run.id);
    expect(paused).toMatchObject({ processed: 1, stats: { seen: 1 }, pauseKind: 'HANDLER' });
    expect(JSON.parse(Buffer.from(paused.cursorBase64!, 'base64').toString())).toEqual({ next: 1 });
  });

  it('hands back a run it took while stopping, rather than run it on after stop()', async () => {
    const take = holdNext('update runs r set owner = $1');
    const pool = hookedPool(t.database.pool, take.hook);
    const r = createRunner({ pool, registry, log: createLogger('silent'), heartbeatMs: 100, pollMs: 50, staleMs: 1000 });
    await r.start();
    runners.push(r);
    take.arm();
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'walk', params: { n: 1_000_000, batch: 10 } });
    await eventually(async () => take.holding(), 5000, 'a take in flight');
    // stop() marks the runner stopping before its first await: the take lands after that.
    const stopped = r.stop({ graceMs: 2000 });
    take.release();
    await stopped;
    await quietPeriod(QUIET.afterStop); // time for a take stop() did not wait for to land
    expect((await t.query(`select status, owner from runs where id = $1`, [run.id])).rows[0]).toEqual({ status: 'RUNNING', owner: null });
    expect(r.active()).toBe(0);
  });

  it('keeps a run it takes again in its count while its earlier execution of that run winds down', async () => {
    let second: () => void = () => {};
    const secondGate = new Promise<void>((res) => (second = res));
    let calls = 0;
    let woundDown = false;
    registry.register({
      name: 'retaken',
      async run(store) {
        const mine = ++calls;
        atGate++;
        await (mine === 1 ? gate : secondGate);
        await store.status();
        if (mine === 1) woundDown = true;
        return outcome.completed();
      },
    });
    gate = new Promise((res) => (openGate = res));
    const r = await runner();
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'retaken' });
    await eventually(async () => atGate === 1);
    // What a sweep (a heartbeat late) and a resume leave: RUNNING and unowned; the same runner takes it again.
    await t.query(`update runs set owner = null where id = $1`, [run.id]);
    await eventually(async () => atGate === 2);
    openGate();
    await eventually(async () => woundDown);
    await quietPeriod(QUIET.claim);
    expect(r.active()).toBe(1);
    second();
    await eventually(async () => (await status(run.id)) === 'COMPLETED');
    await eventually(async () => r.active() === 0);
  });

  it('pauses at once, as cancelled, a run no runner holds (its handler may be registered nowhere)', async () => {
    const { run } = await t.service.triggerRun(t.actor, { force: true, name: 'registered-nowhere' });
    // No runner will ever take it to see a CANCEL_REQUESTED: asked to stop, it must stop now.
    expect(await t.service.cancelRun(t.actor, run.id)).toMatchObject({
      status: 'PAUSED',
      pauseKind: 'CANCELLED',
      pauseReason: 'cancelled by an operator',
    });
    expect((await t.service.triggerRun(t.actor, { force: true, name: 'registered-nowhere' }, { resumeCancelled: false })).outcome).toBe(
      'HELD',
    );
    expect((await t.service.triggerRun(t.actor, { force: true, name: 'registered-nowhere' })).outcome).toBe('RESUMED');
  });
});
