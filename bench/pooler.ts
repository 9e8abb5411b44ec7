/**
 * jobgate through PgBouncer in transaction mode (Debian's `pgbouncer`), beside a direct
 * connection, on the same server in one run:
 *  - `direct`: DATABASE_URL is Postgres itself (named statements, LISTEN);
 *  - `pgbouncer, LISTEN URL`: DATABASE_URL is the pooler (unnamed statements), LISTEN direct;
 *  - `pgbouncer, polling`: the pooler and no LISTEN URL: workers look for work every second.
 * Figures: enqueue to handler start, sequential single jobs with an idle worker (p50, p99), and
 * a drain of DRAIN queued no-op executions by one worker (executions/s). The pooler has
 * POOL_SIZE server connections for the worker's pool of 10 clients.
 */
import { performance } from 'node:perf_hooks';
import { existsSync } from 'node:fs';
import { createJobgate, type Jobgate } from '../src/index.js';
import { createLogger } from '../src/log.js';
import { PGBOUNCER, startPgBouncer } from '../test/support/pgbouncer.js';
import { sequentialLatency, startSignal } from './engine.js';
import type { Figure } from './run.js';
import { openServer, type BenchServer } from './support/postgres.js';

const env = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const DRAIN = env('BENCH_POOLER_DRAIN', 5_000);
const LATENCY_RUNS = env('BENCH_POOLER_LATENCY_RUNS', 100);
/** Polling answers in up to a second: fewer runs say as much. */
const POLLING_LATENCY_RUNS = env('BENCH_POOLER_POLLING_RUNS', 30);
const POOL_SIZE = 4;
const CONCURRENCY = 50;

type Mode = 'direct' | 'pgbouncer, LISTEN URL' | 'pgbouncer, polling';

async function measure(server: BenchServer, mode: Mode): Promise<Figure[]> {
  const db = await server.createDatabase('jobgate_bench_pooler');
  const bouncer = mode === 'direct' ? undefined : await startPgBouncer(db.url, { poolSize: POOL_SIZE });
  let gate: Jobgate | undefined;
  try {
    gate = await createJobgate({
      databaseUrl: bouncer ? bouncer.url(db.name) : db.url,
      ...(bouncer ? { pooler: 'transaction' as const } : {}),
      ...(mode === 'pgbouncer, LISTEN URL' ? { listenDatabaseUrl: db.url } : {}),
      log: createLogger('warn'),
    });
    await gate.client.registerEndpoint({ name: 'bench.pooler', kind: 'HANDLER', handlerName: 'noop' });
    const started = startSignal();
    let done = 0;
    let drained: () => void = () => {};
    gate.handle('noop', () => {
      started.fire();
      if (++done === DRAIN) drained();
    });

    // Drain: queued first, then one worker takes them all.
    for (let i = 0; i < DRAIN; i += 1000) {
      const n = Math.min(1000, DRAIN - i);
      await gate.client.createJobs(Array.from({ length: n }, () => ({ endpointName: 'bench.pooler', kind: 'IMMEDIATE' as const })));
    }
    const all = new Promise<void>((resolve) => (drained = resolve));
    const t0 = performance.now();
    await gate.startWorker({ concurrency: CONCURRENCY, batchSize: CONCURRENCY });
    await all;
    const rate = DRAIN / ((performance.now() - t0) / 1000);

    // A job created right after the last one started would come just after a poll and wait a
    // whole interval, every time: with polling, each arrives after a random pause instead, as work
    // created by users does, so the figures are of a random moment in the interval.
    const polling = mode === 'pgbouncer, polling';
    const pause = polling ? () => new Promise<void>((r) => setTimeout(r, Math.random() * 1000)) : undefined;
    const latency = await sequentialLatency(
      () => gate!.client.createJob({ endpointName: 'bench.pooler', kind: 'IMMEDIATE' }),
      started,
      polling ? POLLING_LATENCY_RUNS : LATENCY_RUNS,
      pause,
    );
    return [
      { bench: 'pooler.drain', system: mode, value: rate, unit: 'executions/s' },
      { bench: 'pooler.latency.p50', system: mode, value: latency.p50, unit: 'ms' },
      { bench: 'pooler.latency.p99', system: mode, value: latency.p99, unit: 'ms' },
    ];
  } finally {
    await gate?.close();
    await bouncer?.stop();
    await db.drop();
  }
}

export async function run(): Promise<Figure[]> {
  if (!existsSync(PGBOUNCER)) {
    console.log(`bench pooler: skipped, no PgBouncer at ${PGBOUNCER} (apt-get install pgbouncer)`);
    return [];
  }
  const server = await openServer();
  try {
    const figures: Figure[] = [];
    for (const mode of ['direct', 'pgbouncer, LISTEN URL', 'pgbouncer, polling'] as const) figures.push(...(await measure(server, mode)));
    return figures;
  } finally {
    await server.close();
  }
}
