/**
 * A worker process (through the library) with the interval handler `slow`, for tests that
 * SIGKILL it mid-tick. `slow` records its start in `interval_ticks` and then waits an hour.
 * env: DATABASE_URL, STALE_MS. Prints "ready".
 */
import { createJobgate } from '../../src/index.js';
import { createLogger } from '../../src/log.js';

const gate = await createJobgate({ databaseUrl: process.env.DATABASE_URL!, migrate: false, poolMax: 5, log: createLogger('warn') });
gate.interval('slow', {
  everyMs: 3_600_000,
  timeoutMs: 3_600_000,
  async run(ctx) {
    await gate.database.pool.query(`insert into interval_ticks (name, worker, pid) values ('slow', $1, $2)`, [ctx.workerId, process.pid]);
    await new Promise((r) => setTimeout(r, 3_600_000));
    return { count: 1 };
  },
});
await gate.startWorker({ staleMs: Number(process.env.STALE_MS ?? 1000), enginePollMs: 100, pollMs: 500 });
process.stdout.write('ready\n');
