/**
 * A recoverable scan over 1,000,000 synthetic ids in batches of 1,000, one checkpoint per batch
 * (and a status poll per batch, as a handler should): checkpoints/s, and the engine's overhead
 * over the same loop with no engine at all.
 */
import { performance } from 'node:perf_hooks';
import { migrate } from '../src/db/migrate.js';
import { createDatabase } from '../src/db/pool.js';
import { createLogger } from '../src/log.js';
import { outcome, RecoverableRegistry } from '../src/service/engine/runs/recoverable.js';
import { createRunner } from '../src/service/engine/runs/runner.js';
import { createJobService } from '../src/service/index.js';
import type { Figure } from './run.js';
import { openServer } from './support/postgres.js';

const IDS = 1_000_000;
const BATCH = 1_000;

/** The work per batch, the same in both loops: a cheap pass over the ids. */
function work(from: number, to: number): number {
  let acc = 0;
  for (let id = from; id < to; id++) acc = (acc + id * 2654435761) % 4294967296;
  return acc;
}

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  const target = await server.createDatabase('jobgate_bench_runs');
  try {
    await migrate(target.url);
    const database = createDatabase({ connectionString: target.url, max: 4 });
    const service = createJobService({ db: database.db, defaultMaxAttempts: 5 });
    const ws = (await database.pool.query(`select id from workspaces where slug = 'default'`)).rows[0].id as string;
    const actor = { workspaceId: ws, kind: 'system' as const, role: 'ADMIN' as const };

    // The bare loop: the same batches, no engine.
    let sink = 0;
    const b0 = performance.now();
    for (let from = 0; from < IDS; from += BATCH) sink ^= work(from, Math.min(IDS, from + BATCH));
    const bare = performance.now() - b0;

    const registry = new RecoverableRegistry();
    let done!: () => void;
    const finished = new Promise<void>((r) => (done = r));
    let elapsed = 0;
    registry.register({
      name: 'bench.scan',
      async run(store) {
        const t0 = performance.now();
        let cursor = ((await store.loadCursor()) as { next: number } | null)?.next ?? 0;
        while (cursor < IDS) {
          if ((await store.status()) === 'CANCEL_REQUESTED') return outcome.paused({ next: cursor });
          const end = Math.min(IDS, cursor + BATCH);
          sink ^= work(cursor, end);
          await store.checkpoint({ next: end }, { processed: end - cursor, total: IDS, stats: { batches: 1 } });
          cursor = end;
        }
        elapsed = performance.now() - t0;
        done();
        return outcome.completed();
      },
    });
    const runner = createRunner({ pool: database.pool, registry, log: createLogger('warn'), pollMs: 50 });
    await runner.start();
    await service.triggerRun(actor, { name: 'bench.scan', force: true });
    runner.kick();
    await finished;
    await runner.stop();
    await database.close();
    void sink;
    const checkpoints = IDS / BATCH;
    return [
      {
        bench: 'recoverable 1M ids / 1k batches: checkpoints',
        system: 'jobgate',
        value: checkpoints / (elapsed / 1000),
        unit: 'checkpoints/s',
      },
      { bench: 'recoverable 1M ids / 1k batches: scan time', system: 'jobgate', value: elapsed, unit: 'ms' },
      { bench: 'recoverable 1M ids / 1k batches: scan time', system: 'bare loop', value: bare, unit: 'ms' },
      {
        bench: 'recoverable 1M ids / 1k batches: engine overhead per checkpoint',
        system: 'jobgate',
        value: (elapsed - bare) / checkpoints,
        unit: 'ms',
      },
    ];
  } finally {
    await target.drop();
    await server.close();
  }
}
