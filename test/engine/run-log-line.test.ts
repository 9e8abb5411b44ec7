/**
 * A recoverable run's one structured log line per take, from a real engine host: handler, outcome,
 * cause, completed/paused, the items it has processed and its stats (every take's), the time it ran
 * and, when it paused, its cursor.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { HandlerRegistry } from '../../src/service/engine/delivery/handler-registry.js';
import { IntervalRegistry } from '../../src/service/engine/intervals/intervals.js';
import { createEngineHost, type EngineHost } from '../../src/service/engine/runtime/host.js';
import { outcome, RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';

let t: TestDb;
let host: EngineHost;
const logged: Record<string, unknown>[] = [];

beforeAll(async () => {
  t = await createTestDb();
  const recoverables = new RecoverableRegistry();
  recoverables.register({
    name: 'logged.scan',
    async run(store, params: { stopAt?: number; fail?: boolean }) {
      const from = ((await store.loadCursor()) as { next: number } | null)?.next ?? 0;
      for (let i = from; i < 4; i++) {
        // One item a checkpoint: `processed` adds to the run's count.
        await store.checkpoint({ next: i + 1 }, { processed: 1, total: 4, stats: { rows: 10 } });
        if (params.stopAt === i + 1) return outcome.paused();
      }
      return params.fail ? outcome.failed('scan broke') : outcome.completed();
    },
  });
  host = createEngineHost({
    pool: t.database.pool,
    log: createLogger('info', (line) => logged.push(JSON.parse(line) as Record<string, unknown>), 'json'),
    handlers: new HandlerRegistry(),
    recoverables,
    intervals: new IntervalRegistry(),
    triggerRun: t.service.triggerRun,
    staleMs: 2000,
    pollMs: 50,
  });
  await host.start();
});
afterAll(async () => {
  await host.stop({ graceMs: 1000 });
  await t.close();
});

const linesOf = (runId: string) => logged.filter((l) => l.kind === 'recoverable' && l.run_id === runId);

describe("a recoverable run's log line", () => {
  it('is written once per take: paused with its cursor, then completed with its count and stats', async () => {
    const { run } = await t.service.triggerRun(t.actor, { name: 'logged.scan', params: { stopAt: 2 } });
    await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'PAUSED');
    await eventually(async () => linesOf(run.id).length === 1);
    expect(linesOf(run.id)[0]).toMatchObject({
      level: 'info',
      handler: 'logged.scan',
      outcome: 'PAUSED',
      cause: null,
      completed: false,
      paused: true,
      count: 2,
      extra: { rows: 20 },
      cursor: { next: 2 },
    });
    expect(typeof linesOf(run.id)[0]!.elapsed_ms).toBe('number');
    await t.service.triggerRun(t.actor, { name: 'logged.scan' });
    await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'COMPLETED');
    await eventually(async () => linesOf(run.id).length === 2);
    expect(linesOf(run.id)[1]).toMatchObject({
      level: 'info',
      outcome: 'COMPLETED',
      cause: null,
      completed: true,
      paused: false,
      count: 4,
      extra: { rows: 40 },
      cursor: null,
    });
  });

  it('says FAILED with cause HANDLER, at warn', async () => {
    const { run } = await t.service.triggerRun(t.actor, { name: 'logged.scan', params: { fail: true } });
    await eventually(async () => (await t.service.run(t.actor, run.id)).status === 'FAILED');
    await eventually(async () => linesOf(run.id).length === 1);
    expect(linesOf(run.id)[0]).toMatchObject({ level: 'warn', outcome: 'FAILED', cause: 'HANDLER', completed: false, count: 4 });
    expect(String(linesOf(run.id)[0]!.msg)).toContain('scan broke');
  });
});
