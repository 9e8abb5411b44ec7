/**
 * A cron scheduler in a process of its own, for the cron benchmark (bench/cron.ts): on `go` it
 * starts scheduling DATABASE_URL's cron jobs, as a worker process's scheduler does, until its
 * stdin closes. Prints `ready`, then `cpu <µs>` (its CPU time since `go`) on `cpu`.
 */
import { ENGINE_DEFAULTS } from '../../src/defaults.js';
import { createDatabase } from '../../src/db/pool.js';
import { createLogger } from '../../src/log.js';
import { createCronJobScheduler } from '../../src/service/engine/cron/scheduler.js';
import { command, onEnd, say } from './protocol.js';

const database = createDatabase({ connectionString: process.env.DATABASE_URL!, max: 4 });
// A worker process's lead unless BENCH_CRON_LEAD_MS says otherwise (0: each written at its time).
const leadMs = Number(process.env.BENCH_CRON_LEAD_MS ?? ENGINE_DEFAULTS.cronLeadMs);
const scheduler = createCronJobScheduler({ pool: database.pool, log: createLogger('warn'), batchSize: 1000, leadMs });
onEnd(async () => {
  await scheduler.stop();
  await database.close();
});
say('ready');
await command('go');
const cpu0 = process.cpuUsage();
scheduler.start();
for (;;) {
  await command('cpu');
  const cpu = process.cpuUsage(cpu0);
  say(`cpu ${cpu.user + cpu.system}`);
}
