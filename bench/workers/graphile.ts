/**
 * A graphile-worker process for the engine benchmark: a no-op task `noop`, started on `go`.
 * Prints `first <epoch ms>` when its first job starts (the start of the measured window).
 * env: DATABASE_URL, CONCURRENCY, FAST ("1": the fast configuration, see ../support/graphile.ts).
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { run } from 'graphile-worker';
import { graphileLogger, graphilePreset } from '../support/graphile.js';
import { command, envNumber, onEnd, say } from './protocol.js';

const concurrency = envNumber('CONCURRENCY', 10);
// graphile-worker's default pool size; opened before the clock starts.
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL!, max: 10 });
pool.on('error', () => {});
pool.on('connect', (client) => client.on('error', () => {}));
await Promise.all(Array.from({ length: 10 }, () => pool.query('select 1')));
let first = false;
const runner = { current: undefined as Awaited<ReturnType<typeof run>> | undefined };
onEnd(async () => {
  await runner.current?.stop();
  await pool.end();
});
say('ready');
await command('go');
runner.current = await run({
  pgPool: pool,
  concurrency,
  noHandleSignals: true,
  logger: graphileLogger,
  taskList: {
    noop: async () => {
      if (!first) {
        first = true;
        say(`first ${performance.timeOrigin + performance.now()}`);
      }
    },
  },
  preset: graphilePreset(process.env.FAST === '1' ? 'fast' : 'default'),
});
say('started');
