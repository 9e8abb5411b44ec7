/**
 * The engine's drain beside a month of finished history: the plain drain of the engine benchmark
 * (engine.ts: 20,000 no-op executions, one worker process) on a database that also holds
 * 0, 1 million and 10 million SUCCEEDED executions, each with its attempt (seedHistory), as a
 * queue that has run for a month keeps them inside the default retention window. What it shows
 * is whether the engine's cost per execution grows with the history beside it: indexes that
 * outgrow memory, pages read back, full-page images in the WAL after each checkpoint.
 *
 * BENCH_HISTORY_SIZES sets the sizes (comma-separated; default 0,1000000,1000000r,10000000); an
 * `r` after a size seeds that history with random ids (UUID version 4), as a database upgraded past
 * migration 000058 holds what it made before, beside the time-ordered ids of the work it drains.
 * Seeding takes about half a minute per million on a 2-core machine, longer with random ids; each
 * size is a fresh database, dropped afterwards. Figures per size: drain rate, Postgres and worker
 * CPU per execution, WAL bytes per execution, and the rate as a share of the drain without history.
 */
import { jobgateThroughput } from './engine.js';
import type { Figure } from './run.js';
import { openServer } from './support/postgres.js';

const SIZES = (process.env.BENCH_HISTORY_SIZES ?? '0,1000000,1000000r,10000000').split(',').map((size) => ({
  executions: Number(size.replace(/r$/, '')),
  randomIds: size.endsWith('r'),
}));

const say = (msg: string) => process.stderr.write(`bench engine-history: ${msg}\n`);
const label = ({ executions: n, randomIds }: { executions: number; randomIds: boolean }) =>
  (n === 0 ? 'no history' : n >= 1_000_000 ? `${n / 1_000_000}M history` : `${n / 1000}k history`) + (randomIds ? ' (random ids)' : '');

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  const figures: Figure[] = [];
  try {
    let none: number | undefined;
    for (const size of SIZES) {
      say(`drain beside ${label(size)}`);
      const t = await jobgateThroughput(server, 1, false, size);
      const system = `jobgate, ${label(size)}`;
      figures.push({ bench: 'engine-history.throughput.1-process', system, value: Math.round(t.rate), unit: 'executions/s' });
      if (t.cpu) {
        figures.push({ bench: 'engine-history.cpu-per-execution.postgres', system, value: Math.round(t.cpu.postgres), unit: 'µs' });
        figures.push({ bench: 'engine-history.cpu-per-execution.workers', system, value: Math.round(t.cpu.workers), unit: 'µs' });
      }
      figures.push({ bench: 'engine-history.wal-per-execution', system, value: Math.round(t.walBytes), unit: 'bytes' });
      if (size.executions === 0) none = t.rate;
      else if (none !== undefined)
        figures.push({
          bench: 'engine-history.throughput.1-process',
          system: `${label(size)}/no history`,
          value: t.rate / none,
          unit: 'ratio',
        });
    }
    return figures;
  } finally {
    await server.close();
  }
}
