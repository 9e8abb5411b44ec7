/**
 * A jobgate worker process for the engine benchmark: a no-op handler `noop`, started on `go`.
 * env: DATABASE_URL, CONCURRENCY, BATCH_SIZE, POOL_MAX, WORKER_ID, PRUNE (1: run the retention pruner, as
 * a production worker does; off by default so the engine benchmark measures the queue alone).
 */
import { createJobgate } from '../../src/index.js';
import { createLogger } from '../../src/log.js';
import { command, envNumber, onEnd, say } from './protocol.js';

const concurrency = envNumber('CONCURRENCY', 10);
const poolMax = envNumber('POOL_MAX', 10);
const gate = await createJobgate({
  databaseUrl: process.env.DATABASE_URL!,
  migrate: false,
  poolMax,
  log: createLogger('warn'),
  retention: { prune: process.env.PRUNE === '1' },
});
gate.handle('noop', () => {});
// Open the pool's connections before the clock starts, as a long-running worker would have them.
await Promise.all(Array.from({ length: poolMax }, () => gate.database.pool.query('select 1')));
onEnd(() => gate.close());
say('ready');
await command('go');
await gate.startWorker({
  workerId: process.env.WORKER_ID ?? `bench-${process.pid}`,
  concurrency,
  batchSize: envNumber('BATCH_SIZE', concurrency),
});
say('started');
