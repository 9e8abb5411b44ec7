/**
 * triggerHandler with `wait` on an on-demand interval handler whose tick does nothing: the time
 * from the call to the answer (dominated by the workers' poll period, which finds the due tick),
 * and the wait's own latency, from the handler's return to the answer (its poll of the row, from
 * every 25 ms backing off to every 100 ms), at the engine's default poll period (1 s) and at 50 ms.
 */
import { performance } from 'node:perf_hooks';
import { migrate } from '../src/db/migrate.js';
import { createDatabase } from '../src/db/pool.js';
import { createLogger } from '../src/log.js';
import { HandlerRegistry } from '../src/service/engine/delivery/handler-registry.js';
import { createEngineHost } from '../src/service/engine/runtime/host.js';
import { IntervalRegistry } from '../src/service/engine/intervals/intervals.js';
import { RecoverableRegistry } from '../src/service/engine/runs/recoverable.js';
import { createJobService } from '../src/service/index.js';
import type { Figure } from './run.js';
import { openServer } from './support/postgres.js';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  const target = await server.createDatabase('jobgate_bench_intervals');
  const figures: Figure[] = [];
  try {
    await migrate(target.url);
    const database = createDatabase({ connectionString: target.url, max: 4 });
    const service = createJobService({ db: database.db, pool: database.pool, defaultMaxAttempts: 5 });
    const ws = (await database.pool.query(`select id from workspaces where slug = 'default'`)).rows[0].id as string;
    const actor = { workspaceId: ws, kind: 'library' as const, role: 'ADMIN' as const };
    for (const [pollMs, rounds] of [
      [1000, 10],
      [50, 20],
    ] as const) {
      const name = `bench.on-demand.${pollMs}`;
      let returnedAt = 0;
      const intervals = new IntervalRegistry();
      intervals.register({ name, onDemand: true, run: () => void (returnedAt = performance.now()) });
      const host = createEngineHost({
        pool: database.pool,
        log: createLogger('warn'),
        handlers: new HandlerRegistry(),
        recoverables: new RecoverableRegistry(),
        intervals,
        triggerRun: service.triggerRun,
        pollMs,
      });
      await host.start();
      const total: number[] = [];
      const own: number[] = [];
      for (let i = 0; i < rounds; i++) {
        const t0 = performance.now();
        const { tick } = await service.triggerHandler(actor, { name, wait: true });
        const t1 = performance.now();
        if (tick?.state !== 'FINISHED') throw new Error(`the tick did not finish within the wait: ${tick?.state}`);
        total.push(t1 - t0);
        own.push(t1 - returnedAt);
      }
      await host.stop();
      figures.push(
        {
          bench: `triggerHandler wait, engine poll ${pollMs} ms: call to answer (median)`,
          system: 'jobgate',
          value: median(total),
          unit: 'ms',
        },
        {
          bench: `triggerHandler wait, engine poll ${pollMs} ms: tick end to answer (median)`,
          system: 'jobgate',
          value: median(own),
          unit: 'ms',
        },
      );
    }
    await database.close();
    return figures;
  } finally {
    await target.drop();
    await server.close();
  }
}
